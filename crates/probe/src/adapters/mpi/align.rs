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
//! the program's receives): that ping-pong is collective. It crosses the
//! network once per node ([`hark_wire::partition::clock_plan`]): a node's
//! leader pings rank 0, the node's other ranks ping the leader, which
//! answers with rank 0's time as its own measurement maps it, and that
//! mapping's bound (`docs/analysers.md`, "Clocks").
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
use super::mpi_call::{comm_dup, comm_free, initialized, recv_bytes, send_bytes};
use super::plan::Kind;
use crate::core::{
    align_with_server, clock_sync_enabled, now, refine_clock, set_clock, streams_over_mpi,
};
use hark_wire::{ClockPhase, ClockReference, ClockSync};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Rounds of each ping-pong series over MPI.
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
/// over MPI duplicates the world and measures by the clock plan.
pub(super) fn at_init(abi: &Abi) {
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
    measure(abi, comm, ClockPhase::Init);
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
    measure(abi, comm, ClockPhase::Finalize);
    comm_free(comm);
}

/// One measurement on `comm` by this rank's part of the plan
/// ([`hark_wire::partition::clock_plan`]): ping its upstream, if any, then
/// answer the ranks it serves with world rank 0's time as its own
/// measurement maps it, and the bound of that mapping. Sent to the server;
/// nothing is sent if an MPI call failed (a rank it serves then waits in
/// its `PMPI_Recv`, as it would for a failed rank 0 before).
fn measure(abi: &Abi, comm: usize, phase: ClockPhase) {
    let Some(plan) = super::stream::clock_plan() else {
        return;
    };
    // What to add to this clock to read world rank 0's, and how far that
    // may be off when the measurement was taken (at `at`).
    let (mut offset, mut bound, mut at) = (0i64, 0u64, now());
    if let Some(up) = plan.upstream {
        let mut best: Option<ClockSync> = None;
        let mut answer = [0u8; 16];
        for _ in 0..ROUNDS {
            let t_send = now();
            if !send_bytes(abi, &[0], up as i32, TAG, comm)
                || !recv_bytes(abi, &mut answer, up as i32, TAG, comm)
            {
                return;
            }
            let round_trip = now().saturating_sub(t_send);
            let [time, relay] =
                [0, 8].map(|i| u64::from_le_bytes(answer[i..i + 8].try_into().expect("8 bytes")));
            let sync = ClockSync {
                phase,
                local_ns: t_send + round_trip / 2,
                reference_ns: time,
                round_trip_ns: round_trip,
                reference: ClockReference::WorldRank0,
                relay_bound_ns: relay,
            };
            if best.is_none_or(|b| sync.uncertainty_ns() < b.uncertainty_ns()) {
                best = Some(sync);
            }
        }
        let Some(b) = best else {
            return;
        };
        set_clock(b);
        // Rounded up: the half round trip is a real number.
        (offset, bound, at) = (b.offset_ns(), b.uncertainty_ns() + 1, b.local_ns);
    }
    let mut request = [0u8; 1];
    for &peer in &plan.serve {
        for _ in 0..ROUNDS {
            if !recv_bytes(abi, &mut request, peer as i32, TAG, comm) {
                return;
            }
            let t = now();
            // Two clocks each slewed by at most 500 ppm drift apart by at
            // most 1,000 ppm of the measurement's age (as a forwarder's).
            let drift = t.saturating_sub(at) / 1000;
            let mut answer = [0u8; 16];
            answer[..8].copy_from_slice(&t.wrapping_add_signed(offset).to_le_bytes());
            answer[8..].copy_from_slice(&(bound + drift).to_le_bytes());
            if !send_bytes(abi, &answer, peer as i32, TAG, comm) {
                return;
            }
        }
    }
    if plan.reference {
        let t = now();
        set_clock(ClockSync {
            phase,
            local_ns: t,
            reference_ns: t,
            round_trip_ns: 0,
            reference: ClockReference::WorldRank0,
            relay_bound_ns: 0,
        });
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
                    at_init(abi);
                }
            });
            r
        }
        _ => call(),
    }
}
