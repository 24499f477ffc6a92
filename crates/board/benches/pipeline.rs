//! The blackboard against a plain loop, on a pipeline shaped like Hark's:
//! a reader submits packs of 48-byte `hark_wire::Event` records (about
//! 1 MiB each, keyed by rank); an `unpack` knowledge source (serial by key)
//! views each pack as events without copying and submits the batch; a
//! `profile` knowledge source (serial by key) reduces it per (rank,
//! function): calls, time, bytes. The plain loop does the same views and the
//! same reduction on one thread, with no board.
//!
//! Also measured: the cost of one job dispatch, (a) chained — one worker, an
//! operation that submits the entry triggering the next job, so submit,
//! lookup, queue, pop, run and free happen back to back on one thread — and
//! (b) fed — a thread outside the pool submits tiny entries as fast as it
//! can to one worker.
//!
//! Run: `cargo bench -p hark-board --bench pipeline` (add `-- quick` for a
//! short run). Every figure is the median of several runs in this process,
//! configurations interleaved so that machine noise hits them alike. Each
//! run is measured twice: wall-clock time, and the processor time of the
//! whole process (every thread, from `getrusage`), which is what "per core"
//! means and which other programs on a shared machine disturb much less.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hark_board::{Board, Config, Entry, KnowledgeSource, QueueKind};
use hark_wire::{op, Event, EVENT_SIZE};

const RANKS: usize = 4;
const EVENTS_PER_PACK: usize = (1 << 20) / EVENT_SIZE; // 21845, about 1 MiB
const DISTINCT_PACKS: usize = 4;
const OPS: usize = 0x700;

/// One row of the per-(rank, function) profile.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Row {
    calls: u64,
    time: u64,
    bytes: u64,
}

type Table = Vec<Row>;

/// The reduction both sides run: the inner loop of an MPI profile. Never
/// inlined, so that both sides run the very same machine code.
#[inline(never)]
fn reduce(events: &[Event], table: &mut [Row]) {
    for e in events {
        let row = &mut table[e.op() as usize % OPS];
        row.calls += 1;
        row.time += e.duration();
        row.bytes += e.bytes.get();
    }
}

/// A pack as the reader hands it over: shared bytes (the frame it read).
#[derive(Clone)]
struct Pack(Arc<[u8]>);

/// Deterministic packs of plausible MPI events.
fn make_packs() -> Vec<Vec<Pack>> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..RANKS)
        .map(|_| {
            (0..DISTINCT_PACKS)
                .map(|_| {
                    let mut t = 0u64;
                    let events: Vec<Event> = (0..EVENTS_PER_PACK)
                        .map(|_| {
                            let r = rnd();
                            let f = op::MPI_BASE + (r % 48) as u16;
                            t += 50 + (r >> 8) % 200;
                            let mut e = Event::new(f, t, t + (r >> 16) % 5000);
                            e.bytes.set((r >> 32) % 65536);
                            e.peer.set(((r >> 48) % RANKS as u64) as i32);
                            e
                        })
                        .collect();
                    let bytes: Vec<u8> = events
                        .iter()
                        .flat_map(|e| zerocopy::IntoBytes::as_bytes(e).to_vec())
                        .collect();
                    Pack(bytes.into())
                })
                .collect()
        })
        .collect()
}

/// Wall-clock and processor time of a piece of work.
#[derive(Clone, Copy)]
struct Took {
    wall: f64,
    cpu: f64,
}

/// Processor time used by this process so far, all threads, in seconds.
fn cpu_now() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct we own.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

struct Clock(Instant, f64);

impl Clock {
    fn start() -> Clock {
        Clock(Instant::now(), cpu_now())
    }
    fn stop(&self) -> Took {
        Took {
            wall: self.0.elapsed().as_secs_f64(),
            cpu: cpu_now() - self.1,
        }
    }
}

/// The same events cut into packs of `events` events (for the small-pack
/// runs: the board's overhead grows as batches shrink).
fn split(packs: &[Vec<Pack>], events: usize) -> Vec<Vec<Pack>> {
    packs
        .iter()
        .map(|rank| {
            rank.iter()
                .flat_map(|p| p.0.chunks(events * EVENT_SIZE).map(|c| Pack(c.into())))
                .collect()
        })
        .collect()
}

fn plain(packs: &[Vec<Pack>], rounds: usize) -> (Took, Vec<Table>) {
    let mut tables = vec![vec![Row::default(); OPS]; RANKS];
    let start = Clock::start();
    for round in 0..rounds {
        for (rank, table) in tables.iter_mut().enumerate() {
            let pack = &packs[rank][round % packs[rank].len()];
            let events = Event::slice_from(&pack.0).expect("whole events");
            reduce(black_box(events), table);
        }
    }
    (start.stop(), tables)
}

