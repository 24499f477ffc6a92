//! A knowledge source marked serial by key runs one key's jobs one at a
//! time, in the order they were made, down a chain of such sources (a
//! rank's packs unpacked and reduced in order), while different keys run at
//! the same time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use hark_board::{Board, Config, Entry, KnowledgeSource, QueueKind};

fn chain_keeps_order(kind: QueueKind) {
    const KEYS: u64 = 6;
    const PACKS: u64 = 300;
    let board = Board::with_config(Config::new(2).queues(kind));
    let pack = board.intern("pack");
    let events = board.intern("events");
    let level = board.create_level("p");
    // Unpack: a pack numbered n becomes two event batches 2n and 2n+1.
    board
        .register(
            level,
            KnowledgeSource::new("unpack", &[pack], move |ctx, e| {
                let n = *e[0].get::<u64>().unwrap();
                ctx.submit(Entry::new(events, 2 * n));
                ctx.submit(Entry::new(events, 2 * n + 1));
            })
            .serial_by_key(),
        )
        .unwrap();
    let seen: Arc<Vec<Mutex<Vec<u64>>>> = Arc::new((0..KEYS).map(|_| Mutex::default()).collect());
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    let (s, b) = (seen.clone(), busy.clone());
    board
        .register(
            level,
            KnowledgeSource::new("reduce", &[events], move |ctx, e| {
                let k = ctx.key().unwrap() as usize;
                assert!(
                    !b[k].swap(true, Ordering::SeqCst),
                    "two jobs of key {k} at once"
                );
                s[k].lock().unwrap().push(*e[0].get::<u64>().unwrap());
                thread::yield_now();
                b[k].store(false, Ordering::SeqCst);
            })
            .serial_by_key(),
        )
        .unwrap();
    // One reader thread per key, like one connection per rank.
    let readers: Vec<_> = (0..KEYS)
        .map(|k| {
            let board = board.clone();
            thread::spawn(move || {
                for n in 0..PACKS {
                    board.submit_keyed(level, k, Entry::new(pack, n)).unwrap();
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    board.drain();
    for k in 0..KEYS as usize {
        let got = seen[k].lock().unwrap();
        assert_eq!(
            *got,
            (0..2 * PACKS).collect::<Vec<_>>(),
            "key {k} out of order"
        );
    }
    let stats = board.stats();
    assert!(stats.knowledge_sources.iter().all(|k| k.panics == 0));
}

#[test]
fn a_chain_of_serial_sources_keeps_each_key_in_order_with_locked_fifos() {
    chain_keeps_order(QueueKind::LockedFifos);
}

#[test]
fn a_chain_of_serial_sources_keeps_each_key_in_order_with_work_stealing() {
    chain_keeps_order(QueueKind::WorkStealing);
}

#[test]
fn different_keys_of_a_serial_source_run_at_the_same_time() {
    // Key 0's job waits for key 1's job to start: if keys were serialised
    // together, the barrier would time out and the test fail.
    let board = Board::new(2);
    let t = board.intern("t");
    let level = board.create_level("p");
    let barrier = Arc::new(Barrier::new(2));
    let met = Arc::new(AtomicBool::new(false));
    let (b, m) = (barrier.clone(), met.clone());
    board
        .register(
            level,
            KnowledgeSource::new("meet", &[t], move |_, _| {
                let (tx, rx) = std::sync::mpsc::channel();
                let b = b.clone();
                thread::spawn(move || {
                    b.wait();
                    let _ = tx.send(());
                });
                if rx.recv_timeout(Duration::from_secs(10)).is_ok() {
                    m.store(true, Ordering::SeqCst);
                }
            })
            .serial_by_key(),
        )
        .unwrap();
    board.submit_keyed(level, 0, Entry::new(t, ())).unwrap();
    board.submit_keyed(level, 1, Entry::new(t, ())).unwrap();
    board.drain();
    assert!(
        met.load(Ordering::SeqCst),
        "the two keys never ran together"
    );
}
