//! Keys routed between analysers (`docs/analysers.md`): the ranks of one
//! random program split between two or three boards linked by an
//! [`Exchange`] each, whose parcels are carried by hand while the streams
//! are fed (in the order each board queued them, as MPI carries them), give
//! the single server's model — every count, matrix, wait state and derived
//! value — and every match is completed where its key lives: the merge at
//! the end has nothing left to match.

mod common;
use common::*;
use hark_analyses::registry;
use hark_engine::exchange::{Exchange, Parcel};
use hark_engine::{OnBoard, Partial, StreamAccounting};
use proptest::prelude::*;
use std::sync::Arc;

/// Moves every parcel queued so far from each board to its destination;
/// returns how many moved.
fn carry(exchanges: &[Arc<Exchange>], boards: &[OnBoard]) -> usize {
    let mut moved = 0;
    for (from, x) in exchanges.iter().enumerate() {
        for (to, board) in boards.iter().enumerate() {
            let bytes = x.take(to as u32);
            let mut at = 0;
            while at < bytes.len() {
                let size = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
                let parcel = Parcel::read(&bytes[at + 4..at + 4 + size]).expect("a parcel reads");
                board
                    .inject(from as u32, parcel)
                    .expect("a parcel is taken in");
                at += 4 + size;
                moved += 1;
            }
        }
    }
    moved
}

fn linked_boards_give_the_single_model(
    ranks: usize,
    seed: u64,
    assign: &[usize],
    analysers: usize,
) -> Result<(), TestCaseError> {
    let procs: Vec<Proc> = (0..ranks)
        .map(|r| busy(r as i32, ranks as i32, seed.wrapping_add(r as u64) | 1))
        .collect();
    let single = json(&run(&procs));
    let got = json(&linked_model(&procs, assign, analysers)?);
    prop_assert!(
        got == single,
        "linked boards differ from the single server: {}",
        first_difference("", &got, &single)
    );
    Ok(())
}

/// Feeds `procs` (rank `r` to board `assign[r] % analysers`), checks that
/// every match was completed where its key lives (the parts leave
/// unmatched what the single server does), and merges the parts.
fn linked_model(
    procs: &[Proc],
    assign: &[usize],
    analysers: usize,
) -> Result<Vec<hark_model::Program>, TestCaseError> {
    let ranks = procs.len();
    let owner = |r: usize| assign[r] % analysers;
    let owners: Vec<u32> = (0..ranks).map(|r| owner(r) as u32).collect();
    let board = hark_board::Board::new(2);
    let exchanges: Vec<Arc<Exchange>> = (0..analysers)
        .map(|a| Arc::new(Exchange::new(a as u32, analysers as u32, owners.clone())))
        .collect();
    let boards: Vec<OnBoard> = exchanges
        .iter()
        .map(|x| {
            let job = &procs[0].hello.job;
            OnBoard::install_exchanging(&board, program("busy", Default::default()), x.clone(), job)
                .unwrap()
        })
        .collect();
    let infos: Vec<_> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Arc::new(
                boards[owner(i)]
                    .program()
                    .stream_info(i as u64, p.hello.clone(), p.offset_ns),
            )
        })
        .collect();
    let mut accs = vec![StreamAccounting::default(); ranks];
    let mut carried = 0;
    let longest = procs.iter().map(|p| p.steps.len()).max().unwrap_or(0);
    for step in 0..longest {
        for (k, p) in procs.iter().enumerate() {
            let on = &boards[owner(k)];
            match p.steps.get(step) {
                Some(Step::Rank(r)) => infos[k].set_rank(r.clone()),
                Some(Step::Defs(d)) => on.defs(&infos[k], d.clone()).unwrap(),
                Some(Step::Pack(e)) => {
                    accs[k].received += e.len() as u64;
                    on.pack(&infos[k], e).unwrap();
                }
                Some(Step::Counts(c)) => {
                    accs[k].received += c.events;
                    on.counts(&infos[k], c.clone()).unwrap();
                }
                Some(Step::End) => accs[k].end = Some(end_frame(p.events_in_packs())),
                None => {}
            }
        }
        // Parcels travel while the streams go on.
        carried += carry(&exchanges, &boards);
    }
    // The end: analyse, flush the trackers, and carry until nothing moves
    // (operations, then the wait states they yield).
    for b in &boards {
        b.drain();
        b.flush_unpackers();
    }
    loop {
        boards.iter().for_each(OnBoard::drain);
        match carry(&exchanges, &boards) {
            0 => break,
            n => carried += n,
        }
    }
    let mut parts: Vec<Partial> = Vec::new();
    for (a, b) in boards.iter().enumerate() {
        let mine: Vec<_> = (0..ranks)
            .filter(|&r| owner(r) == a)
            .map(|r| (infos[r].clone(), accs[r].clone()))
            .collect();
        parts.push(b.finish_partial(mine));
    }
    board.shutdown();
    let analyses = registry::all();
    // Every key's matcher lives on one board: what the parts leave
    // unmatched, each folded alone, adds up to what the single server left
    // (left to the merge, both sides of every split pair would count).
    let mut left = [0u64; 3];
    for part in &parts {
        let l = unmatched(&part.clone().finish(&analyses, false));
        for (a, b) in left.iter_mut().zip(l) {
            *a += b;
        }
    }
    prop_assert_eq!(
        left,
        unmatched(&run(procs)),
        "unmatched sends, receives, arrivals"
    );
    let split = (0..ranks).any(|r| owner(r) != owner(0));
    prop_assert!(!split || carried > 0, "nothing crossed between boards");
    let mut merged = parts.remove(0);
    for p in parts {
        merged.merge(p, &analyses).unwrap();
    }
    Ok(merged.finish(&analyses, false))
}

