//! The server's frame handling under fuzzed streams: plausible probes (a
//! Hello with any rank and size, definitions with any ids and members,
//! packs of events with any op code, times, peers and byte counts, an End
//! or none) and garbage after them, many at once on one server. Nothing a
//! stream holds may panic an analysis or stop the run: `finish` returns a
//! model in which every program's ranks add up, and that every output
//! renders.
//!
//! CI runs 256 streams; `HARK_FUZZ_CASES` runs more.

mod common;

use common::{server, socket};
use hark_wire::{
    encode_pack, op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, NameKind, RankInfo,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn small() -> impl Strategy<Value = i32> {
    prop_oneof![-2i32..6, any::<i32>()]
}

fn def() -> impl Strategy<Value = Def> {
    let ranks = || prop::collection::vec(small(), 0..5);
    prop_oneof![
        (0u32..40, ranks(), ranks()).prop_map(|(id, members, remote)| Def::Comm {
            id,
            members,
            remote
        }),
        (0u32..40, "[a-z/]{0,8}").prop_map(|(id, path)| Def::File { id, path }),
        (
            0u32..40,
            prop_oneof![
                Just(NameKind::Region),
                Just(NameKind::Counter),
                Just(NameKind::Mark)
            ],
            "[a-z]{0,6}"
        )
            .prop_map(|(id, kind, name)| Def::Name { id, kind, name }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    // Every family of op codes the server knows, so that each analysis
    // meets them often, and any other.
    let code = prop_oneof![
        op::MPI_BASE..op::MPI_BASE + 200,
        op::COMPLETE_RECV..op::CANCELLED + 1,
        op::IO_BASE..op::IO_BASE + 40,
        op::USER_BASE..op::USER_BASE + 12,
        op::SAMPLE_BASE..op::SAMPLE_BASE + 8,
        op::SENSOR_BASE..op::SENSOR_LAST + 1,
        op::OMP_BASE..op::OMP_LAST + 1,
        any::<u16>(),
    ];
    let time = prop_oneof![0u64..10_000, any::<u64>()];
    (
        code,
        time.clone(),
        time,
        prop_oneof![0u64..1_000, any::<u64>()],
        prop_oneof![0u32..40, any::<u32>()],
        small(),
        (any::<i32>(), any::<u16>(), any::<u64>()),
    )
        .prop_map(|(code, t0, t1, bytes, obj, peer, (tag, thread, extra))| {
            let mut e = Event::new(code, t0, t1);
            e.bytes.set(bytes);
            e.obj.set(obj);
            e.peer.set(peer);
            e.tag.set(tag);
            e.thread.set(thread);
            e.extra.set(extra);
            e
        })
}

/// A probe-like stream: Hello, rank, definitions and packs in any order,
/// an End or none, then maybe garbage.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    (
        (small(), small(), 0u32..3, any::<bool>()),
        prop::collection::vec(
            prop_oneof![
                prop::collection::vec(def(), 0..4).prop_map(Ok),
                prop::collection::vec(event(), 0..30).prop_map(Err),
            ],
            0..6,
        ),
        prop::option::of((any::<u64>(), any::<u64>())),
        prop::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|((rank, size, program, tsc), body, end, garbage)| {
            let mut b = Vec::new();
            Hello {
                program: format!("p{program}"),
                argv: vec![],
                host: "h".into(),
                pid: 1,
                rank,
                size,
                job: "fuzz".into(),
                clock: if tsc {
                    ClockSource::Tsc(hark_wire::TickScale {
                        tsc0: 5,
                        ns0: 7,
                        mult: 3 << 32,
                    })
                } else {
                    ClockSource::Monotonic
                },
                clock_ns: 0,
                realtime_ns: 1_700_000_000_000_000_000,
                pack_size: 1 << 20,
                secret: String::new(),
                parent: 0,
            }
            .encode(&mut b);
            RankInfo {
                world_rank: rank,
                world_size: size,
                appnum: 0,
                thread_level: 0,
                flavour: Flavour::Mpich,
                library: String::new(),
            }
            .encode(&mut b);
            for (seq, piece) in body.into_iter().enumerate() {
                match piece {
                    Ok(defs) => Def::encode_all(&defs, &mut b),
                    Err(events) => encode_pack(seq as u64, &events, &mut b),
                }
            }
            if let Some((written, dropped)) = end {
                End {
                    events_written: written,
                    events_dropped: dropped,
                    packs_sent: 0,
                    reason: EndReason::Exit,
                }
                .encode(&mut b);
            }
            b.extend(garbage);
            b
        })
}

#[test]
fn fuzzed_streams_never_stop_the_run() {
    let cases = std::env::var("HARK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let (dir, path) = socket("fuzz-server");
    let server = server(&path, None);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&stream(), |bytes| {
            let mut s = UnixStream::connect(&path).unwrap();
            // The server may close a broken stream before all of it is sent.
            let _ = s.write_all(&bytes);
            Ok(())
        })
        .unwrap();
    let run = server.finish(Duration::from_secs(20));
    for p in &run.programs {
        assert!(
            !p.diagnostics.iter().any(|d| d.contains("panicked")),
            "{:#?}",
            p.diagnostics
        );
        assert_eq!(p.rank_info.len(), p.ranks, "{}", p.name);
        let received: u64 = p
            .rank_info
            .iter()
            .map(|r| r.accounting.events_received)
            .sum();
        let analysed: u64 = p
            .rank_info
            .iter()
            .map(|r| r.accounting.events_analysed)
            .sum();
        assert_eq!(
            received, analysed,
            "{}: every event received is analysed",
            p.name
        );
    }
    assert!(!run.programs.is_empty());
    // And the outputs render it.
    let summary = hark_outputs::summary::render(&run);
    assert!(summary.contains("== p"), "{summary}");
    let html = hark_outputs::html::render(&run, &hark_outputs::html::Options { graphviz: false });
    assert!(html.contains("</html>"));
    // And the other outputs (the report above, without graphviz).
    hark_outputs::write_all(&run, &dir.join("out"), |name| name != "html").unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
