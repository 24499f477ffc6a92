mod common;
use common::*;
use hark_wire::{op, PEER_NULL};

/// World rank 0 talks to 1 in every way there is; rank 1 receives.
fn talkers() -> Vec<Proc> {
    let r0 = Proc::mpi("app", 0, 2)
        .pack(vec![
            mpi("MPI_Send", 0, 10).peer(1).bytes(100),
            mpi("MPI_Isend", 20, 22).peer(1).bytes(200).extra(5),
            mpi("MPI_Wait", 23, 30).bytes(1),
            ev(op::COMPLETE_SEND, 23, 30).peer(1).bytes(200).extra(5),
            mpi("MPI_Sendrecv", 40, 60).peer(1).bytes(300),
            ev(op::COMPLETE_RECV, 40, 60).peer(1).bytes(30),
            mpi("MPI_Send_init", 70, 71).peer(1).bytes(400).extra(9),
        ])
        // The persistent request runs three times, across packs.
        .pack(
            (0..3)
                .flat_map(|i| {
                    let t = 100 + 10 * i;
                    [
                        mpi("MPI_Start", t, t + 1).extra(9),
                        mpi("MPI_Wait", t + 2, t + 5).bytes(1),
                        ev(op::COMPLETE_SEND, t + 2, t + 5)
                            .peer(1)
                            .bytes(400)
                            .extra(9),
                    ]
                })
                .collect(),
        )
        .pack(vec![
            mpi("MPI_Request_free", 200, 201).extra(9),
            mpi("MPI_Send", 210, 211).peer(PEER_NULL),
        ])
        .end();
    let r1 = Proc::mpi("app", 1, 2)
        .pack(vec![
            mpi("MPI_Recv", 0, 12).peer(0).bytes(100),
            mpi("MPI_Irecv", 13, 14).peer(-2).bytes(1 << 20).extra(3),
            mpi("MPI_Wait", 15, 31).bytes(1),
            ev(op::COMPLETE_RECV, 15, 31).peer(0).bytes(200).extra(3),
            mpi("MPI_Sendrecv", 40, 61).peer(0).bytes(30),
            ev(op::COMPLETE_RECV, 40, 61).peer(0).bytes(300),
        ])
        .end();
    vec![r0, r1]
}

#[test]
fn all_kinds_together_count_sends_only() {
    let p = run(&talkers()).remove(0);
    // Send, Isend, Sendrecv, 3 persistent starts from 0 to 1; Sendrecv from 1 to 0.
    assert_eq!(p.p2p.messages, vec![vec![0, 6], vec![1, 0]]);
    assert_eq!(
        p.p2p.bytes,
        vec![vec![0, 100 + 200 + 300 + 3 * 400], vec![30, 0]]
    );
    // Time: Send 10, Isend's posting 2, Sendrecv 20, three Starts 1 each.
    assert_eq!(p.p2p.time_ns[0][1], 10 + 2 + 20 + 3);
}

#[test]
fn each_function_has_its_own_matrices_and_receives_are_seen_from_the_receiver() {
    let p = run(&talkers()).remove(0);
    let f = &p.p2p.by_function;
    assert_eq!(f["MPI_Send"].messages, vec![vec![0, 1], vec![0, 0]]);
    assert_eq!(f["MPI_Isend"].bytes, vec![vec![0, 200], vec![0, 0]]);
    assert_eq!(f["MPI_Send_init"].messages[0][1], 3);
    assert_eq!(
        f["MPI_Recv"].messages,
        vec![vec![0, 1], vec![0, 0]],
        "from 0 to 1"
    );
    assert_eq!(f["MPI_Irecv"].bytes[0][1], 200, "actual, not posted");
    // Sendrecv: its sends; its receive sides are the same messages.
    assert_eq!(f["MPI_Sendrecv"].messages, vec![vec![0, 1], vec![1, 0]]);
    assert!(
        !f.contains_key("MPI_Start"),
        "Start is not a kind of message"
    );
    assert_eq!(p.mpi["MPI_Send_init"].bytes, vec![1200, 0]);
    assert_eq!(p.mpi["MPI_Sendrecv"].bytes, vec![300, 30], "sent bytes");
}

#[test]
fn matrices_use_program_ranks_in_world_rank_order_whatever_the_connection_order() {
    let mut procs = talkers();
    procs.reverse();
    let p = run(&procs).remove(0);
    assert_eq!(p.rank_info[0].world_rank, 0);
    assert_eq!(p.p2p.messages, vec![vec![0, 6], vec![1, 0]]);
}

#[test]
fn messages_to_another_program_are_left_out_of_the_matrix_and_said_so() {
    let solo = Proc::mpi("app", 0, 4)
        .pack(vec![mpi("MPI_Send", 0, 1).peer(3).bytes(8)])
        .end();
    let p = run(&[solo]).remove(0);
    assert!(p.p2p.messages.is_empty(), "no message within the program");
    assert_eq!(p.mpi["MPI_Send"].bytes, vec![8]);
    assert!(p
        .diagnostics
        .iter()
        .any(|d| d.contains("outside this program")));
}

/// Three ranks move data one-sided: rank 0 puts into 1 and reads 2 (an
/// atomic read), rank 2 accumulates into 0 and fetches-and-adds on 1, and
/// one put goes to `MPI_PROC_NULL`; rank 1 also sends a message to 0.
#[test]
fn one_sided_operations_go_from_origin_to_target_in_matrices_of_their_own() {
    let r0 = Proc::mpi("app", 0, 3)
        .pack(vec![
            mpi("MPI_Put", 0, 4).peer(1).bytes(64),
            mpi("MPI_Put", 5, 6).peer(1).bytes(16),
            mpi("MPI_Get_accumulate", 10, 13).peer(2).bytes(32),
            mpi("MPI_Put", 20, 21).peer(PEER_NULL),
            mpi("MPI_Win_flush_all", 22, 40),
        ])
        .end();
    let r1 = Proc::mpi("app", 1, 3)
        .pack(vec![mpi("MPI_Send", 0, 3).peer(0).bytes(8)])
        .end();
    let r2 = Proc::mpi("app", 2, 3)
        .pack(vec![
            mpi("MPI_Accumulate", 0, 2).peer(0).bytes(24),
            mpi("MPI_Fetch_and_op", 3, 8).peer(1).bytes(8),
        ])
        .end();
    let p = run(&[r0, r1, r2]).remove(0);
    let o = &p.p2p.one_sided;
    assert_eq!(
        o.messages,
        vec![vec![0, 2, 1], vec![0, 0, 0], vec![1, 1, 0]]
    );
    assert_eq!(
        o.bytes,
        vec![vec![0, 80, 32], vec![0, 0, 0], vec![24, 8, 0]]
    );
    assert_eq!(o.time_ns[0][1], 4 + 1);
    let f = &p.p2p.by_function;
    assert_eq!(f["MPI_Put"].bytes[0][1], 80);
    assert_eq!(f["MPI_Get_accumulate"].messages[0][2], 1);
    assert_eq!(f["MPI_Fetch_and_op"].bytes[2][1], 8);
    assert!(
        !f.contains_key("MPI_Win_flush_all"),
        "synchronisation moves no data"
    );
    // Messages stay messages: only rank 1's send.
    assert_eq!(
        p.p2p.messages,
        vec![vec![0, 0, 0], vec![1, 0, 0], vec![0, 0, 0]]
    );
}
