//! A knowledge source that panics costs only its own results: the others
//! finish, and the diagnostics name it (and so summary.txt and report.html,
//! which print them).

mod common;
use common::*;
use hark_analyses::{
    registry, Analysis, DynAnalysis, Finish, IdMap, Input, NoState, RankState, Sensitivity, Spec,
    StreamCx,
};
use hark_engine::{Config, ProgramAnalysis};
use hark_model::Program;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Panics on its third batch.
struct Fragile;

#[derive(Default, Serialize, Deserialize)]
struct Count(u64);

impl RankState for Count {
    fn fold(&mut self, _: &StreamCx<'_>, input: &Input<'_>) {
        if !input.events.is_empty() {
            self.0 += 1;
            assert!(self.0 < 3, "fragile broke on batch {}", self.0);
        }
    }
    fn remap(&mut self, _: &IdMap) {}
}

static FRAGILE: Spec = Spec {
    name: "fragile",
    description: "Breaks.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &[],
};

impl Analysis for Fragile {
    type Rank = Count;
    fn spec(&self) -> &'static Spec {
        &FRAGILE
    }
    fn new_rank(&self) -> Count {
        Count::default()
    }
    fn finish(&self, _: &Finish<'_>, _: &[&Count], _: &mut Program) {}
}

/// Panics when folding.
struct BrokenFold;

static BROKEN: Spec = Spec {
    name: "broken-fold",
    description: "Breaks at the end.",
    sensitivities: &[Sensitivity::ProgramEnd],
    fills: &[],
};

impl Analysis for BrokenFold {
    type Rank = NoState;
    fn spec(&self) -> &'static Spec {
        &BROKEN
    }
    fn new_rank(&self) -> NoState {
        NoState
    }
    fn finish(&self, _: &Finish<'_>, _: &[&NoState], _: &mut Program) {
        panic!("index out of bounds");
    }
}

#[test]
fn a_panicking_analysis_is_named_and_the_others_finish() {
    let mut analyses: Vec<Arc<dyn DynAnalysis>> = registry::all();
    analyses.push(Arc::new(Fragile));
    analyses.push(Arc::new(BrokenFold));
    let program = ProgramAnalysis::new("busy", 0, analyses.clone(), Config::default());
    let proc = busy(0, 1, 9).rebatched(500);
    let (_, partial) = on_board_with(program, &[(0, &proc)], 2);
    let p = partial.finish(&analyses, false).remove(0);
    let said = |what: &str| p.diagnostics.iter().any(|d| d.contains(what));
    assert!(
        said("analysis `fragile` failed") && said("fragile broke on batch"),
        "{:?}",
        p.diagnostics
    );
    assert!(
        said("analysis `broken-fold` failed while folding"),
        "{:?}",
        p.diagnostics
    );
    assert!(p.mpi.contains_key("MPI_Send"), "the others finished");
    assert!(!p.digest.is_empty() || p.efficiency.is_some());
}

/// The analyses of a row fold each input one after the other in one job: a
/// panic in one of them must not cost the others that input.
#[test]
fn the_other_analyses_fold_the_input_a_panicking_one_broke_on() {
    let proc = busy(0, 1, 9).rebatched(500);
    let model = |analyses: Vec<Arc<dyn DynAnalysis>>| {
        let program = ProgramAnalysis::new("busy", 0, analyses.clone(), Config::default());
        let (_, partial) = on_board_with(program, &[(0, &proc)], 2);
        let p = partial.finish(&analyses, false).remove(0);
        let mut json = serde_json::to_value(&p).unwrap();
        json.as_object_mut().unwrap().remove("diagnostics");
        (p.diagnostics, json)
    };
    let (_, alone) = model(registry::all());
    let mut with_fragile = registry::all();
    // First in fold order, so that it breaks before every other one folds.
    with_fragile.insert(0, Arc::new(Fragile));
    let (said, mut beside) = model(with_fragile);
    assert!(
        said.iter().any(|d| d.contains("analysis `fragile` failed")),
        "{said:?}"
    );
    // An event counts as analysed once every analysis took it: fragile took
    // its first two batches of 500.
    let analysed = &mut beside["rank_info"][0]["accounting"]["events_analysed"];
    assert_eq!(*analysed, 1000);
    *analysed = alone["rank_info"][0]["accounting"]["events_analysed"].clone();
    for (key, value) in alone.as_object().unwrap() {
        assert!(
            beside[key] == *value,
            "`{key}` changed: {value} against {}",
            beside[key]
        );
    }
}
