//! `hark ctl sample 1/2 JOB` on a running 4-rank job: from then on world
//! ranks 1 and 3 send totals instead of events, until `sample 2/2` brings
//! back every rank's events. Calls and bytes in `profile.json` are exactly
//! what the program made, for every rank; the time slices after the switch
//! hold no event of ranks 1 and 3 while 0 and 2 go on, and hold theirs
//! again at the end; and the diagnostics name the sampled-out ranks. The
//! switch goes through `hark ctl`, the return through the HTTP API; both
//! refuse a bad filter.

mod common;
mod served;

use common::*;
use served::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The `HOST:PORT` that `hark serve --http` printed in its log.
fn http_addr(served: &Served) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = served.log();
        if let Some(rest) = log.split("POST http://").nth(1) {
            return rest.split('/').next().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no HTTP address in {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `POST /api/runs/{id}/control` with `body`: the status and the answer.
fn post_control(addr: &str, id: &str, body: &str) -> (u16, String) {
    let session = hark_live::client::get(&format!("http://{addr}/api/session")).unwrap();
    let session: serde_json::Value = serde_json::from_str(&session).unwrap();
    let csrf = session["csrf"].as_str().unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /api/runs/{id}/control HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-Hark-Csrf: {csrf}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, answer)
}

/// Iterations the program runs after the return to full detail.
const AFTER: u64 = 500;

fn sampled(mpi: Mpi, tag: &str) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("{} not installed: skipped", mpi.name);
        return;
    }
    let dir = scratch(tag);
    let exe = compile(mpi.cc, "sampled.c".as_ref(), &dir, &[]);
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(&served);
    let go = dir.join("go");
    let back = dir.join("back");
    let mut cmd = launcher(mpi, 4);
    cmd.extend([
        exe.display().to_string(),
        go.display().to_string(),
        back.display().to_string(),
        AFTER.to_string(),
    ]);
    let job = served.run(None, &cmd);
    let jobs = served.wait_jobs("four ranks connected", |j| {
        j.len() == 1 && j[0]["open"] == 4
    });
    let id = jobs[0]["id"].as_str().unwrap().to_string();
    wait_for_the_loop(&go);
    a_bad_filter_is_refused(&served, &http, &id);
    sample_one_in_two_then_all(&served, &http, &id, &go, &back);
    let out = job.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = served.wait_jobs("the job folded", |j| j[0]["state"] != "running");
    assert_eq!(jobs[0]["state"], "finished", "{jobs:?}");
    let n: u64 = std::fs::read_to_string(go.with_extension("count"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let p = profile(jobs[0]["dir"].as_str().unwrap().as_ref());
    let prog = &p["programs"][0];
    counts_are_exact(&p, n);
    the_diagnostic_names_ranks_1_and_3(prog);
    the_slices_hold_a_stretch_without_ranks_1_and_3(prog, n);
}

/// Every rank in its loop, then a second of full detail.
fn wait_for_the_loop(go: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !go.with_extension("ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the program never started its loop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1000));
}

/// `hark ctl` and the HTTP API refuse a bad filter.
fn a_bad_filter_is_refused(served: &Served, http: &str, id: &str) {
    for bad in ["0/0", "3/2", "x/2", "1-2"] {
        let out = served.ctl(None, &["sample", bad, id]);
        assert!(!out.status.success(), "sample {bad} was taken");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("K") || err.contains("K/N"), "{bad}: {err}");
    }
    let (code, answer) = post_control(http, id, r#"{"action":"sample","keep":3,"of":2}"#);
    assert_eq!(code, 422, "{answer}");
    assert!(
        answer.contains("cannot keep 3 of every 2 ranks"),
        "{answer}"
    );
}

/// The switch to one rank in two through `hark ctl`; phase 2 starts once
/// every probe has read it (they look every 100 ms). Three seconds
/// sampled, then every rank in detail again, through the HTTP API.
fn sample_one_in_two_then_all(
    served: &Served,
    http: &str,
    id: &str,
    go: &std::path::Path,
    back: &std::path::Path,
) {
    served.ask(None, &["sample", "1/2", id]);
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(go, "").unwrap();
    // Three seconds sampled, then every rank in detail again.
    std::thread::sleep(Duration::from_millis(3000));
    let (code, answer) = post_control(http, id, r#"{"action":"sample","keep":2,"of":2}"#);
    assert_eq!(code, 200, "{answer}");
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(back, "").unwrap();
}

/// Exact counts for every rank, sampled out or not, of the program's `n`
/// iterations.
fn counts_are_exact(p: &serde_json::Value, n: u64) {
    let prog = &p["programs"][0];
    for f in ["MPI_Send", "MPI_Recv", "MPI_Bcast"] {
        assert_eq!(per_rank(p, 0, f, "calls"), vec![n; 4], "{f} calls");
    }
    assert_eq!(per_rank(p, 0, "MPI_Send", "bytes"), vec![256 * n; 4]);
    assert_eq!(per_rank(p, 0, "MPI_Recv", "bytes"), vec![256 * n; 4]);
    for r in 0..4 {
        let w = &prog["io"]["per_rank"][r]["pwrite"];
        assert_eq!(w["calls"], n, "rank {r} pwrite: {w}");
        assert_eq!(w["bytes"], 100 * n, "rank {r} pwrite: {w}");
    }
    assert_eq!(lost(p), 0, "events counted as lost");
}

/// The diagnostic names ranks 1 and 3 and when they left.
fn the_diagnostic_names_ranks_1_and_3(prog: &serde_json::Value) {
    let diags: Vec<&str> = prog["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    let said = diags
        .iter()
        .find(|d| d.contains("ranks 1,3 sampled out from t="))
        .unwrap_or_else(|| panic!("no sampling diagnostic in {diags:?}"));
    assert!(said.contains("their counts are exact"), "{said}");
}

/// Time slices. Where rank 0 makes calls: ranks 1 and 3 have events in the
/// first half second (full detail before the switch) and in the last (full
/// detail again); in between, one stretch of at least half a second in
/// which they have none at all while ranks 0 and 2 go on.
fn the_slices_hold_a_stretch_without_ranks_1_and_3(prog: &serde_json::Value, n: u64) {
    let ts = &prog["timeslices"];
    let width = ts["slice_ns"].as_u64().unwrap();
    let calls = matrix(&ts["metrics"]["MPI_Send.calls"]);
    let half_second = (500_000_000 / width).max(1) as usize;
    let active: Vec<usize> = (0..calls[0].len()).filter(|&s| calls[0][s] > 0).collect();
    let (first, last) = (active[0], *active.last().unwrap());
    let sum = |r: usize, s: std::ops::Range<usize>| calls[r][s].iter().sum::<u64>();
    for r in 0..4 {
        assert!(
            sum(r, first..first + half_second) > 0,
            "rank {r} at the start: {calls:?}"
        );
        assert!(
            sum(r, last + 1 - half_second..last + 1) > 0,
            "rank {r} at the end: {calls:?}"
        );
    }
    // The longest run of consecutive slices in which ranks 1 and 3 have
    // nothing while rank 2 goes on: the sampled-out stretch. (Not the first
    // and last such slices: under load a slice where both happen to make no
    // call comes before the switch too.)
    let quiet = |s: usize| calls[1][s] == 0 && calls[3][s] == 0 && calls[2][s] > 0;
    let (mut best, mut run) = (0..0, 0..0);
    for (s, rank2) in calls[2].iter().enumerate().take(last + 1).skip(first) {
        if quiet(s) {
            run = if run.is_empty() {
                s..s + 1
            } else {
                run.start..s + 1
            };
            if run.len() > best.len() {
                best = run.clone();
            }
        } else if *rank2 > 0 {
            run = 0..0;
        }
    }
    assert!(
        best.len() >= half_second,
        "ranks 1 and 3 were never out for half a second ({} slices of {width} ns at most): {calls:?}",
        best.len()
    );
    for r in [0, 2] {
        assert_eq!(calls[r].iter().sum::<u64>(), n, "rank {r}: {calls:?}");
    }
    for r in [1, 3] {
        assert!(calls[r].iter().sum::<u64>() < n, "rank {r}: {calls:?}");
    }
}

#[test]
fn open_mpi_ranks_sampled_out_keep_exact_counts() {
    sampled(OPEN_MPI, "sample-ompi");
}

#[test]
fn mpich_ranks_sampled_out_keep_exact_counts() {
    sampled(MPICH, "sample-mpich");
}
