//! Our own MPI programs, whose calls and bytes are known by construction
//! (see `tests/programs/ring.c` and `ring.f90`), measured through real
//! `mpirun` with both MPI flavours: every count in `profile.json` must be
//! exact, nothing lost, and the program's output unchanged.

mod common;

use common::*;

/// Checks a ring of `np` ranks where each rank sent `rounds` messages of
/// `bytes` bytes to its right neighbour with `send`.
fn check_ring(
    profile: &serde_json::Value,
    np: usize,
    rounds: u64,
    bytes: u64,
    send: &str,
    others: &[&str],
) {
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"].as_u64(), Some(np as u64), "ranks");
    assert_eq!(
        per_rank(profile, 0, send, "calls"),
        vec![rounds; np],
        "{send} calls"
    );
    assert_eq!(
        per_rank(profile, 0, send, "bytes"),
        vec![rounds * bytes; np],
        "{send} bytes"
    );
    for f in others {
        assert_eq!(
            per_rank(profile, 0, f, "calls"),
            vec![rounds; np],
            "{f} calls"
        );
    }
    let messages = matrix(&p["p2p"]["messages"]);
    let volume = matrix(&p["p2p"]["bytes"]);
    for i in 0..np {
        for j in 0..np {
            let want = if j == (i + 1) % np { rounds } else { 0 };
            assert_eq!(messages[i][j], want, "messages {i} -> {j}");
            assert_eq!(volume[i][j], want * bytes, "bytes {i} -> {j}");
        }
    }
    assert_eq!(lost(profile), 0, "events lost");
}

fn run_c_ring(mpi: Mpi, np: usize) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("cring-{}", mpi.cc));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, np);
    command.extend([exe.display().to_string(), "40".into(), "250".into()]);

    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "the ring fails without hark");
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(out.stdout, bare.stdout, "the program's output changed");

    let profile = profile(&run_dir);
    check_ring(
        &profile,
        np,
        40,
        1000,
        "MPI_Isend",
        &["MPI_Recv", "MPI_Wait", "MPI_Allreduce"],
    );
    assert_eq!(per_rank(&profile, 0, "MPI_Barrier", "calls"), vec![1; np]);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains(", 0 lost"), "{summary}");
    assert!(
        summary.contains(&format!("Run directory: {}", run_dir.display())),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_c_ring_on_open_mpi_is_counted_exactly() {
    run_c_ring(OPEN_MPI, 3);
}

#[test]
fn a_c_ring_on_mpich_is_counted_exactly() {
    run_c_ring(MPICH, 2);
}

#[test]
fn a_fortran_ring_on_open_mpi_is_counted_exactly() {
    let mpi = OPEN_MPI;
    if !have(mpi.fc) || !have(mpi.run) {
        eprintln!("skipped: {} Fortran is not installed", mpi.name);
        return;
    }
    let dir = scratch("fring");
    let exe = compile(mpi.fc, "ring.f90".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.push(exe.display().to_string());
    let bare = bare_run(&dir, &command);
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(out.stdout, bare.stdout, "the program's output changed");
    // Fortran calls are reported under the C names.
    check_ring(
        &profile(&run_dir),
        4,
        50,
        400,
        "MPI_Send",
        &["MPI_Recv", "MPI_Allreduce"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
