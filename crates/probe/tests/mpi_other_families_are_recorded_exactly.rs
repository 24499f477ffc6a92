//! Non-blocking collectives, `MPI_Comm_idup`, matched probes, `MPI_Cancel`,
//! `MPI_Iprobe`, `MPI_Alltoallw`, a neighbourhood collective on a cartesian
//! topology, an inter-communicator broadcast, one-sided operations and
//! MPI-IO, on 4 ranks: each rank's stream equals
//! `tests/programs/mpi/rma_io_and_more.expected` on both libraries.

mod mpi_support;
use mpi_support::*;

const EXPECTED: &str = "rma_io_and_more.expected";

#[test]
fn open_mpi_streams_equal_what_the_program_did() {
    check_program(Mpi::OpenMpi, "rma_io_and_more.c", &[], EXPECTED);
}

#[test]
fn mpich_streams_equal_what_the_program_did() {
    check_program(Mpi::Mpich, "rma_io_and_more.c", &[], EXPECTED);
}
