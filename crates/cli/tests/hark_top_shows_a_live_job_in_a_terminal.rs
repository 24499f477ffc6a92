//! `hark top URL` in a real terminal (tmux, 160 × 45) on a real 4-rank job
//! (Open MPI): it draws the run's progress, every rank's MPI share and the
//! top functions, its event count grows between two captures of the pane,
//! and `q` quits it, giving the terminal back. Skips, saying so, without
//! tmux (`scripts/deps.sh` installs it) or Open MPI.

mod common;
#[path = "common/live.rs"]
mod live;

use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .output()
        .expect("cannot run tmux")
}

/// The pane's text once `want` is on it (at most 60 s).
fn capture_when(socket: &str, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = tmux(socket, &["capture-pane", "-p", "-t", "top"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if want(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the pane never showed it:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The number after "events " on the pane.
fn events(pane: &str) -> u64 {
    let at = pane.find("events ").expect("no event count") + "events ".len();
    pane[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn hark_top_shows_a_live_job_and_quits_on_q() {
    if !common::have("tmux") || !common::have(common::OPEN_MPI.run) {
        eprintln!("skipped: needs tmux and {}", common::OPEN_MPI.run);
        return;
    }
    let dir = common::scratch("top");
    let job = live::start(&dir, 3, 60);
    job.wait_for_events(0);
    let socket = format!("hark-top-test-{}", std::process::id());
    let cmd = format!("{} top {}", common::hark().display(), job.url);
    let out = tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "160",
            "-y",
            "45",
            &cmd,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let first = capture_when(&socket, |p| {
        p.contains("MPI share per rank") && p.contains("MPI_Sendrecv") && p.contains("events ")
    });
    assert!(first.contains("hark top"), "{first}");
    assert!(first.contains("(running)"), "{first}");
    assert!(first.contains("ranks 4"), "{first}");
    assert!(first.contains("Top functions"), "{first}");
    for rank in 0..4 {
        assert!(
            first
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("│{rank} "))
                    || l.contains(&format!("│{rank}     "))),
            "rank {rank} is missing:\n{first}"
        );
    }
    let n = events(&first);
    let later = capture_when(&socket, |p| p.contains("events ") && events(p) > n);
    assert!(events(&later) > n);

    tmux(&socket, &["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while tmux(&socket, &["has-session", "-t", "top"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "hark top did not quit on q:\n{}",
            String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p", "-t", "top"]).stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = tmux(&socket, &["kill-server"]);
    job.stop();
}
