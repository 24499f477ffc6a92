//! Every analysis's results, byte for byte, against those recorded before
//! the engine's hot path was last reworked: 180 random programs (one to six
//! ranks of [`common::busy`]) fed by hand and through a board with two
//! workers, each model's JSON reduced to a 64-bit FNV-1a digest. A change
//! that is only meant to make the engine faster must leave every digest as
//! it is.
//!
//! A change that means to alter results records the new digests:
//! `HARK_RECORD_MODELS=1 cargo test -p hark-analyses --test
//! random_programs_give_the_recorded_models -- --nocapture --test-threads=1`,
//! whose lines (without the `quarter` headers) replace
//! `fixtures/recorded_models.txt` (the test itself writes no file).

mod common;
use common::*;

/// `(ranks, seed, fed by hand, digest)` per line, as recorded.
const RECORDED: &str = include_str!("fixtures/recorded_models.txt");

/// The number of random programs.
const PROGRAMS: u64 = 180;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The two digests of each program in `programs`, in the order `RECORDED`
/// lists them.
fn digests(programs: std::ops::Range<u64>) -> Vec<String> {
    let mut lines = Vec::new();
    for program in programs {
        let ranks = 1 + (program % 6) as i32;
        let seed = 0x5eed_0000 + program * 7919;
        let procs: Vec<Proc> = (0..ranks)
            .map(|r| busy(r, ranks, seed.wrapping_add(r as u64)))
            .collect();
        for (how, model) in [("hand", run(&procs)), ("board", run_on_board(&procs, 2))] {
            let text = serde_json::to_string(&model).unwrap();
            lines.push(format!(
                "{ranks} {seed} {how} {:016x}",
                fnv1a(text.as_bytes())
            ));
        }
    }
    lines
}

/// Compares the programs of one quarter (the four run in parallel).
fn quarter(k: u64) {
    let programs = k * PROGRAMS / 4..(k + 1) * PROGRAMS / 4;
    let got = digests(programs.clone());
    if std::env::var_os("HARK_RECORD_MODELS").is_some() {
        println!("quarter {k}\n{}", got.join("\n"));
        return;
    }
    let recorded: Vec<&str> = RECORDED.lines().collect();
    let recorded =
        &recorded[2 * programs.start as usize..(2 * programs.end as usize).min(recorded.len())];
    assert_eq!(
        recorded.len(),
        got.len(),
        "a digest per program and way of feeding"
    );
    let differ: Vec<String> = (got.iter().zip(recorded))
        .filter(|(g, r)| g != r)
        .map(|(g, r)| format!("got {g}, recorded {r}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} models differ:\n{}",
        differ.len(),
        got.len(),
        differ.join("\n")
    );
}

#[test]
fn random_programs_give_the_recorded_models_first_quarter() {
    quarter(0);
}

#[test]
fn random_programs_give_the_recorded_models_second_quarter() {
    quarter(1);
}

#[test]
fn random_programs_give_the_recorded_models_third_quarter() {
    quarter(2);
}

#[test]
fn random_programs_give_the_recorded_models_fourth_quarter() {
    quarter(3);
}

#[test]
fn the_digest_sees_a_changed_byte() {
    // The comparison can fail: one byte more in a model's JSON changes it.
    let procs = [busy(0, 1, 3)];
    let text = serde_json::to_string(&run(&procs)).unwrap();
    assert_ne!(fnv1a(text.as_bytes()), fnv1a(format!("{text} ").as_bytes()));
}
