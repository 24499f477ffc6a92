//! Property: on a board with random knowledge sources (one to three
//! sensitivities each, types repeated at will) and a random stream of
//! entries, every entry reaches every sensitivity of its type exactly once;
//! a join fires exactly as many times as its scarcest sensitivity allows,
//! pairing entries in submission order; the rest wait; and once everything
//! is removed and drained, no entry and no byte is held.

use std::sync::{Arc, Mutex};

use hark_board::{Board, Config, Entry, KnowledgeSource, QueueKind};
use proptest::prelude::*;

type Seen = Arc<Mutex<Vec<Vec<u64>>>>;

fn check(types: usize, ks_sens: Vec<Vec<usize>>, stream: Vec<usize>, stealing: bool) {
    let kind = if stealing {
        QueueKind::WorkStealing
    } else {
        QueueKind::LockedFifos
    };
    let board = Board::with_config(Config::new(2).queues(kind));
    let tys: Vec<_> = (0..types).map(|t| board.intern(&format!("t{t}"))).collect();
    let level = board.create_level("p");
    let mut ids = Vec::new();
    let mut seen: Vec<Seen> = Vec::new();
    for (i, sens) in ks_sens.iter().enumerate() {
        let s: Seen = Arc::default();
        let rec = s.clone();
        let sens_tys: Vec<_> = sens.iter().map(|&t| tys[t]).collect();
        let ks = KnowledgeSource::new(&format!("ks{i}"), &sens_tys, move |_ctx, entries| {
            let ids = entries.iter().map(|e| *e.get::<u64>().unwrap()).collect();
            rec.lock().unwrap().push(ids);
        });
        ids.push(board.register(level, ks).unwrap());
        seen.push(s);
    }
    for (id, &t) in stream.iter().enumerate() {
        board
            .submit(level, Entry::with_bytes(tys[t], id as u64, 100))
            .unwrap();
    }
    board.drain();

    // Entries of each type, in submission order.
    let of_type = |t: usize| -> Vec<u64> {
        (0..stream.len() as u64)
            .filter(|&i| stream[i as usize] == t)
            .collect()
    };
    let stats = board.stats();
    for (i, sens) in ks_sens.iter().enumerate() {
        let jobs_expected = sens.iter().map(|&t| of_type(t).len()).min().unwrap();
        let mut jobs = seen[i].lock().unwrap().clone();
        assert_eq!(jobs.len(), jobs_expected, "ks{i} {sens:?}: jobs fired");
        // Jobs may run in any order; each slot's entries, sorted, must be
        // exactly the first `jobs` entries of its type.
        for (slot, &t) in sens.iter().enumerate() {
            let mut got: Vec<u64> = jobs.iter().map(|j| j[slot]).collect();
            got.sort_unstable();
            let want: Vec<u64> = of_type(t).into_iter().take(jobs_expected).collect();
            assert_eq!(got, want, "ks{i} slot {slot}: entries delivered");
        }
        // And the pairing follows submission order: sorted by first slot,
        // every other slot is increasing too.
        jobs.sort();
        for slot in 0..sens.len() {
            assert!(jobs.windows(2).all(|w| w[0][slot] < w[1][slot]));
        }
        let waiting: usize = sens.iter().map(|&t| of_type(t).len() - jobs_expected).sum();
        let row = stats
            .knowledge_sources
            .iter()
            .find(|k| k.id == ids[i])
            .unwrap();
        let waiting_reported = if sens.len() == 1 { 0 } else { waiting };
        assert_eq!(
            row.entries_waiting, waiting_reported,
            "ks{i}: entries waiting"
        );
        assert_eq!(row.jobs_run as usize, jobs_expected);
        assert_eq!(row.jobs_pending, 0);
    }

    for id in ids {
        board.remove(id);
    }
    board.drain();
    let level_stats = &board.stats().levels[0];
    assert_eq!(level_stats.entries_submitted as usize, stream.len());
    assert_eq!(level_stats.entries_live, 0, "entries live after drain");
    assert_eq!(level_stats.bytes_live, 0, "bytes held after drain");
    assert_eq!(level_stats.jobs_outstanding, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_entry_reaches_every_matching_sensitivity_once(
        types in 1usize..4,
        ks in prop::collection::vec(prop::collection::vec(0usize..4, 1..4), 1..5),
        stream in prop::collection::vec(0usize..4, 0..120),
        stealing in any::<bool>(),
    ) {
        let ks: Vec<Vec<usize>> = ks.into_iter().map(|s| s.into_iter().map(|t| t % types).collect()).collect();
        let stream: Vec<usize> = stream.into_iter().map(|t| t % types).collect();
        check(types, ks, stream, stealing);
    }
}

#[test]
fn a_type_twice_in_one_knowledge_source_gives_each_entry_to_both_slots() {
    check(1, vec![vec![0, 0]], vec![0, 0, 0], false);
}

#[test]
fn a_join_waits_for_its_missing_sensitivity() {
    // Three of type 0, none of type 1: nothing fires, three wait.
    check(2, vec![vec![0, 1]], vec![0, 0, 0], true);
}
