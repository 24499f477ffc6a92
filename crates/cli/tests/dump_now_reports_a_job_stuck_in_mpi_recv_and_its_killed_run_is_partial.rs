//! Dump-now on a job stuck for good in `MPI_Recv`: the dump holds every
//! call completed before it was taken (the probes flush what their blocked
//! threads hold), a second dump holds the same, and the job, killed
//! afterwards, is written as partial. The service goes on. Each dump is
//! listed beside the job (`hark ctl list`, `GET /api/runs`) with the state
//! `dump`, under its own id, and its profile is served; after a restart of
//! the service, they are listed again, the same.

mod common;
mod served;

use common::*;
use served::*;
use std::time::{Duration, Instant};

#[test]
fn a_dump_of_a_hung_job_holds_everything_and_the_killed_job_is_partial() {
    let dir = scratch("dump-hung");
    let exe = compile("mpicc.openmpi", "stuck_recv.c".as_ref(), &dir, &[]);
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let stop = dir.join("stop");
    let mut cmd = launcher(OPEN_MPI, 2);
    cmd.extend([
        exe.display().to_string(),
        stop.display().to_string(),
        "hang".into(),
    ]);
    let mut job = served.run(None, &cmd);
    let jobs = served.wait_jobs("two ranks connected", |j| j.len() == 1 && j[0]["open"] == 2);
    let id = jobs[0]["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&stop, "").unwrap();
    let count = stop.with_extension("count");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !count.exists() {
        assert!(Instant::now() < deadline, "the program never left its loop");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Now rank 0 waits in MPI_Recv and rank 1 in MPI_Barrier, for ever.
    std::thread::sleep(Duration::from_millis(300));
    let n: u64 = std::fs::read_to_string(&count)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(n > 0);
    let first = served.ask(None, &[&id, "dump"]);
    let second = served.ask(None, &[&id, "dump"]);
    for answer in [&first, &second] {
        let d = std::path::PathBuf::from(answer["dir"].as_str().unwrap());
        let p = profile(&d);
        assert_eq!(
            per_rank(&p, 0, "MPI_Barrier", "calls"),
            vec![n, n],
            "{}",
            d.display()
        );
        assert_eq!(
            per_rank(&p, 0, "MPI_Bcast", "calls"),
            vec![n, n],
            "{}",
            d.display()
        );
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("service.json")).unwrap())
                .unwrap();
        assert_eq!(meta["kind"], "dump");
        let diag = p["programs"][0]["diagnostics"].to_string();
        assert!(diag.contains("This is dump"), "{diag}");
    }
    // Listed, each as a run of its own, after the running job.
    let listed = served.listed(None);
    let states: Vec<&str> = listed
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["running", "dump", "dump"], "{listed:?}");
    for (k, answer) in [&first, &second].into_iter().enumerate() {
        let d = &listed[k + 1];
        assert_eq!(
            d["id"].as_str(),
            Some(format!("{id}-dump{}", k + 1).as_str())
        );
        assert_eq!(
            (d["job_id"].as_str(), d["dump"].as_u64()),
            (Some(id.as_str()), Some(k as u64 + 1))
        );
        assert_eq!(d["dir"], answer["dir"]);
        let shown = served.ask(None, &[d["id"].as_str().unwrap(), "show"]);
        assert_eq!(shown["job"], *d);
    }
    let api = served.get("api/runs");
    let runs: serde_json::Value = serde_json::from_str(&api).unwrap();
    let api_ids: Vec<(&str, &str)> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    let dump1 = format!("{id}-dump1");
    let dump2 = format!("{id}-dump2");
    assert_eq!(
        api_ids,
        [
            (id.as_str(), "running"),
            (dump1.as_str(), "dump"),
            (dump2.as_str(), "dump")
        ],
        "{api}"
    );
    let dumped: serde_json::Value =
        serde_json::from_str(&served.get(&format!("api/runs/{dump1}/profile"))).unwrap();
    assert_eq!(
        per_rank(&dumped, 0, "MPI_Barrier", "calls"),
        vec![n, n],
        "the dump's profile over HTTP"
    );
    // The job is still running after its dumps; then it is killed.
    assert_eq!(served.jobs(None)[0]["state"], "running");
    kill_session(&mut job);
    let jobs = served.wait_jobs("the killed job folded", |j| {
        j.len() == 1 && j[0]["state"] != "running"
    });
    assert_eq!(jobs[0]["state"], "partial", "{jobs:?}");
    let d = std::path::PathBuf::from(jobs[0]["dir"].as_str().unwrap());
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("service.json")).unwrap()).unwrap();
    assert_eq!(
        (meta["kind"].as_str(), meta["state"].as_str()),
        (Some("final"), Some("partial"))
    );
    assert_eq!(
        per_rank(&profile(&d), 0, "MPI_Barrier", "calls"),
        vec![n, n]
    );
    let dumps = served.dumps(None);
    assert_eq!(dumps.len(), 2, "{dumps:?}");
    served.stop();
    let served = Served::start(&dir, &[]);
    assert_eq!(served.dumps(None), dumps, "the dumps after a restart");
    served.stop();
}
