//! Nothing finished is lost: a job run through `hark serve` is recorded in
//! the service's run index (`RUNS/index.sqlite`); after the service is
//! stopped (SIGTERM) and started again on the same runs directory, `hark ctl
//! list` and `GET /api/runs` still show the finished job under its number,
//! `GET /api/runs/{id}/profile` serves its run directory's profile, new
//! jobs are numbered after it, and `hark runs --index RUNS` lists it. A damaged index
//! is moved aside and rebuilt from the run directories, and so is a missing
//! one; neither stops the service.

mod common;
mod served;

use common::*;
use served::*;

fn finished(served: &Served) -> Vec<serde_json::Value> {
    served.wait_jobs("the job is finished", |j| {
        !j.is_empty() && j.iter().all(|j| j["state"] == "finished")
    })
}

fn hark_runs(index: &std::path::Path) -> String {
    let out = std::process::Command::new(hark())
        .args(["runs", "--index"])
        .arg(index)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_finished_run_is_listed_again_after_a_restart_and_a_damaged_index_is_rebuilt() {
    if !have(OPEN_MPI.run) {
        eprintln!("skipped: no {}", OPEN_MPI.run);
        return;
    }
    let dir = scratch("restart");
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let mut cmd = launcher(OPEN_MPI, 2);
    cmd.push(exe.display().to_string());

    let served = Served::start(&dir, &[]);
    let out = served.run(None, &cmd).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = finished(&served);
    assert_eq!(before.len(), 1, "{before:?}");
    let run_dir = std::path::PathBuf::from(before[0]["dir"].as_str().unwrap());
    let calls = per_rank(&profile(&run_dir), 0, "MPI_Send", "calls");
    assert!(calls.iter().all(|&c| c > 0), "{calls:?}");
    let runs = served.runs.clone();
    served.stop();

    let listed = hark_runs(&runs);
    assert!(
        listed.contains(&run_dir.display().to_string()) && listed.contains("(uid 0)"),
        "{listed}"
    );

    // Started again: the finished job is there, as it was.
    let served = Served::start(&dir, &[]);
    let after = finished(&served);
    assert_eq!(after.len(), 1, "{after:?}");
    for field in [
        "id",
        "job",
        "owner",
        "state",
        "programs",
        "dir",
        "started_ns",
        "events",
    ] {
        assert_eq!(after[0][field], before[0][field], "{field}");
    }
    // A new job is numbered after it.
    let out = served.run(None, &cmd).wait_with_output().unwrap();
    assert!(out.status.success());
    let both = served.wait_jobs("two jobs", |j| {
        j.len() == 2 && j.iter().all(|j| j["state"] == "finished")
    });
    let ids: Vec<u64> = both
        .iter()
        .map(|j| j["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids[1] > ids[0], "{ids:?}");
    served.stop();

    // A damaged index is moved aside and rebuilt; a missing one rebuilt.
    let index = runs.join("index.sqlite");
    std::fs::write(&index, vec![b'#'; 8192]).unwrap();
    let served = Served::start(&dir, &[]);
    assert_eq!(finished(&served).len(), 2);
    let log = served.stop();
    assert!(
        log.contains("was damaged") && log.contains("rebuilt it from 2 run directories"),
        "{log}"
    );
    assert!(runs.join("index.sqlite.corrupt").exists());
    std::fs::remove_file(&index).unwrap();
    let served = Served::start(&dir, &[]);
    assert_eq!(finished(&served).len(), 2);
    let log = served.stop();
    assert!(log.contains("was missing; rebuilt it from 2"), "{log}");
    assert_eq!(hark_runs(&runs).matches("(uid 0)").count(), 2);
}
