//! The halo-exchange mix of the server's flood and the engine's hot-path
//! bench, and the definitions its events name (one file, included by both
//! with `#[path]`), so that the two measure the same events.

use hark_wire::{op, Def, Event, NameKind};

/// The definitions the mix's events name: the world of `size` ranks, the
/// region, rank `rank`'s file and the counter.
pub fn defs(rank: i32, size: i32) -> Vec<Def> {
    vec![
        Def::Comm {
            id: 1,
            members: (0..size).collect(),
            remote: vec![],
        },
        Def::Name {
            id: 2,
            kind: NameKind::Region,
            name: "step".into(),
        },
        Def::File {
            id: 3,
            path: format!("/tmp/out.{rank}"),
        },
        Def::Name {
            id: 4,
            kind: NameKind::Counter,
            name: "residual".into(),
        },
    ]
}

/// A mix like a halo-exchange code's: non-blocking exchange and its waits,
/// blocking sends, collectives, a region, I/O, a counter. `end` holds each
/// event's duration.
pub fn mix(rank: i32, size: i32) -> Vec<Event> {
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let f = |name: &str| op::mpi_op(name).unwrap();
    let ev = |code: u16, dur: u64| Event::new(code, 0, dur);
    let mut v = Vec::new();
    let mut e = ev(op::REGION_BEGIN, 0);
    e.obj.set(2);
    v.push(e);
    let mut e = ev(f("MPI_Isend"), 300);
    e.peer.set(next);
    e.bytes.set(4096);
    e.extra.set(1);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(f("MPI_Irecv"), 200);
    e.peer.set(prev);
    e.bytes.set(4096);
    e.extra.set(2);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(f("MPI_Waitall"), 900);
    e.bytes.set(2);
    v.push(e);
    let mut e = ev(op::COMPLETE_SEND, 900);
    e.peer.set(next);
    e.bytes.set(4096);
    e.extra.set(1);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(op::COMPLETE_RECV, 900);
    e.peer.set(prev);
    e.bytes.set(4096);
    e.extra.set(2);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(f("MPI_Send"), 500);
    e.peer.set(next);
    e.bytes.set(64);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(f("MPI_Recv"), 700);
    e.peer.set(prev);
    e.bytes.set(64);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(f("MPI_Allreduce"), 800);
    e.bytes.set(8);
    e.extra.set(8);
    e.obj.set(1);
    v.push(e);
    let mut e = ev(op::io::WRITE, 400);
    e.obj.set(3);
    e.peer.set(5);
    e.bytes.set(1024);
    v.push(e);
    let mut e = ev(op::COUNTER, 0);
    e.obj.set(4);
    e.bytes.set(42);
    v.push(e);
    let mut e = ev(op::REGION_END, 0);
    e.obj.set(2);
    v.push(e);
    v
}
