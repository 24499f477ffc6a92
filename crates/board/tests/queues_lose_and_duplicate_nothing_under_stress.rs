//! A concurrency stress test of the job queues, key order and wake-ups,
//! for both queue designs: many submitting threads, operations that fan out
//! into more entries, serial and parallel sources, random pauses to shake
//! the schedules, many rounds with fresh seeds. Every job must run exactly
//! once, every key stay in order, and the board end empty.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use hark_board::{Board, Config, Entry, KnowledgeSource, QueueKind};

/// A tiny deterministic generator (xorshift) so that failures replay.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn jitter(seed: u64) {
    match seed % 16 {
        0 => thread::yield_now(),
        1 => {
            for _ in 0..(seed % 500) {
                std::hint::spin_loop();
            }
        }
        _ => {}
    }
}

fn round(kind: QueueKind, workers: usize, seed: u64) {
    const SUBMITTERS: u64 = 8;
    const PER: u64 = 400;
    const FAN: u64 = 3;
    let board = Board::with_config(Config::new(workers).queues(kind));
    let root = board.intern("root");
    let leaf = board.intern("leaf");
    let level = board.create_level("p");
    let leaves_seen = Arc::new(AtomicU64::new(0));
    let sum_seen = Arc::new(AtomicU64::new(0));
    let last: Arc<Vec<Mutex<Option<u64>>>> =
        Arc::new((0..SUBMITTERS).map(|_| Mutex::new(None)).collect());

    // Root, parallel: fans out into FAN leaves keyed like the root.
    board
        .register(
            level,
            KnowledgeSource::new("fan", &[root], move |ctx, e| {
                let v = *e[0].get::<u64>().unwrap();
                jitter(v.wrapping_mul(31));
                for i in 0..FAN {
                    ctx.submit(Entry::with_bytes(leaf, v * FAN + i, 16));
                }
            }),
        )
        .unwrap();
    // Leaf, parallel: counts and sums.
    let (l, s) = (leaves_seen.clone(), sum_seen.clone());
    board
        .register(
            level,
            KnowledgeSource::new("count", &[leaf], move |_, e| {
                let v = *e[0].get::<u64>().unwrap();
                jitter(v);
                l.fetch_add(1, Ordering::Relaxed);
                s.fetch_add(v, Ordering::Relaxed);
            }),
        )
        .unwrap();
    // Root, serial by key: each submitter's roots in order.
    let order = last.clone();
    board
        .register(
            level,
            KnowledgeSource::new("order", &[root], move |ctx, e| {
                let v = *e[0].get::<u64>().unwrap();
                let k = ctx.key().unwrap() as usize;
                let mut prev = order[k].lock().unwrap();
                assert!(prev.is_none_or(|p| p < v), "key {k}: {v} after {prev:?}");
                *prev = Some(v);
            })
            .serial_by_key(),
        )
        .unwrap();

    let threads: Vec<_> = (0..SUBMITTERS)
        .map(|k| {
            let board = board.clone();
            let mut x = seed ^ (k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            thread::spawn(move || {
                for i in 0..PER {
                    let v = k * PER + i;
                    board
                        .submit_keyed(level, k, Entry::with_bytes(root, v, 8))
                        .unwrap();
                    jitter(next(&mut x));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    board.drain();
    let roots = SUBMITTERS * PER;
    assert_eq!(leaves_seen.load(Ordering::Relaxed), roots * FAN);
    let n = roots * FAN;
    assert_eq!(sum_seen.load(Ordering::Relaxed), n * (n - 1) / 2);
    let stats = board.stats();
    let ran: u64 = stats.knowledge_sources.iter().map(|k| k.jobs_run).sum();
    assert_eq!(ran, roots * 2 + roots * FAN);
    assert!(stats
        .knowledge_sources
        .iter()
        .all(|k| k.panics == 0 && k.jobs_pending == 0));
    assert_eq!(stats.levels[0].entries_live, 0);
    assert_eq!(stats.levels[0].bytes_live, 0);
    assert_eq!(stats.jobs_queued, 0);
    board.shutdown();
}

#[test]
fn locked_fifos_lose_and_duplicate_nothing_under_stress() {
    for seed in 1..=6 {
        round(QueueKind::LockedFifos, 1 + (seed as usize % 4), seed);
    }
}

#[test]
fn work_stealing_loses_and_duplicates_nothing_under_stress() {
    for seed in 1..=6 {
        round(QueueKind::WorkStealing, 1 + (seed as usize % 4), seed);
    }
}
