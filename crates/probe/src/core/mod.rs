//! The probe's core: clock, per-thread event buffers, definitions, the
//! reentrancy guard and the process-wide state every adapter records through.
//!
//! CONTRACT used by the adapters (`adapters/*`). Signatures here are fixed;
//! bodies are filled in by the core's implementation.
//!
//! An adapter's wrapper does, in this order:
//! 1. `let Some(_g) = core::enter() else { return real(args) };` — None when
//!    recording is paused or off, the probe is not initialised, or this thread
//!    is already inside the probe (its own I/O, a nested MPI call);
//! 2. `let t0 = core::now();` call the real function; `let t1 = core::now();`
//! 3. fill an `Event` (`Event::new(op, t0, t1)` and its fields) and
//!    `core::record(ev)`; details of the same call follow with more `record`s.
//!
//! Definitions (`Def`) are sent with `core::define` *before* the first event
//! that refers to them. Ids come from `core::next_id()`.

use hark_wire::{Def, EndReason, Event, RankInfo};

/// A token proving this thread is inside the probe; dropping it leaves.
pub struct Guard {
    _private: (),
}

/// Enters the probe on this thread, if recording is on and this thread is not
/// already inside it. Cheapest check first: one relaxed atomic load.
#[inline(always)]
pub fn enter() -> Option<Guard> {
    unimplemented!()
}

/// Enters the probe even when recording is paused (for definitions and
/// bookkeeping that must not be missed, such as communicator creation).
/// Still `None` when this thread is already inside the probe.
#[inline(always)]
pub fn enter_always() -> Option<Guard> {
    unimplemented!()
}

/// Nanoseconds on the probe clock (TSC calibrated, or CLOCK_MONOTONIC).
#[inline(always)]
pub fn now() -> u64 {
    unimplemented!()
}

/// Appends one event to this thread's buffer (sets its `thread` field).
/// No lock, no allocation, no system call on the common path.
#[inline(always)]
pub fn record(_ev: Event) {
    unimplemented!()
}

/// Queues a definition; it reaches the stream before any event recorded
/// after this call returns.
pub fn define(_def: Def) {
    unimplemented!()
}

/// A fresh id for a communicator, file or name (never 0).
pub fn next_id() -> u32 {
    unimplemented!()
}

/// Records the process's place in the job once MPI is initialised.
pub fn set_rank(_info: RankInfo) {
    unimplemented!()
}

/// Pauses (`false`) or resumes (`true`) recording: `MPI_Pcontrol(0|1)`.
pub fn set_recording(_on: bool) {
    unimplemented!()
}

/// Flushes every buffer and closes the stream with its totals. Called at
/// `MPI_Finalize`, `MPI_Abort` and process exit; only the first call acts.
pub fn finish(_reason: EndReason) {
    unimplemented!()
}

/// Prints `message` to stderr once per `key`, prefixed `hark: `.
pub fn warn_once(_key: &'static str, _message: &str) {
    unimplemented!()
}
