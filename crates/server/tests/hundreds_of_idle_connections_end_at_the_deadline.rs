//! Hundreds of connections that connect and say nothing more (a hung
//! process, a port scanner, a probe stuck before its first pack) cost a
//! reader thread each and no buffer, do not disturb a real stream, and are
//! cut at the shutdown deadline.

mod common;

use common::{hello, memory, server, socket};
use hark_wire::{End, EndReason};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

#[test]
fn three_hundred_idle_connections_cost_little_and_are_cut_at_the_deadline() {
    let (dir, path) = socket("idle");
    let server = server(&path, None);
    let before = memory().0;
    let mut idle = Vec::new();
    for i in 0..300 {
        let mut s = UnixStream::connect(&path).unwrap();
        if i % 2 == 0 {
            // Half say hello, then nothing.
            s.write_all(&hello("idle", 1000 + i, 1 << 20)).unwrap();
        }
        idle.push(s);
    }
    let mut real = hello("real", 1, 1 << 20);
    End {
        events_written: 0,
        events_dropped: 0,
        packs_sent: 0,
        reason: EndReason::Exit,
    }
    .encode(&mut real);
    UnixStream::connect(&path)
        .unwrap()
        .write_all(&real)
        .unwrap();
    let settle = Instant::now() + Duration::from_secs(10);
    while server.status().connections < 151 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = memory().0;
    eprintln!("server RSS {before} KiB before, {after} KiB with 300 idle connections");
    assert!(
        after < before + 32 * 1024,
        "300 idle connections grew the server from {before} to {after} KiB"
    );

    let started = Instant::now();
    let run = server.finish(Duration::from_secs(1));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "finish took {:?}",
        started.elapsed()
    );
    let real = run.programs.iter().find(|p| p.name == "real").unwrap();
    assert!(!real.rank_info[0].partial, "the real stream is whole");
    let idle_program = run.programs.iter().find(|p| p.name == "idle").unwrap();
    assert_eq!(idle_program.rank_info.len(), 150);
    assert!(idle_program.rank_info.iter().all(|r| r.partial));
    drop(idle);
    std::fs::remove_dir_all(&dir).unwrap();
}
