//! A C++ program whose two threads call MPI at `MPI_THREAD_MULTIPLE`: each
//! thread's events arrive as that thread's own sequence, exactly, on Open MPI
//! and on MPICH.

mod mpi_support;
use mpi_support::*;

fn check(mpi: Mpi) {
    let exe = build(mpi, "threads.cc", &[]);
    let job = run(mpi, 2, &exe, &[]);
    assert!(job.success, "the job failed: {}{}", job.stdout, job.stderr);
    // What thread t of a rank does: three messages, then its allreduce.
    let worker = |call: &str, peer: i32, t: usize| {
        let mut v: Vec<String> = (0..3)
            .map(|_| {
                format!(
                    "{call} [0 1] peer={peer} tag={} bytes={} extra=-",
                    100 + t,
                    8 * (t + 1)
                )
            })
            .collect();
        v.push("MPI_Allreduce [0 1] peer=- tag=0 bytes=8 extra=8".to_string());
        v
    };
    let main = vec![
        "MPI_Init_thread - peer=- tag=0 bytes=0 extra=-".to_string(),
        "MPI_Comm_dup [0 1] peer=- tag=0 bytes=0 extra=3".to_string(),
        "MPI_Comm_dup [0 1] peer=- tag=0 bytes=0 extra=4".to_string(),
        "MPI_Comm_free [0 1] peer=- tag=0 bytes=0 extra=-".to_string(),
        "MPI_Comm_free [0 1] peer=- tag=0 bytes=0 extra=-".to_string(),
        "MPI_Finalize - peer=- tag=0 bytes=0 extra=-".to_string(),
    ];
    for (rank, call, peer) in [(0, "MPI_Send", 1), (1, "MPI_Recv", 0)] {
        let s = job.rank(rank);
        assert!(s.is_clean(), "rank {rank}: {:?}", s.closed);
        assert_eq!(s.ranks[0].thread_level, 3, "MPI_THREAD_MULTIPLE granted");
        let mut want = vec![main.clone(), worker(call, peer, 0), worker(call, peer, 1)];
        want.sort();
        let got = render_by_thread(s);
        assert_eq!(got, want, "{mpi:?} rank {rank}");
    }
}

#[test]
fn open_mpi_two_threads() {
    check(Mpi::OpenMpi);
}

#[test]
fn mpich_two_threads() {
    check(Mpi::Mpich);
}
