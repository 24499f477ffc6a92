//! Statistics are readable while the board works: queue depth per
//! knowledge source, entries and bytes held per level, time spent in
//! operations — and they come back to zero when the work is done.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hark_board::{Board, Entry, KnowledgeSource};

#[test]
fn statistics_show_queue_depth_time_and_held_bytes_at_any_moment() {
    let board = Board::new(1);
    let t = board.intern("t");
    let level = board.create_level("ocean");
    let (release, gate) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let (started_tx, started) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    board
        .register(
            level,
            KnowledgeSource::new("slow", &[t], move |_, _| {
                started_tx.lock().unwrap().send(()).unwrap();
                gate.lock().unwrap().recv().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }),
        )
        .unwrap();
    for _ in 0..5 {
        board
            .submit(level, Entry::with_bytes(t, vec![0u8; 1000], 1000))
            .unwrap();
    }
    // The single worker is inside the first job; four wait behind it.
    started.recv().unwrap();
    let s = board.stats();
    assert_eq!(s.workers, 1);
    assert_eq!(s.jobs_outstanding, 5);
    assert_eq!(s.levels[0].name, "ocean");
    assert_eq!(s.levels[0].entries_live, 5);
    assert_eq!(s.levels[0].bytes_live, 5000);
    assert_eq!(s.levels[0].jobs_outstanding, 5);
    assert_eq!(s.knowledge_sources[0].name, "slow");
    assert_eq!(s.knowledge_sources[0].jobs_pending, 4);
    assert_eq!(s.knowledge_sources[0].jobs_run, 0);
    for _ in 0..5 {
        release.send(()).unwrap();
    }
    board.drain();
    let s = board.stats();
    let ks = &s.knowledge_sources[0];
    assert_eq!(ks.jobs_run, 5);
    assert_eq!(ks.jobs_pending, 0);
    // Five operations of at least 20 ms each.
    assert!(ks.busy >= Duration::from_millis(90), "busy {:?}", ks.busy);
    assert!(ks.busy < Duration::from_secs(30), "busy {:?}", ks.busy);
    assert_eq!(s.levels[0].entries_live, 0);
    assert_eq!(s.levels[0].bytes_live, 0);
    assert_eq!(s.levels[0].entries_submitted, 5);
    assert_eq!(s.jobs_outstanding, 0);
}

/// One level's knowledge sources, asked of that level alone, are what the
/// whole snapshot lists of them.
#[test]
fn one_level_s_knowledge_sources_are_those_the_snapshot_lists() {
    let board = Board::new(2);
    let t = board.intern("t");
    let levels: Vec<_> = (0..3)
        .map(|i| board.create_level(&format!("level {i}")))
        .collect();
    for (i, &level) in levels.iter().enumerate() {
        for k in 0..=i {
            let ks = KnowledgeSource::new(&format!("ks {i}.{k}"), &[t], move |_, _| {
                assert!(k != 1, "ks {k} breaks");
            });
            board.register(level, ks).unwrap();
        }
        board.submit(level, Entry::new(t, ())).unwrap();
    }
    board.drain();
    // All but the time, which each snapshot converts from ticks anew.
    let counts = |k: &hark_board::KsStats| {
        let id = (k.id, k.name.clone(), k.level, k.jobs_run, k.jobs_pending);
        (id, k.panics, k.errors, k.last_error.clone())
    };
    let all = board.stats().knowledge_sources;
    for &level in &levels {
        let mine: Vec<_> = all
            .iter()
            .filter(|k| k.level == level)
            .map(counts)
            .collect();
        let asked: Vec<_> = board
            .knowledge_sources_on(level)
            .iter()
            .map(counts)
            .collect();
        assert_eq!(asked, mine);
    }
    let third = board.knowledge_sources_on(levels[2]);
    assert_eq!(third.len(), 3);
    assert_eq!(third.iter().map(|k| k.panics).sum::<u64>(), 1);
    board.retire_level(levels[0]);
    assert!(board.knowledge_sources_on(levels[0]).is_empty());
}