/// A batch of events: a view into a pack, without copying.
struct Batch {
    pack: Pack,
    range: std::ops::Range<usize>,
}

fn engine(
    packs: &[Vec<Pack>],
    rounds: usize,
    workers: usize,
    kind: QueueKind,
) -> (Took, Vec<Table>) {
    let board = Board::with_config(Config::new(workers).queues(kind));
    let pack_ty = board.intern("pack");
    let mpi_ty = board.intern("mpi-events");
    let level = board.create_level("bench");
    board
        .register(
            level,
            KnowledgeSource::new("unpack", &[pack_ty], move |ctx, e| {
                let pack: &Pack = e[0].get().expect("a pack");
                let n = Event::slice_from(&pack.0).expect("whole events").len();
                let batch = Batch {
                    pack: pack.clone(),
                    range: 0..n * EVENT_SIZE,
                };
                ctx.submit(Entry::with_bytes(mpi_ty, batch, n * EVENT_SIZE));
            })
            .serial_by_key(),
        )
        .unwrap();
    let tables: Arc<Vec<Mutex<Table>>> = Arc::new(
        (0..RANKS)
            .map(|_| Mutex::new(vec![Row::default(); OPS]))
            .collect(),
    );
    let t = tables.clone();
    board
        .register(
            level,
            KnowledgeSource::new("profile", &[mpi_ty], move |ctx, e| {
                let batch: &Batch = e[0].get().expect("a batch");
                let events = Event::slice_from(&batch.pack.0[batch.range.clone()]).expect("whole");
                let mut table = t[ctx.key().unwrap() as usize].lock().unwrap();
                reduce(events, &mut table);
            })
            .serial_by_key(),
        )
        .unwrap();
    let start = Clock::start();
    for round in 0..rounds {
        for (rank, packs) in packs.iter().enumerate() {
            let pack = packs[round % packs.len()].clone();
            let bytes = pack.0.len();
            board
                .submit_keyed(level, rank as u64, Entry::with_bytes(pack_ty, pack, bytes))
                .unwrap();
        }
    }
    board.drain();
    let took = start.stop();
    board.shutdown();
    let tables = tables.iter().map(|m| m.lock().unwrap().clone()).collect();
    (took, tables)
}

/// Chained dispatch: one worker, each job submits the entry for the next.
fn dispatch_chained(jobs: u64, kind: QueueKind) -> Duration {
    let board = Board::with_config(Config::new(1).queues(kind));
    let ty = board.intern("tick");
    let level = board.create_level("bench");
    board
        .register(
            level,
            KnowledgeSource::new("tick", &[ty], move |ctx, e| {
                let n = *e[0].get::<u64>().unwrap();
                if n > 0 {
                    ctx.submit(Entry::new(ty, n - 1));
                }
            }),
        )
        .unwrap();
    let start = Instant::now();
    board.submit(level, Entry::new(ty, jobs - 1)).unwrap();
    board.drain();
    let took = start.elapsed();
    assert_eq!(board.stats().knowledge_sources[0].jobs_run, jobs);
    took
}

