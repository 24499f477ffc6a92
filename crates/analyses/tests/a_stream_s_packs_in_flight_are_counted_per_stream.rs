//! An analyser of several bounds each stream's packs waiting for analysis
//! (`docs/analysers.md`, "Flow control"): its server reads a stream only
//! while `StreamInfo::in_flight` is under `hark_engine::exchange::
//! stream_backlog`. That count must be the stream's own packs, from their
//! submission until every analysis folded them, and nothing of another
//! stream's. Here an analysis holds every fold at a gate: what two streams
//! submitted is all in flight, each stream's on its own count, and once the
//! gate opens and the level drains, both counts are back at zero.

mod common;
use common::*;
use hark_analyses::{
    Analysis, DynAnalysis, Finish, IdMap, Input, RankState, Sensitivity, Spec, StreamCx,
};
use hark_engine::{Config, OnBoard, ProgramAnalysis};
use hark_model::Program;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Condvar, Mutex};

/// Closed until the test opens it; every fold waits for it.
static GATE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

fn open_gate() {
    *GATE.0.lock().unwrap() = true;
    GATE.1.notify_all();
}

#[derive(Default, Serialize, Deserialize)]
struct Held;

impl RankState for Held {
    fn fold(&mut self, _: &StreamCx<'_>, _: &Input<'_>) {
        let mut open = GATE.0.lock().unwrap();
        while !*open {
            open = GATE.1.wait(open).unwrap();
        }
    }
    fn remap(&mut self, _: &IdMap) {}
}

struct HeldAnalysis;

static HELD: Spec = Spec {
    name: "held",
    description: "Folds nothing until the test opens its gate.",
    sensitivities: &[Sensitivity::Events],
    fills: &[],
};

impl Analysis for HeldAnalysis {
    type Rank = Held;
    fn spec(&self) -> &'static Spec {
        &HELD
    }
    fn new_rank(&self) -> Held {
        Held
    }
    fn finish(&self, _: &Finish<'_>, _: &[&Held], _: &mut Program) {}
}

#[test]
fn each_stream_counts_its_own_packs_until_they_are_analysed() {
    let analyses: Vec<Arc<dyn DynAnalysis>> = vec![Arc::new(HeldAnalysis)];
    let program = ProgramAnalysis::new("held", 0, analyses, Config::default());
    let board = hark_board::Board::new(2);
    let on = OnBoard::install(&board, program).unwrap();
    let mut submitted = Vec::new();
    let mut infos = Vec::new();
    for (conn, (rank, packs)) in [(0, 3), (1, 1)].into_iter().enumerate() {
        let proc = busy(rank, 2, 5 + rank as u64).rebatched(200);
        let info = Arc::new(on.program().stream_info(conn as u64, proc.hello.clone(), 0));
        let mut bytes = 0u64;
        let mut left = packs;
        for step in &proc.steps {
            match step {
                Step::Rank(r) => info.set_rank(r.clone()),
                Step::Defs(d) => on.defs(&info, d.clone()).unwrap(),
                Step::Pack(e) if left > 0 => {
                    on.pack(&info, e).unwrap();
                    bytes += (e.len() * hark_wire::EVENT_SIZE) as u64;
                    left -= 1;
                }
                _ => {}
            }
        }
        assert_eq!(left, 0, "rank {rank}'s script has fewer than {packs} packs");
        submitted.push(bytes);
        infos.push(info);
    }
    // Nothing is folded while the gate is closed: every pack is in flight,
    // on its own stream's count.
    assert_eq!(infos[0].in_flight(), submitted[0]);
    assert_eq!(infos[1].in_flight(), submitted[1]);
    assert!(on.in_flight() >= submitted[0] + submitted[1]);

    open_gate();
    on.drain();
    assert_eq!(infos[0].in_flight(), 0);
    assert_eq!(infos[1].in_flight(), 0);
    assert_eq!(on.in_flight(), 0);
    board.shutdown();
}
