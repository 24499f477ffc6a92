//! A live snapshot must not stop the analysis. Here a snapshot is
//! caught in the middle of saving a rank's state: the state's `Serialize`,
//! on the snapshot's thread, hands the rank one more pack and waits until
//! the rank's analysis has folded it. If the snapshot held the state while
//! saving it, the fold would wait for the snapshot and the snapshot for the
//! fold: the wait gives up (after 30 s, only so that the test ends) and the
//! test fails. With states copied on write, the worker folds into a copy of
//! its own, the snapshot keeps the state as it was, and nobody waits.

mod common;
use common::*;
use hark_analyses::{
    Analysis, DynAnalysis, Finish, IdMap, Input, RankState, Sensitivity, Spec, StreamCx,
};
use hark_engine::{Config, OnBoard, ProgramAnalysis, StreamAccounting};
use hark_model::Program;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Packs folded by the gate, over all states.
static FOLDS: AtomicU64 = AtomicU64::new(0);
/// Called by the first save on the snapshot's thread; says whether the
/// rank's analysis folded a pack meanwhile.
static HOOK: OnceLock<Box<dyn Fn() -> bool + Send + Sync>> = OnceLock::new();
static HOOKED: AtomicBool = AtomicBool::new(false);
static FOLDED_DURING_SAVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set on the thread that takes the snapshot.
    static SNAPSHOTTING: Cell<bool> = const { Cell::new(false) };
}

/// Counts its packs; its saving is the trap described above.
#[derive(Default, Deserialize)]
struct Gate {
    folds: u64,
}

impl Serialize for Gate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if SNAPSHOTTING.with(Cell::get) && !HOOKED.swap(true, Ordering::SeqCst) {
            let folded = HOOK.get().expect("the hook is set")();
            FOLDED_DURING_SAVE.store(folded, Ordering::SeqCst);
        }
        let mut st = s.serialize_struct("Gate", 1)?;
        st.serialize_field("folds", &self.folds)?;
        st.end()
    }
}

impl RankState for Gate {
    fn fold(&mut self, _: &StreamCx<'_>, input: &Input<'_>) {
        if !input.events.is_empty() {
            self.folds += 1;
            FOLDS.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn remap(&mut self, _: &IdMap) {}
}

struct GateAnalysis;

static GATE: Spec = Spec {
    name: "gate",
    description: "Counts packs; waits for a fold while a snapshot saves it.",
    sensitivities: &[Sensitivity::Events],
    fills: &[],
};

impl Analysis for GateAnalysis {
    type Rank = Gate;
    fn spec(&self) -> &'static Spec {
        &GATE
    }
    fn new_rank(&self) -> Gate {
        Gate::default()
    }
    fn finish(&self, _: &Finish<'_>, ranks: &[&Gate], out: &mut Program) {
        let folds: u64 = ranks.iter().map(|r| r.folds).sum();
        out.diagnostics.push(format!("gate: {folds} packs"));
    }
}

fn packs_said(p: &[Program]) -> String {
    p[0].diagnostics
        .iter()
        .find(|d| d.starts_with("gate: "))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_rank_folds_on_while_a_snapshot_saves_its_state() {
    let analyses: Vec<Arc<dyn DynAnalysis>> = vec![Arc::new(GateAnalysis)];
    let program = ProgramAnalysis::new("gated", 0, analyses, Config::default());
    let board = hark_board::Board::new(2);
    let on = Arc::new(OnBoard::install(&board, program).unwrap());
    let proc = busy(0, 1, 9).rebatched(500);
    let info = Arc::new(on.program().stream_info(1, proc.hello.clone(), 0));
    let mut packs = Vec::new();
    for step in &proc.steps {
        match step {
            Step::Rank(r) => info.set_rank(r.clone()),
            Step::Defs(d) => on.defs(&info, d.clone()).unwrap(),
            Step::Pack(e) => packs.push(e.clone()),
            _ => {}
        }
    }
    assert!(packs.len() >= 3, "the script has {} packs", packs.len());
    let last = packs.pop().unwrap();
    for p in &packs {
        on.pack(&info, p).unwrap();
    }
    on.drain();
    let before = FOLDS.load(Ordering::SeqCst);
    assert_eq!(before, packs.len() as u64);

    let (on2, info2) = (on.clone(), info.clone());
    let _ = HOOK.set(Box::new(move || {
        on2.pack(&info2, &last).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if FOLDS.load(Ordering::SeqCst) > before {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }));
    let ranks = vec![(info.clone(), StreamAccounting::default())];
    SNAPSHOTTING.with(|s| s.set(true));
    let snapshot = on.snapshot(&ranks);
    SNAPSHOTTING.with(|s| s.set(false));

    assert!(
        HOOKED.load(Ordering::SeqCst),
        "the snapshot saved the state"
    );
    assert!(
        FOLDED_DURING_SAVE.load(Ordering::SeqCst),
        "the rank's analysis waited for the snapshot to finish saving its state"
    );
    let contention = on.contention();
    assert_eq!(contention.stalls, 0, "{contention:?}");
    assert_eq!(contention.copies, 1, "the worker folded into its own copy");
    // The snapshot is the state as it was when it was taken.
    assert_eq!(packs_said(&snapshot), format!("gate: {before} packs"));

    let done = on.finish(ranks);
    assert_eq!(packs_said(&done), format!("gate: {} packs", before + 1));
    board.shutdown();
}
