//! `hark ctl RUN pause` stops recording in every process of a running job
//! (nothing new arrives while it is paused, as two dumps a second apart
//! show) and `resume` starts it again; the job then ends normally, and its
//! run knows how long each rank was paused (out of its efficiencies).

mod common;
mod served;

use common::*;
use served::*;
use std::time::Duration;

fn barriers(dir: &serde_json::Value) -> Vec<u64> {
    per_rank(
        &profile(dir.as_str().unwrap().as_ref()),
        0,
        "MPI_Barrier",
        "calls",
    )
}

#[test]
fn pause_stops_every_rank_and_resume_starts_them_again() {
    let dir = scratch("pause");
    let exe = compile("mpicc.openmpi", "stuck_recv.c".as_ref(), &dir, &[]);
    let served = Served::start(&dir, &[]);
    let stop = dir.join("stop");
    let mut cmd = launcher(OPEN_MPI, 2);
    cmd.extend([exe.display().to_string(), stop.display().to_string()]);
    let job = served.run(None, &cmd);
    let jobs = served.wait_jobs("two ranks connected", |j| j.len() == 1 && j[0]["open"] == 2);
    let id = jobs[0]["id"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(800));
    served.ask(None, &[&id, "pause"]);
    std::thread::sleep(Duration::from_millis(500));
    let a = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    std::thread::sleep(Duration::from_millis(1000));
    let b = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    assert!(a[0] > 0, "{a:?}");
    assert_eq!(a, b, "events arrived while paused");
    served.ask(None, &[&id, "resume"]);
    std::thread::sleep(Duration::from_millis(1000));
    let c = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    assert!(
        c[0] > b[0] && c[1] > b[1],
        "nothing arrived after resume: {b:?} then {c:?}"
    );
    std::fs::write(&stop, "").unwrap();
    let out = job.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = served.wait_jobs("the job folded", |j| j[0]["state"] != "running");
    assert_eq!(jobs[0]["state"], "finished", "{jobs:?}");
    let n: u64 = std::fs::read_to_string(stop.with_extension("count"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let last = barriers(&jobs[0]["dir"]);
    // The paused stretch is missing from the final run, and only it.
    assert!(
        last[0] < n && last[0] >= c[0],
        "{last:?} of {n}, {c:?} at the last dump"
    );
    // Paused for the two dumps a second apart, at least.
    let run = profile(jobs[0]["dir"].as_str().unwrap().as_ref());
    let paused = &run["programs"][0]["paused_ns"];
    for r in 0..2 {
        let ns = paused[r].as_u64().unwrap_or(0);
        assert!(ns >= 1_000_000_000, "rank {r} paused {ns} ns: {paused}");
    }
}
