//! A fuzz harness for the wire decoder and the server's frame handling.
//!
//! Streams are built from structured pieces: well-formed frames of every
//! kind with arbitrary field values, frames with a wrong kind, a lying
//! length (up to 4 GiB) or a payload of random bytes, in any order; then cut
//! at a random byte, or a byte flipped. Each stream is read twice:
//!
//! - by [`FrameReader`] alone: it never panics, and a stream of well-formed
//!   frames reads back exactly as written;
//! - as a connection is read ([`read_stream_from`]), into a sink that checks
//!   the [`Sink`] contract: `on_hello` at most once and first, no frame
//!   after `End`, `on_close` exactly once and last, a clean close only after
//!   an `End`, and never more payload buffered than the frame caps allow.
//!
//! CI runs 4,096 cases per property; `HARK_FUZZ_CASES=10000000` runs a long
//! campaign (see `BENCHMARKS.md`).

use hark_transport::{read_stream_from, Closed, ConnId, Sink};
use hark_wire::{
    encode_pack, ClockSource, Def, End, EndReason, Event, Flavour, Frame, FrameReader, Hello, Kind,
    NameKind, RankInfo, TickScale, HEADER_SIZE,
};
use proptest::prelude::*;
use std::sync::Mutex;

/// One piece of a stream.
#[derive(Clone, Debug)]
enum Piece {
    Hello(Hello),
    Rank(RankInfo),
    Defs(Vec<Def>),
    Pack(u64, Vec<Event>),
    End(End),
    /// A header of any kind number and any length, then `bytes`.
    Raw(u32, u32, Vec<u8>),
}

impl Piece {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Piece::Hello(h) => h.encode(out),
            Piece::Rank(r) => r.encode(out),
            Piece::Defs(d) => Def::encode_all(d, out),
            Piece::Pack(seq, events) => encode_pack(*seq, events, out),
            Piece::End(e) => e.encode(out),
            Piece::Raw(kind, len, bytes) => {
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }

    fn well_formed(&self) -> bool {
        !matches!(self, Piece::Raw(..))
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z./_]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(40).collect()),
    ]
}

fn hello() -> impl Strategy<Value = Hello> {
    let clock = prop_oneof![
        Just(ClockSource::Monotonic),
        (any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(tsc0, ns0, mult)| ClockSource::Tsc(TickScale { tsc0, ns0, mult })),
    ];
    (
        (
            text(),
            prop::collection::vec(text(), 0..4),
            text(),
            any::<u32>(),
        ),
        (any::<i32>(), any::<i32>(), text(), clock),
        (
            any::<u64>(),
            any::<u64>(),
            prop_oneof![Just(1u32 << 20), 0u32..4096, any::<u32>()],
        ),
    )
        .prop_map(
            |(
                (program, argv, host, pid),
                (rank, size, job, clock),
                (clock_ns, realtime_ns, pack_size),
            )| Hello {
                program,
                argv,
                host,
                pid,
                rank,
                size,
                job,
                clock,
                clock_ns,
                realtime_ns,
                pack_size,
                secret: String::new(),
                parent: 0,
            },
        )
}

fn def() -> impl Strategy<Value = Def> {
    let ranks = || prop::collection::vec(any::<i32>(), 0..6);
    prop_oneof![
        (any::<u32>(), ranks(), ranks()).prop_map(|(id, members, remote)| Def::Comm {
            id,
            members,
            remote
        }),
        (any::<u32>(), text()).prop_map(|(id, path)| Def::File { id, path }),
        (
            any::<u32>(),
            prop_oneof![
                Just(NameKind::Region),
                Just(NameKind::Counter),
                Just(NameKind::Mark)
            ],
            text()
        )
            .prop_map(|(id, kind, name)| Def::Name { id, kind, name }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(op, t0, t1, bytes, obj)| {
            let mut e = Event::new(op, t0, t1);
            e.bytes.set(bytes);
            e.obj.set(obj);
            e
        })
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        2 => hello().prop_map(Piece::Hello),
        1 => (any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>(), text()).prop_map(
            |(world_rank, world_size, appnum, thread_level, library)| Piece::Rank(RankInfo {
                world_rank,
                world_size,
                appnum,
                thread_level,
                flavour: Flavour::OpenMpi,
                library,
            })
        ),
        2 => prop::collection::vec(def(), 0..5).prop_map(Piece::Defs),
        3 => (any::<u64>(), prop::collection::vec(event(), 0..8))
            .prop_map(|(seq, events)| Piece::Pack(seq, events)),
        1 => (any::<u64>(), any::<u64>(), any::<u64>(), prop_oneof![
            Just(EndReason::Finalize), Just(EndReason::Exit), Just(EndReason::Abort)
        ])
            .prop_map(|(events_written, events_dropped, packs_sent, reason)| Piece::End(End {
                events_written,
                events_dropped,
                packs_sent,
                reason,
            })),
        2 => (
            prop_oneof![0u32..8, any::<u32>()],
            prop_oneof![0u32..64, any::<u32>()],
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(k, l, b)| Piece::Raw(k, l, b)),
    ]
}

/// A stream: mostly a Hello first, then pieces; sometimes cut or flipped.
fn stream() -> impl Strategy<Value = (Vec<Piece>, Option<(usize, Option<u8>)>)> {
    (
        hello(),
        any::<bool>(),
        prop::collection::vec(piece(), 0..10),
        prop::option::of((any::<usize>(), prop::option::of(1u8..=255))),
    )
        .prop_map(|(h, lead, mut pieces, damage)| {
            if lead {
                pieces.insert(0, Piece::Hello(h));
            }
            (pieces, damage)
        })
}

