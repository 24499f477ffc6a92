//! What the server's tests share: a private socket, a handshake written as
//! a probe writes it, and this process's memory.

#![allow(dead_code)] // each test file uses a part

use hark_server::{Server, ServerConfig};
use hark_wire::{ClockSource, End, EndReason, Hello};
use std::path::{Path, PathBuf};

/// A fresh directory for a test's socket, and the socket's path.
pub fn socket(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("hark-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    (dir, path)
}

/// A server on the Unix socket `path` with two board workers and every
/// analysis, or those named.
pub fn server(path: &Path, analyses: Option<&[&str]>) -> Server {
    Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        analyses: analyses.map(|a| a.iter().map(|s| s.to_string()).collect()),
        ..ServerConfig::default()
    })
    .unwrap()
}

/// The `Hello` frame of a non-MPI process `pid` of `program`.
pub fn hello(program: &str, pid: u32, pack_size: u32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: program.into(),
        argv: vec![format!("./{program}")],
        host: "node0".into(),
        pid,
        rank: -1,
        size: -1,
        job: "job".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

/// The `End` frame of a process that exited having written no event.
pub fn end_without_events() -> Vec<u8> {
    let mut b = Vec::new();
    End {
        events_written: 0,
        events_dropped: 0,
        packs_sent: 0,
        reason: EndReason::Exit,
    }
    .encode(&mut b);
    b
}

/// VmRSS and VmSize in KiB, and the number of mappings, of this process.
pub fn memory() -> (u64, u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = |key: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    (kib("VmRSS:"), kib("VmSize:"), maps.lines().count() as u64)
}
