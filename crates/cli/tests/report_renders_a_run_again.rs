//! `hark report RUN_DIR` renders summary.txt, report.html and the topology
//! again from profile.json and prints the summary; a closed pipe is not an
//! error; a directory without a profile gets a clear message.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A run directory of the serial I/O program (a program that surely
/// connects: it does I/O and exits normally).
fn measured_run(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/serial/io.c");
    let exe = compile("cc", &src, dir, &[]);
    let (out, run_dir) = hark_run(dir, &["-q"], &[exe.display().to_string()]);
    assert_exit(&out, 0);
    run_dir
}

#[test]
fn a_run_directory_is_rendered_again_from_its_profile() {
    let dir = scratch("report");
    let run_dir = measured_run(&dir);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    for file in ["summary.txt", "report.html"] {
        std::fs::remove_file(run_dir.join(file)).unwrap();
    }
    std::fs::remove_dir_all(run_dir.join("topology")).unwrap();

    let out = Command::new(hark())
        .arg("report")
        .arg(&run_dir)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), summary);
    assert_eq!(
        std::fs::read_to_string(run_dir.join("summary.txt")).unwrap(),
        summary
    );
    assert!(run_dir.join("report.html").exists());
    let dots = std::fs::read_dir(run_dir.join("topology")).unwrap().count();
    assert_eq!(dots, 1, "one topology file for the one program");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_closed_stdout_ends_report_quietly() {
    let dir = scratch("report-pipe");
    let run_dir = measured_run(&dir);
    let mut child = Command::new(hark())
        .arg("report")
        .arg(&run_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before hark writes: its write meets a broken pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_without_a_profile_is_a_clear_error() {
    let dir = scratch("report-empty");
    // (what profile.json holds, or None for no file; what the error says)
    let cases = [
        (None, "profile.json"),
        (Some("{ not json"), "is not a Hark profile"),
    ];
    for (content, says) in cases {
        if let Some(text) = content {
            std::fs::write(dir.join("profile.json"), text).unwrap();
        }
        let out = Command::new(hark())
            .arg("report")
            .arg(&dir)
            .output_within()
            .unwrap();
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
    // A path that is not there at all says what `hark report` expected.
    let out = Command::new(hark())
        .arg("report")
        .arg(dir.join("no-such-run"))
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not a Hark run: expected a run directory"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_shows_examples_for_every_command() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["report", "--help"],
        &["help", "run"],
    ] {
        let out = Command::new(hark()).args(args).output_within().unwrap();
        assert_exit(&out, 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Examples:"), "{args:?}: {text}");
        assert!(text.contains("hark "), "{args:?}: {text}");
    }
}
