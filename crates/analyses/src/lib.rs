//! The analysis API: what a knowledge source is written against, and
//! Hark's knowledge sources.
//!
//! A knowledge source ([`Analysis`], listed in [`registry`]) keeps a small
//! state per rank ([`RankState`]) that it folds each [`Input`] into: one
//! pack of one stream's events with what the engine derived from it once
//! ([`Msg`]s completed, [`Times`]), or the [`Wait`]s found across ranks. It
//! asks the stream through a [`StreamCx`] (clock mapping, ids translated by
//! the program's [`Unifier`]), and folds every rank's state into the model
//! once, in [`Analysis::finish`]. A rank's state is also its partial result:
//! it serialises and its ids renumber ([`IdMap`]), so one server or many give
//! the same model. [`DynAnalysis`] and [`DynRank`] are the same contract
//! behind trait objects, for the engine to hold a list of them.
//!
//! The engine that runs knowledge sources (streams, unpacking, message
//! matching, the board, partial results) is the crate `hark-engine`; this
//! crate never depends on it. It does no I/O and spawns no thread. What each
//! analysis computes is in `docs/analyses.md`; `ks/template.rs` is the
//! commented template of a new one.
//!
//! ```
//! use hark_analyses::{registry, Input, StreamCx};
//! use hark_wire::{op, Event};
//!
//! // Fold one pack of rank 0's events into a fresh MPI profile state.
//! let cx = StreamCx::bare(0, 20, 64);
//! let mut send = Event::new(op::mpi_op("MPI_Send").unwrap(), 1_000, 3_000);
//! send.peer.set(1);
//! send.bytes.set(4096);
//! let events = [send];
//! let input = Input { events: &events, ..Input::default() };
//! let mpi_profile = registry::select(&["mpi-profile"]).unwrap().remove(0);
//! let mut state = mpi_profile.new_rank();
//! state.fold(&cx, &input);
//! assert!(!state.save().is_empty());
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod analysis;
pub mod clock;
mod derived;
mod dynamic;
mod error;
mod fx;
mod hist;
mod ks;
pub mod names;
pub mod registry;
mod sat;
mod slices;
mod stream;
mod unify;
mod values;

pub use analysis::{Analysis, Finish, Input, NoState, RankMeta, RankState, Sensitivity, Spec};
pub use derived::{Msg, Pattern, Times, Wait, MAX_REGION_DEPTH};
pub use dynamic::{DynAnalysis, DynRank};
pub use error::{Error, ErrorKind};
pub use ks::counters::refusal;
pub use stream::StreamCx;
pub use unify::{CommDef, IdMap, TableEntries, Tables, Translation, Unifier, FOLDED, UNDEFINED};

/// Helpers the engine (`hark-engine`) shares with the knowledge sources on
/// the hot path: not part of what a knowledge source is written against.
#[doc(hidden)]
pub mod internal {
    pub use crate::fx::{FxHashMap, FxHashSet, FxHasher};
    pub use hark_model::sat::Sat;
}
