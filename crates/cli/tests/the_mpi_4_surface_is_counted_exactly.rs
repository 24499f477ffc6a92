//! The MPI 4.0 surface (`tests/programs/mpi4_surface.c`): large-count `_c`
//! calls, partitioned communication, persistent collectives,
//! `MPI_Isendrecv(_replace)`, `MPI_Comm_idup_with_info` and the Sessions
//! functions, on MPICH 4.0 at np 2. Calls and bytes equal the independent
//! count (`tests/programs/count_mpi.c`), a count past 32 bits is counted in
//! full, and the partitioned receive whose sender starts late is a Late
//! Sender in `MPI_Wait`. The same program built against Open MPI 4.1 (MPI
//! 3.1: the MPI 4.0 part compiled out) runs unchanged. From Fortran
//! (`use mpi_f08`, `tests/programs/mpi4_f08.f90`): the partitioned,
//! persistent-collective and `MPI_Isendrecv` calls counted as the program
//! makes them.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::*;
use independent_count::{compare, counted_run_on, counts_of, read_counts};

/// Runs the program built with `mpi` under `hark run` with the counter
/// preloaded; the profile and the counter's counts, after checking the run
/// succeeded and printed `expect`.
fn run(mpi: Mpi, expect: &str) -> Option<(serde_json::Value, usize)> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: needs {} ({} and {})", mpi.name, mpi.cc, mpi.run);
        return None;
    }
    let dir = scratch(&format!("mpi4-{}", mpi.cc));
    let exe = compile(mpi.cc, "mpi4_surface.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.push(exe.to_string_lossy().into_owned());
    let (out, run_dir) = counted_run_on(mpi, &dir, "run", &[], &command);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains(expect),
        "{}: no `{expect}` in {stdout}",
        mpi.name
    );
    let profile = profile(&run_dir);
    let counts = read_counts(&dir.join(counts_of("run")), 2);
    let n = compare(&profile, &counts);
    Some((profile, n))
}

#[test]
fn mpi_4_calls_on_mpich_match_an_independent_count_and_find_the_late_partitioned_sender() {
    let Some((profile, functions)) = run(MPICH, "mpi4 ok 4.0") else {
        return;
    };
    // The counter saw the MPI 4.0 families, so `compare` checked them.
    assert!(functions >= 30, "only {functions} functions counted");
    let mpi = &profile["programs"][0]["mpi"];
    for f in [
        "MPI_Psend_init",
        "MPI_Pready_list",
        "MPI_Parrived",
        "MPI_Allreduce_init",
        "MPI_Isendrecv_replace",
        "MPI_Comm_idup_with_info",
        "MPI_Session_get_nth_pset",
        "MPI_Comm_create_from_group",
        "MPI_Bcast_c",
    ] {
        assert!(mpi[f].is_object(), "{f} not in the profile");
    }
    // 2^32 + 16 bytes: a 32-bit count would have given 16.
    assert_eq!(
        per_rank(&profile, 0, "MPI_Bcast_c", "bytes"),
        vec![(1u64 << 32) + 16; 2]
    );
    // Each start of the partitioned receive is one message of 4 × 8 doubles.
    assert_eq!(
        per_rank(&profile, 0, "MPI_Precv_init", "bytes"),
        vec![0, 2 * 256]
    );
    // Rank 0 sleeps before each MPI_Start of its partitioned send: rank 1
    // waits for it in MPI_Wait, twice.
    let ls = &profile["programs"][0]["waits"]["late_sender"];
    let in_wait = ls["by_function"]["MPI_Wait"]["instances"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        in_wait >= 2,
        "no Late Sender in MPI_Wait on the partitioned receive: {ls}"
    );
    let diagnostics = profile["programs"][0]["diagnostics"].to_string();
    assert!(
        !diagnostics.contains("found no partner"),
        "unmatched messages: {diagnostics}"
    );
    // What the analyses skip is said, naming the functions.
    for f in ["MPI_Allreduce_init", "MPI_Barrier_init", "MPI_Isendrecv"] {
        assert!(
            diagnostics.contains(f) && diagnostics.contains("timed and counted only"),
            "the diagnostics do not say {f} is skipped: {diagnostics}"
        );
    }
    check_waits_fit(&profile, 0);
}

#[test]
fn the_same_program_on_open_mpi_4_1_runs_unchanged() {
    let Some((profile, _)) = run(OPEN_MPI, "mpi4 ok 3.1") else {
        return;
    };
    assert!(profile["programs"][0]["mpi"]["MPI_Send"].is_object());
    let diagnostics = profile["programs"][0]["diagnostics"].to_string();
    assert!(!diagnostics.contains("MPI 4.0"), "{diagnostics}");
}

/// The Fortran program's calls per rank, as it makes them (5 rounds; 4
/// partitions of 256 doubles on rank 0's send and rank 1's receive).
const F08_CALLS: [(&str, [u64; 2]); 9] = [
    ("MPI_Psend_init", [1, 0]),
    ("MPI_Precv_init", [0, 1]),
    ("MPI_Pready", [20, 0]),
    ("MPI_Parrived", [0, 5]),
    ("MPI_Allreduce_init", [1, 1]),
    ("MPI_Start", [10, 10]),
    ("MPI_Wait", [15, 15]),
    ("MPI_Isendrecv", [5, 5]),
    ("MPI_Request_free", [2, 2]),
];

#[test]
fn mpi_4_calls_from_fortran_on_mpich_are_counted_as_made() {
    let mpi = MPICH;
    if !have(mpi.fc) || !have(mpi.run) {
        eprintln!("skipped: needs {} ({} and {})", mpi.name, mpi.fc, mpi.run);
        return;
    }
    let dir = scratch("mpi4-f08");
    let exe = compile(mpi.fc, "mpi4_f08.f90".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.push(exe.to_string_lossy().into_owned());
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("mpi4_f08: done"));
    let profile = profile(&run_dir);
    for (f, calls) in F08_CALLS {
        assert_eq!(per_rank(&profile, 0, f, "calls"), calls.to_vec(), "{f}");
    }
    // Each start of the partitioned request is one message of 4 × 256
    // doubles, counted at the send when called and at the receive when
    // its request completes.
    let message = 4 * 256 * 8;
    assert_eq!(
        per_rank(&profile, 0, "MPI_Psend_init", "bytes"),
        vec![5 * message, 0]
    );
    assert_eq!(
        per_rank(&profile, 0, "MPI_Precv_init", "bytes"),
        vec![0, 5 * message]
    );
    let diagnostics = profile["programs"][0]["diagnostics"].to_string();
    assert!(
        diagnostics.contains("MPI_Allreduce_init") && diagnostics.contains("MPI_Isendrecv"),
        "the diagnostics do not say what is timed only: {diagnostics}"
    );
}
