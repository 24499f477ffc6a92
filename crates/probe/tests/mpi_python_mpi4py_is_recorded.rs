//! Python's mpi4py loads the MPI library in a local scope (its extension is
//! opened with `RTLD_LOCAL`), where neither `RTLD_NEXT` nor the global scope
//! finds `PMPI_*`: the probe must still forward every call (not break the
//! program) and record it.

mod mpi_support;
use mpi_support::*;
use std::path::Path;

#[test]
fn mpi4py_runs_and_its_calls_are_recorded() {
    let script = repo().join("tests/programs/mpi/mpi4py_ping.py");
    let job = run_with(
        Mpi::OpenMpi,
        2,
        Path::new("/usr/bin/python3"),
        &[script.to_str().unwrap()],
        true,
        &[],
    );
    assert!(job.success, "{}{}", job.stdout, job.stderr);
    assert!(
        // Both ranks finished (their lines may interleave).
        job.stdout.matches("ok").count() == 2,
        "{}{}",
        job.stdout,
        job.stderr
    );
    for (r, line) in [
        (0, "MPI_Send [0 1] peer=1 tag=3 bytes=16 extra=-"),
        (1, "MPI_Recv [0 1] peer=0 tag=3 bytes=16 extra=-"),
    ] {
        let s = job.rank(r);
        assert!(s.is_clean(), "rank {r}: {:?}", s.closed);
        let lines = render(s);
        assert_eq!(
            lines.first().map(String::as_str),
            Some("MPI_Init_thread - peer=- tag=0 bytes=0 extra=-")
        );
        assert!(lines.iter().any(|l| l == line), "rank {r}: {lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l == "MPI_Barrier [0 1] peer=- tag=0 bytes=0 extra=0"),
            "{lines:#?}"
        );
    }
}
