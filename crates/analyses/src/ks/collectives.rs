//! Collectives per communicator: calls, bytes (send side) and time of each
//! collective function, summed over the communicator's members.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::fx::FxHashMap;
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::unify::UNDEFINED;
use hark_model::{CommCollectives, Program, Totals};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct Collectives;

static SPEC: Spec = Spec {
    name: "collectives",
    description: "Calls, bytes and time of each collective function per communicator.",
    sensitivities: &[
        Sensitivity::Defs,
        Sensitivity::Events,
        Sensitivity::ProgramEnd,
    ],
    fills: &["collectives"],
};

/// Per rank: totals per communicator and function.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    /// (global comm, function) → totals.
    cells: FxHashMap<(u32, u16), Totals>,
    undefined: u64,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        let events = input.events;
        for ev in events {
            let op::OpKind::Mpi(i) = op::kind(ev.op()) else {
                continue;
            };
            if !matches!(FUNCTIONS[i].class, Class::Collective | Class::Icollective) {
                continue;
            }
            let comm = cx.comm(ev.obj.get());
            if comm == UNDEFINED {
                self.undefined += 1;
            }
            let t = self.cells.entry((comm, i as u16)).or_default();
            t.calls += 1;
            t.bytes.sat(ev.bytes.get());
            t.time_ns.sat(ev.duration());
        }
    }
    fn remap(&mut self, ids: &IdMap) {
        self.cells = std::mem::take(&mut self.cells)
            .into_iter()
            .map(|((comm, f), t)| ((ids.comm(comm), f), t))
            .collect();
    }
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        self.undefined += o.undefined;
        for (k, t) in &o.cells {
            let into = self.cells.entry(*k).or_default();
            into.calls += t.calls;
            into.bytes.sat(t.bytes);
            into.time_ns.sat(t.time_ns);
        }
    }
}

impl Analysis for Collectives {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let mut comms: BTreeMap<u32, BTreeMap<String, Totals>> = BTreeMap::new();
        let mut undefined = 0;
        for rank in ranks.iter().copied() {
            undefined += rank.undefined;
            for (&(comm, func), t) in &rank.cells {
                let into = comms
                    .entry(comm)
                    .or_default()
                    .entry(FUNCTIONS[func as usize].name.to_string())
                    .or_default();
                into.calls += t.calls;
                into.bytes.sat(t.bytes);
                into.time_ns.sat(t.time_ns);
            }
        }
        for (comm, functions) in comms {
            let members = match cx.unifier.comm(comm) {
                Some(def) => def
                    .members
                    .iter()
                    .map(|&w| cx.program_rank(w).map_or(w, |r| r as i32))
                    .collect(),
                None => Vec::new(),
            };
            out.collectives.push(CommCollectives { members, functions });
        }
        if undefined > 0 {
            out.diagnostics.push(format!(
                "collectives: {undefined} calls were on communicators never defined; they are listed under a communicator with no members"
            ));
        }
    }
}