fn bytes_of(pieces: &[Piece], damage: Option<(usize, Option<u8>)>) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pieces {
        p.encode(&mut out);
    }
    match damage {
        Some((at, None)) if !out.is_empty() => out.truncate(at % out.len()),
        Some((at, Some(x))) if !out.is_empty() => {
            let i = at % out.len();
            out[i] ^= x;
        }
        _ => {}
    }
    out
}

/// What a stream of well-formed frames must read back as.
fn expected(p: &Piece) -> String {
    match p {
        Piece::Hello(h) => format!("{h:?}"),
        Piece::Rank(r) => format!("{r:?}"),
        Piece::Defs(d) => format!("{d:?}"),
        Piece::Pack(seq, events) => format!("{seq} {events:?}"),
        Piece::End(e) => format!("{e:?}"),
        Piece::Raw(..) => unreachable!("only well-formed pieces are compared"),
    }
}

fn decoded(f: &Frame<'_>) -> String {
    match f {
        Frame::Hello(h) => format!("{h:?}"),
        Frame::Rank(r) => format!("{r:?}"),
        Frame::Defs(d) => format!("{d:?}"),
        Frame::Pack { seq, events } => format!("{seq} {events:?}"),
        Frame::End(e) => format!("{e:?}"),
        Frame::Clock(c) => format!("{c:?}"),
        Frame::Ring => "Ring".into(),
        Frame::Cpus(c) => format!("{c:?}"),
        Frame::Control(c) => format!("{c:?}"),
        Frame::Counts(c) => format!("{c:?}"),
        Frame::Scale(t) => format!("{t:?}"),
        Frame::Node(n) => format!("{n:?}"),
        Frame::Mux { stream, frame } => format!("{stream} {frame:?}"),
        Frame::Gone(g) => format!("{g:?}"),
        Frame::ClockPing => "ClockPing".into(),
        Frame::ClockPong(p) => format!("ClockPong {} {}", p.reference_ns, p.bound_ns),
    }
}

/// A sink that checks the contract of [`Sink`] as the reader calls it.
#[derive(Default)]
struct Contract {
    log: Mutex<Log>,
}

#[derive(Default)]
struct Log {
    hello: bool,
    frames: usize,
    ended: bool,
    closed: Option<Closed>,
    violations: Vec<String>,
}

impl Sink for Contract {
    fn on_hello(&self, _: ConnId, _: &Hello, _: i64) {
        let mut l = self.log.lock().unwrap();
        if l.hello || l.frames > 0 || l.closed.is_some() {
            l.violations.push("on_hello not first or twice".into());
        }
        l.hello = true;
    }

    fn on_frame(&self, _: ConnId, frame: Frame<'_>) {
        let mut l = self.log.lock().unwrap();
        if !l.hello || l.ended || l.closed.is_some() {
            l.violations
                .push("a frame before Hello, after End or after close".into());
        }
        if matches!(frame, Frame::Hello(_)) {
            l.violations.push("a second Hello passed on".into());
        }
        l.ended |= matches!(frame, Frame::End(_));
        l.frames += 1;
    }

    fn on_close(&self, _: ConnId, outcome: Closed) {
        let mut l = self.log.lock().unwrap();
        if l.closed.is_some() {
            l.violations.push("on_close twice".into());
        }
        if outcome == Closed::Clean && !l.ended {
            l.violations.push("a clean close without End".into());
        }
        if let Closed::Broken(why) = &outcome {
            if why.is_empty() {
                l.violations.push("a broken stream without a reason".into());
            }
        }
        l.closed = Some(outcome);
    }
}

/// Reads `bytes` with [`FrameReader`] alone: an error or the end, never a
/// panic, and whole well-formed streams read back as written.
fn check_frames(bytes: &[u8], pieces: &[Piece], damaged: bool) -> Result<(), TestCaseError> {
    let mut reader = FrameReader::new(bytes);
    let mut got = Vec::new();
    loop {
        match reader.next_frame() {
            Ok(Some(f)) => got.push(decoded(&f)),
            Ok(None) => break,
            Err(e) => {
                prop_assert!(!e.to_string().is_empty());
                break;
            }
        }
    }
    // Whole, well-formed streams read back as written, as long as no pack
    // is over the size its stream's latest Hello declared and their clock
    // is CLOCK_MONOTONIC (TSC ticks come back converted to nanoseconds).
    let mut pack_size = None;
    let mut fits = true;
    for p in pieces {
        match p {
            Piece::Hello(h) => {
                pack_size = Some(h.pack_size as usize);
                fits &= h.clock == ClockSource::Monotonic;
            }
            Piece::Pack(_, ev) => {
                let payload = 8 + ev.len() * hark_wire::EVENT_SIZE;
                fits &= pack_size.is_none_or(|max| payload <= max);
            }
            _ => {}
        }
    }
    if !damaged && fits && pieces.iter().all(Piece::well_formed) {
        let want: Vec<String> = pieces.iter().map(expected).collect();
        prop_assert_eq!(got, want);
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("HARK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_stream_is_read_to_an_error_or_its_end_and_the_sink_contract_holds(
        (pieces, damage) in stream()
    ) {
        let bytes = bytes_of(&pieces, damage);
        check_frames(&bytes, &pieces, damage.is_some())?;

        let sink = Contract::default();
        read_stream_from(ConnId(0), &mut &bytes[..], &sink);
        let log = sink.log.into_inner().unwrap();
        prop_assert!(log.violations.is_empty(), "{:?}", log.violations);
        prop_assert!(log.closed.is_some(), "on_close was not called");
        let starts_with_hello = bytes.len() >= HEADER_SIZE
            && bytes[0..4] == (Kind::Hello as u32).to_le_bytes();
        if !starts_with_hello && !bytes.is_empty() {
            prop_assert!(!log.hello);
        }
    }
}
