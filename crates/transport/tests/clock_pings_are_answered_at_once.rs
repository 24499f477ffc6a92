//! A probe aligning its clock opens a connection of its own and sends
//! `ClockPing` frames; the reader answers each at once with the server's
//! `CLOCK_REALTIME` (`docs/wire.md`, "ClockPing"). The connection closes
//! clean, with no `Hello` and nothing for the sink; anything else on it,
//! or a ping inside a stream, breaks only that connection.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hark_transport::{collect, Closed};
use hark_wire::{ClockSource, End, EndReason, Hello, Kind, HEADER_SIZE};

fn realtime() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn pong(s: &mut UnixStream) -> u64 {
    let mut b = [0u8; HEADER_SIZE + 16];
    s.read_exact(&mut b).unwrap();
    assert_eq!(
        u32::from_le_bytes(b[0..4].try_into().unwrap()),
        Kind::ClockPong as u32
    );
    assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 16);
    // hark's own clock: exact, no bound of its own.
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 0);
    u64::from_le_bytes(b[8..16].try_into().unwrap())
}

/// Waits until the collector has `n` connections closed without a Hello.
fn rejected(c: &collect::Collector, n: usize) -> Vec<Closed> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c.rejected();
        if r.len() >= n || Instant::now() > deadline {
            return r.into_iter().map(|(_, o)| o).collect();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn pings_are_answered_with_the_servers_clock_and_close_clean() {
    let dir = std::env::temp_dir().join(format!("hark-pings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s");
    let c = collect::serve_collect(&format!("unix:{}", path.display())).unwrap();
    let mut ping = Vec::new();
    hark_wire::encode_clock_ping(&mut ping);

    let mut s = UnixStream::connect(&path).unwrap();
    for _ in 0..3 {
        let before = realtime();
        s.write_all(&ping).unwrap();
        let server = pong(&mut s);
        let after = realtime();
        assert!(
            before <= server && server <= after,
            "{before} {server} {after}"
        );
    }
    drop(s);
    assert_eq!(rejected(&c, 1), [Closed::Clean]);

    // Anything but pings on a clock connection breaks it.
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(&ping).unwrap();
    pong(&mut s);
    let mut end = Vec::new();
    End {
        events_written: 0,
        events_dropped: 0,
        packs_sent: 0,
        reason: EndReason::Exit,
    }
    .encode(&mut end);
    s.write_all(&end).unwrap();
    let outcomes = rejected(&c, 2);
    assert!(
        matches!(&outcomes[1], Closed::Broken(why) if why.contains("clock connection")),
        "{outcomes:?}"
    );

    // A ping inside a stream breaks that stream.
    let mut bytes = Vec::new();
    Hello {
        program: "p".into(),
        argv: vec!["p".into()],
        host: "h".into(),
        pid: 1,
        rank: -1,
        size: -1,
        job: "j".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut bytes);
    bytes.extend_from_slice(&ping);
    UnixStream::connect(&path)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let streams = c.wait_closed(1, Duration::from_secs(20)).unwrap();
    assert!(
        matches!(&streams[0].closed, Some(Closed::Broken(why)) if why.contains("inside a stream")),
        "{:?}",
        streams[0].closed
    );
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
