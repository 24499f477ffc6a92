//! What a knowledge source is, as far as the analyses are concerned.
//!
//! A knowledge source ([`Analysis`]) keeps one state per rank
//! ([`RankState`]) that it feeds with that rank's inputs, and folds all
//! ranks' states into the program's model once the program is over
//! ([`Analysis::finish`]). The per-rank split is what makes the work
//! parallel: inputs of different ranks run on different workers, inputs of
//! one rank run one after the other, so a state never needs a lock.
//!
//! A rank's state is also its *partial result*: it serialises, and its ids
//! can be renumbered ([`RankState::remap`]), so states made by different
//! servers (or analyser ranks) merge into one program (`hark_engine::Partial`).
//! Every derived value (spreads, histograms, density maps, efficiencies, the
//! digest) is computed in `finish`, once, from the merged states: one server
//! or many give the same model.
//!
//! The contract every knowledge source follows (the shared compliance test in
//! `tests/every_analysis_complies.rs` checks it):
//!
//! - it MUST NOT panic on any input: unknown op codes, undefined ids, peers
//!   out of range and clocks going backwards are counted and reported in
//!   [`Program::diagnostics`](hark_model::Program), never printed at runtime
//!   (a panic is contained and named in the diagnostics, and that analysis's
//!   results are then incomplete);
//! - its per-rank state MUST stay bounded by what the model holds (functions,
//!   peers, files, regions, time slices), never grow with the number of
//!   events;
//! - its result MUST NOT depend on how a rank's events are cut into batches,
//!   nor on how ranks are split between servers whose partials are merged;
//! - `remap` MUST renumber every global id the state holds;
//! - it SHOULD touch only the inputs it cares about: one pass, a match on the
//!   op code, and a `continue` for the rest.

use crate::derived::{Msg, Times, Wait};
use crate::stream::StreamCx;
use crate::unify::{IdMap, Unifier};
use hark_model::Program;
use hark_wire::{Counts, Event};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;

/// What a knowledge source depends on. On the board, each is an entry type
/// the knowledge source is registered for (`on_board.rs`); `Defs` and
/// `ProgramEnd` are not entries but say that the knowledge source reads the
/// stream's id translation or folds at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sensitivity {
    /// `defs`: the stream's definitions (names, files, communicators),
    /// through [`StreamCx`]'s translation.
    Defs,
    /// `batches`: one pack of one stream's events, with the point-to-point
    /// messages its requests completed ([`Input::events`], [`Input::msgs`])
    /// and what it says of the rank's time ([`Input::times`]).
    Events,
    /// `waits`: wait states found across ranks, for the rank that waited
    /// ([`Input::waits`]).
    Waits,
    /// `program-end`: every stream of the program has closed.
    ProgramEnd,
}

impl Sensitivity {
    /// Its name in specs and documentation.
    pub fn name(self) -> &'static str {
        match self {
            Sensitivity::Defs => "defs",
            Sensitivity::Events => "batches",
            Sensitivity::Waits => "waits",
            Sensitivity::ProgramEnd => "program-end",
        }
    }
}

/// The description of a knowledge source.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Short unique name, kebab-case (`mpi-profile`); used to select analyses.
    pub name: &'static str,
    /// One sentence: what it computes.
    pub description: &'static str,
    /// What it reacts to: it is registered on the board for exactly the
    /// entry types named here.
    pub sensitivities: &'static [Sensitivity],
    /// The parts of the model it fills (`Program` field names).
    pub fills: &'static [&'static str],
}

/// What a rank's state is fed: one of its batches, its counts in place of
/// one, or wait states found for it. At most one of `events`, `waits` and
/// `counts` is non-empty.
#[derive(Clone, Copy, Debug, Default)]
pub struct Input<'a> {
    /// The events of one pack, in stream order.
    pub events: &'a [Event],
    /// The point-to-point messages that pack completed, in stream order
    /// (the request tracker ran once for all knowledge sources).
    pub msgs: &'a [Msg],
    /// What the pack's events say of the rank's time (window, MPI time,
    /// top-level regions), when some knowledge source looks across ranks:
    /// the tracker gathers it in its pass over the events.
    pub times: Option<&'a Times>,
    /// Wait states in which this rank waited.
    pub waits: &'a [Wait],
    /// A sampled-out rank's exact totals for the events of one pack it did
    /// not send (`docs/wire.md`, "Counts"); `events` is then empty. Only
    /// knowledge sources whose results are per-function sums fold them.
    pub counts: Option<&'a Counts>,
    /// The pages ([`hark_wire::op::page`]) of the pack's events, when the
    /// unpacker gathered them in its pass; `None`: any may be there.
    pub pages: Option<u32>,
}

