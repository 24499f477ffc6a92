//! Rank 3 of 4 is killed with SIGKILL after a first round of messages while
//! ranks 0-2 go on with 50 allreduces among themselves: the survivors'
//! streams end cleanly with every one of their calls, and the killed rank's
//! stream ends without an `End` frame but keeps what was flushed before the
//! kill (Open MPI; MPICH's launcher kills the whole job when a rank dies).

mod mpi_support;
use hark_transport::Closed;
use mpi_support::*;

#[test]
fn survivors_are_whole_and_the_killed_rank_is_marked() {
    let exe = build(Mpi::OpenMpi, "killed_rank.c", &[]);
    let job = run_with(
        Mpi::OpenMpi,
        4,
        &exe,
        &[],
        true,
        &[
            ("HARK_FLUSH_MS", "50"),
            ("OMPI_MCA_orte_abort_on_non_zero_status", "0"),
        ],
    );
    for r in 0..3 {
        assert!(
            job.stdout.contains(&format!("rank {r} done")),
            "{}",
            job.stdout
        );
    }
    assert_eq!(job.streams.len(), 4, "{}", job.stderr);
    for r in 0..3 {
        let s = job.rank(r);
        assert!(s.is_clean(), "rank {r}: {:?}", s.closed);
        let lines = render(s);
        let allreduces: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("MPI_Allreduce"))
            .collect();
        assert_eq!(allreduces.len(), 50, "rank {r}");
        for (i, l) in allreduces.iter().enumerate() {
            assert_eq!(
                **l,
                format!("MPI_Allreduce [0 1 2] peer=- tag={i} bytes=16 extra=16")
            );
        }
    }
    let killed = job.rank(3);
    assert_eq!(killed.closed, Some(Closed::NoEnd));
    assert!(killed.end.is_none());
    // What was flushed before the kill: everything before the Iprobes that
    // triggered flushes, then some of those Iprobes (how many made it
    // depends on timing).
    let lines = render_with(killed, |_| true);
    let before = [
        "MPI_Init - peer=- tag=0 bytes=0 extra=-",
        "MPI_Send [0 1 2 3] peer=0 tag=1 bytes=8 extra=-",
        "MPI_Comm_split [0 1 2 3] peer=- tag=0 bytes=0 extra=-",
    ];
    assert!(lines.len() >= 3, "{lines:?}");
    assert_eq!(lines[..3], before);
    for l in &lines[3..] {
        assert_eq!(l, "MPI_Iprobe [3] peer=any tag=0 bytes=0 extra=0");
    }
}
