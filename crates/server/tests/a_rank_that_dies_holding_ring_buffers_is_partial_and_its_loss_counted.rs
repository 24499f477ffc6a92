//! A probe streaming through a shared-memory ring dies (its socket closes)
//! with a buffer it was still filling: the server reads everything it had
//! published, marks the rank partial, names the events it lost, and the
//! rank beside it, on a plain socket, is whole.

#[path = "../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use hark_ring::{SlotState, Writer};
use hark_server::{Server, ServerConfig};
use hark_wire::{
    encode_pack, encode_ring, op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, RankInfo,
};

fn hello(rank: i32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "ring".into(),
        argv: vec!["./ring".into()],
        host: "node0".into(),
        pid: 4000 + rank as u32,
        rank,
        size: 2,
        job: "job1".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 16,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

/// The frames after the Hello: rank, the world communicator, and one pack
/// of `n` receives (rank 1) or sends (rank 0).
fn body(rank: i32, n: u64) -> Vec<Vec<u8>> {
    let mut r = Vec::new();
    RankInfo {
        world_rank: rank,
        world_size: 2,
        appnum: 0,
        thread_level: 0,
        flavour: Flavour::Mpich,
        library: "MPICH 4.0.2".into(),
    }
    .encode(&mut r);
    let mut d = Vec::new();
    Def::encode_all(
        &[Def::Comm {
            id: 1,
            members: vec![0, 1],
            remote: vec![],
        }],
        &mut d,
    );
    let mut p = Vec::new();
    encode_pack(0, &events(rank, n), &mut p);
    vec![r, d, p]
}

fn events(rank: i32, n: u64) -> Vec<Event> {
    let f = if rank == 0 { "MPI_Send" } else { "MPI_Recv" };
    (0..n)
        .map(|i| {
            let mut e = Event::new(op::mpi_op(f).unwrap(), 2_000 + 10 * i, 2_005 + 10 * i);
            e.peer.set(1 - rank);
            e.bytes.set(100);
            e.obj.set(1);
            e
        })
        .collect()
}

#[test]
fn a_ring_writer_that_dies_mid_pack_is_partial_and_its_lost_events_are_named() {
    let dir = std::env::temp_dir().join(format!("hark-server-ring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit::remove_at_exit(&dir);
    let path = dir.join("sock");
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        ..ServerConfig::default()
    })
    .unwrap();

    // Rank 0: a whole stream on the socket.
    let mut whole = hello(0);
    for f in body(0, 10) {
        whole.extend(f);
    }
    End {
        events_written: 10,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(&mut whole);
    let mut s0 = UnixStream::connect(&path).unwrap();
    s0.write_all(&whole).unwrap();
    drop(s0);

    // Rank 1: Hello and Ring on the socket, then its frames in the ring.
    let (mut w, fd) = Writer::create(4, 1 << 16).unwrap();
    w.set_records_at(16);
    let s1 = UnixStream::connect(&path).unwrap();
    let mut first = hello(1);
    encode_ring(&mut first);
    hark_ring::send_with_fd(s1.as_raw_fd(), &first, fd.as_raw_fd()).unwrap();
    drop(fd); // sent: the server holds its own
    for (slot, frame) in body(1, 10).into_iter().enumerate() {
        w.slot_mut(slot as u32)[..frame.len()].copy_from_slice(&frame);
        w.publish(slot as u32, frame.len());
    }
    // It was filling slot 3 with 7 more events when it died.
    let mut partial = Vec::new();
    encode_pack(1, &events(1, 7), &mut partial);
    w.set_state(3, SlotState::Filling);
    w.slot_mut(3)[16..partial.len()].copy_from_slice(&partial[16..]);
    drop(s1);

    let run = server.finish(Duration::from_secs(20));
    let p = &run.programs[0];
    assert_eq!(p.ranks, 2);
    assert_eq!(
        p.rank_info.iter().map(|r| r.partial).collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(p.mpi["MPI_Send"].calls, vec![10, 0]);
    assert_eq!(p.mpi["MPI_Recv"].calls, vec![0, 10], "all it published");
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.contains("pid 4001")
                && d.contains("died with 7 recorded events in 1 buffers")),
        "{:?}",
        p.diagnostics
    );
    assert_eq!(run.accounting.partial_ranks, 1);
}
