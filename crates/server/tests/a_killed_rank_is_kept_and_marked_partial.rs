//! The server end to end over a real Unix socket: streams written by hand
//! with the wire encoding, as probes would, several at once.

#[path = "../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use hark_server::{Server, ServerConfig};
use hark_wire::{
    encode_pack, op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, RankInfo,
};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn socket(name: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("hark-server-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit::remove_at_exit(&dir);
    let path = dir.join("sock");
    let addr = format!("unix:{}", path.display());
    (path, addr)
}

fn start(addr: &str) -> Server {
    Server::start(ServerConfig {
        addr: addr.into(),
        workers: 2,
        ..ServerConfig::default()
    })
    .unwrap()
}

/// A probe's stream for world rank `rank` of `size` running `program`:
/// rank 0 sends `n` messages of 100 bytes to rank 1, in packs of 1000.
fn stream(program: &str, rank: i32, size: i32, appnum: i32, n: u64, end: bool) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: program.into(),
        argv: vec![format!("./{program}")],
        host: "node0".into(),
        pid: 4000 + rank as u32,
        rank,
        size,
        job: "job1".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    RankInfo {
        world_rank: rank,
        world_size: size,
        appnum,
        thread_level: 0,
        flavour: Flavour::Mpich,
        library: "MPICH 4.0.2".into(),
    }
    .encode(&mut b);
    Def::encode_all(
        &[Def::Comm {
            id: 1,
            members: (0..size).collect(),
            remote: vec![],
        }],
        &mut b,
    );
    let send = op::mpi_op("MPI_Send").unwrap();
    let recv = op::mpi_op("MPI_Recv").unwrap();
    let events: Vec<Event> = (0..n)
        .map(|i| {
            let mut e = Event::new(
                if rank == 0 { send } else { recv },
                2_000 + 10 * i,
                2_005 + 10 * i,
            );
            e.peer.set(if rank == 0 { 1 } else { 0 });
            e.bytes.set(100);
            e.obj.set(1);
            e
        })
        .collect();
    for (seq, chunk) in events.chunks(1000).enumerate() {
        encode_pack(seq as u64, chunk, &mut b);
    }
    let mut barrier = Event::new(op::mpi_op("MPI_Barrier").unwrap(), 900_000, 900_100);
    barrier.obj.set(1);
    encode_pack(99, &[barrier], &mut b);
    if end {
        End {
            events_written: n + 1 + 5,
            events_dropped: 5,
            packs_sent: 0,
            reason: EndReason::Finalize,
        }
        .encode(&mut b);
    }
    b
}

