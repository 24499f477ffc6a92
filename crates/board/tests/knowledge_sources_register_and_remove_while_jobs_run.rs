//! Knowledge sources come and go while the board runs: registered from
//! outside and from operations, removed from outside and by themselves. A
//! registration sees every entry submitted after it returns; a removed
//! knowledge source starts no job after `remove` returns; counts stay exact
//! and everything drains to zero.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use hark_board::{Board, Entry, KnowledgeSource};

#[test]
fn a_registration_sees_entries_submitted_after_it_and_not_after_its_removal() {
    let board = Board::new(2);
    let a = board.intern("a");
    let level = board.create_level("p");
    let runs = Arc::new(AtomicU64::new(0));
    board.submit(level, Entry::new(a, 0u64)).unwrap();
    let r = runs.clone();
    let id = board
        .register(
            level,
            KnowledgeSource::new("count", &[a], move |_, _| {
                r.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
    for i in 0..10u64 {
        board.submit(level, Entry::new(a, i)).unwrap();
    }
    board.drain();
    assert_eq!(runs.load(Ordering::SeqCst), 10);
    assert!(board.remove(id));
    assert!(!board.remove(id), "a registration is removed once");
    for i in 0..10u64 {
        board.submit(level, Entry::new(a, i)).unwrap();
    }
    board.drain();
    assert_eq!(runs.load(Ordering::SeqCst), 10);
}

#[test]
fn an_operation_registers_a_knowledge_source_that_sees_what_it_submits_next() {
    let board = Board::new(2);
    let a = board.intern("a");
    let b = board.intern("b");
    let level = board.create_level("p");
    let seen_b = Arc::new(AtomicU64::new(0));
    let registered = Arc::new(AtomicBool::new(false));
    let (s, r) = (seen_b.clone(), registered.clone());
    board
        .register(
            level,
            KnowledgeSource::new("spawner", &[a], move |ctx, _| {
                if !r.swap(true, Ordering::SeqCst) {
                    let s = s.clone();
                    ctx.register(KnowledgeSource::new("child", &[b], move |_, e| {
                        s.fetch_add(*e[0].get::<u64>().unwrap(), Ordering::SeqCst);
                    }))
                    .unwrap();
                }
                ctx.submit(Entry::new(b, 1u64));
            })
            .serial_by_key(),
        )
        .unwrap();
    for _ in 0..50 {
        board.submit(level, Entry::new(a, ())).unwrap();
    }
    board.drain();
    // The spawner is serial (no key = one key), so the child was registered
    // before the first `b` was submitted: it saw all fifty.
    assert_eq!(seen_b.load(Ordering::SeqCst), 50);
}

#[test]
fn a_knowledge_source_that_removes_itself_starts_no_later_job() {
    let board = Board::new(2);
    let a = board.intern("a");
    let level = board.create_level("p");
    let runs = Arc::new(AtomicU64::new(0));
    let r = runs.clone();
    board
        .register(
            level,
            KnowledgeSource::new("one-shot", &[a], move |ctx, _| {
                r.fetch_add(1, Ordering::SeqCst);
                ctx.remove_self();
            }),
        )
        .unwrap();
    for _ in 0..200 {
        board.submit(level, Entry::new(a, ())).unwrap();
    }
    board.drain();
    let n = runs.load(Ordering::SeqCst);
    // Only jobs already started when the first one removed the source can
    // run: at most one per worker.
    assert!((1..=2).contains(&n), "ran {n} times");
    assert!(board.stats().knowledge_sources.is_empty());
    assert_eq!(board.stats().levels[0].entries_live, 0);
}

#[test]
fn registering_and_removing_from_another_thread_during_a_flood_stays_consistent() {
    let board = Board::new(2);
    let a = board.intern("a");
    let level = board.create_level("p");
    let total = Arc::new(AtomicU64::new(0));
    let t = total.clone();
    board
        .register(
            level,
            KnowledgeSource::new("steady", &[a], move |_, _| {
                t.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
    let flood = {
        let board = board.clone();
        thread::spawn(move || {
            for i in 0..20_000u64 {
                board.submit_keyed(level, i % 7, Entry::new(a, i)).unwrap();
            }
        })
    };
    let churned = Arc::new(AtomicU64::new(0));
    for round in 0..200 {
        let c = churned.clone();
        let ks = KnowledgeSource::new("churn", &[a, a], move |_, _| {
            c.fetch_add(1, Ordering::Relaxed);
        });
        let ks = if round % 2 == 0 {
            ks.serial_by_key()
        } else {
            ks
        };
        let id = board.register(level, ks).unwrap();
        thread::yield_now();
        assert!(board.remove(id));
    }
    flood.join().unwrap();
    board.drain();
    assert_eq!(
        total.load(Ordering::Relaxed),
        20_000,
        "the steady source saw every entry"
    );
    let stats = board.stats();
    assert_eq!(stats.knowledge_sources.len(), 1);
    assert_eq!(stats.levels[0].entries_live, 0);
    assert_eq!(stats.levels[0].bytes_live, 0);
    assert_eq!(stats.jobs_outstanding, 0);
}
