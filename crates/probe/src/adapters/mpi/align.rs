//! Aligning this rank's probe clock, at the end of `MPI_Init` and at the
//! start of `MPI_Finalize`.
//!
//! A handshake sample per connection places each stream on the server's
//! timeline to within the one-way delay of that sample, or within the
//! disagreement of two hosts' clocks; waiting times between ranks need
//! better. So each process measures its offset by a ping-pong (Cristian's
//! algorithm, as Scalasca does): it sends a request at `t_send`, the
//! reference answers with its clock `t_ref`, the answer arrives at
//! `t_recv`, and `t_ref − (t_send + t_recv) / 2` is the offset, wrong by at
//! most half the round trip. Of [`ROUNDS`] rounds the one with the smallest
//! round trip is kept. The result goes to the server as a `Clock` frame
//! (`docs/wire.md`); the server applies it (`docs/analyses.md`, "Time").
//!
//! The reference is **the server's clock**, over a connection of the
//! probe's own (`ship::ping`): no other rank takes part, so a job in which
//! only some processes carry the probe, or some cannot reach the server,
//! runs as without Hark. Only streams over MPI (`hark run --analysers`,
//! where Hark starts every rank with the probe and the analysers) align
//! with world rank 0 instead, over `PMPI_*` on a private duplicate of
//! `MPI_COMM_WORLD` (so the messages are never recorded and never match
//! the program's receives): that ping-pong is collective.
//!
//! The program waits in `MPI_Init` and `MPI_Finalize` meanwhile, so their
//! events span the alignment too ([`finalize_entered`]): counted as time
//! outside MPI, a slow ping-pong (ranks sharing cores under MPICH's busy
//! polling: 12 ms round trips were seen) read as the program's own work and
//! moved its load balance by 0.2.
//!
//! `HARK_CLOCK_SYNC=0` turns the alignment off; over a socket each process
//! may decide for itself, over MPI every rank must agree.

use super::abi::Abi;
use super::mpi_call::{comm_dup, comm_free, initialized, rank_size, recv_bytes, send_bytes};
use super::plan::Kind;
use crate::core::{
    align_with_server, clock_sync_enabled, now, refine_clock, set_clock, streams_over_mpi,
};
use hark_wire::{ClockPhase, ClockReference, ClockSync};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Rounds of ping-pong per rank and measurement over MPI.
pub(crate) const ROUNDS: usize = hark_wire::partition::CLOCK_ROUNDS;

/// The tag of the requests and answers (the communicator is private).
const TAG: i32 = hark_wire::partition::CLOCK_TAG;

/// The private duplicate of `MPI_COMM_WORLD`, from `MPI_Init` to
/// `MPI_Finalize`; 0 while there is none (no handle of either flavour is 0).
static COMM: AtomicUsize = AtomicUsize::new(0);

/// When the program entered `MPI_Finalize` (probe clock), before the
/// alignment there; 0 before.
static FINALIZE_ENTERED: AtomicU64 = AtomicU64::new(0);

/// The start of `MPI_Finalize`'s event: when the program called it, before
/// the alignment that runs ahead of the real call.
pub(super) fn finalize_entered() -> Option<u64> {
    Some(FINALIZE_ENTERED.load(Relaxed)).filter(|&t| t != 0)
}

/// At the end of a successful `MPI_Init`: measures against the server, or
/// over MPI duplicates the world and measures against world rank 0.
pub(super) fn at_init(abi: &Abi, rank: i32, size: i32) {
    refine_clock();
    if !streams_over_mpi() {
        align_with_server(ClockPhase::Init);
        return;
    }
    if !clock_sync_enabled() {
        return;
    }
    let Some(comm) = comm_dup(abi, abi.comm_world) else {
        return;
    };
    // A failed ping-pong then leaves this rank unaligned instead of ending
    // the program.
    super::mpi_call::errors_return(abi, comm);
    COMM.store(comm, Relaxed);
    measure(abi, comm, rank, size, ClockPhase::Init);
}

/// At the start of `MPI_Finalize`: measures again and frees the duplicate.
pub(super) fn at_finalize(abi: &Abi) {
    FINALIZE_ENTERED.store(crate::core::stamp(), Relaxed);
    if !streams_over_mpi() {
        align_with_server(ClockPhase::Finalize);
        return;
    }
    let comm = COMM.swap(0, Relaxed);
    if comm == 0 {
        return;
    }
    let (rank, size) = rank_size(comm);
    measure(abi, comm, rank, size, ClockPhase::Finalize);
    comm_free(comm);
}

/// One measurement on `comm`, sent to the server; nothing is sent if an
/// MPI call failed.
fn measure(abi: &Abi, comm: usize, rank: i32, size: i32, phase: ClockPhase) {
    if rank == 0 {
        let mut request = [0u8; 1];
        for peer in 1..size {
            for _ in 0..ROUNDS {
                if !recv_bytes(abi, &mut request, peer, TAG, comm) {
                    return;
                }
                if !send_bytes(abi, &now().to_le_bytes(), peer, TAG, comm) {
                    return;
                }
            }
        }
        let t = now();
        set_clock(ClockSync {
            phase,
            local_ns: t,
            reference_ns: t,
            round_trip_ns: 0,
            reference: ClockReference::WorldRank0,
            relay_bound_ns: 0,
        });
    } else if rank > 0 {
        let mut best: Option<ClockSync> = None;
        let mut answer = [0u8; 8];
        for _ in 0..ROUNDS {
            let t_send = now();
            if !send_bytes(abi, &[0], 0, TAG, comm) || !recv_bytes(abi, &mut answer, 0, TAG, comm) {
                return;
            }
            let round_trip = now().saturating_sub(t_send);
            if best.is_none_or(|b| round_trip < b.round_trip_ns) {
                best = Some(ClockSync {
                    phase,
                    local_ns: t_send + round_trip / 2,
                    reference_ns: u64::from_le_bytes(answer),
                    round_trip_ns: round_trip,
                    reference: ClockReference::WorldRank0,
                    relay_bound_ns: 0,
                });
            }
        }
        if let Some(b) = best {
            set_clock(b);
        }
    }
}

/// `MPI_Init*` or `MPI_Finalize` (function `i` of the table) called while
/// its wrapper could not enter the probe, because this process's stream
/// failed (the server refused it, or went away) or is being closed: nothing
/// is recorded, but what is collective still takes part, since the other
/// ranks wait for this one: the alignment over MPI, the split of a
/// virtualised world (`virt.rs`) and the MPI streams. Its frames go
/// nowhere; the alignment with the server is skipped (no stream).
#[cold]
#[inline(never)]
pub(super) fn unentered<R>(i: usize, call: impl FnOnce() -> R) -> R {
    let Some(abi) = super::abi::get() else {
        return call();
    };
    match super::PLANS[i].kind {
        Kind::Finalize => {
            super::guarded(|| {
                at_finalize(abi);
                super::stream::at_finalize_unentered();
            });
            call()
        }
        Kind::Init => {
            let r = call();
            super::guarded(|| {
                if initialized() {
                    super::virt::at_init(abi);
                    super::stream::at_init(abi);
                    let (rank, size) = rank_size(abi.comm_world);
                    at_init(abi, rank, size);
                }
            });
            r
        }
        _ => call(),
    }
}
