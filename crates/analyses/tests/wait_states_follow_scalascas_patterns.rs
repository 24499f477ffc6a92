//! Every wait-state pattern on hand-made timelines whose waits are known,
//! fed by hand and through the board (which must agree).

mod common;
use common::*;
use hark_model::Program;
use hark_wire::{op, NameKind};

const WORLD: u32 = 1;

fn world(size: i32) -> Vec<hark_wire::Def> {
    vec![comm(WORLD, &(0..size).collect::<Vec<_>>())]
}

fn rank(r: i32, size: i32, events: Vec<hark_wire::Event>) -> Proc {
    Proc::mpi("app", r, size)
        .defs(world(size))
        .pack(events)
        .end()
}

/// The program, checked to be the same by hand and on the board.
fn both(procs: &[Proc]) -> Program {
    let by_hand = run(procs);
    assert_eq!(
        json(&by_hand),
        json(&run_on_board(procs, 2)),
        "board and hand agree"
    );
    by_hand.into_iter().next().unwrap()
}

/// `(time_ns, instances)` per rank of `pattern`.
fn waits(p: &Program, pattern: &str) -> Vec<(u64, u64)> {
    let w = &p.waits[pattern];
    w.time_ns
        .iter()
        .copied()
        .zip(w.instances.iter().copied())
        .collect()
}

fn send(name: &str, t: (u64, u64), to: i32, tag: i32) -> hark_wire::Event {
    mpi(name, t.0, t.1).obj(WORLD).peer(to).tag(tag).bytes(8)
}

fn recv(t: (u64, u64), from: i32, tag: i32) -> hark_wire::Event {
    mpi("MPI_Recv", t.0, t.1)
        .obj(WORLD)
        .peer(from)
        .tag(tag)
        .bytes(8)
}

fn coll(name: &str, t: (u64, u64), seq: i32, root: i32) -> hark_wire::Event {
    mpi(name, t.0, t.1).obj(WORLD).tag(seq).peer(root).bytes(8)
}

#[test]
fn a_receive_entered_before_its_send_is_a_late_sender() {
    let p = both(&[
        rank(0, 2, vec![recv((100, 500), 1, 7)]),
        rank(1, 2, vec![send("MPI_Send", (300, 310), 0, 7)]),
    ]);
    assert_eq!(waits(&p, "late_sender"), vec![(200, 1), (0, 0)]);
    assert_eq!(p.waits["late_sender"].by_function["MPI_Recv"].time_ns, 200);
    assert_eq!(
        p.waits["late_sender"].late[1].instances, 1,
        "rank 1 was late"
    );
    assert_eq!(p.wait_causes.time_ns[1][0], 200, "rank 1 made rank 0 wait");
    assert_eq!(waits(&p, "late_receiver"), vec![(0, 0), (0, 0)]);
}

#[test]
fn a_blocking_send_entered_before_its_receive_is_a_late_receiver() {
    let p = both(&[
        rank(0, 2, vec![send("MPI_Ssend", (100, 600), 1, 3)]),
        rank(1, 2, vec![recv((400, 610), 0, 3)]),
    ]);
    assert_eq!(waits(&p, "late_receiver"), vec![(300, 1), (0, 0)]);
    assert_eq!(waits(&p, "late_sender"), vec![(0, 0), (0, 0)]);
    // An eager send that returned before the receive was posted waited
    // for nothing.
    let eager = both(&[
        rank(0, 2, vec![send("MPI_Send", (100, 110), 1, 3)]),
        rank(1, 2, vec![recv((400, 410), 0, 3)]),
    ]);
    assert_eq!(waits(&eager, "late_receiver"), vec![(0, 0), (0, 0)]);
}

#[test]
fn waiting_for_a_late_message_while_an_earlier_one_is_there_is_wrong_order() {
    // Rank 1 sends tag 1 at 50 and tag 2 at 500; rank 0 first waits for
    // tag 2, while tag 1 is there.
    let p = both(&[
        rank(0, 2, vec![recv((100, 510), 1, 2), recv((510, 520), 1, 1)]),
        rank(
            1,
            2,
            vec![
                send("MPI_Send", (50, 60), 0, 1),
                send("MPI_Send", (500, 505), 0, 2),
            ],
        ),
    ]);
    assert_eq!(waits(&p, "late_sender_wrong_order")[0], (400, 1));
    assert_eq!(waits(&p, "late_sender")[0], (0, 0));
    // In order, the same late message is a plain Late Sender.
    let p = both(&[
        rank(0, 2, vec![recv((100, 110), 1, 1), recv((110, 510), 1, 2)]),
        rank(
            1,
            2,
            vec![
                send("MPI_Send", (50, 60), 0, 1),
                send("MPI_Send", (500, 505), 0, 2),
            ],
        ),
    ]);
    assert_eq!(waits(&p, "late_sender")[0], (390, 1));
    assert_eq!(waits(&p, "late_sender_wrong_order")[0], (0, 0));
}

