//! A C program with known MPI calls and bytes (blocking, non-blocking and
//! persistent point-to-point, `MPI_ANY_SOURCE` with `Waitany`/`Testsome`,
//! probes, derived types, `MPI_PROC_NULL`, zero counts, `MPI_IN_PLACE`,
//! collectives on world and on split/dup communicators), run on 4 ranks
//! under real `mpirun`: the decoded stream of every rank equals, line for
//! line, `tests/programs/mpi/p2p_and_collectives.expected` — the same file
//! for Open MPI and for MPICH.

mod mpi_support;
use mpi_support::*;

const EXPECTED: &str = "p2p_and_collectives.expected";

#[test]
fn open_mpi_streams_equal_what_the_program_did() {
    check_program(Mpi::OpenMpi, "p2p_and_collectives.c", &[], EXPECTED);
}

#[test]
fn mpich_streams_equal_what_the_program_did() {
    check_program(Mpi::Mpich, "p2p_and_collectives.c", &[], EXPECTED);
}

/// Calls MPI rejects (with `MPI_ERRORS_RETURN`) are recorded with what is
/// known without asking MPI, and the program runs on.
fn rejected_calls_are_recorded_and_harmless(mpi: Mpi) {
    let exe = build(mpi, "errors_return.c", &[]);
    let job = run(mpi, 2, &exe, &[]);
    assert!(job.success, "{}{}", job.stdout, job.stderr);
    assert_eq!(
        job.stdout.lines().filter(|l| *l == "errors 1 1 1").count(),
        2,
        "{}",
        job.stdout
    );
    for r in 0..2 {
        assert_lines(
            &format!("{mpi:?} rank {r}"),
            &render(job.rank(r)),
            "MPI_Init - peer=- tag=0 bytes=0 extra=-
             MPI_Send [0 1] peer=- tag=0 bytes=0 extra=-
             MPI_Send [0 1] peer=0 tag=0 bytes=0 extra=-
             MPI_Bcast [0 1] peer=0 tag=0 bytes=0 extra=-
             MPI_Finalize - peer=- tag=0 bytes=0 extra=-",
        );
    }
}

#[test]
fn open_mpi_rejected_calls_are_recorded_and_harmless() {
    rejected_calls_are_recorded_and_harmless(Mpi::OpenMpi);
}

#[test]
fn mpich_rejected_calls_are_recorded_and_harmless() {
    rejected_calls_are_recorded_and_harmless(Mpi::Mpich);
}
