//! Another process of the user can read a job's `HARK_ADDR` from
//! `/proc/PID/environ` and connect. A stream without the run's secret is
//! refused; one with it that claims a world rank another stream holds (in
//! its `Hello`, or later in its `Rank` frame) is refused too, and so is a
//! child (its `Hello` names a parent process) whose `Rank` frame says it
//! called `MPI_Init`; each is named in the diagnostics: its "1000 GiB"
//! never reaches the report.

use hark_server::{Server, ServerConfig};
use hark_wire::{
    encode_pack, op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, RankInfo,
};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const SECRET: &str = "0123456789abcdef0123456789abcdef";
const GIB_1000: u64 = 1000 << 30;

fn hello(secret: &str, pid: u32, rank: i32) -> Vec<u8> {
    child_hello(secret, pid, rank, 0)
}

/// A `Hello` of a child of process `parent` (0: of no process).
fn child_hello(secret: &str, pid: u32, rank: i32, parent: u32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "app".into(),
        argv: vec!["./app".into()],
        host: "node0".into(),
        pid,
        rank,
        size: 2,
        job: "job1".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 20,
        secret: secret.into(),
        parent,
    }
    .encode(&mut b);
    b
}

/// The rank frame, the world communicator, and `n` sends of `bytes` each
/// to the other rank.
fn work(rank: i32, n: u64, bytes: u64) -> Vec<u8> {
    let mut b = Vec::new();
    RankInfo {
        world_rank: rank,
        world_size: 2,
        appnum: 0,
        thread_level: 0,
        flavour: Flavour::OpenMpi,
        library: "Open MPI v4.1".into(),
    }
    .encode(&mut b);
    Def::encode_all(
        &[Def::Comm {
            id: 1,
            members: vec![0, 1],
            remote: vec![],
        }],
        &mut b,
    );
    let events: Vec<Event> = (0..n)
        .map(|i| {
            let mut e = Event::new(
                op::mpi_op("MPI_Send").unwrap(),
                2_000 + 10 * i,
                2_005 + 10 * i,
            );
            e.peer.set(1 - rank);
            e.bytes.set(bytes);
            e.obj.set(1);
            e
        })
        .collect();
    encode_pack(0, &events, &mut b);
    b
}

fn end(n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    End {
        events_written: n,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(&mut b);
    b
}

/// Waits (bounded) until `done` holds, polling the server's status.
fn wait_for(server: &Server, what: &str, done: impl Fn(&hark_server::Status) -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done(&server.status()) {
        assert!(
            Instant::now() < until,
            "timed out waiting for {what}: {:?}",
            server.status()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn impostors_without_the_secret_or_for_a_streaming_rank_are_refused_and_named() {
    let dir = std::env::temp_dir().join(format!("hark-impostor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        secret: Some(SECRET.into()),
        ..ServerConfig::default()
    })
    .unwrap();
    assert_eq!(
        server.probe_addr(),
        format!("{SECRET}@unix:{}", path.display())
    );

    // The job's two ranks start streaming, and stay open.
    let mut ranks = Vec::new();
    for rank in 0..2 {
        let mut s = UnixStream::connect(&path).unwrap();
        s.write_all(&hello(SECRET, 4000 + rank as u32, rank))
            .unwrap();
        s.write_all(&work(rank, 10, 100)).unwrap();
        ranks.push(s);
    }
    wait_for(&server, "both ranks", |s| {
        s.connections == 2 && s.events_received == 20
    });

    // Three impostors, each sending 1000 GiB as rank 0 or 1.
    let impostors = [
        // No secret.
        (hello("", 9001, 0), work(0, 1, GIB_1000)),
        // A wrong one.
        (
            hello("00000000000000000000000000000000", 9002, 0),
            work(0, 1, GIB_1000),
        ),
        // The secret, but rank 0 is streaming.
        (hello(SECRET, 9003, 0), work(0, 1, GIB_1000)),
        // The secret and no rank in the Hello; the Rank frame claims 1.
        (hello(SECRET, 9004, -1), work(1, 1, GIB_1000)),
        // A child of rank 0's process that calls MPI_Init.
        (child_hello(SECRET, 9005, 0, 4000), work(0, 1, GIB_1000)),
    ];
    for (h, w) in impostors {
        let mut s = UnixStream::connect(&path).unwrap();
        s.write_all(&h).unwrap();
        s.write_all(&w).unwrap();
        s.write_all(&end(1)).unwrap();
    }
    wait_for(&server, "the impostors' refusal", |s| s.refused == 5);

    for mut s in ranks {
        s.write_all(&end(10)).unwrap();
    }
    let run = server.finish(Duration::from_secs(20));
    assert_eq!(run.programs.len(), 1);
    let p = &run.programs[0];
    assert_eq!(p.ranks, 2);
    assert_eq!(
        p.rank_info.iter().map(|r| r.pid).collect::<Vec<_>>(),
        [4000, 4001]
    );
    assert_eq!(p.mpi["MPI_Send"].bytes, vec![1000, 1000], "no 1000 GiB");
    assert!(p.children.is_empty(), "{:?}", p.children);
    assert_eq!(run.accounting.events_written, 20);
    assert_eq!(run.accounting.events_analysed, 20);
    let refused: Vec<&String> = p
        .diagnostics
        .iter()
        .filter(|d| d.starts_with("refused"))
        .collect();
    assert_eq!(refused.len(), 5, "{:#?}", p.diagnostics);
    for (pid, why) in [
        (9001, "did not give this run's secret"),
        (9002, "did not give this run's secret"),
        (
            9003,
            "world rank 0 is already streaming from pid 4000 on node0",
        ),
        (
            9004,
            "claims world rank 1, which is already streaming from pid 4001 on node0",
        ),
        (
            9005,
            "called MPI_Init as world rank 0 below pid 4000, a process of the same program name",
        ),
    ] {
        assert!(
            refused
                .iter()
                .any(|d| d.contains(&format!("pid {pid} ")) && d.contains(why)),
            "pid {pid}: {refused:#?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_without_a_secret_accepts_streams_without_one() {
    let dir = std::env::temp_dir().join(format!("hark-no-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        ..ServerConfig::default()
    })
    .unwrap();
    assert_eq!(server.probe_addr(), format!("unix:{}", path.display()));
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(&hello("", 4000, 0)).unwrap();
    s.write_all(&work(0, 3, 100)).unwrap();
    s.write_all(&end(3)).unwrap();
    drop(s);
    let run = server.finish(Duration::from_secs(20));
    assert_eq!(run.programs[0].mpi["MPI_Send"].bytes, vec![300]);
    std::fs::remove_dir_all(&dir).unwrap();
}