#[test]
fn messages_match_in_order_per_channel_whatever_the_tag_of_the_call() {
    // Two messages on one channel: the first receive matches the first send.
    let p = both(&[
        rank(0, 2, vec![recv((100, 200), 1, 5), recv((200, 900), 1, 5)]),
        rank(
            1,
            2,
            vec![
                send("MPI_Send", (150, 160), 0, 5),
                send("MPI_Send", (800, 810), 0, 5),
            ],
        ),
    ]);
    assert_eq!(waits(&p, "late_sender")[0], (50 + 600, 2));
}

#[test]
fn a_waitall_for_two_late_messages_is_one_instance_as_long_as_the_latest() {
    let irecv = |req: u64, from: i32| mpi("MPI_Irecv", 10, 20).obj(WORLD).peer(from).extra(req);
    let done = |req: u64, from: i32| {
        ev(op::COMPLETE_RECV, 100, 500)
            .obj(WORLD)
            .peer(from)
            .extra(req)
            .bytes(8)
    };
    let p = both(&[
        rank(
            0,
            3,
            vec![
                irecv(1, 1),
                irecv(2, 2),
                mpi("MPI_Waitall", 100, 500).bytes(2),
                done(1, 1),
                done(2, 2),
            ],
        ),
        rank(1, 3, vec![send("MPI_Send", (300, 310), 0, 0)]),
        rank(2, 3, vec![send("MPI_Isend", (450, 455), 0, 0)]),
    ]);
    assert_eq!(waits(&p, "late_sender")[0], (350, 1));
    assert_eq!(
        p.waits["late_sender"].by_function["MPI_Waitall"].instances,
        1
    );
    assert_eq!(
        p.wait_causes.time_ns[2][0], 350,
        "the latest sender is the cause"
    );
}

#[test]
fn collectives_wait_for_the_last_the_root_or_the_first() {
    let enter = [100u64, 200, 400];
    let all = |name: &str, root: i32| -> Vec<Proc> {
        (0..3)
            .map(|r| rank(r, 3, vec![coll(name, (enter[r as usize], 410), 0, root)]))
            .collect()
    };
    let p = both(&all("MPI_Barrier", -1));
    assert_eq!(waits(&p, "wait_barrier"), vec![(300, 1), (200, 1), (0, 0)]);
    assert_eq!(p.wait_causes.late_instances, vec![0, 0, 2]);
    let p = both(&all("MPI_Allreduce", -1));
    assert_eq!(waits(&p, "wait_nxn"), vec![(300, 1), (200, 1), (0, 0)]);
    // Root 2 enters last: the others wait for it.
    let p = both(&all("MPI_Bcast", 2));
    assert_eq!(
        waits(&p, "late_broadcast"),
        vec![(300, 1), (200, 1), (0, 0)]
    );
    // Root 0 enters first: it waits for the first of the others.
    let p = both(&all("MPI_Reduce", 0));
    assert_eq!(waits(&p, "early_reduce"), vec![(100, 1), (0, 0), (0, 0)]);
    // Scan has no pattern.
    let p = both(&all("MPI_Scan", -1));
    assert!(p.waits.values().all(|w| w.time_ns.iter().all(|&t| t == 0)));
}

#[test]
fn an_instance_a_rank_never_reaches_is_counted_not_kept() {
    let p = both(&[
        rank(0, 2, vec![coll("MPI_Barrier", (100, 200), 0, -1)]),
        Proc::mpi("app", 1, 2).defs(world(2)).end(),
    ]);
    assert!(
        p.diagnostics.iter().any(|d| d.contains("never completed")),
        "{:?}",
        p.diagnostics
    );
    assert_eq!(waits(&p, "wait_barrier"), vec![(0, 0), (0, 0)]);
}

#[test]
fn waits_are_attributed_to_the_waiting_ranks_call_path_and_the_late_ranks() {
    let region = |n: u32, t: u64, code: u16| ev(code, t, t).obj(n);
    let names = vec![
        comm(WORLD, &[0, 1]),
        name(2, NameKind::Region, "solve"),
        name(3, NameKind::Region, "compute"),
    ];
    let p = both(&[
        Proc::mpi("app", 0, 2)
            .defs(names.clone())
            .pack(vec![
                region(2, 0, op::REGION_BEGIN),
                coll("MPI_Allreduce", (100, 500), 0, -1),
                region(2, 600, op::REGION_END),
            ])
            .end(),
        Proc::mpi("app", 1, 2)
            .defs(names)
            .pack(vec![
                region(3, 0, op::REGION_BEGIN),
                coll("MPI_Allreduce", (400, 500), 0, -1),
                region(3, 600, op::REGION_END),
            ])
            .end(),
    ]);
    let w = &p.waits["wait_nxn"];
    assert_eq!(w.by_callpath["solve"].time_ns, 300);
    assert_eq!(w.cause_callpaths["compute"].time_ns, 300);
    assert_eq!(w.slices.iter().map(|c| c.time_ns).sum::<u64>(), 300);
    // The digest names the pattern, the late rank and its region.
    let f = &p.digest[0];
    assert!(f.title.contains("Wait at N×N in MPI_Allreduce"), "{f:?}");
    assert!(
        f.detail.contains("rank 1") && f.detail.contains("`compute`"),
        "{f:?}"
    );
}
