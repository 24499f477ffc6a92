//! Naming and creating the run directory: `hark-<program>-<timestamp>/`.
//!
//! Where it goes is decided before the command starts ([`Place::choose`]):
//! a location that cannot be written is found out then, not after an hour
//! of computing, and the temporary directory is used instead, said on
//! stderr.

use crate::output::print_stderr;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Longest program name kept in a run directory's name, in characters:
/// `hark-<name>-<timestamp>-<k>` then stays far below the 255-byte limit on
/// file names.
const NAME_MAX: usize = 64;

/// Where the run directory goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// Exactly this directory (`hark run -o DIR`).
    Exact(PathBuf),
    /// A new `hark-<program>-<timestamp>` inside this one.
    Inside(PathBuf),
}

impl Place {
    /// The place asked for (`-o DIR`, or `--out-dir DIR`), if it can be
    /// written now; otherwise, with a warning saying why, a new directory in
    /// the temporary directory.
    pub fn choose(exact: Option<&Path>, inside: &Path) -> Place {
        let wanted = match exact {
            Some(dir) => Place::Exact(dir.to_path_buf()),
            None => Place::Inside(inside.to_path_buf()),
        };
        match writable(wanted.parent()) {
            Ok(()) => wanted,
            Err(e) => {
                let fallback = Place::temporary();
                print_stderr(&format!(
                    "hark: warning: cannot write the run directory in {}: {e:#}; \
                     it will be written under {} instead\n",
                    wanted.parent().display(),
                    fallback.parent().display()
                ));
                fallback
            }
        }
    }

    /// A new run directory in the temporary directory.
    pub fn temporary() -> Place {
        Place::Inside(std::env::temp_dir())
    }

    /// The directory that must be writable: the run directory itself, or
    /// the one it is created in.
    pub fn parent(&self) -> &Path {
        match self {
            Place::Exact(p) | Place::Inside(p) => p,
        }
    }

    /// Creates the run directory for `program` and returns its path.
    pub fn create(&self, program: &str) -> Result<PathBuf> {
        match self {
            Place::Exact(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create the directory {}", dir.display()))?;
                Ok(dir.clone())
            }
            Place::Inside(parent) => create_new(parent, program, &timestamp()),
        }
    }
}

/// Creates `dir` if needed and checks that a file can be made in it.
fn writable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))?;
    let probe = dir.join(format!(".hark-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// A new directory `hark-<program>-<YYYYMMDD-HHMMSS>` inside `parent`, with
/// `-2`, `-3`... appended when that name is taken (two runs in one second).
pub fn create_new(parent: &Path, program: &str, stamp: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create the directory {}", parent.display()))?;
    let base = format!("hark-{}-{stamp}", safe(program));
    for k in 1.. {
        let name = if k == 1 {
            base.clone()
        } else {
            format!("{base}-{k}")
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create the run directory {}", dir.display()))
            }
        }
    }
    unreachable!("the loop returns or fails")
}

/// A program name fit for a directory name: safe characters, at most
/// [`NAME_MAX`] of them.
fn safe(program: &str) -> String {
    let s = hark_outputs::units::file_name_part(program);
    let s: String = s.trim_start_matches('.').chars().take(NAME_MAX).collect();
    if s.is_empty() {
        "run".into()
    } else {
        s
    }
}

/// The local time as `YYYYMMDD-HHMMSS`.
pub fn timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let Some(t) = hark_os::local_time(now) else {
        return format!("{now}");
    };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_directories_are_new_and_named_after_the_program() {
        let parent = std::env::temp_dir().join(format!("hark-rundir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        let a = create_new(&parent, "lmp", "20260101-120000").unwrap();
        let b = create_new(&parent, "lmp", "20260101-120000").unwrap();
        let c = create_new(&parent, "../x y", "20260101-120000").unwrap();
        assert!(a.ends_with("hark-lmp-20260101-120000"));
        assert!(b.ends_with("hark-lmp-20260101-120000-2"));
        assert!(c.ends_with("hark-_x_y-20260101-120000"));
        let long = create_new(&parent, &"x".repeat(238), "20260101-120000").unwrap();
        let name = long.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            name,
            format!("hark-{}-20260101-120000", "x".repeat(NAME_MAX))
        );
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn timestamps_have_a_fixed_shape() {
        let t = timestamp();
        assert_eq!(t.len(), 15, "{t}");
        assert_eq!(&t[8..9], "-");
        assert!(t.chars().filter(|c| *c != '-').all(|c| c.is_ascii_digit()));
    }
}
