//! Hark's knowledge sources: reduce event streams into profiles, matrices and
//! time series.
//!
//! A measured program is a [`ProgramAnalysis`]; each of its processes is a
//! [`Stream`] fed with that process's frames in order (rank info,
//! definitions, event batches, end of stream). A per-stream tracker runs
//! once over each batch and publishes what it implies (messages completed,
//! sends and receives to match, arrivals at collectives); message matching
//! and collective instances relate ranks to each other and publish the wait
//! states they find ([`matching`]). Every knowledge source ([`Analysis`],
//! listed in [`registry`]) keeps a small state per rank that is also its
//! partial result: a program's [`Partial`] serialises and merges with
//! another server's, and every derived value is computed once, from the
//! merged partial ([`Partial::finish`]). [`OnBoard`] puts a program on a
//! level of a [`hark_board::Board`], every analysis a knowledge source
//! there; the server (`hark-server`) feeds it. This crate does no I/O and
//! spawns no thread. What each analysis computes is in `docs/analyses.md`.
//!
//! Definitions are unified across processes ([`Unifier`]): names by text,
//! files by path, communicators by members and creation order, so that ids
//! mean the same on every rank.
//!
//! ```
//! use hark_analyses::{registry, Config, ProgramAnalysis};
//! use hark_wire::{op, ClockSource, End, EndReason, Event, Hello};
//!
//! let hello = |rank: i32| Hello {
//!     program: "ring".into(), argv: vec!["./ring".into()], host: "node1".into(),
//!     pid: 100 + rank as u32, rank, size: 2, job: "job".into(),
//!     clock: ClockSource::Monotonic, clock_ns: 0, realtime_ns: 0, pack_size: 1 << 20, secret: String::new(), parent: 0,
//! };
//! let program = ProgramAnalysis::new("ring", 0, registry::all(), Config::default());
//! let mut streams: Vec<_> = (0..2).map(|r| program.open(r as u64, hello(r), 0)).collect();
//!
//! // Rank 0 sends 4096 bytes to rank 1.
//! let mut send = Event::new(op::mpi_op("MPI_Send").unwrap(), 1_000, 3_000);
//! send.peer.set(1);
//! send.bytes.set(4096);
//! streams[0].events(&[send]);
//! for s in &mut streams {
//!     let written = s.accounting().received;
//!     s.end(End { events_written: written, events_dropped: 0, packs_sent: 1, reason: EndReason::Finalize });
//! }
//!
//! let model = program.finish(streams).remove(0);
//! assert_eq!(model.mpi["MPI_Send"].bytes, vec![4096, 0]);
//! assert_eq!(model.p2p.bytes[0][1], 4096);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod analysis;
pub mod clock;
mod dynamic;
mod error;
pub mod exchange;
mod fx;
mod hist;
mod ks;
pub mod matching;
mod on_board;
mod partial;
mod program;
pub mod registry;
mod sat;
mod segq;
mod slices;
mod stream;
pub mod trace;
mod track;
mod tracker;
mod unify;
mod values;

pub use analysis::{Analysis, Finish, Input, NoState, RankMeta, RankState, Sensitivity, Spec};
pub use dynamic::{DynAnalysis, DynRank};
pub use error::{Error, ErrorKind};
pub use on_board::{Contention, OnBoard, ARRIVALS, BATCHES, FRAMES, P2P_OPS, WAITS};
pub use partial::{Partial, RankAccounting, RankPartial};
pub use program::{Config, ProgramAnalysis, DEFAULT_ROWS};
pub use stream::{Stream, StreamAccounting, StreamCx, StreamInfo};
pub use track::{Msg, Pattern, Times, Wait};
pub use unify::{CommDef, IdMap, Tables, Translation, Unifier, FOLDED, UNDEFINED};
