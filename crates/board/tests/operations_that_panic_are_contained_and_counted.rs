//! A panicking operation does not take a worker or the board down: the
//! panic is counted with its message in the knowledge source's statistics,
//! the job's entries are freed, and other jobs keep running.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hark_board::{Board, Entry, KnowledgeSource};

#[test]
fn operations_that_panic_are_contained_and_counted() {
    let board = Board::new(1);
    let t = board.intern("t");
    let level = board.create_level("p");
    let ok = Arc::new(AtomicU64::new(0));
    let o = ok.clone();
    board
        .register(
            level,
            KnowledgeSource::new("fragile", &[t], move |ctx, e| {
                let n = *e[0].get::<u64>().unwrap();
                if n % 3 == 0 {
                    panic!("cannot digest {n}");
                }
                if n % 3 == 1 {
                    ctx.report_error(format!("odd input {n}"));
                }
                o.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
    for n in 0..30u64 {
        board.submit(level, Entry::with_bytes(t, n, 64)).unwrap();
    }
    board.drain();
    assert_eq!(ok.load(Ordering::SeqCst), 20);
    let stats = board.stats();
    let ks = &stats.knowledge_sources[0];
    assert_eq!(ks.jobs_run, 30);
    assert_eq!(ks.panics, 10);
    assert_eq!(ks.errors, 10);
    assert!(ks.last_error.is_some());
    assert_eq!(stats.levels[0].entries_live, 0);
    assert_eq!(stats.levels[0].bytes_live, 0);
}

#[test]
fn an_operation_that_waits_for_its_own_board_is_stopped_not_hung() {
    let board = Board::new(1);
    let t = board.intern("t");
    let level = board.create_level("p");
    let handle = std::sync::Mutex::new(Some(board.clone()));
    board
        .register(
            level,
            KnowledgeSource::new("waits", &[t], move |_, _| {
                // Take the handle out so the board is not kept alive by it.
                if let Some(b) = handle.lock().unwrap().take() {
                    b.drain();
                }
            }),
        )
        .unwrap();
    board.submit(level, Entry::new(t, ())).unwrap();
    board.drain();
    let stats = board.stats();
    let ks = &stats.knowledge_sources[0];
    assert_eq!(ks.panics, 1);
    assert!(ks
        .last_error
        .as_deref()
        .unwrap()
        .contains("wait for itself"));
}
