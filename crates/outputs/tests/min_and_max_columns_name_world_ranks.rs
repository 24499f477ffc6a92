//! The min/max columns name world ranks, not indices into the per-rank
//! arrays: the two differ when a rank never connected (killed, aborted, as
//! after `MPI_Abort`) or a program is the second of an MPMD launch, which
//! shifts every later rank down.

mod common;

use hark_model::Spread;

#[test]
fn the_second_program_of_an_mpmd_run_names_its_own_world_ranks() {
    let run = common::two_programs();
    let atmos = &run.programs[1];
    let worlds: Vec<i32> = atmos.rank_info.iter().map(|r| r.world_rank).collect();
    assert_eq!(worlds, [4, 5], "the fixture's second program");
    let text = hark_outputs::summary::render(&run);
    let section = &text[text.find("== atmos").expect("an atmos section")..];
    assert!(
        section.contains("(r4)") || section.contains("(r5)"),
        "{section}"
    );
    assert!(
        !section.contains("(r0)") && !section.contains("(r1)"),
        "{section}"
    );
}

#[test]
fn a_missing_rank_does_not_shift_the_names_of_the_others() {
    // Rank 0 aborted before it connected: world ranks 1 and 2 remain.
    let mut run = common::two_programs();
    let p = &mut run.programs[1];
    for (info, w) in p.rank_info.iter_mut().zip([1, 2]) {
        info.world_rank = w;
    }
    for f in p.mpi.values_mut() {
        f.time_ns = vec![10, 30];
        f.time_across_ranks = Spread::of(&[10.0, 30.0]);
    }
    let html = hark_outputs::html::render(&run, &hark_outputs::html::Options { graphviz: false });
    let atmos = &html[html.find("atmos").unwrap()..];
    assert!(
        atmos.contains("(rank 2)"),
        "the slower rank is world rank 2"
    );
    let text = hark_outputs::summary::render(&run);
    let section = &text[text.find("== atmos").unwrap()..];
    assert!(
        section.contains("(r1)") && section.contains("(r2)"),
        "{section}"
    );
}
