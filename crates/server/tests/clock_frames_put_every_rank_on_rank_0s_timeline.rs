//! The server applies the MPI clock alignment (`Clock` frames): a rank whose
//! probe clock runs 50 ms ahead, and whose handshake does not show it, is
//! mapped with rank 0's handshake plus its measured offset, whichever of
//! the two streams' clock frames arrives first; the model records the
//! method, the measurements and the residual error. A garbage clock frame
//! closes its connection with the reason and corrupts nothing.

#[path = "../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use hark_server::{Server, ServerConfig};
use hark_wire::{
    encode_pack, op, ClockPhase, ClockReference, ClockSource, ClockSync, End, EndReason, Event,
    Flavour, Hello, RankInfo,
};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

const MS: u64 = 1_000_000;
const SKEW: u64 = 50 * MS;

/// One realtime reading for every handshake of the test: both ranks' hosts
/// agree, and the handshake maps both clocks exactly alike.
fn realtime() -> u64 {
    static AT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *AT.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    })
}

fn head(rank: i32, b: &mut Vec<u8>) {
    Hello {
        program: "app".into(),
        argv: vec!["./app".into()],
        host: "node0".into(),
        pid: 7000 + rank as u32,
        rank,
        size: 2,
        job: "job".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 0,
        realtime_ns: realtime(),
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(b);
    RankInfo {
        world_rank: rank,
        world_size: 2,
        appnum: 0,
        thread_level: 0,
        flavour: Flavour::OpenMpi,
        library: "Open MPI".into(),
    }
    .encode(b);
}

/// Rank `rank`'s clock frames: rank 1 reads `SKEW` ahead of rank 0, and
/// drifts 20 µs further by finalize.
fn clocks(rank: i32, b: &mut Vec<u8>) {
    for (phase, local, drift) in [
        (ClockPhase::Init, 10 * MS, 0),
        (ClockPhase::Finalize, 90 * MS, 20_000),
    ] {
        let (local_ns, reference_ns, round_trip_ns) = if rank == 0 {
            (local, local, 0)
        } else {
            (local + SKEW + drift, local, 8_000)
        };
        ClockSync {
            phase,
            local_ns,
            reference_ns,
            round_trip_ns,
            reference: ClockReference::WorldRank0,
            relay_bound_ns: 0,
        }
        .encode(b);
    }
}

/// One MPI_Barrier from 20 to 21 ms on rank 0's clock, on rank `rank`'s clock.
fn tail(rank: i32, b: &mut Vec<u8>) {
    let at = if rank == 0 { 20 * MS } else { 20 * MS + SKEW };
    encode_pack(
        0,
        &[Event::new(op::mpi_op("MPI_Barrier").unwrap(), at, at + MS)],
        b,
    );
    End {
        events_written: 1,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(b);
}

fn server(name: &str) -> (std::path::PathBuf, Server) {
    let dir = std::env::temp_dir().join(format!("hark-clock-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit::remove_at_exit(&dir);
    let path = dir.join("sock");
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        ..ServerConfig::default()
    })
    .unwrap();
    (path, server)
}

/// Waits until `n` connections have closed (bounded, not a timing check).
fn closed(server: &Server, accepted: u64, open: u64) {
    for _ in 0..2000 {
        let s = server.status();
        if s.connections == accepted && s.open == open {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the server did not get there: {:?}", server.status());
}

#[test]
fn a_rank_is_mapped_with_rank_0s_handshake_and_its_measured_offset() {
    let (path, server) = server("aligned");
    // Rank 1's clock frames come first, before rank 0 (the reference) is
    // even connected; its events only once rank 0's stream is in.
    let mut one = UnixStream::connect(&path).unwrap();
    let mut b = Vec::new();
    head(1, &mut b);
    clocks(1, &mut b);
    one.write_all(&b).unwrap();
    closed(&server, 1, 1);
    let mut b = Vec::new();
    head(0, &mut b);
    clocks(0, &mut b);
    tail(0, &mut b);
    UnixStream::connect(&path).unwrap().write_all(&b).unwrap();
    closed(&server, 2, 1);
    let mut b = Vec::new();
    tail(1, &mut b);
    one.write_all(&b).unwrap();
    drop(one);

    let run = server.finish(Duration::from_secs(20));
    let p = &run.programs[0];
    // Both barriers from 20 to 21 ms on one timeline: the program lasted
    // 1 ms (51 ms with rank 1 on its own handshake), but for the drift:
    // rank 1's batch came after its finalize frame, so its offset is
    // interpolated, 10 ms into 80.02 ms of drifting by 20 µs: 2.499 µs.
    assert_eq!(p.wall_ns, MS + 2_499, "{:?}", p.clock);
    let c = &p.clock;
    assert_eq!(c.ranks[0].method, "ping-pong");
    assert_eq!(c.ranks[1].method, "ping-pong");
    let init = c.ranks[1].init.unwrap();
    assert_eq!(
        (init.offset_ns, init.round_trip_ns),
        (-(SKEW as i64), 8_000)
    );
    assert_eq!(
        c.ranks[1].finalize.unwrap().offset_ns,
        -(SKEW as i64) - 20_000
    );
    // The bound: the drift, on top of half the 8 µs round trip.
    assert_eq!(
        (c.ranks[1].residual_ns, c.residual_ns, c.violations),
        (24_000, 24_000, 0)
    );
}

#[test]
fn without_clock_frames_the_handshake_holds() {
    let (path, server) = server("handshake");
    for rank in [0, 1] {
        let mut b = Vec::new();
        head(rank, &mut b);
        tail(rank, &mut b);
        UnixStream::connect(&path).unwrap().write_all(&b).unwrap();
    }
    let run = server.finish(Duration::from_secs(20));
    let p = &run.programs[0];
    // Rank 1 stays 50 ms late (give or take the handshakes' own error,
    // the time between their readings and the server's).
    assert!(p.wall_ns.abs_diff(MS + SKEW) < 10 * MS, "{}", p.wall_ns);
    assert!(p
        .clock
        .ranks
        .iter()
        .all(|r| r.method == "handshake" && r.init.is_none()));
}

#[test]
fn a_garbage_clock_frame_closes_its_connection_with_the_reason() {
    let (path, server) = server("garbage");
    let mut b = Vec::new();
    head(1, &mut b);
    ClockSync {
        phase: ClockPhase::Init,
        local_ns: 0,
        reference_ns: u64::MAX,
        round_trip_ns: 0,
        reference: ClockReference::WorldRank0,
        relay_bound_ns: 0,
    }
    .encode(&mut b);
    tail(1, &mut b);
    UnixStream::connect(&path).unwrap().write_all(&b).unwrap();
    let run = server.finish(Duration::from_secs(20));
    let p = &run.programs[0];
    assert!(p.rank_info[0].partial);
    assert_eq!(p.clock.ranks[0].method, "handshake");
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.contains("broke") && d.contains("clock")),
        "{:?}",
        p.diagnostics
    );
}
