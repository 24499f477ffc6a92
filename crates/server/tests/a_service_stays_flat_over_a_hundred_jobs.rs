//! Endurance: one service takes 100 short jobs one after another and then
//! 8 at once; every job gets its complete run directory, and the service's
//! memory, descriptors and threads come back to where they were.

mod service;

use service::*;
use std::time::{Duration, Instant};

fn complete(dir: &std::path::Path) -> bool {
    ["profile.json", "summary.txt", "report.html"]
        .iter()
        .all(|f| dir.join(f).metadata().is_ok_and(|m| m.len() > 0))
}

fn settle(setup: &Setup, finished: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while setup.service.stats().finished < finished || setup.service.stats().open > 0 {
        assert!(Instant::now() < deadline, "{:?}", setup.service.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Reader threads end just after their close is handled.
    std::thread::sleep(Duration::from_millis(200));
}

/// Eight jobs of four ranks at once.
fn parallel(setup: &Setup, name: &str) {
    std::thread::scope(|s| {
        for j in 0..8 {
            s.spawn(move || whole_job_seen(setup, &format!("{name}/{j}"), 4, 2000));
        }
    });
}

#[test]
fn a_hundred_jobs_in_sequence_and_eight_at_once_leave_nothing_behind() {
    // The history of finished jobs is bounded (256 by default) and grows
    // until full: a few KiB a job, 1 MB by its bound, which this test would
    // read as a leak. A short history is full before the baseline is taken.
    let setup = start("endurance", true, |c| {
        c.linger = Duration::from_millis(50);
        c.history = 8;
    });
    // Warm up: the outputs' first use, and the allocator's per-thread
    // arenas, which concurrent readers create once (a one-time step).
    for i in 0..10 {
        whole_job_seen(&setup, &format!("warm-{i}"), 2, 2000);
        settle(&setup, i + 1);
    }
    parallel(&setup, "warm");
    settle(&setup, 18);
    parallel(&setup, "warm2");
    settle(&setup, 26);
    let (fds0, threads0) = fds_and_threads();
    let rss0 = rss_kib();
    for i in 0..100 {
        whole_job_seen(&setup, &format!("seq-{i}"), 2, 2000);
        settle(&setup, 27 + i);
    }
    let rss_seq = rss_kib();
    let mut rss_rounds = Vec::new();
    for round in 0..3 {
        parallel(&setup, &format!("par-{round}"));
        settle(&setup, 126 + 8 * (round + 1));
        rss_rounds.push(rss_kib());
    }
    let rss_end = rss_kib();
    let (fds1, threads1) = fds_and_threads();
    let runs = setup.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 150);
    for k in &runs {
        let ranks = if k.job.contains('/') { 4 } else { 2 };
        assert_eq!((k.analysed, k.partial), (ranks * 2000, 0), "{k:?}");
        assert!(complete(&k.dir), "{k:?}");
    }
    let remembered = setup.service.jobs(&ROOT);
    assert_eq!(remembered.len(), 8, "the history keeps its bound");
    assert!(
        remembered.iter().all(|j| j.job.starts_with("par-2/")),
        "the history keeps the newest: {remembered:?}"
    );
    assert_eq!(fds1, fds0, "descriptors leaked");
    assert_eq!(threads1, threads0, "threads leaked");
    eprintln!("RSS after warm-up {rss0} KiB, after 100 in sequence {rss_seq} KiB, after each round of 8 in parallel {rss_rounds:?} KiB");
    for rss in [rss_seq, rss_end].into_iter().chain(rss_rounds) {
        assert!(
            rss.abs_diff(rss0) * 10 <= rss0,
            "memory moved more than 10 %: {rss0} KiB -> {rss} KiB"
        );
    }
}
