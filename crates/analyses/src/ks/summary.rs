//! The rank summary: when each rank was alive (first to last event, on the
//! common timeline), how much of it was spent inside MPI, and the program's
//! wall time. Every other result is read against these.
//!
//! When some knowledge source looks across ranks, the tracker gathers the
//! same of each pack in its pass over the events (`Times`): the summary
//! folds that instead of walking the events a second time.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::Program;
use hark_wire::op;
use serde::{Deserialize, Serialize};

/// See the module documentation.
pub struct Summary;

static SPEC: Spec = Spec {
    name: "summary",
    description: "Per rank: first and last event on the common timeline and time inside MPI; the program's wall time.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["wall_ns", "rank_wall_ns", "mpi_time_ns"],
};

#[derive(Serialize, Deserialize)]
pub struct Rank {
    first: u64,
    last: u64,
    mpi: u64,
    unknown: u64,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        // A sampled-out rank's totals: its MPI time stays exact, its span
        // runs from the first to the last event counted.
        if let Some(c) = input.counts.filter(|c| c.events > 0) {
            for cell in &c.cells {
                match op::kind(cell.op) {
                    op::OpKind::Mpi(_) => self.mpi.sat(cell.time_ns),
                    op::OpKind::Unknown => self.unknown += cell.calls,
                    _ => {}
                }
            }
            self.first = self.first.min(cx.common(c.since_ns));
            self.last = self.last.max(cx.common(c.until_ns));
        }
        if let Some(t) = input.times {
            // The tracker gathered the same of this pack in its pass (some
            // knowledge source looks across ranks): not walked again.
            self.mpi.sat(t.mpi_all_ns);
            self.unknown += t.unknown;
            if t.first != u64::MAX {
                self.first = self.first.min(t.first);
                self.last = self.last.max(t.last);
            }
            return;
        }
        let events = input.events;
        let (mut first, mut last) = (u64::MAX, 0u64);
        for ev in events {
            let (s, e) = (ev.start.get(), ev.end.get());
            match op::kind(ev.op()) {
                op::OpKind::Mpi(_) => self.mpi.sat(e.saturating_sub(s)),
                // Detail records repeat their call's times; samples span
                // the time between two readings, not the program's work.
                op::OpKind::Detail | op::OpKind::Sample => continue,
                op::OpKind::Unknown => {
                    self.unknown += 1;
                    continue;
                }
                _ => {}
            }
            first = first.min(s);
            last = last.max(e);
        }
        if first != u64::MAX {
            self.first = self.first.min(cx.common(first));
            self.last = self.last.max(cx.common(last));
        }
    }
    fn remap(&mut self, _: &IdMap) {}
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
        self.mpi.sat(o.mpi);
        self.unknown += o.unknown;
    }
}

impl Analysis for Summary {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank {
            first: u64::MAX,
            last: 0,
            mpi: 0,
            unknown: 0,
        }
    }
    fn finish(&self, _: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let (mut first, mut last, mut unknown) = (u64::MAX, 0u64, 0u64);
        for r in ranks.iter().copied() {
            out.mpi_time_ns.push(r.mpi);
            if r.first == u64::MAX {
                out.rank_wall_ns.push(0);
            } else {
                out.rank_wall_ns.push(r.last.saturating_sub(r.first));
                first = first.min(r.first);
                last = last.max(r.last);
            }
            unknown += r.unknown;
        }
        out.wall_ns = last.saturating_sub(first);
        if unknown > 0 {
            out.diagnostics.push(format!(
                "summary: {unknown} events had op codes this version does not know (a newer probe?); every analysis skipped them"
            ));
        }
    }
}
