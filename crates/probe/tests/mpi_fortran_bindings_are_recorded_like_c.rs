//! The same Fortran program through each binding — `mpif.h`, `use mpi`,
//! `use mpi_f08` — records the same stream (`bindings.expected`), named with
//! the C functions' names, on Open MPI (whose Fortran layer the probe wraps
//! itself) and on MPICH (whose Fortran layer reaches the C wrappers).

mod mpi_support;
use mpi_support::*;

const EXPECTED: &str = "bindings.expected";

fn check(mpi: Mpi, binding: u8) {
    let flag = format!("-DBINDING={binding}");
    check_program(mpi, "bindings.F90", &[&flag], EXPECTED);
}

#[test]
fn open_mpi_mpif_h() {
    check(Mpi::OpenMpi, 1);
}

#[test]
fn open_mpi_use_mpi() {
    check(Mpi::OpenMpi, 2);
}

#[test]
fn open_mpi_use_mpi_f08() {
    check(Mpi::OpenMpi, 3);
}

#[test]
fn mpich_mpif_h() {
    check(Mpi::Mpich, 1);
}

#[test]
fn mpich_use_mpi() {
    check(Mpi::Mpich, 2);
}

#[test]
fn mpich_use_mpi_f08() {
    check(Mpi::Mpich, 3);
}
