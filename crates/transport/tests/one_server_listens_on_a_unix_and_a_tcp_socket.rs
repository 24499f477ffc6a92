//! `hark run` listens on its node-local Unix socket and, for ranks on other
//! nodes, on TCP: two listeners served as one, with one numbering of
//! connections, one sink and one shutdown.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hark_transport::{Closed, ConnId, Listener, Sink};
use hark_wire::{Frame, Hello};

#[derive(Default)]
struct Closes(Mutex<Vec<u64>>);

impl Sink for Closes {
    fn on_hello(&self, _: ConnId, _: &Hello, _: i64) {}
    fn on_frame(&self, _: ConnId, _: Frame<'_>) {}
    fn on_close(&self, conn: ConnId, _: Closed) {
        self.0.lock().unwrap().push(conn.0);
    }
}

#[test]
fn connections_to_either_socket_reach_one_sink_under_distinct_ids() {
    let dir = std::env::temp_dir().join(format!("hark-both-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    let unix = Listener::bind(&format!("unix:{}", sock.display())).unwrap();
    let tcp = Listener::bind("tcp:127.0.0.1:0").unwrap();
    let closes = Arc::new(Closes::default());
    let server = unix.also(tcp).serve(closes.clone());

    let addrs = server.addrs().to_vec();
    assert_eq!(addrs.len(), 2, "{addrs:?}");
    assert_eq!(addrs[0], format!("unix:{}", sock.display()));
    assert_eq!(server.addr(), addrs[0]);
    let port = addrs[1]
        .strip_prefix("tcp:127.0.0.1:")
        .expect("a TCP address");
    assert!(port.parse::<u16>().unwrap() > 0);

    for _ in 0..2 {
        drop(std::os::unix::net::UnixStream::connect(&sock).unwrap());
        drop(std::net::TcpStream::connect(&addrs[1]["tcp:".len()..]).unwrap());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while closes.0.lock().unwrap().len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ids = closes.0.lock().unwrap().clone();
    ids.sort();
    assert_eq!(ids, [0, 1, 2, 3]);
    assert_eq!(server.connections(), 4);

    server.shutdown();
    assert!(
        !sock.exists(),
        "the Unix socket file is removed at shutdown"
    );
    assert!(std::net::TcpStream::connect(&addrs[1]["tcp:".len()..]).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
