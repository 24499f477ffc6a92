//! One knowledge-source set registered on every level keeps one state per
//! level: two programs measured at once never mix, a level created later
//! gets the set too, and retiring one level leaves the other running.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hark_board::{Board, Entry, ErrorKind, KnowledgeSource, Level};

#[test]
fn two_levels_with_the_same_knowledge_sources_stay_independent() {
    let board = Board::new(2);
    let numbers = board.intern("numbers");
    let sum = board.intern("sum");
    let totals: Arc<Mutex<Vec<(Level, u64)>>> = Arc::default();

    // Unpack: sum a batch, pass the sum on (same level, same key).
    board
        .register_all(move |_| {
            KnowledgeSource::new("unpack", &[numbers], move |ctx, e| {
                let v: &Vec<u64> = e[0].get().unwrap();
                ctx.submit(Entry::new(sum, v.iter().sum::<u64>()));
            })
        })
        .unwrap();
    // Reduce: one accumulator per level, made by the factory.
    let t = totals.clone();
    board
        .register_all(move |level| {
            let acc = Arc::new(AtomicU64::new(0));
            t.lock().unwrap().push((level, 0));
            let t = t.clone();
            KnowledgeSource::new("reduce", &[sum], move |ctx, e| {
                let now = acc.fetch_add(*e[0].get::<u64>().unwrap(), Ordering::SeqCst)
                    + *e[0].get::<u64>().unwrap();
                let mut t = t.lock().unwrap();
                let row = t.iter_mut().find(|(l, _)| *l == ctx.level()).unwrap();
                row.1 = row.1.max(now);
            })
        })
        .unwrap();

    let a = board.create_level("ocean");
    let b = board.create_level("atmos");
    for i in 0..100u64 {
        board
            .submit(a, Entry::with_bytes(numbers, vec![1u64; 10], 80))
            .unwrap();
        board
            .submit(b, Entry::with_bytes(numbers, vec![i; 3], 24))
            .unwrap();
    }
    board.drain();
    let total_of = |l: Level| totals.lock().unwrap().iter().find(|r| r.0 == l).unwrap().1;
    assert_eq!(total_of(a), 1000);
    assert_eq!(total_of(b), 3 * (0..100).sum::<u64>());

    // Each level's statistics count only its own.
    let stats = board.stats();
    assert_eq!(stats.levels.len(), 2);
    assert!(stats.levels.iter().all(|l| l.entries_submitted == 200));
    assert_eq!(stats.knowledge_sources.len(), 4);

    // Retire one; the other goes on; a new level gets the set.
    board.drain_level(a);
    assert!(board.retire_level(a));
    let err = board
        .submit(a, Entry::new(numbers, vec![1u64]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LevelRetired);
    assert!(err.to_string().contains("retired"), "{err}");
    board.submit(b, Entry::new(numbers, vec![5u64])).unwrap();
    let c = board.create_level("land");
    board.submit(c, Entry::new(numbers, vec![7u64])).unwrap();
    board.drain();
    assert_eq!(total_of(a), 1000);
    assert_eq!(total_of(b), 3 * (0..100).sum::<u64>() + 5);
    assert_eq!(total_of(c), 7);
    assert_eq!(board.level("land"), Some(c));
    assert_eq!(board.level("ocean"), None);
    let stats = board.stats();
    assert!(stats
        .levels
        .iter()
        .all(|l| l.entries_live == 0 && l.bytes_live == 0));
    assert_eq!(
        stats.knowledge_sources.len(),
        4,
        "retired level's sources are gone"
    );
}

#[test]
fn submitting_to_a_level_never_created_is_a_clear_error() {
    let board = Board::new(1);
    let t = board.intern("t");
    let other = Board::new(1);
    let foreign = other.create_level("elsewhere");
    let _ = other.create_level("elsewhere-too");
    let fresh = Board::new(1);
    let _ = fresh.create_level("only");
    let e = board.submit(foreign, Entry::new(t, ())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnknownLevel);
    assert!(e.to_string().contains("create_level"), "{e}");
}
