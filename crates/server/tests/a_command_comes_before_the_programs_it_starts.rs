//! A job's programs without world ranks come in the order their processes
//! made their handshakes, not the order the handshakes arrived in: `sh -c
//! "…; sleep 1"` comes before `sleep` even when a short-lived `sleep`'s
//! handshake arrives first (the parent's shipping thread sent its own
//! late). A service names a job's run directory after its first program.

mod common;

use hark_wire::{ClockSource, Hello};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The handshake and end of a process of `program` that made its handshake
/// at `clock_ns` on the job's one host, whose realtime clock read `now` at
/// `at_ns` of that clock.
fn stream(program: &str, pid: u32, clock_ns: u64, (now, at_ns): (u64, u64)) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: program.into(),
        argv: vec![program.into()],
        host: "node0".into(),
        pid,
        rank: -1,
        size: -1,
        job: "job1".into(),
        clock: ClockSource::Monotonic,
        clock_ns,
        realtime_ns: now - (at_ns - clock_ns),
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b.extend(common::end_without_events());
    b
}

#[test]
fn a_command_comes_before_the_programs_it_starts_whoever_connects_first() {
    let (dir, path) = common::socket("first-program");
    let server = common::server(&path, None);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let clock = (now, 50_000_000);
    // Two `sleep`s started 20 and 30 ms after `sh`, arriving first; `sh`'s
    // handshake, made 40 ms ago, arrives last (to the server's timeline,
    // so late a handshake is clock skew: it puts `sh` last).
    let mut streams = Vec::new();
    for (pid, at) in [(102, 40_000_000), (101, 30_000_000)] {
        let mut s = UnixStream::connect(&path).unwrap();
        s.write_all(&stream("sleep", pid, at, clock)).unwrap();
        streams.push(s);
        let until = Instant::now() + Duration::from_secs(30);
        while server.status().connections < streams.len() as u64 {
            assert!(Instant::now() < until, "{:?}", server.status());
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(&stream("sh", 100, 10_000_000, clock)).unwrap();
    streams.push(s);
    drop(streams);
    let run = server.finish(Duration::from_secs(20));
    let names: Vec<&str> = run.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["sh", "sleep"]);
    let _ = std::fs::remove_dir_all(&dir);
}