/// Connects one socket per stream, in order (connections are numbered as
/// accepted), then writes them all at once.
fn send_all(path: &Path, streams: Vec<Vec<u8>>) {
    let threads: Vec<_> = streams
        .into_iter()
        .map(|bytes| {
            let mut s = UnixStream::connect(path).unwrap();
            std::thread::spawn(move || s.write_all(&bytes).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_rank_that_dies_without_its_end_is_kept_named_and_counted() {
    let (path, addr) = socket("killed");
    let server = start(&addr);
    send_all(
        &path,
        vec![
            stream("ring", 1, 3, 0, 5000, true),
            stream("ring", 0, 3, 0, 5000, true),
            // Rank 2 dies: its stream stops after its packs, no End.
            stream("ring", 2, 3, 0, 10, false),
        ],
    );
    let run = server.finish(Duration::from_secs(20));
    assert_eq!(run.programs.len(), 1);
    let p = &run.programs[0];
    assert_eq!(p.ranks, 3);
    assert_eq!(
        p.rank_info.iter().map(|r| r.partial).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(p.rank_info[2].pid, 4002, "the report can name it");
    assert_eq!(p.mpi["MPI_Send"].calls, vec![5000, 0, 0]);
    assert_eq!(p.mpi["MPI_Recv"].bytes, vec![0, 500_000, 1000]);
    assert_eq!(p.p2p.messages[0][1], 5000);
    assert_eq!(p.collectives[0].functions["MPI_Barrier"].calls, 3);
    let a = &run.accounting;
    assert_eq!(a.events_received, 5001 + 5001 + 11);
    assert_eq!(a.events_analysed, a.events_received);
    assert_eq!(
        a.events_written,
        5006 + 5006 + 11,
        "a dead rank wrote what arrived"
    );
    assert_eq!(a.events_dropped, 10);
    assert_eq!(a.partial_ranks, 1);
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(json["programs"][0]["mpi"]["MPI_Send"]["calls"][0], 5000);
}

#[test]
fn a_malformed_stream_closes_only_its_own_connection() {
    let (path, addr) = socket("malformed");
    let server = start(&addr);
    let mut bad = stream("ring", 1, 2, 0, 10, false);
    bad.extend_from_slice(&[9, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4]); // unknown frame kind 9
    send_all(&path, vec![stream("ring", 0, 2, 0, 10, true), bad]);
    let run = server.finish(Duration::from_secs(20));
    let p = &run.programs[0];
    assert_eq!(p.ranks, 2);
    assert!(!p.rank_info[0].partial && p.rank_info[1].partial);
    assert_eq!(
        p.mpi["MPI_Recv"].calls,
        vec![0, 10],
        "what came before the damage is kept"
    );
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.contains("broke") && d.contains("4001")),
        "{:?}",
        p.diagnostics
    );
}

#[test]
fn mpmd_programs_get_a_chapter_each_with_their_own_ranks() {
    let (path, addr) = socket("mpmd");
    let server = start(&addr);
    // mpirun -np 2 ./ocean : -np 1 ./atmos
    send_all(
        &path,
        vec![
            stream("ocean", 0, 3, 0, 10, true),
            stream("atmos", 2, 3, 1, 10, true),
            stream("ocean", 1, 3, 0, 10, true),
        ],
    );
    let run = server.finish(Duration::from_secs(20));
    let names: Vec<(&str, usize)> = run
        .programs
        .iter()
        .map(|p| (p.name.as_str(), p.ranks))
        .collect();
    assert_eq!(names, vec![("ocean", 2), ("atmos", 1)]);
    assert_eq!(run.programs[1].rank_info[0].world_rank, 2);
    assert_eq!(run.programs[1].mpi["MPI_Recv"].calls, vec![10]);
}

#[test]
fn a_connection_still_open_at_the_deadline_is_cut_and_marked_partial() {
    let (path, addr) = socket("hung");
    let server = start(&addr);
    let mut hung = UnixStream::connect(&path).unwrap();
    hung.write_all(&stream("ring", 0, 1, 0, 10, false)).unwrap();
    let run = server.finish(Duration::from_millis(300));
    assert_eq!(run.programs[0].mpi["MPI_Send"].calls, vec![10]);
    assert!(run.programs[0].rank_info[0].partial);
    drop(hung);
}

#[test]
fn readers_wait_for_the_analyses_instead_of_queueing_without_bound() {
    // One byte in flight: every pack waits until the one before it has been
    // analysed by every knowledge source. Nothing may be lost or hang.
    let (path, addr) = socket("throttle");
    let server = Server::start(ServerConfig {
        addr,
        workers: 1,
        max_in_flight: 1,
        ..ServerConfig::default()
    })
    .unwrap();
    send_all(
        &path,
        vec![
            stream("ring", 0, 2, 0, 20_000, true),
            stream("ring", 1, 2, 0, 20_000, true),
        ],
    );
    // Each reader submits only below the limit: at most one pack each, and
    // what the pack derives (per event at most one operation or arrival
    // to match, 72 bytes, and one wait state, 56).
    let status = server.status();
    assert!(
        status.bytes_in_flight <= 2 * 1000 * (48 + 72 + 56),
        "{status:?}"
    );
    let run = server.finish(Duration::from_secs(20));
    assert_eq!(run.accounting.events_analysed, 2 * 20_001);
    assert_eq!(run.programs[0].mpi["MPI_Send"].calls, vec![20_000, 0]);
}

#[test]
fn a_snapshot_shows_what_is_analysed_while_the_program_runs() {
    let (path, addr) = socket("snapshot");
    let server = start(&addr);
    let mut running = UnixStream::connect(&path).unwrap();
    running
        .write_all(&stream("ring", 0, 1, 0, 3000, false))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let live = loop {
        let run = server.snapshot();
        if run.accounting.events_analysed == 3001 || std::time::Instant::now() > deadline {
            break run;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(live.accounting.events_analysed, 3001);
    let p = &live.programs[0];
    assert_eq!(p.mpi["MPI_Send"].calls, vec![3000]);
    assert!(!p.rank_info[0].partial, "still running is not partial");
    assert!(
        !p.diagnostics.iter().any(|d| d.contains("end-of-stream")),
        "{:?}",
        p.diagnostics
    );
    // The run goes on after a snapshot, and ends as usual.
    let mut end = Vec::new();
    End {
        events_written: 3001,
        events_dropped: 0,
        packs_sent: 4,
        reason: EndReason::Exit,
    }
    .encode(&mut end);
    running.write_all(&end).unwrap();
    drop(running);
    let run = server.finish(Duration::from_secs(20));
    assert!(!run.programs[0].rank_info[0].partial);
    assert_eq!(run.accounting.events_written, 3001);
}
