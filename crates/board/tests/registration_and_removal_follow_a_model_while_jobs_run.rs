//! Property: a random script of registrations, removals, submissions and
//! drains, run while another thread floods the board, agrees with a simple
//! model. A knowledge source sees only entries submitted while it was
//! registered; after a drain it has seen every one of them exactly once; and
//! a removed one never sees anything submitted after its removal.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use hark_board::{Board, Entry, KnowledgeSource, KsId};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Register { ty: usize, serial: bool },
    Remove(usize),
    Submit { ty: usize, key: u64 },
    Drain,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..3, any::<bool>()).prop_map(|(ty, serial)| Step::Register { ty, serial }),
        (0usize..8).prop_map(Step::Remove),
        (0usize..3, 0u64..4).prop_map(|(ty, key)| Step::Submit { ty, key }),
        (0usize..3, 0u64..4).prop_map(|(ty, key)| Step::Submit { ty, key }),
        Just(Step::Drain),
    ]
}

struct Reg {
    id: KsId,
    ty: usize,
    seen: Arc<Mutex<Vec<u64>>>,
    expected: BTreeSet<u64>,
    removed: bool,
    /// What it must have seen for sure: everything up to the last drain
    /// before its removal.
    certain: BTreeSet<u64>,
}

fn run(script: Vec<Step>) {
    let board = Board::new(2);
    let types: Vec<_> = (0..3).map(|t| board.intern(&format!("t{t}"))).collect();
    let noise = board.intern("noise");
    let level = board.create_level("p");
    board
        .register(level, KnowledgeSource::new("sink", &[noise], |_, _| {}))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let (board, stop) = (board.clone(), stop.clone());
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                board
                    .submit_keyed(level, i % 3, Entry::new(noise, i))
                    .unwrap();
                i += 1;
            }
        })
    };

    let mut regs: Vec<Reg> = Vec::new();
    let mut next = 0u64;
    for s in script {
        match s {
            Step::Register { ty, serial } => {
                let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
                let rec = seen.clone();
                let ks = KnowledgeSource::new("k", &[types[ty]], move |_, e| {
                    rec.lock().unwrap().push(*e[0].get::<u64>().unwrap());
                });
                let ks = if serial { ks.serial_by_key() } else { ks };
                let id = board.register(level, ks).unwrap();
                regs.push(Reg {
                    id,
                    ty,
                    seen,
                    expected: BTreeSet::new(),
                    removed: false,
                    certain: BTreeSet::new(),
                });
            }
            Step::Remove(i) => {
                if let Some(r) = regs.get_mut(i) {
                    assert_eq!(board.remove(r.id), !r.removed);
                    r.removed = true;
                }
            }
            Step::Submit { ty, key } => {
                board
                    .submit_keyed(level, key, Entry::with_bytes(types[ty], next, 8))
                    .unwrap();
                for r in regs.iter_mut().filter(|r| !r.removed && r.ty == ty) {
                    r.expected.insert(next);
                }
                next += 1;
            }
            Step::Drain => {
                board.drain();
                for r in regs.iter_mut().filter(|r| !r.removed) {
                    r.certain = r.expected.clone();
                }
            }
        }
    }
    board.drain();
    for (i, r) in regs.iter().enumerate() {
        let seen = r.seen.lock().unwrap();
        let set: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(set.len(), seen.len(), "reg {i}: an entry seen twice");
        assert!(
            set.is_subset(&r.expected),
            "reg {i}: saw {set:?}, allowed {:?}",
            r.expected
        );
        if r.removed {
            assert!(
                r.certain.is_subset(&set),
                "reg {i}: missed entries before a drain"
            );
        } else {
            assert_eq!(
                set, r.expected,
                "reg {i}: live and drained, must have seen all"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    board.drain();
    let stats = board.stats();
    assert_eq!(stats.levels[0].entries_live, 0);
    assert_eq!(stats.levels[0].bytes_live, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn registration_and_removal_follow_a_model_while_jobs_run(
        script in prop::collection::vec(step(), 0..80)
    ) {
        run(script);
    }
}
