//! A rank whose probe could not connect (here: world rank 1 is given an
//! address nobody listens on) records nothing, and nobody waits for it:
//! each rank aligns its clock with the server on a connection of its own,
//! so rank 0 aligns at `MPI_Init` and `MPI_Finalize` as usual and the job
//! ends (were the alignment collective, as it once was over MPI, rank 0
//! would wait for rank 1 and the job runner would kill the job after two
//! minutes). Real `mpirun`, Open MPI and MPICH.

mod mpi_support;
use hark_wire::ClockPhase;
use mpi_support::*;
use std::path::Path;

fn check(mpi: Mpi) {
    let exe = build(mpi, "init_barrier_finalize.c", &[]);
    let script = format!(
        "r=${{OMPI_COMM_WORLD_RANK:-$PMI_RANK}}; [ \"$r\" = 1 ] && export HARK_ADDR=unix:/nonexistent/hark.sock; exec {}",
        exe.display()
    );
    let job = run_reaching(
        mpi,
        2,
        1,
        Path::new("/bin/sh"),
        &["-c", &script],
        &[("HARK_SKIP", "sh")],
    );
    assert!(job.success, "the job failed: {}", job.stderr);
    assert_eq!(job.streams.len(), 1, "only rank 0 connects");
    let s = job.rank(0);
    assert!(s.is_clean(), "{:?}", s.closed);
    let phases: Vec<_> = s.clocks.iter().map(|c| c.phase).collect();
    assert_eq!(phases, [ClockPhase::Init, ClockPhase::Finalize]);
}

#[test]
fn open_mpi() {
    check(Mpi::OpenMpi);
}

#[test]
fn mpich() {
    check(Mpi::Mpich);
}