/// Sends, receives and collective arrivals left unmatched, from the
/// diagnostics.
fn unmatched(programs: &[hark_model::Program]) -> [u64; 3] {
    let number = |d: &str, after: &str| -> u64 {
        d.split_once(after)
            .map(|(_, rest)| rest)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let mut out = [0; 3];
    for d in programs.iter().flat_map(|p| &p.diagnostics) {
        if d.contains("found no partner") {
            out[0] += number(d, "matching: ");
            out[1] += number(d, " sends and ");
        } else if d.contains("arrivals at collectives") {
            out[2] += number(d, "matching: ");
        }
    }
    out
}

/// The first place two JSON values differ.
fn first_difference(at: &str, a: &serde_json::Value, b: &serde_json::Value) -> String {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let null = Value::Null;
                let (u, v) = (x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null));
                if u != v {
                    return first_difference(&format!("{at}.{k}"), u, v);
                }
            }
            String::new()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if u != v {
                    return first_difference(&format!("{at}[{i}]"), u, v);
                }
            }
            String::new()
        }
        _ => format!("{at}: linked {a}, single {b}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn any_split_between_linked_boards_gives_the_single_server_model(
        ranks in 2usize..6,
        seed in any::<u64>(),
        assign in proptest::collection::vec(0usize..3, 6),
        analysers in 2usize..4,
    ) {
        linked_boards_give_the_single_model(ranks, seed, &assign, analysers)?;
    }
}

#[test]
fn every_rank_on_another_board_than_its_neighbours() {
    // Round-robin over 3 boards: every pair of neighbours split.
    linked_boards_give_the_single_model(5, 12345, &[0, 1, 2, 0, 1, 2], 3).unwrap();
}

#[test]
fn a_communicator_folded_on_one_analyser_only_still_matches() {
    // Rank 0's analyser folds the duplicate of the world past the cap,
    // rank 1's keeps it an id of its own: their waits on it are found all
    // the same, whichever analyser matches the barrier (by its members)
    // and each message (by its receiver).
    // (Its profile rows may stay two: which communicators keep ids of
    // their own past a cap depends on the order tables meet.)
    let procs = folded_on_rank_0s_server_only();
    let single = run(&procs);
    assert_eq!(single[0].waits["wait_barrier"].time_ns, vec![49 * MS, 0]);
    assert_eq!(
        single[0].waits["late_sender"].time_ns,
        vec![40 * MS, 40 * MS]
    );
    for assign in [[0, 1], [1, 0]] {
        let got = linked_model(&procs, &assign, 2).unwrap();
        assert_eq!(
            serde_json::to_value(&got[0].waits).unwrap(),
            serde_json::to_value(&single[0].waits).unwrap(),
            "analysers {assign:?}"
        );
    }
}

#[test]
fn a_message_on_a_communicator_duplicated_hundreds_of_times_matches_across_analysers() {
    // Both ranks duplicate the world 300 times (the first 63 keep ids of
    // their own, the rest are folded on every analyser), then rank 1 sends
    // on the last, 40 ms after rank 0 began to receive. Its occurrence, 300,
    // shares its low byte with the 44th duplicate, which has an id of its
    // own: the message must still be matched as one on the 300th.
    let dups = |first: u32| {
        (0..=300)
            .map(|i| comm(first + i, &[0, 1]))
            .collect::<Vec<_>>()
    };
    let on = |first: u32| first + 300;
    let rank0 = Proc::mpi("busy", 0, 2)
        .defs(dups(1))
        .pack(vec![mpi("MPI_Recv", 60 * MS, 100 * MS)
            .obj(on(1))
            .peer(1)
            .tag(5)
            .bytes(8)])
        .end();
    let rank1 = Proc::mpi("busy", 1, 2)
        .defs(dups(1000))
        .pack(vec![mpi("MPI_Send", 100 * MS, 100 * MS + 10)
            .obj(on(1000))
            .peer(0)
            .tag(5)
            .bytes(8)])
        .end();
    let procs = [rank0, rank1];
    let single = run(&procs);
    assert_eq!(single[0].waits["late_sender"].time_ns, vec![40 * MS, 0]);
    let got = linked_model(&procs, &[0, 1], 2).unwrap();
    assert_eq!(got[0].waits["late_sender"].time_ns, vec![40 * MS, 0]);
}
