//! The job of `half_the_ranks_carry_the_probe` streaming into a service
//! (`hark serve`): world rank 1 carries no probe, the job runs to its end
//! as without Hark (nothing rank 0's probe does waits for rank 1), and the
//! service's run of the job names rank 1 in its summary's first line and
//! in `profile.json`. Real `mpirun`, Open MPI.

mod common;
mod served;

use common::*;
use served::*;

#[test]
fn open_mpi_rank_1_without_the_probe_into_hark_serve() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: {} is not installed", OPEN_MPI.name);
        return;
    }
    let dir = scratch("half-served");
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let script = format!(
        "[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && unset LD_PRELOAD; exec {} 50 100",
        exe.display()
    );
    let mut cmd = launcher(OPEN_MPI, 2);
    cmd.extend(["sh".into(), "-c".into(), script]);
    // The shell that picks rank 1 is not measured; `hark run` passes the
    // setting to everything it starts (the only test in this binary).
    std::env::set_var("HARK_SKIP", "sh");
    let served = Served::start(&dir, &[]);
    let out = wait_within(served.run(None, &cmd), limit(), "hark run --server");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = served.wait_jobs("the job is finished", |j| {
        !j.is_empty() && j.iter().all(|j| j["state"] != "running")
    });
    let run_dir = std::path::PathBuf::from(jobs[0]["dir"].as_str().unwrap());
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let first = summary.lines().next().unwrap_or_default();
    assert!(
        first.ends_with("1 of 2 ranks measured: rank 1 never reached hark"),
        "first line: {first}\n{summary}"
    );
    assert_eq!(
        profile(&run_dir)["missing"][0]["ranks"],
        serde_json::json!([1])
    );
    served.stop();
}
