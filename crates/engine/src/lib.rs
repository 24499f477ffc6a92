//! Hark's analysis engine: runs the knowledge sources of `hark-analyses`
//! over the streams of measured programs.
//!
//! A measured program is a [`ProgramAnalysis`]; each of its processes is a
//! [`StreamInfo`] (identity, clock, id translation) fed with that process's
//! frames in order (rank info, definitions, event batches, end of stream).
//! An unpacker (`unpack.rs`) runs once over each batch of a stream and
//! publishes what it implies (messages completed, sends and receives to
//! match, arrivals at collectives); message matching and collective
//! instances relate ranks to each other and publish the wait states they
//! find ([`matching`]). Every knowledge source keeps a small state per rank
//! that is also its partial result: a program's [`Partial`] serialises and
//! merges with another server's, and every derived value is computed once,
//! from the merged partial ([`Partial::finish`]). [`OnBoard`] puts a program
//! on a level of a [`hark_board::Board`]: unpacking, the matchers and the
//! folds of each row's batches and wait states are knowledge sources there
//! (one job folds an input into every analysis); the server (`hark-server`)
//! feeds it. [`Stream`] feeds one process by hand, without a board (tests,
//! tools). This crate does no I/O and spawns no thread.
//!
//! The API a knowledge source is written against ([`hark_analyses`]) never
//! depends on this crate: the engine reads the API, never the other way.
//!
//! ```
//! use hark_analyses::registry;
//! use hark_engine::{Config, ProgramAnalysis};
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

pub mod exchange;
pub mod matching;
mod on_board;
mod partial;
mod program;
mod requests;
mod segq;
mod stream;
pub mod trace;
mod unpack;

pub use hark_analyses::{Error, ErrorKind};
pub use on_board::{Contention, OnBoard};
pub use partial::{Partial, RankAccounting, RankPartial};
pub use program::{Config, ProgramAnalysis, DEFAULT_ROWS};
pub use stream::{Stream, StreamAccounting, StreamInfo};
pub use unpack::{Msg, Pattern, Times, Wait};
