//! The engine's hot path without sockets or threads of writers: ranks of the
//! flood's halo-exchange mix (`crates/server/benches/flood.rs`, 12 events a
//! round) fed through a board with one worker, as the server feeds packs,
//! then folded. Made to run under callgrind, whose instruction counts do not
//! depend on the machine's load:
//!
//! ```text
//! cargo bench -p hark-engine --bench hot_path --no-run
//! valgrind --tool=callgrind target/release/deps/hot_path-* ROUNDS RANKS [ANALYSES|all|none]
//! ```
//!
//! `ANALYSES` is a comma-separated list of spec names (`registry::select`);
//! `none` runs the unpacker alone. Run it twice, with `ROUNDS` and
//! `2 × ROUNDS`: the difference divided by `12 × ROUNDS × RANKS` is the
//! instructions per event, setup and fold cancelled out. Without valgrind it
//! prints the events per second of one analysing core.

use hark_analyses::registry;
use hark_engine::{Config, OnBoard, ProgramAnalysis, StreamAccounting};
use hark_wire::{op, ClockSource, End, EndReason, Event, Hello, RankInfo};
use std::sync::Arc;
use std::time::Instant;

#[path = "support/halo_mix.rs"]
mod halo_mix;
use halo_mix::{defs, mix};

/// Rounds of the mix per pack (about the flood's 1 MiB packs).
const ROUNDS_PER_PACK: usize = 1800;

/// How far each rank's timeline runs behind the one before it, in ns.
const LAG_NS: u64 = 400;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rounds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let ranks: i32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4);
    let which = args.get(2).map_or("all", String::as_str);
    let analyses = match which {
        "all" => registry::all(),
        "none" => Vec::new(),
        names => {
            let names: Vec<&str> = names.split(',').collect();
            registry::select(&names).expect("known analysis names (see registry::all)")
        }
    };
    let program = ProgramAnalysis::new("flood", 0, analyses, Config::default());
    let board = hark_board::Board::new(1);
    let on = OnBoard::install(&board, program).expect("installing the program");
    let infos: Vec<_> = (0..ranks)
        .map(|r| {
            let info = Arc::new(on.program().stream_info(r as u64, hello(r, ranks), 0));
            info.set_rank(RankInfo {
                world_rank: r,
                world_size: ranks,
                appnum: 0,
                thread_level: 0,
                flavour: hark_wire::Flavour::OpenMpi,
                library: "synthetic".into(),
            });
            on.defs(&info, defs(r, ranks)).expect("definitions");
            info
        })
        .collect();
    let templates: Vec<Vec<Event>> = (0..ranks).map(|r| template(r, ranks)).collect();
    let mut packs: Vec<Vec<Event>> = templates.clone();
    let started = Instant::now();
    let (mut done, mut seq) = (0usize, 0u64);
    while done < rounds {
        let n = (rounds - done).min(ROUNDS_PER_PACK);
        for (r, info) in infos.iter().enumerate() {
            let pack = &mut packs[r][..n * MIX];
            moved_on(pack, &templates[r], seq);
            on.pack(info, pack).expect("a pack");
        }
        // As the flood's writers are coupled: a few packs apart at most.
        if seq % 4 == 3 {
            board.drain_level(on.level());
        }
        done += n;
        seq += 1;
    }
    let events = (rounds * MIX) as u64;
    let ranks_acc: Vec<_> = infos
        .into_iter()
        .map(|info| {
            let acc = StreamAccounting {
                received: events,
                analysed: 0,
                end: Some(End {
                    events_written: events,
                    events_dropped: 0,
                    packs_sent: seq,
                    reason: EndReason::Finalize,
                }),
                abort_code: None,
            };
            (info, acc)
        })
        .collect();
    board.drain_level(on.level());
    let analysed = started.elapsed();
    let model = on.finish(ranks_acc);
    board.shutdown();
    let total = events * ranks as u64;
    println!(
        "{total} events ({rounds} rounds × {ranks} ranks, {which}): {:.1} M events/s analysed, {} bytes of model",
        total as f64 / analysed.as_secs_f64() / 1e6,
        serde_json::to_string(&model).map_or(0, |s| s.len()),
    );
}

/// Events in a round of the mix.
const MIX: usize = 12;

fn hello(rank: i32, size: i32) -> Hello {
    Hello {
        program: "flood".into(),
        argv: vec!["flood".into()],
        host: "localhost".into(),
        pid: 1000 + rank as u32,
        rank,
        size,
        job: "bench".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
}

/// A pack's worth of the mix with the first pack's times, one synthetic
/// microsecond per event.
fn template(rank: i32, size: i32) -> Vec<Event> {
    let pattern = mix(rank, size);
    let allreduce = op::mpi_op("MPI_Allreduce").unwrap();
    (0..ROUNDS_PER_PACK * MIX)
        .map(|i| {
            let mut e = pattern[i % MIX];
            let t = i as u64 * 1000 + rank as u64 * LAG_NS;
            e.start.set(t);
            e.end.set(t + e.end.get());
            if e.op() == allreduce {
                e.tag.set((i / MIX) as i32);
            }
            e
        })
        .collect()
}

/// The template with its times and collective numbers moved on to pack `seq`.
fn moved_on(pack: &mut [Event], template: &[Event], seq: u64) {
    let allreduce = op::mpi_op("MPI_Allreduce").unwrap();
    let shift = seq * (ROUNDS_PER_PACK * MIX) as u64 * 1000;
    for (e, t) in pack.iter_mut().zip(template) {
        e.start.set(t.start.get() + shift);
        e.end.set(t.end.get() + shift);
        if e.op() == allreduce {
            e.tag
                .set(t.tag.get() + (seq as usize * ROUNDS_PER_PACK) as i32);
        }
    }
}
