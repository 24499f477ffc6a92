//! `hark` ends by its deadline while a client keeps connecting after the
//! program ended: the grace period is one hard deadline over every
//! connection, old and new, and SIGTERM or SIGINT ends it at once, report
//! written.
//!
//! The measured command starts a client in the background and ends after
//! one second. The client, measured too (its own probe connection stays
//! open), opens a new connection every 50 ms and holds it, for two minutes.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLIENT: &str = r#"
import os, socket, time
path = os.environ["HARK_ADDR"].split("unix:", 1)[1]
held = []
end = time.time() + 120
while time.time() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        held.append(s)
        if len(held) == 1:
            open(os.environ["PIDFILE"], "w").write(str(os.getpid()))
        if len(held) > 200:
            held.pop(0).close()
    except OSError:
        pass
    time.sleep(0.05)
"#;

/// Runs hark on the command above; `signal` is sent to hark half a second
/// after the command ended. Returns how long hark took after the command
/// ended, its stderr and the run directory.
fn run(tag: &str, signal: Option<libc::c_int>) -> (Duration, String, std::path::PathBuf, Scratch) {
    probe();
    let dir = scratch(tag);
    let pidfile = dir.join("client.pid");
    let script = format!(
        "python3 -c '{CLIENT}' </dev/null >/dev/null 2>&1 & \
         i=0; while [ ! -s \"$PIDFILE\" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         touch ended"
    );
    let out_dir = dir.join("run");
    let started = Instant::now();
    let mut child = Command::new(hark())
        .current_dir(&dir)
        .args(["run", "-o"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", &script])
        .env("PIDFILE", &pidfile)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = dir.join("ended");
    while !ended.exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ended = Instant::now();
    if let Some(sig) = signal {
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill has no memory preconditions; the pid is our child's,
        // not yet reaped.
        unsafe { libc::kill(child.id() as i32, sig) };
    }
    // Bounded wait: a hark that hangs fails the test instead of hanging it.
    let give_up = started + Duration::from_secs(100);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = ended.elapsed();
    if let Ok(pid) = std::fs::read_to_string(&pidfile) {
        // SAFETY: as above; the client may already be gone.
        unsafe { libc::kill(pid.trim().parse().unwrap(), libc::SIGKILL) };
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "hark: {status:?}\n{stderr}");
    (took, stderr, out_dir, dir)
}

#[test]
fn hark_ends_within_its_grace_period_and_writes_the_report() {
    if !have("python3") {
        eprintln!("skipped: no python3");
        return;
    }
    let (took, stderr, run_dir, _dir) = run("deadline", None);
    // The grace period is 10 s: 20 s of slack for a loaded machine, far
    // below the client's two minutes.
    assert!(
        took < Duration::from_secs(30),
        "hark took {took:?}\n{stderr}"
    );
    assert!(run_dir.join("profile.json").exists(), "{stderr}");
    let profile = profile(&run_dir);
    let diagnostics: Vec<String> = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["diagnostics"].as_array().unwrap())
        .map(|d| d.to_string())
        .collect();
    assert!(
        diagnostics.iter().any(|d| d.contains("were cut")),
        "{diagnostics:#?}"
    );
}

#[test]
fn sigterm_after_the_program_ended_ends_the_wait_and_writes_the_report() {
    if !have("python3") {
        eprintln!("skipped: no python3");
        return;
    }
    let (took, stderr, run_dir, _dir) = run("sigterm", Some(libc::SIGTERM));
    // Without the signal, hark would wait 10 s.
    assert!(
        took < Duration::from_secs(7),
        "hark took {took:?}\n{stderr}"
    );
    assert!(run_dir.join("profile.json").exists(), "{stderr}");
}
