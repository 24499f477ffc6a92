//! What the reader makes of well-formed, cut and malformed streams.

#[path = "../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use std::io::Write;
use std::time::Duration;

use hark_transport::collect::{serve_collect, Collector};
use hark_transport::{Closed, ErrorKind, Listener};
use hark_wire::{encode_pack, op, ClockSource, Def, End, EndReason, Event, Hello};

fn hello(pid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "t".into(),
        argv: vec!["t".into(), "x".into()],
        host: "h".into(),
        pid,
        rank: 0,
        size: 1,
        job: "j".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 5,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

fn end(written: u64) -> Vec<u8> {
    let mut b = Vec::new();
    End {
        events_written: written,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Exit,
    }
    .encode(&mut b);
    b
}

fn pack(n: usize) -> Vec<u8> {
    let evs: Vec<Event> = (0..n)
        .map(|i| {
            let mut e = Event::new(op::io::WRITE, i as u64, i as u64 + 1);
            e.bytes.set(i as u64);
            e
        })
        .collect();
    let mut b = Vec::new();
    encode_pack(0, &evs, &mut b);
    b
}

fn collector(tag: &str) -> (Collector, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("hark-transport-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit::remove_at_exit(&dir);
    let path = dir.join("sock");
    (
        serve_collect(&format!("unix:{}", path.display())).unwrap(),
        path,
    )
}

fn send(path: &std::path::Path, chunks: &[Vec<u8>]) {
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    for c in chunks {
        s.write_all(c).unwrap();
    }
}

#[test]
fn a_whole_stream_arrives_in_order_and_closes_clean() {
    let (c, path) = collector("clean");
    let mut defs = Vec::new();
    Def::encode_all(
        &[Def::File {
            id: 1,
            path: "/tmp/x".into(),
        }],
        &mut defs,
    );
    send(&path, &[hello(7), defs, pack(3), pack(2), end(5)]);
    let s = c.wait_closed(1, Duration::from_secs(10)).unwrap();
    assert_eq!(s.len(), 1);
    let s = &s[0];
    assert!(s.is_clean(), "{:?}", s.closed);
    assert_eq!(s.hello.pid, 7);
    assert_eq!(s.file(1), Some("/tmp/x"));
    let bytes: Vec<u64> = s.events.iter().map(|e| e.bytes.get()).collect();
    assert_eq!(bytes, vec![0, 1, 2, 0, 1]);
    assert_eq!(s.end.as_ref().unwrap().events_written, 5);
}

#[test]
fn each_bad_stream_closes_only_its_own_connection_with_a_reason() {
    let (c, path) = collector("bad");
    let mut garbage = hello(1);
    garbage.extend_from_slice(&[99, 0, 0, 0, 0, 0, 0, 0]);
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (
            vec![hello(1), garbage[garbage.len() - 8..].to_vec()],
            "unknown frame kind 99",
        ),
        (vec![hello(2), pack(2)[..40].to_vec()], "middle of a frame"),
        (vec![pack(1)], "instead of Hello"),
        (vec![hello(3), end(0), pack(1)], "follows the End frame"),
        (vec![hello(4), hello(4)], "second Hello"),
        (
            vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()],
            "unknown frame kind",
        ),
    ];
    for (chunks, _) in &cases {
        send(&path, chunks);
    }
    // A good stream alongside is unaffected.
    send(&path, &[hello(9), pack(4), end(4)]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.streams().iter().filter(|s| s.closed.is_some()).count() + c.rejected().len()
        < cases.len() + 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "streams did not close"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut reasons: Vec<String> = c
        .streams()
        .iter()
        .filter_map(|s| match &s.closed {
            Some(Closed::Broken(r)) => Some(r.clone()),
            _ => None,
        })
        .chain(c.rejected().into_iter().filter_map(|(_, cl)| match cl {
            Closed::Broken(r) => Some(r),
            _ => None,
        }))
        .collect();
    reasons.sort();
    for (_, want) in &cases {
        assert!(
            reasons.iter().any(|r| r.contains(want)),
            "no reason mentions {want:?}: {reasons:#?}"
        );
    }
    let good = c.streams().into_iter().find(|s| s.hello.pid == 9).unwrap();
    assert!(good.is_clean());
    assert_eq!(good.events.len(), 4);
}

#[test]
fn a_stream_cut_between_frames_closes_without_end() {
    let (c, path) = collector("cut");
    send(&path, &[hello(1), pack(3)]);
    let s = c.wait_closed(1, Duration::from_secs(10)).unwrap();
    assert_eq!(s[0].closed, Some(Closed::NoEnd));
    assert_eq!(s[0].events.len(), 3);
}

#[test]
fn tcp_port_zero_reports_the_real_port_and_carries_streams() {
    let c = serve_collect("tcp:127.0.0.1:0").unwrap();
    let port = c.addr().rsplit(':').next().unwrap().parse::<u16>().unwrap();
    assert_ne!(port, 0);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(&hello(5)).unwrap();
    s.write_all(&end(0)).unwrap();
    drop(s);
    let got = c.wait_closed(1, Duration::from_secs(10)).unwrap();
    assert!(got[0].is_clean());
    // The offset is receipt time minus the hello's realtime: positive here.
    assert!(got[0].clock_offset_ns > 0);
}

#[test]
fn addresses_are_checked_and_live_sockets_are_not_stolen() {
    for bad in ["/tmp/x", "udp:1.2.3.4:5", ""] {
        let e = Listener::bind(bad).err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::BadAddress(_)), "{bad}: {e}");
    }
    let (c, path) = collector("inuse");
    let e = Listener::bind(&format!("unix:{}", path.display()))
        .err()
        .unwrap();
    assert!(matches!(e.kind(), ErrorKind::InUse(_)), "{e}");
    drop(c);
    // Once the server is gone its path can be bound again.
    assert!(Listener::bind(&format!("unix:{}", path.display())).is_ok());
}
