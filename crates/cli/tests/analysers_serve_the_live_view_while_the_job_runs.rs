//! `hark run --analysers 2 --http`: the analysers' snapshots, merged over
//! MPI about once a second, reach the live view of `hark run` while a real
//! 4-rank job runs (Open MPI; `live_phases.c`: point to point for 3 s,
//! collectives after). The run is listed as running; the profile has the
//! ranks of both analysers and its counts grow between two polls; once the
//! point-to-point phase is over, the live profile's `MPI_Sendrecv` counts
//! per rank equal the final profile's.

mod common;
#[path = "common/live.rs"]
mod live;

use std::time::{Duration, Instant};

fn sendrecv_calls(profile: &serde_json::Value) -> Vec<u64> {
    common::per_rank(profile, 0, "MPI_Sendrecv", "calls")
}

fn allreduce_calls(profile: &serde_json::Value) -> u64 {
    common::per_rank(profile, 0, "MPI_Allreduce", "calls")
        .iter()
        .sum()
}

#[test]
fn analysers_serve_the_live_view_while_the_job_runs() {
    if !common::have(common::OPEN_MPI.run) || !common::have(common::OPEN_MPI.cc) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = common::scratch("analysers-live");
    // 3 s of point-to-point, then collectives until 30 s: time for the
    // snapshots, which lag by a merge round, to settle under a loaded
    // machine (with 9 s the job ended before they did, in a full suite).
    let job = live::start_with(&dir, 3, 30, &["--analysers", "2"]);

    let runs: serde_json::Value = serde_json::from_str(&job.get("api/runs").unwrap()).unwrap();
    assert_eq!(runs[0]["id"], "run", "{runs}");
    assert_eq!(runs[0]["state"], "running", "{runs}");

    let first = job.wait_for_events(0);
    std::thread::sleep(Duration::from_millis(1500));
    let second = job.wait_for_events(first);
    assert!(second > first, "{second} events after {first}");
    let p = job.profile("");
    assert_eq!(
        p["programs"][0]["ranks"], 4,
        "both analysers' ranks are in the snapshot"
    );

    // Once the collectives run, the point-to-point counts are complete:
    // wait until the live profile has them, unchanged over three polls
    // while the collectives' grow (so the snapshots are not stale).
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut last, mut last_coll, mut stable) = (Vec::new(), 0, 0);
    let live = loop {
        let p = job.profile("");
        let (now, coll) = (sendrecv_calls(&p), allreduce_calls(&p));
        stable = match coll > last_coll && last_coll > 0 && now == last {
            true => stable + 1,
            false => 0,
        };
        if stable == 2 && now.iter().all(|&c| c > 0) {
            break p;
        }
        (last, last_coll) = (now, coll);
        assert!(
            Instant::now() < deadline,
            "the live profile's MPI_Sendrecv counts did not settle within 120 s"
        );
        std::thread::sleep(Duration::from_millis(1200));
    };
    let run_dir = job.run_dir.clone();
    assert_eq!(job.wait(), 0);
    let fin = common::profile(&run_dir);
    assert_eq!(sendrecv_calls(&live), sendrecv_calls(&fin));
    let events = |p: &serde_json::Value| p["accounting"]["events_received"].as_u64().unwrap();
    assert!(events(&live) <= events(&fin));
    assert_eq!(common::lost(&fin), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