impl Input<'_> {
    /// Whether the events may hold a code of `code`'s page (its family,
    /// [`hark_wire::op::page`]): `false` lets a knowledge source that looks
    /// at that family alone skip the pack without walking it.
    #[inline]
    pub fn may_hold(&self, code: u16) -> bool {
        self.pages
            .is_none_or(|p| p & hark_wire::op::page(code) != 0)
    }
}

/// A knowledge source: per-rank reduction, then a fold into the model.
pub trait Analysis: Send + Sync + 'static {
    /// Its per-rank state, which is also its partial result.
    type Rank: RankState;

    /// Its description.
    fn spec(&self) -> &'static Spec;

    /// A fresh state for a rank that just connected.
    fn new_rank(&self) -> Self::Rank;

    /// Folds every rank's state into `out`, once the program is over (or
    /// for a snapshot).
    ///
    /// `ranks` are in program-rank order, as `cx.ranks`. Called after every
    /// rank's last input, in registry order: a knowledge source listed later
    /// sees what earlier ones wrote into `out` (the density maps and the
    /// digest read the profiles this way).
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Self::Rank], out: &mut Program);
}

/// A knowledge source's state for one rank. `Sync` because a live
/// snapshot reads it on its own thread while the rank's analysis goes on
/// (`docs/analyses.md`).
pub trait RankState: Send + Sync + Serialize + DeserializeOwned + 'static {
    /// Consumes one input of this rank. Event batches come in stream order;
    /// waits come in any order, so what they add must commute.
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>);

    /// Renumbers every global id (communicator, file, name) the state holds
    /// through `ids`, when states from another server join this program's
    /// tables. Ids `ids` does not know become [`crate::UNDEFINED`].
    fn remap(&mut self, ids: &IdMap);

    /// Whether [`RankState::absorb`] can add `other` to this state exactly.
    /// The default is no: a knowledge source that does not say how its
    /// states combine keeps every process in a row of its own.
    fn absorbs(&self, other: &Self) -> bool {
        let _ = other;
        false
    }

    /// Adds `other`, the finished state of another process, to this one,
    /// so that one row stands for both with exact counts (sums summed,
    /// minima and maxima kept). Processes without a world rank beyond a
    /// program's first `hark_engine::Config::rows` are folded into one row this
    /// way, so that a shell loop of 40,000 processes costs the memory of
    /// one. Called only when [`RankState::absorbs`] said yes.
    fn absorb(&mut self, other: &Self) {
        let _ = other;
    }
}

/// The state of a knowledge source that needs none per rank (it folds
/// only what the others put in the model).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct NoState;

impl RankState for NoState {
    fn fold(&mut self, _: &StreamCx<'_>, _: &Input<'_>) {}
    fn remap(&mut self, _: &IdMap) {}
    fn absorbs(&self, _: &NoState) -> bool {
        true
    }
}

/// One rank of a program, as [`Analysis::finish`] sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankMeta {
    /// Rank in `MPI_COMM_WORLD`, -1 without MPI.
    pub world_rank: i32,
    /// `MPI_APPNUM`, 0 when unknown.
    pub appnum: i32,
    /// Host it ran on.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Its command line.
    pub argv: Vec<String>,
    /// Its handshake on the common timeline (orders processes without a
    /// world rank).
    pub hello_ns: u64,
    /// Its connection's number on the server that received it: the order
    /// of processes whose handshakes tie.
    pub conn: u64,
    /// How many processes this row stands for when it is the row of the
    /// processes folded together (see [`RankState::absorb`]); 0 for the
    /// row of one process.
    #[serde(default)]
    pub folded: u64,
}

/// What [`Analysis::finish`] gets besides the states.
pub struct Finish<'a> {
    /// The ranks, indexed by program rank.
    pub ranks: &'a [RankMeta],
    /// The program's global names, files and communicators.
    pub unifier: &'a Unifier,
    /// The program's origin on the common timeline.
    pub origin_ns: u64,
    /// A time slice starts `1 << slice_shift` ns wide.
    pub slice_shift: u32,
    /// The fixed number of time slices.
    pub slices: usize,
    /// Program rank by world rank ([`Finish::program_rank`]).
    pub world_to_program: &'a HashMap<i32, usize>,
}

impl Finish<'_> {
    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True when the program has no ranks.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The program rank of world rank `world`, if it belongs to this program.
    pub fn program_rank(&self, world: i32) -> Option<usize> {
        self.world_to_program.get(&world).copied()
    }
}
