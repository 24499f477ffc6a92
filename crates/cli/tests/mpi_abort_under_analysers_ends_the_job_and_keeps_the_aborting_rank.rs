//! `MPI_Abort(MPI_COMM_WORLD, 3)` under `hark run --analysers`, on a
//! virtualised world and with `--no-virtualise`: both libraries end the
//! whole job, analysers included, with the program's code. The aborting
//! rank's probe sends its whole stream (the abort recorded, the End) before
//! the real call, so it is whole in the run `hark run` merges from the
//! analysers' keepers; the rank it left waiting is partial
//! (`docs/analysers.md`, "When a rank dies"; `docs/mpi.md`, "`MPI_Abort`").
//! Under MPICH over UCX the rank left waiting is ended from inside UCX's
//! progress, and its probe's exit path must not call MPI there
//! (`docs/analysers.md`, Known problems: "Fixed: `MPI_Abort` under MPICH
//! could end in a UCX assertion").
//!
//! The rank left waiting sends nothing once it waits, so it is in the run
//! only because its stream's opening went out before `MPI_Init` returned,
//! even when its shipper thread had not yet run (a crowded node; here a
//! test build's `HARK_TEST_SHIPPER_DELAY_MS`): without it, that rank was
//! missing from the run.

mod common;

use common::*;
use serde_json::Value;

const N: u64 = 30;

fn partial(p: &Value) -> Vec<bool> {
    p["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partial"].as_bool().unwrap())
        .collect()
}

fn aborts(mpi: Mpi, virtualise: bool) {
    aborts_with(mpi, virtualise, &[]);
}

/// [`aborts`] with every shipper `late_ms` behind its rank.
fn aborts_with_late_shippers(mpi: Mpi, virtualise: bool, late_ms: &str) {
    aborts_with(mpi, virtualise, &[("HARK_TEST_SHIPPER_DELAY_MS", late_ms)]);
}

fn aborts_with(mpi: Mpi, virtualise: bool, env: &[(&str, &str)]) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let late = if env.is_empty() { "" } else { "-late" };
    let dir = scratch(&format!("abort-analysers-{virtualise}-{}{late}", mpi.cc));
    let exe = compile(mpi.cc, "die.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.extend([exe.display().to_string(), "abort".into(), N.to_string()]);
    let mut args = vec!["--no-http", "--analysers", "1"];
    if !virtualise {
        args.push("--no-virtualise");
    }
    let (out, run_dir) = hark_run_env(&dir, &args, &command, env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("before the analysers merged"), "{err}");
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    assert_eq!(partial(p), vec![false, true], "{err}");
    assert_eq!(per_rank(&profile, 0, "MPI_Abort", "calls"), vec![1, 0]);
    assert_eq!(per_rank(&profile, 0, "MPI_Barrier", "calls")[0], N);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mpi_abort_on_a_virtualised_world_under_open_mpi() {
    aborts(OPEN_MPI, true);
}

#[test]
fn mpi_abort_without_virtualisation_under_open_mpi() {
    aborts(OPEN_MPI, false);
}

#[test]
fn mpi_abort_on_a_virtualised_world_under_mpich() {
    aborts(MPICH, true);
}

#[test]
fn mpi_abort_without_virtualisation_under_mpich() {
    aborts(MPICH, false);
}

#[test]
fn a_rank_that_waits_from_its_start_is_in_the_run_under_open_mpi() {
    aborts_with_late_shippers(OPEN_MPI, true, "500");
}

#[test]
fn a_rank_that_waits_from_its_start_is_in_the_run_under_mpich() {
    aborts_with_late_shippers(MPICH, false, "500");
}
