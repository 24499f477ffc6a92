//! `hark run` over a launcher listens on TCP beside its Unix socket, where
//! anyone on the network may connect: a client that never sends its
//! `Hello` is cut off after the server's `hello_timeout` instead of being
//! waited for, while a stream on either socket is taken.

mod common;

use common::*;
use hark_server::{Server, ServerConfig};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

#[test]
fn a_silent_tcp_client_is_cut_off_and_both_sockets_take_streams() {
    let (dir, path) = socket("run-tcp");
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        also: vec!["tcp:127.0.0.1:0".into()],
        hello_timeout: Some(Duration::from_millis(300)),
        workers: 2,
        ..ServerConfig::default()
    })
    .unwrap();
    let addrs = server.addrs().to_vec();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    let tcp = addrs[1].strip_prefix("tcp:").unwrap().to_string();
    assert_eq!(
        server.probe_addr_for(&[&addrs[0], &addrs[1]]),
        format!("{},{}", addrs[0], addrs[1])
    );

    let mut silent = std::net::TcpStream::connect(&tcp).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 16];
    // The server closes it: end of stream (or a reset), long before 20 s.
    let n = silent.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    assert!(start.elapsed() < Duration::from_secs(15));

    for (i, s) in [
        Box::new(std::net::TcpStream::connect(&tcp).unwrap()) as Box<dyn Write>,
        Box::new(std::os::unix::net::UnixStream::connect(&path).unwrap()),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = s;
        s.write_all(&hello("tool", 100 + i as u32, 4096)).unwrap();
        s.write_all(&end_without_events()).unwrap();
    }
    let run = server.finish(Duration::from_secs(10));
    let processes: u64 = run.programs.iter().map(|p| p.ranks as u64).sum();
    assert_eq!(processes, 2, "one process through each socket");
    let _ = std::fs::remove_dir_all(dir);
}
