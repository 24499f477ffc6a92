//! Under `hark run --analysers`, a writer rank that dies makes the launcher
//! end the whole job, analysers included (Open MPI's `mpirun` with SIGTERM
//! then SIGKILL, MPICH's Hydra with SIGKILL). The analysers' servers run in
//! keepers that outlive them (`crates/analyser/src/keeper.rs`), and
//! `hark run` merges what they kept: the run directory is there, the dead
//! rank is partial, and every rank's counts are what it did before the
//! death (`docs/analysers.md`, "When a rank dies").

mod common;

use common::*;
use serde_json::Value;

/// Barriers before the death.
const N: u64 = 40;
const NP: usize = 3;

fn partial(p: &Value) -> Vec<bool> {
    p["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partial"].as_bool().unwrap())
        .collect()
}

fn dies(mpi: Mpi, how: &str, analysers: u32) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("dying-writer-{how}-{analysers}-{}", mpi.cc));
    let exe = compile(mpi.cc, "dies_mid_run.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, NP);
    command.extend([
        exe.display().to_string(),
        how.into(),
        N.to_string(),
        "1".into(),
    ]);
    let a = analysers.to_string();
    let (out, run_dir) = hark_run(&dir, &["--no-http", "--analysers", &a], &command);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("before the analysers merged"),
        "hark run says what happened: {err}"
    );
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    assert!(partial(p)[1], "the dead rank is partial: {err}");
    assert_eq!(
        per_rank(&profile, 0, "MPI_Barrier", "calls"),
        vec![N; NP],
        "every rank's barriers before the death: {err}"
    );
    assert!(!run_dir.join(".partials").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_writer_that_aborts_is_partial_under_open_mpi_with_one_analyser() {
    dies(OPEN_MPI, "abort", 1);
}

#[test]
fn a_writer_killed_by_sigkill_is_partial_under_open_mpi_with_two_analysers() {
    dies(OPEN_MPI, "kill", 2);
}

#[test]
fn a_writer_that_aborts_is_partial_under_mpich_with_two_analysers() {
    dies(MPICH, "abort", 2);
}

#[test]
fn a_writer_killed_by_sigkill_is_partial_under_mpich_with_one_analyser() {
    dies(MPICH, "kill", 1);
}
