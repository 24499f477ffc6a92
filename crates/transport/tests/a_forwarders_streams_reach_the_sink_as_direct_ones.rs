//! A forwarder's connection (`Node`, then `Mux` and `Gone` frames) is taken
//! apart into the streams it carries: each reaches the sink as a connection
//! of its own, with its packs' ticks converted by its own `Hello`; a bad
//! carried frame breaks only its stream; streams still open when the
//! connection ends close as broken, naming the forwarder.

use hark_transport::{collect, Closed};
use hark_wire::{
    encode_mux, encode_pack, op, ClockSource, End, EndReason, Event, Gone, GoneHow, Hello, Node,
    TickScale,
};
use std::io::Write;
use std::time::Duration;

fn hello(pid: u32, clock: ClockSource) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "p".into(),
        argv: vec!["p".into()],
        host: "n1".into(),
        pid,
        rank: pid as i32 - 1,
        size: 2,
        job: "j".into(),
        clock,
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 4096,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

fn pack(seq: u64, start: u64) -> Vec<u8> {
    let mut b = Vec::new();
    encode_pack(
        seq,
        &[Event::new(op::REGION_BEGIN, start, start + 10)],
        &mut b,
    );
    b
}

fn end() -> Vec<u8> {
    let mut b = Vec::new();
    End {
        events_written: 1,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Exit,
    }
    .encode(&mut b);
    b
}

fn gone(stream: u64) -> Vec<u8> {
    let mut b = Vec::new();
    Gone {
        stream,
        how: GoneHow::Closed,
        lost_events: 0,
        lost_packs: 0,
        reason: String::new(),
    }
    .encode(&mut b);
    b
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hark-fwd-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn interleaved_streams_come_apart_and_the_open_one_breaks_at_the_end() {
    let dir = scratch("apart");
    let collector = collect::serve_collect(&format!("unix:{}", dir.join("s").display())).unwrap();
    // Stream 9 counts ticks: two per nanosecond (mult = 2^31).
    let tsc = ClockSource::Tsc(TickScale {
        tsc0: 1000,
        ns0: 0,
        mult: 1 << 31,
    });
    let mut bytes = Vec::new();
    Node {
        host: "n1".into(),
        pid: 77,
    }
    .encode(&mut bytes);
    encode_mux(3, &hello(1, ClockSource::Monotonic), &mut bytes);
    encode_mux(9, &hello(2, tsc), &mut bytes);
    encode_mux(3, &pack(0, 500), &mut bytes);
    encode_mux(9, &pack(0, 3000), &mut bytes);
    encode_mux(3, &end(), &mut bytes);
    bytes.extend(gone(3));
    let mut s = std::os::unix::net::UnixStream::connect(dir.join("s")).unwrap();
    s.write_all(&bytes).unwrap();
    drop(s);

    let streams = collector.wait_closed(2, Duration::from_secs(10)).unwrap();
    let a = streams.iter().find(|s| s.hello.pid == 1).unwrap();
    let b = streams.iter().find(|s| s.hello.pid == 2).unwrap();
    assert!(a.is_clean(), "{:?}", a.closed);
    assert_eq!(a.events[0].start.get(), 500);
    // (3000 - 1000) ticks at two per ns.
    assert_eq!(b.events[0].start.get(), 1000);
    match &b.closed {
        Some(Closed::Broken(why)) => assert!(
            why.contains("forwarder on n1 (pid 77)") && why.contains("still open"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_ne!(a.conn, b.conn);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_carried_frame_breaks_only_its_own_stream() {
    let dir = scratch("bad");
    let collector = collect::serve_collect(&format!("unix:{}", dir.join("s").display())).unwrap();
    let mut bytes = Vec::new();
    Node {
        host: "n1".into(),
        pid: 78,
    }
    .encode(&mut bytes);
    encode_mux(1, &hello(1, ClockSource::Monotonic), &mut bytes);
    encode_mux(2, &hello(2, ClockSource::Monotonic), &mut bytes);
    // A pack above the 4096 bytes stream 1's Hello declared.
    let big: Vec<Event> = (0..100)
        .map(|i| Event::new(op::REGION_BEGIN, i, i + 1))
        .collect();
    let mut too_big = Vec::new();
    encode_pack(0, &big, &mut too_big);
    encode_mux(1, &too_big, &mut bytes);
    // Its later frames are dropped; stream 2 goes on.
    encode_mux(1, &pack(1, 5), &mut bytes);
    encode_mux(2, &pack(0, 7), &mut bytes);
    encode_mux(2, &end(), &mut bytes);
    bytes.extend(gone(2));
    bytes.extend(gone(1));
    let mut s = std::os::unix::net::UnixStream::connect(dir.join("s")).unwrap();
    s.write_all(&bytes).unwrap();
    drop(s);

    let streams = collector.wait_closed(2, Duration::from_secs(10)).unwrap();
    let one = streams.iter().find(|s| s.hello.pid == 1).unwrap();
    let two = streams.iter().find(|s| s.hello.pid == 2).unwrap();
    match &one.closed {
        Some(Closed::Broken(why)) => assert!(why.contains("above its limit"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(one.events.is_empty());
    assert!(two.is_clean(), "{:?}", two.closed);
    assert_eq!(two.events.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
