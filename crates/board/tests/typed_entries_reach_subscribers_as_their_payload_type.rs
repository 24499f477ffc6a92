//! A kind of entry declared once as a constant carries its payload type from
//! the publisher to the subscriber: entries published through it reach a
//! knowledge source subscribed to it as that type, on the key they were
//! published with, from outside the board and from inside an operation. An
//! entry made under the kind's name with another payload never reaches the
//! subscriber: it is skipped and reported as the subscriber's error.

use std::sync::{Arc, Mutex};

use hark_board::{Board, Entry, EntryKind, KnowledgeSource};

/// Numbers, one batch per entry.
const NUMBERS: EntryKind<Vec<u64>> = EntryKind::new("numbers");
/// The sum of one batch of numbers.
const SUMS: EntryKind<u64> = EntryKind::new("sums");

/// What is published: per key, a batch of numbers (or, for `None`, an entry
/// named like the kind that holds a string instead).
struct Case {
    published: &'static [(u64, Option<&'static [u64]>)],
    /// The sums the subscriber to `SUMS` sees, with their keys, sorted.
    sums: &'static [(u64, u64)],
    /// Errors the subscriber to `NUMBERS` reports.
    errors: u64,
}

const CASES: &[Case] = &[
    Case {
        published: &[(0, Some(&[1, 2, 3])), (7, Some(&[10])), (7, Some(&[]))],
        sums: &[(0, 6), (7, 0), (7, 10)],
        errors: 0,
    },
    Case {
        published: &[(1, None), (2, Some(&[4, 4])), (3, None)],
        sums: &[(2, 8)],
        errors: 2,
    },
];

#[test]
fn typed_entries_reach_subscribers_as_their_payload_type() {
    for (i, case) in CASES.iter().enumerate() {
        let board = Board::new(2);
        let level = board.create_level("program");
        let (numbers, sums) = (board.typed(&NUMBERS), board.typed(&SUMS));
        assert_eq!(
            numbers.ty(),
            board.typed(&NUMBERS).ty(),
            "one kind, one type"
        );
        assert_eq!(board.type_name(numbers.ty()).as_deref(), Some("numbers"));

        board
            .register(
                level,
                KnowledgeSource::on("adder", numbers, move |ctx, batch: &Vec<u64>| {
                    ctx.publish(sums, batch.iter().sum(), 8);
                }),
            )
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        board
            .register(
                level,
                KnowledgeSource::on("total", sums, move |ctx, sum: &u64| {
                    s.lock().unwrap().push((ctx.key().unwrap(), *sum));
                }),
            )
            .unwrap();

        for &(key, batch) in case.published {
            match batch {
                Some(batch) => board
                    .publish_keyed(level, numbers, key, batch.to_vec(), batch.len() * 8)
                    .unwrap(),
                None => board
                    .submit_keyed(level, key, Entry::new(numbers.ty(), "not numbers"))
                    .unwrap(),
            }
        }
        board.drain();

        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, case.sums, "case {i}");
        let stats = board.stats();
        let adder = stats
            .knowledge_sources
            .iter()
            .find(|k| k.name == "adder")
            .unwrap();
        assert_eq!(adder.errors, case.errors, "case {i}");
        assert_eq!(adder.panics, 0, "case {i}");
        assert_eq!(stats.levels[0].entries_live, 0, "case {i}");
        board.shutdown();
    }
}
