//! One user who opens HTTP connections to `hark serve --http` and sends
//! nothing holds no more than their cap (32): the ones past it are turned
//! away at once (503), the rest are closed once idle for 10 s. Meanwhile
//! another user's request is answered and their job finishes and is
//! written, as if nobody held anything.

mod common;
mod served;

use common::*;
use served::*;
use std::io::Read;
use std::time::{Duration, Instant};

const USER: &str = "hark-t-ann";
/// Connections the idle client opens, and the cap per user.
const OPENED: usize = 40;
const CAP: usize = 32;

#[test]
fn idle_connections_past_the_cap_are_refused_and_the_rest_cut() {
    if !root_or_skip() {
        return;
    }
    let uid = ensure_user(USER);
    let dir = scratch("idle-http");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let job = served.run(Some(USER), &["sh".to_string(), "-c".into(), wait]);
    served.wait_jobs("the user's job registered", |j| j.len() == 1);
    let url = served.url();
    let addr = url.trim_start_matches("http://").trim_end_matches('/');

    // Root holds connections that say nothing; each is read until its end.
    let started = Instant::now();
    let held: Vec<_> = (0..OPENED)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got);
                (
                    started.elapsed(),
                    String::from_utf8_lossy(&got).into_owned(),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));

    // The other user is answered meanwhile, and their job ends and is written.
    let out = as_user(Some(USER), "curl")
        .args(["-s", "-f", "-S", &format!("{url}api/runs")])
        .output_within()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "the user's job");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = served.wait_jobs("the user's job written", |j| {
        j.len() == 1 && j[0]["state"] == "finished"
    });
    assert_eq!(jobs[0]["owner"], uid);
    let dir_written = std::path::PathBuf::from(jobs[0]["dir"].as_str().unwrap());
    assert!(dir_written.join("profile.json").exists());

    let ends: Vec<(Duration, String)> = held.into_iter().map(|t| t.join().unwrap()).collect();
    let turned_away: Vec<_> = ends.iter().filter(|(_, a)| a.contains(" 503 ")).collect();
    let cut: Vec<_> = ends.iter().filter(|(_, a)| a.is_empty()).collect();
    assert_eq!(
        (turned_away.len(), cut.len()),
        (OPENED - CAP, CAP),
        "{ends:?}"
    );
    for (at, _) in &turned_away {
        assert!(
            *at < Duration::from_secs(5),
            "turned away only after {at:?}"
        );
    }
    for (at, _) in &cut {
        assert!(
            *at >= Duration::from_secs(9) && *at < Duration::from_secs(40),
            "an idle connection was cut after {at:?}"
        );
    }
    // The cap is given back as connections end.
    assert!(served
        .get("api/runs")
        .contains(&format!("\"id\":\"{}\"", jobs[0]["id"].as_str().unwrap())));
}
