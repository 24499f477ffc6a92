//! Issue 12, item 1, through the whole server: a run that starts 40,000
//! short processes (a shell loop of `/bin/true`) must not leave
//! per-connection resources behind. Each fake client here connects, sends a
//! `Hello` and an `End`, and closes, as such a process's probe does. After
//! 40,000 of them the server's virtual size and number of mappings are
//! within 10 % of what they were after 1,000 (each leftover reader stack was
//! 2 MiB and one mapping, and the kernel's limit is 65,530 mappings).
//!
//! The resident set does grow, by what the model keeps of each process (a
//! row in the per-rank tables, the stream's accounting): about 1 KiB per
//! process, checked here (under 1.5 KiB). The transport alone stays within 10 % on all
//! three measures (`crates/transport/tests/`).

mod common;

use common::{hello, memory, server, socket};
use hark_server::Server;
use hark_wire::{End, EndReason};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn one_process(path: &Path, bytes: &[u8]) {
    let mut s = UnixStream::connect(path).expect("connecting to the server");
    s.write_all(bytes).expect("sending a stream");
}

/// Sends connections until `total` have been accepted and closed.
fn run_until(server: &Server, path: &Path, bytes: &[u8], from: u64, total: u64) {
    for _ in from..total {
        one_process(path, bytes);
    }
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let s = server.status();
        if s.connections == total && s.open == 0 {
            return;
        }
        assert!(
            Instant::now() < give_up,
            "{} of {total} connections said hello, {} still open",
            s.connections,
            s.open
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn memory_after_40000_connections_is_within_10_percent_of_after_1000() {
    let (dir, path) = socket("flat");
    // Every analysis: the point-to-point matrices, ranks × ranks, are made
    // only when a message was sent (40,000 processes would need 38 GB).
    let server = server(&path, None);
    let mut bytes = hello("true", 77, 1 << 20);
    End {
        events_written: 0,
        events_dropped: 0,
        packs_sent: 0,
        reason: EndReason::Exit,
    }
    .encode(&mut bytes);

    run_until(&server, &path, &bytes, 0, 1_000);
    let (rss1, vm1, maps1) = memory();
    run_until(&server, &path, &bytes, 1_000, 40_000);
    let (rss40, vm40, maps40) = memory();
    eprintln!(
        "after 1,000: RSS {rss1} KiB, VmSize {vm1} KiB, {maps1} maps; \
         after 40,000: RSS {rss40} KiB, VmSize {vm40} KiB, {maps40} maps"
    );
    let within = |a: u64, b: u64| b as f64 <= a as f64 * 1.10;
    let per_process = (rss40.saturating_sub(rss1) * 1024) / 39_000;
    eprintln!("RSS per further process: {per_process} bytes");
    // Measured 760 bytes with the one-rank analyses, 944 with every one
    // (2026-11-23); a leftover reader stack would be 2 MiB.
    assert!(
        per_process < 1536,
        "RSS grew from {rss1} to {rss40} KiB: {per_process} bytes per process"
    );
    assert!(within(vm1, vm40), "VmSize grew from {vm1} to {vm40} KiB");
    assert!(within(maps1, maps40), "maps grew from {maps1} to {maps40}");

    let run = server.finish(Duration::from_secs(10));
    let ranks: usize = run.programs.iter().map(|p| p.rank_info.len()).sum();
    assert_eq!(ranks, 40_000, "every process is in the run");
    std::fs::remove_dir_all(&dir).unwrap();
}
