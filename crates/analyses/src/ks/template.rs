//! The template knowledge source: copy this file to write a new one.
//!
//! It is a real, registered analysis — iteration marks (`hark_mark("step")`
//! in the user API) become counters named `mark:<name>` whose count is how
//! many marks were set and whose min, max and mean are over the iteration
//! numbers — and it is kept small so that every line can say why it is there.
//!
//! # Adding a knowledge source
//!
//! 1. Copy this file to `ks/<your_name>.rs` and add `mod <your_name>;` in
//!    `ks/mod.rs`.
//! 2. Add one line to `registry.rs`. That is the only list there is.
//! 3. Document it in `docs/analyses.md` and, if it fills a new part of the
//!    model, in `docs/profile-json.md`.
//!
//! # Rules
//!
//! - **Threading.** `fold` is called for one rank at a time, in that rank's
//!   stream order for event batches (`Input::events`, with the messages the
//!   tracker found in `Input::msgs`), in any order for wait states
//!   (`Input::waits`, if the spec names `Waits`). Different ranks' states run
//!   on different threads at once. Keep everything in the per-rank state and
//!   nothing in `self`; `finish` runs alone, after every rank's last input.
//! - **Partial results.** The per-rank state is what a server sends another
//!   to merge: it derives serde's traits, and `remap` renumbers every global
//!   id it holds (communicators, files, names). Compute nothing derived in
//!   the state (a mean, a histogram, a spread): `finish` computes it, once,
//!   from the merged states.
//! - **Errors.** Never panic and never print. Data you cannot use (an
//!   undefined id, an impossible value) is counted in the state and reported
//!   once, in `finish`, as a sentence in `Program::diagnostics`.
//! - **Memory.** The state may grow with what the model holds (functions,
//!   names, peers, slices), never with the number of events.
//! - **Naming.** The spec's `name` is kebab-case and unique; it is how users
//!   select analyses (`--analyses mpi-profile,marks`). Model keys use the
//!   names users wrote (the mark's name), prefixed when they share a map with
//!   other kinds (`mark:`).

// Everything a knowledge source needs comes from the crate's analysis
// module (the trait and its context types) and from the wire (op codes).
use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::fx::FxHashMap;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::unify::UNDEFINED;
use crate::values::Values;
use hark_model::Program;
use hark_wire::op;
use serde::{Deserialize, Serialize};

/// Iteration marks as counters (the template knowledge source).
pub struct Marks;

// The spec is static: the registry and `hark --list-analyses` read it without
// building anything.
static SPEC: Spec = Spec {
    name: "marks",
    description: "Iteration and phase marks as counters `mark:<name>`: how many, and the iteration numbers' range and mean.",
    // Marks name their mark through a definition, so it needs the `defs`
    // (which the stream applies before any later batch) and the `batches`.
    // Each sensitivity is real: the board registers the knowledge source for
    // exactly these entry types.
    sensitivities: &[Sensitivity::Defs, Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["regions.counters"],
};

// The per-rank state: one small record per mark name. Its size grows with
// the number of distinct marks, never with the number of events.
// It is also the analysis's partial result: it serialises (a server sends
// it to another to merge), so everything in it derives serde's traits.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    marks: FxHashMap<u32, Values>,
    // Marks whose name was never defined: counted, reported in `finish`.
    undefined: u64,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        // Skipped when the pack has no user event (`MARK`'s page): the
        // unpacker saw every event's code once already.
        if !input.may_hold(op::MARK) {
            return;
        }
        let events = input.events;
        for ev in events {
            // Cheapest check first: most events are not ours.
            if ev.op() != op::MARK {
                continue;
            }
            // Local ids mean nothing across ranks: translate to the
            // program's global id, which every rank shares.
            let name = cx.name(ev.obj.get());
            if name == UNDEFINED {
                self.undefined += 1;
                continue;
            }
            // Count, min, max and mean: the same running statistics as the
            // user counters keep (`values.rs`).
            self.marks
                .entry(name)
                .or_default()
                .add(ev.bytes.get() as i64);
        }
    }

    // States from another server hold that server's global ids: renumber
    // every id the state keeps (here, the marks' names).
    fn remap(&mut self, ids: &IdMap) {
        self.marks = std::mem::take(&mut self.marks)
            .into_iter()
            .map(|(name, v)| (ids.name(name), v))
            .collect();
    }

    // Processes folded into one row (a shell loop's thousands of runs):
    // their marks add up.
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        self.undefined += o.undefined;
        for (name, v) in &o.marks {
            self.marks.entry(*name).or_default().merge(v);
        }
    }
}

impl Analysis for Marks {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn new_rank(&self) -> Rank {
        Rank::default()
    }

    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        // Merge the ranks. Global ids index the program's unifier, which
        // turns them back into names.
        let mut merged: FxHashMap<u32, Values> = FxHashMap::default();
        let mut undefined = 0;
        for rank in ranks.iter().copied() {
            undefined += rank.undefined;
            for (&name, m) in &rank.marks {
                merged.entry(name).or_default().merge(m);
            }
        }
        for (name, m) in merged {
            let name = cx.unifier.name(name).unwrap_or("?");
            out.regions
                .counters
                .insert(format!("mark:{name}"), m.stats());
        }
        // One sentence per kind of trouble, with the count.
        if undefined > 0 {
            out.diagnostics.push(format!(
                "marks: {undefined} marks named undefined ids and were ignored"
            ));
        }
    }
}
