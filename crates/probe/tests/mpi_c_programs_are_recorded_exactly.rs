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
