//! Partial results merge: the ranks of one program split arbitrarily
//! between independent servers (some feeding by hand, some through a board),
//! their partials sent as bytes and merged in any order, give exactly the
//! model one server builds — every count, matrix, wait state and derived
//! value.

mod common;
use common::*;
use hark_analyses::{registry, Partial};
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn any_split_between_servers_merges_into_the_single_server_model(
        ranks in 2usize..6,
        seed in any::<u64>(),
        assign in proptest::collection::vec(0usize..3, 6),
        board_for in 0usize..3,
    ) {
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
        prop_assert_eq!(&forward, &single);
        prop_assert_eq!(&backward, &single);
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
