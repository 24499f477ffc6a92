//! Partial results merge: the ranks of one program split arbitrarily
//! between independent servers (some feeding by hand, some through a board),
//! their partials sent as bytes and merged in any order, give exactly the
//! model one server builds — every count, matrix, wait state and derived
//! value.

mod common;
use common::*;
use hark_analyses::registry;
use hark_engine::Partial;
use proptest::prelude::*;

fn through_bytes(p: Partial) -> Partial {
    Partial::from_bytes(&p.to_bytes()).expect("a partial reads back")
}

fn merged(mut parts: Vec<Partial>) -> serde_json::Value {
    let analyses = registry::all();
    let mut first = parts.remove(0);
    for p in parts {
        first
            .merge(p, &analyses)
            .expect("partials of one program merge");
    }
    json(&first.finish(&analyses, false))
}

/// Splits `ranks` ranks of one random program between three servers as
/// `assign` says (one of them, `board_for`, through a board), merges their
/// partials both ways round and compares with the single server's model.
fn split_merges_into_single(
    ranks: usize,
    seed: u64,
    assign: &[usize],
    board_for: usize,
) -> Result<(), TestCaseError> {
    let procs: Vec<Proc> = (0..ranks)
        .map(|r| busy(r as i32, ranks as i32, seed.wrapping_add(r as u64) | 1))
        .collect();
    let single = json(&run(&procs));
    let mut servers: Vec<Vec<(u64, &Proc)>> = vec![Vec::new(); 3];
    for (i, p) in procs.iter().enumerate() {
        servers[assign[i]].push((i as u64, p));
    }
    let parts: Vec<Partial> = servers
        .iter()
        .enumerate()
        .map(|(s, procs)| {
            let p = if s == board_for {
                on_board("busy", procs, 2).1
            } else {
                partial_by_hand("busy", procs, Default::default())
            };
            through_bytes(p)
        })
        .collect();
    // (a + b) + c, and c + (b + a): associative and commutative.
    let forward = merged(parts.clone());
    let mut reversed = parts;
    reversed.reverse();
    let backward = merged(reversed);
    for (name, got) in [("forward", &forward), ("backward", &backward)] {
        let mut diffs = Vec::new();
        differences("", got, &single, &mut diffs);
        prop_assert!(
            diffs.is_empty(),
            "{name} merge differs from the single server at: {diffs:#?}"
        );
    }
    Ok(())
}

/// Where two JSON values differ, as paths with both values (the first 20).
fn differences(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    if out.len() >= 20 || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (u, v) = (x.get(k), y.get(k));
                let null = Value::Null;
                differences(
                    &format!("{at}.{k}"),
                    u.unwrap_or(&null),
                    v.unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(&format!("{at}[{i}]"), u, v, out);
            }
        }
        _ => out.push(format!("{at}: merged {a}, single {b}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn any_split_between_servers_merges_into_the_single_server_model(
        ranks in 2usize..6,
        seed in any::<u64>(),
        assign in proptest::collection::vec(0usize..3, 6),
        board_for in 0usize..3,
    ) {
        split_merges_into_single(ranks, seed, &assign, board_for)?;
    }
}

/// A wait judged Late Sender on one side of a split and Late Sender /
/// Wrong Order on the other would be wrong: the judgement must not
/// depend on which server saw which rank, nor on the order partials meet.
#[test]
fn wrong_order_does_not_depend_on_the_split() {
    let cases: [(usize, u64, [usize; 6], usize); 4] = [
        (4, 587603952362497680, [2, 2, 1, 1, 1, 2], 2),
        (3, 2419425593199480957, [2, 0, 0, 0, 2, 1], 0),
        (4, 16286999432405394088, [2, 0, 1, 1, 2, 2], 0),
        // Two threads' MPI_Waitall calls whose receives shared a number.
        (4, 509189730473479082, [1, 0, 0, 0, 0, 0], 0),
    ];
    for (ranks, seed, assign, board_for) in cases {
        if let Err(e) = split_merges_into_single(ranks, seed, &assign, board_for) {
            panic!("ranks {ranks}, seed {seed}, assign {assign:?}, board {board_for}: {e}");
        }
    }
}

#[test]
fn partials_of_different_analyses_do_not_merge() {
    let procs = [busy(0, 1, 3)];
    let all: Vec<(u64, &Proc)> = vec![(0, &procs[0])];
    let mut a = partial_by_hand("busy", &all, Default::default());
    let b = a.clone();
    let fewer = registry::select(&["summary"]).unwrap();
    let err = a.merge(b, &fewer).unwrap_err();
    assert!(err.to_string().contains("different analyses"), "{err}");
    assert!(Partial::from_bytes(b"not a partial").is_err());
}

#[test]
fn a_communicator_folded_on_one_server_only_still_matches() {
    // Rank 0's server folds the duplicate of the world past the cap, rank
    // 1's keeps it an id of its own. Merged either way round, with either
    // through a board, their waits on it are found as one server finds
    // them. (Its profile rows may stay two: which communicators keep ids
    // of their own past a cap depends on the order tables meet.)
    let procs = folded_on_rank_0s_server_only();
    let single = run(&procs);
    let waits = &single[0].waits;
    assert_eq!(waits["wait_barrier"].time_ns, vec![49 * MS, 0]);
    assert_eq!(waits["late_sender"].time_ns, vec![40 * MS, 40 * MS]);
    for board_for in 0..2 {
        let parts: Vec<Partial> = (0..2)
            .map(|r| {
                let one = [(r as u64, &procs[r])];
                through_bytes(if r == board_for {
                    on_board("busy", &one, 2).1
                } else {
                    partial_by_hand("busy", &one, Default::default())
                })
            })
            .collect();
        for parts in [parts.clone(), parts.into_iter().rev().collect()] {
            let mut merged = parts;
            let mut first = merged.remove(0);
            let analyses = registry::all();
            for p in merged {
                first.merge(p, &analyses).unwrap();
            }
            let got = first.finish(&analyses, false);
            for pattern in ["wait_barrier", "late_sender"] {
                assert_eq!(
                    got[0].waits[pattern].time_ns, waits[pattern].time_ns,
                    "{pattern}, board for rank {board_for}"
                );
            }
            let unmatched = (got[0].diagnostics.iter())
                .filter(|d| d.starts_with("matching:"))
                .collect::<Vec<_>>();
            assert!(unmatched.is_empty(), "{unmatched:?}");
        }
    }
}
