//! Results survive a run directory that cannot be written (a read-only file
//! system, a full disk, a program name longer than a file name may be): the
//! location is checked before the program starts, long names are shortened,
//! each file is written whole or not at all, the summary is always printed,
//! a temporary directory is used instead and named, and hark exits with
//! the program's status.
//!
//! The read-only and full file systems are small tmpfs mounts, which needs
//! root; without it those cases say so and pass.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A tmpfs of `size` mounted on `dir` with `options`; unmounted on drop.
struct Mount(PathBuf);

impl Mount {
    fn new(dir: &Path, options: &str) -> Option<Mount> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `hark run <args> -- <command>` in `dir`, with TMPDIR set to `tmp`.
fn run_hark(dir: &Path, tmp: &Path, args: &[&str], command: &[&str]) -> Output {
    probe();
    std::fs::create_dir_all(tmp).unwrap();
    Command::new(hark())
        .current_dir(dir)
        .env("TMPDIR", tmp)
        .arg("run")
        .args(args)
        .arg("--")
        .args(command)
        .output_within()
        .unwrap()
}

/// The run directories hark made in `dir`.
fn runs_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("hark-")
        })
        .filter(|p| p.join("profile.json").exists())
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_read_only_output_directory_falls_back_to_a_temporary_one() {
    let dir = scratch("read-only");
    let Some(_ro) = Mount::new(&dir.join("ro"), "ro,size=64k") else {
        eprintln!("skipped: cannot mount a tmpfs (not root?)");
        return;
    };
    let tmp = dir.join("tmp");
    let out = run_hark(&dir, &tmp, &["--out-dir", "ro"], &["sh", "-c", "exit 3"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("cannot write the run directory in ro"),
        "{text}"
    );
    assert!(text.contains("Events:"), "no summary: {text}");
    let runs = runs_in(&tmp);
    assert_eq!(runs.len(), 1, "{text}");
    assert!(text.contains(&runs[0].display().to_string()), "{text}");
    drop(_ro);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_disk_leaves_no_truncated_file_and_the_run_goes_to_a_temporary_directory() {
    let dir = scratch("full");
    // Room for the check before the run, not for the outputs.
    let Some(_full) = Mount::new(&dir.join("full"), "size=8k") else {
        eprintln!("skipped: cannot mount a tmpfs (not root?)");
        return;
    };
    let tmp = dir.join("tmp");
    let out = run_hark(
        &dir,
        &tmp,
        &["-o", "full/run"],
        &[
            "sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8; do cat /etc/passwd; done > /dev/null",
        ],
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("writing the run directory under"), "{text}");
    assert!(text.contains("Events:"), "no summary: {text}");
    for entry in std::fs::read_dir(dir.join("full/run")).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            !path.to_string_lossy().ends_with(".partial"),
            "a temporary file is left: {}",
            path.display()
        );
        if path.ends_with("profile.json") {
            let json = std::fs::read_to_string(&path).unwrap();
            assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
        }
    }
    assert_eq!(runs_in(&tmp).len(), 1, "{text}");
    drop(_full);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_238_character_program_name_is_shortened() {
    let dir = scratch("long-name");
    let name = "p".repeat(238);
    std::fs::copy("/bin/true", dir.join(&name)).unwrap();
    let program = format!("./{name}");
    let out = run_hark(&dir, &dir.join("tmp"), &[], &[&program]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let runs = runs_in(&dir);
    assert_eq!(runs.len(), 1, "{text}");
    let made = runs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        made.starts_with(&format!("hark-{}-", "p".repeat(64))),
        "{made}"
    );
    assert!(made.len() < 100, "{made}");
    std::fs::remove_dir_all(&dir).unwrap();
}