/// Fed dispatch: this thread submits, one worker runs.
fn dispatch_fed(jobs: u64, kind: QueueKind) -> Duration {
    let board = Board::with_config(Config::new(1).queues(kind));
    let ty = board.intern("tick");
    let level = board.create_level("bench");
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    board
        .register(
            level,
            KnowledgeSource::new("tick", &[ty], move |_, _| {
                c.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
    let start = Instant::now();
    for i in 0..jobs {
        board.submit(level, Entry::new(ty, i)).unwrap();
    }
    board.drain();
    let took = start.elapsed();
    assert_eq!(count.load(Ordering::Relaxed), jobs);
    took
}

/// Reads every pack once, untimed, so that each measured run starts with
/// the caches in the same state whatever ran before it.
fn touch(packs: &[Vec<Pack>]) {
    let mut sum = 0u64;
    for p in packs.iter().flatten() {
        sum =
            p.0.iter()
                .step_by(64)
                .fold(sum, |s, &b| s.wrapping_add(b as u64));
    }
    black_box(sum);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (runs, rounds, jobs) = if quick {
        (3, 32, 200_000)
    } else {
        (15, 512, 1_000_000)
    };
    let packs = make_packs();
    let events = (rounds * RANKS * EVENTS_PER_PACK) as f64;
    let kinds = [
        ("work-stealing", QueueKind::WorkStealing),
        ("locked-fifos", QueueKind::LockedFifos),
    ];

    // Warm up, and check the engine computes what the plain loop computes.
    let (_, want) = plain(&packs, rounds);
    for (_, kind) in kinds {
        for workers in [1, 2] {
            let (_, got) = engine(&packs, rounds, workers, kind);
            assert_eq!(
                got, want,
                "the board's profile differs from the plain loop's"
            );
        }
    }

    // Small packs: the same events in packs of 1365 (64 KiB), 16 times as
    // many jobs; work-stealing only.
    const SMALL: usize = (64 << 10) / EVENT_SIZE;
    let small = split(&packs, SMALL);
    let small_rounds = rounds * EVENTS_PER_PACK.div_ceil(SMALL);
    assert_eq!(plain(&small, small_rounds).1, want);
    let mut small_t: [Vec<Took>; 3] = Default::default();

    let mut plain_t: Vec<Took> = Vec::new();
    let mut eng: Vec<[Vec<Took>; 2]> = vec![Default::default(), Default::default()];
    let mut chained: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    let mut fed: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for _ in 0..runs {
        touch(&packs);
        plain_t.push(plain(&packs, rounds).0);
        for (k, (_, kind)) in kinds.iter().enumerate() {
            for (w, times) in eng[k].iter_mut().enumerate() {
                touch(&packs);
                times.push(engine(&packs, rounds, w + 1, *kind).0);
            }
            if k == 0 {
                touch(&small);
                small_t[0].push(plain(&small, small_rounds).0);
                for (w, times) in small_t.iter_mut().enumerate().skip(1) {
                    touch(&small);
                    times.push(engine(&small, small_rounds, w, *kind).0);
                }
            }
            chained[k].push(dispatch_chained(jobs, *kind).as_secs_f64() * 1e9 / jobs as f64);
            fed[k].push(dispatch_fed(jobs, *kind).as_secs_f64() * 1e9 / jobs as f64);
        }
    }

    let wall = |v: &[Took]| median(v.iter().map(|t| t.wall).collect());
    let best = |v: &[Took]| v.iter().map(|t| t.wall).fold(f64::INFINITY, f64::min);
    let cpu = |v: &[Took]| median(v.iter().map(|t| t.cpu).collect());
    let (pw, pb) = (wall(&plain_t), best(&plain_t));
    println!(
        "pipeline: {RANKS} ranks x {rounds} packs x {EVENTS_PER_PACK} events of {EVENT_SIZE} B \
         = {events:.0} events; {runs} runs: median (and best)"
    );
    println!("| configuration | wall ms | M events/s | CPU ms (all threads) | time / plain loop | speed-up 1→2 workers |");
    println!("|---|---|---|---|---|---|");
    let row = |name: String, t: &[Took], speedup: String| {
        let (w, b) = (wall(t), best(t));
        println!(
            "| {name} | {:.1} ({:.1}) | {:.0} ({:.0}) | {:.1} | {:.3} ({:.3}) | {speedup} |",
            w * 1e3,
            b * 1e3,
            events / w / 1e6,
            events / b / 1e6,
            cpu(t) * 1e3,
            w / pw,
            b / pb,
        );
    };
    row("plain loop, 1 thread".into(), &plain_t, String::new());
    for (k, (name, _)) in kinds.iter().enumerate() {
        let [one, two] = &eng[k];
        row(format!("board {name}, 1 worker"), one, String::new());
        let speedup = format!(
            "{:.2}x ({:.2}x)",
            wall(one) / wall(two),
            best(one) / best(two)
        );
        row(format!("board {name}, 2 workers"), two, speedup);
    }
    let [sp, s1, s2] = &small_t;
    let (spw, spb) = (wall(sp), best(sp));
    for (name, t, speedup) in [
        ("plain loop, 1 thread, 64 KiB packs", sp, String::new()),
        (
            "board work-stealing, 1 worker, 64 KiB packs",
            s1,
            String::new(),
        ),
        (
            "board work-stealing, 2 workers, 64 KiB packs",
            s2,
            format!("{:.2}x ({:.2}x)", wall(s1) / wall(s2), best(s1) / best(s2)),
        ),
    ] {
        let (w, b) = (wall(t), best(t));
        println!(
            "| {name} | {:.1} ({:.1}) | {:.0} ({:.0}) | {:.1} | {:.3} ({:.3}) | {speedup} |",
            w * 1e3,
            b * 1e3,
            events / w / 1e6,
            events / b / 1e6,
            cpu(t) * 1e3,
            w / spw,
            b / spb,
        );
    }
    println!();
    println!("| job dispatch | chained, 1 worker (ns/job) | fed from a reader thread (ns/job) |");
    println!("|---|---|---|");
    for (k, (name, _)) in kinds.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {:.0} |",
            median(chained[k].clone()),
            median(fed[k].clone())
        );
    }
}
