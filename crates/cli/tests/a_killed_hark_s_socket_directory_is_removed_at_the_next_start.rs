//! A `hark` killed by SIGKILL leaves its private socket
//! directory (`$TMPDIR/hark-<pid>-<hex>/hark.sock`) behind. The next
//! `hark run` removes the ones whose process is gone.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn socket_dirs(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("hark-"))
        .collect()
}

#[test]
fn the_next_run_removes_a_dead_hark_s_socket_directory() {
    probe();
    let dir = scratch("stale-socket");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pidfile = dir.join("sleep.pid");
    let mut killed = Command::new(hark())
        .current_dir(&dir)
        .env("TMPDIR", &tmp)
        .args(["run", "-q", "-o", "run1", "--", "sh", "-c"])
        .arg(format!("echo $$ > {}; exec sleep 60", pidfile.display()))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        assert!(Instant::now() < give_up, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    let sleep: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill has no memory preconditions; this is the orphaned
    // command, started above.
    unsafe { libc::kill(sleep, libc::SIGKILL) };
    let left = socket_dirs(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");

    let out = Command::new(hark())
        .current_dir(&dir)
        .env("TMPDIR", &tmp)
        .args(["run", "-q", "-o", "run2", "--", "true"])
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    let now = socket_dirs(&tmp);
    assert!(now.is_empty(), "left behind: {now:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
