//! What a knowledge source is, as far as the analyses are concerned.
//!
//! A knowledge source ([`Analysis`]) keeps one state per rank
//! ([`RankState`]) that it feeds with that rank's event batches, in stream
//! order, and folds all ranks' states into the program's model once the
//! program is over ([`Analysis::finish`]). The per-rank split is what makes
//! the work parallel: batches of different ranks run on different workers,
//! batches of one rank run one after the other, so a state never needs a lock.
//!
//! The contract every knowledge source follows (the shared compliance test in
//! `tests/every_analysis_complies.rs` checks the first and the third, and
//! that the board gives the same result as feeding by hand):
//!
//! - it MUST NOT panic on any input: unknown op codes, undefined ids, peers
//!   out of range and clocks going backwards are counted and reported in
//!   [`Program::diagnostics`](hark_model::Program), never printed at runtime;
//! - its per-rank state MUST stay bounded by what the model holds (functions,
//!   peers, files, regions, time slices), never grow with the number of
//!   events;
//! - its result MUST NOT depend on how a rank's events are cut into batches;
//! - it SHOULD touch only the events it cares about: one pass, a match on the
//!   op code, and a `continue` for the rest.

use crate::stream::{StreamCx, StreamInfo};
use crate::unify::Unifier;
use hark_model::Program;
use hark_wire::Event;
use std::any::Any;

/// What a knowledge source depends on.
///
/// On the board (`on_board.rs`) every analysis is a knowledge source
/// sensitive to the `events` entries; definitions reach it through the
/// stream's translation, which `unpack` fills from the `frames` entries
/// before forwarding the batches that follow them; `program-end` is the fold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sensitivity {
    /// `defs`: the stream's definitions (names, files, communicators).
    Defs,
    /// `events`: a batch of events from one stream (one pack).
    Events,
    /// `program-end`: every stream of the program has closed.
    ProgramEnd,
}

impl Sensitivity {
    /// Its name in specs and documentation.
    pub fn name(self) -> &'static str {
        match self {
            Sensitivity::Defs => "defs",
            Sensitivity::Events => "events",
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
    /// What it reacts to.
    pub sensitivities: &'static [Sensitivity],
    /// The parts of the model it fills (`Program` field names).
    pub fills: &'static [&'static str],
}

/// A knowledge source: per-rank reduction, then a fold into the model.
pub trait Analysis: Send + Sync + 'static {
    /// Its description.
    fn spec(&self) -> &'static Spec;

    /// A fresh state for a rank that just connected.
    fn new_rank(&self) -> Box<dyn RankState>;

    /// Folds every rank's state into `out`, once the program is over.
    ///
    /// Called once per program, after every rank's last batch, in registry
    /// order: a knowledge source listed later sees what earlier ones wrote
    /// into `out` (the density maps read the profiles this way).
    fn finish(&self, cx: &Finish<'_>, out: &mut Program);
}

/// A knowledge source's state for one rank.
pub trait RankState: Any + Send {
    /// Consumes one batch of this rank's events, in stream order.
    fn events(&mut self, cx: &StreamCx<'_>, events: &[Event]);

    /// Itself, for [`Finish::states`] to downcast.
    fn as_any(&self) -> &dyn Any;
}

/// The state of a knowledge source that needs none per rank.
pub struct NoState;

impl RankState for NoState {
    fn events(&mut self, _: &StreamCx<'_>, _: &[Event]) {}
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One rank, as [`Analysis::finish`] sees it.
pub struct RankView<'a> {
    /// Its stream.
    pub info: &'a StreamInfo,
    pub(crate) states: &'a [&'a dyn RankState],
}

/// What [`Analysis::finish`] gets: the program's ranks in program-rank order.
pub struct Finish<'a> {
    /// The ranks, indexed by program rank.
    pub ranks: Vec<RankView<'a>>,
    /// The program's global names, files and communicators.
    pub unifier: &'a Unifier,
    pub(crate) index: usize,
    pub(crate) world_to_program: &'a std::collections::HashMap<i32, usize>,
}

impl<'a> Finish<'a> {
    /// This knowledge source's state of every rank, in program-rank order.
    ///
    /// # Panics
    /// If `T` is not the type this knowledge source's `new_rank` returns —
    /// a programming error in the knowledge source, not a data error.
    pub fn states<T: RankState>(&self) -> impl Iterator<Item = &'a T> + '_ {
        let index = self.index;
        self.ranks.iter().map(move |r| {
            r.states[index]
                .as_any()
                .downcast_ref::<T>()
                .expect("a knowledge source's finish asks for its own state type")
        })
    }

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
