//! A generic parallel blackboard: typed data entries, knowledge sources that
//! fire when all their sensitivities are satisfied, levels, and a pool of
//! workers (seed `000_*`, sections II-B and III-B).
//!
//! **The board knows nothing of MPI or of the wire.** It moves reference-
//! counted entries of any Rust type between knowledge sources; what the
//! entries mean is the business of the knowledge sources (`hark-analyses`).
//!
//! The main types:
//!
//! - [`Board`] — the engine: N workers, a type interner, levels, the
//!   sensitivity table. A cheap `Clone` handle usable from any thread.
//! - [`Entry`] — a type ([`EntryType`], from [`Board::intern`]) and a
//!   read-only payload, shared by reference count, freed when the last job
//!   over it ends. Meant to be a batch (a pack, or one kind of event of a
//!   pack), not one event.
//! - [`EntryKind`] — a kind of entry declared once as a constant: a name
//!   and the payload's Rust type. Interned on a board it is a [`Typed`]
//!   handle: [`Board::publish_keyed`] and [`Context::publish`] make entries
//!   of it, [`KnowledgeSource::on`] subscribes to it with a closure over the
//!   payload, so a payload's route is in the signatures on both ends.
//! - [`KnowledgeSource`] — a name, sensitivities (entry types) and an
//!   operation `Fn(&mut Context, &[Entry])`, optionally
//!   [serial by key](KnowledgeSource::serial_by_key).
//! - [`Level`] — one measured program: the same knowledge sources and types
//!   live on many levels, independently.
//! - [`Context`] — what an operation may do: submit, register, remove.
//! - [`Stats`] — jobs, time and queue depth per knowledge source; entries and
//!   bytes held per level, readable at any moment.
//! - [`Plugin`] and [`abi`] — knowledge sources from a shared library
//!   through a versioned C ABI.
//!
//! ```
//! use hark_board::{Board, Entry, KnowledgeSource};
//! use std::sync::{Arc, Mutex};
//!
//! let board = Board::new(2);
//! let pack = board.intern("pack");
//! let sums = board.intern("sum");
//!
//! // On every level: sum each pack of numbers, and submit the sum.
//! board.register_all(move |_level| {
//!     KnowledgeSource::new("adder", &[pack], move |ctx, entries| {
//!         let numbers: &Vec<u64> = entries[0].get().expect("a pack holds numbers");
//!         ctx.submit(Entry::new(sums, numbers.iter().sum::<u64>()));
//!     })
//!     .serial_by_key()
//! })?;
//!
//! let program = board.create_level("program-a");
//! let total = Arc::new(Mutex::new(0u64));
//! let t = total.clone();
//! board.register(program, KnowledgeSource::new("total", &[sums], move |_ctx, e| {
//!     *t.lock().unwrap() += *e[0].get::<u64>().unwrap();
//! }))?;
//!
//! for rank in 0..4u64 {
//!     let numbers = vec![rank; 1000];
//!     board.submit_keyed(program, rank, Entry::with_bytes(pack, numbers, 8000))?;
//! }
//! board.drain();
//! assert_eq!(*total.lock().unwrap(), (0..4).map(|r| r * 1000).sum::<u64>());
//! let stats = board.stats();
//! assert_eq!(stats.levels[0].entries_live, 0);
//! board.shutdown();
//! # Ok::<(), hark_board::Error>(())
//! ```
//!
//! The design is written down in `docs/board.md`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod board;
mod clock;
pub mod cpus;
mod entry;
mod error;
mod ks;
mod place;
mod plugin;
mod queue;
mod stats;

pub use board::{Board, Config};
pub use entry::{Entry, EntryKind, EntryType, Level, Typed};
pub use error::{Error, ErrorKind};
pub use ks::{Context, KnowledgeSource, KsId, Operation};
pub use plugin::Plugin;
pub use queue::QueueKind;
pub use stats::{KsStats, LevelStats, Stats};
