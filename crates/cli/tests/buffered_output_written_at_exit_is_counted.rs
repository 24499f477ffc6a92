//! Output that stdio holds in its buffer until exit, or that reaches the
//! buffer without a counted call (the inline `putchar_unlocked`, `ls`'s
//! unlocked stdio), is counted: `<stdout>` written equals what the file
//! received.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// `<stdout>` bytes written by program `name` in a run's profile.
fn stdout_written(profile: &serde_json::Value, name: &str) -> u64 {
    let p = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no program {name} in {profile:#}"));
    p["io"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str() == Some("<stdout>"))
        .map_or(0, |f| f["write_bytes"][0].as_u64().unwrap())
}

#[test]
fn output_left_in_stdio_s_buffer_at_exit_is_counted() {
    if !have("cc") {
        eprintln!("skipped: no C compiler");
        return;
    }
    let dir = scratch("buffered");
    let exe = compile("cc", Path::new("buffered_at_exit.c"), &dir, &[]);
    let command = vec![exe.display().to_string()];
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    // hark's own lines go to stderr: stdout is the program's.
    let expect = "a".repeat(3000) + &"b".repeat(10000) + "tail";
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&expect),
        "the program's output changed"
    );
    let profile = profile(&run_dir);
    assert_eq!(
        stdout_written(&profile, "buffered_at_exit-cc"),
        expect.len() as u64
    );
    assert_eq!(lost(&profile), 0);
}

#[test]
fn ls_la_into_a_file_counts_what_the_file_holds() {
    let dir = scratch("ls-la");
    let listed = dir.join("listed");
    std::fs::create_dir(&listed).unwrap();
    // A listing of several buffers' worth, written through ls's unlocked
    // stdio and its flush at exit.
    for i in 0..150 {
        std::fs::write(
            listed.join(format!("a-file-with-a-long-name-{i:04}.txt")),
            "x",
        )
        .unwrap();
    }
    let file = dir.join("listing.txt");
    let script = format!("ls -la {} > {}", listed.display(), file.display());
    let command = vec!["sh".to_string(), "-c".to_string(), script];
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 8192, "a listing of {size} bytes");
    let first = profile(&run_dir);
    assert_eq!(stdout_written(&first, "ls"), size);
    std::fs::remove_dir_all(&run_dir).unwrap();
    // And into a pipe, as `hark run -- ls -la` does.
    let bare = Command::new("ls").arg("-la").arg(&listed).output().unwrap();
    let command = vec![
        "ls".to_string(),
        "-la".to_string(),
        listed.display().to_string(),
    ];
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(out.stdout.len(), bare.stdout.len());
    assert_eq!(
        stdout_written(&profile(&run_dir), "ls"),
        out.stdout.len() as u64
    );
}
