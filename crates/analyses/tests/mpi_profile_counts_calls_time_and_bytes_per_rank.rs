mod common;
use common::*;
use hark_wire::{op, PEER_NULL};

#[test]
fn every_rank_gets_its_calls_time_bytes_and_extremes() {
    // Three ranks call MPI_Send a different number of times, with
    // different durations; rank 2 connects first.
    let sends = |rank: i32, n: u64| {
        let events = (0..n)
            .map(|i| {
                mpi("MPI_Send", 100 * i, 100 * i + 10 * (rank as u64 + 1) + i)
                    .peer((rank + 1) % 3)
                    .bytes(1000 * (i + 1))
            })
            .collect();
        Proc::mpi("app", rank, 3).pack(events).end()
    };
    let p = run(&[sends(2, 3), sends(0, 1), sends(1, 2)]).remove(0);
    let send = &p.mpi["MPI_Send"];
    assert_eq!(send.calls, vec![1, 2, 3]);
    assert_eq!(send.bytes, vec![1000, 3000, 6000]);
    // rank 1: 20 + 21; rank 2: 30 + 31 + 32.
    assert_eq!(send.time_ns, vec![10, 41, 93]);
    assert_eq!(send.min_ns, vec![10, 20, 30]);
    assert_eq!(send.max_ns, vec![10, 21, 32]);
    let s = &send.time_across_ranks;
    assert_eq!((s.min, s.min_rank, s.max, s.max_rank), (10.0, 0, 93.0, 2));
    assert!((s.mean - 48.0).abs() < 1e-9);
    assert_eq!(send.time_histogram.counts.iter().sum::<u64>(), 3);
    // Sizes 1000, 1000, 2000, 1000, 2000, 3000: bins [512,1024) and [2048,4096) and [1024,2048).
    let h = &send.size_histogram;
    assert_eq!(h.counts.iter().sum::<u64>(), 6);
    assert_eq!(h.counts[10], 3, "1000 bytes fall in [512, 1024)");
    assert_eq!(h.edges[10], 512.0);
    assert_eq!(p.mpi_time_ns, vec![10, 41, 93]);
    assert_eq!(p.rank_wall_ns, vec![10, 121, 232]);
}

#[test]
fn a_receive_request_gives_its_received_bytes_to_the_function_that_posted_it() {
    let proc = Proc::mpi("app", 0, 2)
        .pack(vec![
            mpi("MPI_Irecv", 0, 5).peer(-2).bytes(4096).extra(77),
            mpi("MPI_Isend", 6, 8).peer(1).bytes(64).extra(78),
            mpi("MPI_Waitall", 10, 50).bytes(2),
            ev(op::COMPLETE_RECV, 10, 50).peer(1).bytes(100).extra(77),
            ev(op::COMPLETE_SEND, 10, 50).peer(1).bytes(64).extra(78),
        ])
        .end();
    let p = run(&[proc, Proc::mpi("app", 1, 2).end()]).remove(0);
    assert_eq!(
        p.mpi["MPI_Irecv"].bytes,
        vec![100, 0],
        "received, not posted"
    );
    assert_eq!(p.mpi["MPI_Isend"].bytes, vec![64, 0]);
    assert_eq!(
        p.mpi["MPI_Waitall"].bytes,
        vec![0, 0],
        "a count of requests is not bytes"
    );
    assert_eq!(p.mpi["MPI_Waitall"].time_ns, vec![40, 0]);
    assert_eq!(p.mpi_time_ns, vec![47, 0], "details are not calls");
}

#[test]
fn a_send_to_proc_null_is_a_call_but_not_a_message() {
    let proc = Proc::mpi("app", 0, 1)
        .pack(vec![mpi("MPI_Send", 0, 1).peer(PEER_NULL).bytes(0)])
        .end();
    let p = run(&[proc]).remove(0);
    assert_eq!(p.mpi["MPI_Send"].calls, vec![1]);
    assert!(p.p2p.messages.is_empty(), "no message, no matrix");
}

#[test]
fn an_isend_counts_its_bytes_when_called_its_message_when_completed() {
    // The second request is freed, never completed: its bytes were sent as
    // far as the program's calls go (a PMPI counter agrees), but no message
    // is known to have completed.
    let proc = Proc::mpi("app", 0, 2)
        .pack(vec![
            mpi("MPI_Isend", 0, 2).peer(1).bytes(100).extra(1),
            mpi("MPI_Isend", 3, 4).peer(1).bytes(50).extra(2),
            mpi("MPI_Wait", 5, 9).bytes(1),
            ev(op::COMPLETE_SEND, 5, 9).peer(1).bytes(100).extra(1),
            mpi("MPI_Request_free", 10, 11).extra(2),
        ])
        .end();
    let p = run(&[proc, Proc::mpi("app", 1, 2).end()]).remove(0);
    assert_eq!(p.mpi["MPI_Isend"].bytes, vec![150, 0]);
    assert_eq!(
        p.mpi["MPI_Isend"].size_histogram.counts.iter().sum::<u64>(),
        2
    );
    assert_eq!(p.p2p.bytes[0][1], 100);
    assert_eq!(p.mpi["MPI_Wait"].bytes, vec![0, 0]);
}
