//! Naming and creating the run directory: `hark-<program>-<timestamp>/`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

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

/// A program name fit for a directory name.
fn safe(program: &str) -> String {
    let s = hark_outputs::units::file_name_part(program);
    let s = s.trim_start_matches('.').to_string();
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
        .map_or(0, |d| d.as_secs()) as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills in; both pointers
    // are valid for the call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return format!("{now}");
        }
        tm
    };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
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
