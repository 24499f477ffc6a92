//! What the engine derives from a stream's events once, for every knowledge
//! source: the point-to-point messages a pack completed ([`Msg`]), what a
//! pack says of its rank's time ([`Times`]), and the wait states found
//! across ranks ([`Wait`], one [`Pattern`] each). A knowledge source reads
//! them in its [`Input`](crate::Input); the engine (`hark-engine`) makes
//! them.

use crate::unify::IdMap;
use serde::{Deserialize, Serialize};

/// Region call paths deeper than this are folded into their ancestor at
/// this depth: the regions' tree and the call paths that waits and
/// operations carry stop at the same depth.
pub const MAX_REGION_DEPTH: usize = 64;

/// A point-to-point message seen from one side, complete: published by the
/// per-stream tracker with every batch (`Input::msgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// True for the sending side.
    pub send: bool,
    /// Index in `FUNCTIONS` of the function that names the message's kind:
    /// the send or receive call, or the one that posted the request.
    pub func: usize,
    /// World rank of the peer.
    pub peer: i32,
    /// Bytes sent or received.
    pub bytes: u64,
    /// Time of the call that moved it, or of the call that posted its
    /// request (the wait is timed as a call of its own).
    pub time_ns: u64,
    /// Start of the event that completed it (probe clock, ns): the call's
    /// own record, or the completion record that follows a `MPI_Wait*`.
    pub start: u64,
}

/// A wait-state pattern (Scalasca's pattern catalogue; `docs/analyses.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Pattern {
    /// A receive waited for a send that was entered later.
    LateSender,
    /// A late sender while a message sent earlier was already there.
    LateSenderWrongOrder,
    /// A blocking send waited for a receive that was posted later.
    LateReceiver,
    /// Waiting for the last rank in an N×N collective.
    WaitNxN,
    /// Waiting for the last rank in a barrier.
    WaitBarrier,
    /// Non-root ranks waiting for the root of a one-to-all collective.
    LateBroadcast,
    /// The root of an all-to-one collective waiting for the first sender.
    EarlyReduce,
}

impl Pattern {
    /// Every pattern, in report order.
    pub const ALL: [Pattern; 7] = [
        Pattern::LateSender,
        Pattern::LateSenderWrongOrder,
        Pattern::LateReceiver,
        Pattern::WaitNxN,
        Pattern::WaitBarrier,
        Pattern::LateBroadcast,
        Pattern::EarlyReduce,
    ];

    /// Its key in `profile.json` (`late_sender`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Pattern::LateSender => "late_sender",
            Pattern::LateSenderWrongOrder => "late_sender_wrong_order",
            Pattern::LateReceiver => "late_receiver",
            Pattern::WaitNxN => "wait_nxn",
            Pattern::WaitBarrier => "wait_barrier",
            Pattern::LateBroadcast => "late_broadcast",
            Pattern::EarlyReduce => "early_reduce",
        }
    }

    /// Its name in reports (`Late Sender`, ...).
    pub fn title(self) -> &'static str {
        match self {
            Pattern::LateSender => "Late Sender",
            Pattern::LateSenderWrongOrder => "Late Sender / Wrong Order",
            Pattern::LateReceiver => "Late Receiver",
            Pattern::WaitNxN => "Wait at N×N",
            Pattern::WaitBarrier => "Wait at Barrier",
            Pattern::LateBroadcast => "Late Broadcast",
            Pattern::EarlyReduce => "Early Reduce",
        }
    }
}

/// One wait state: a rank that waited in an MPI call for another rank.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    /// The pattern.
    pub pattern: Pattern,
    /// World rank that waited.
    pub waiter: i32,
    /// When the waiting call was entered, on the common timeline.
    pub enter_ns: u64,
    /// How long it waited, in ns.
    pub time_ns: u64,
    /// Index in `FUNCTIONS` of the call it waited in.
    pub func: u16,
    /// The waiting rank's region call path (an id of the program's tables:
    /// `outer/inner`, `""` for none).
    pub path: u32,
    /// The waiting rank's top-level region (global name id), or
    /// `UNDEFINED` outside any region.
    pub region: u32,
    /// World rank that was late (the cause).
    pub late: i32,
    /// The region call path the late rank was in when it arrived.
    pub late_path: u32,
    /// Call site of the call that waited (a call path id of the program's
    /// tables, `UNDEFINED` when unknown).
    pub site: u32,
    /// Call site of the late rank's call (the send, the last arrival).
    pub late_site: u32,
}

impl Wait {
    /// Renumbers its ids into another program's tables (a merge of
    /// partial results).
    pub fn remap(&mut self, ids: &IdMap) {
        self.region = ids.name(self.region);
        self.path = ids.path(self.path);
        self.late_path = ids.path(self.late_path);
        self.site = ids.path(self.site);
        self.late_site = ids.path(self.late_site);
    }
}

/// What one pack says of its rank's time, for the POP efficiencies
/// (`ks/efficiency.rs`): gathered in the tracker's pass, so that no
/// knowledge source walks the events again for it. Times are common ns.
#[derive(Clone, Debug, PartialEq)]
pub struct Times {
    /// Earliest start of the pack's events (other than completion records
    /// and unknown codes); `u64::MAX` when there is none.
    pub first: u64,
    /// Latest end of those events; 0 when there is none.
    pub last: u64,
    /// End of the pack's last `MPI_Init` (or `MPI_Init_thread`).
    pub init_end: Option<u64>,
    /// Start of the pack's last `MPI_Finalize`.
    pub fin_start: Option<u64>,
    /// Time in MPI calls other than `MPI_Init` and `MPI_Finalize`, ns.
    pub mpi_ns: u64,
    /// Time in every MPI call, on the probe's clock (the `summary`
    /// analysis's sum, which it then need not walk the events for).
    pub mpi_all_ns: u64,
    /// Events with codes this server does not know.
    pub unknown: u64,
    /// Whether the pack has an MPI call other than those two.
    pub mpi_calls: bool,
    /// `MPI_Init` and `MPI_Finalize` calls: enter and leave.
    pub init_fin: Vec<(u64, u64)>,
    /// Top-level regions that ended in the pack, in order of first end:
    /// name (global id), time inside, and MPI time inside (outside
    /// `MPI_Init` and `MPI_Finalize`), summed over the calls that end near
    /// one another (a loop's region has one entry, not one per call).
    pub regions: Vec<(u32, u64, u64)>,
    /// Whether a thread is inside a top-level region when the pack ends.
    pub open: bool,
    /// Time the stream spent paused (`MPI_Pcontrol(0)`, `hark_pause`, a
    /// service's pause) in spans that closed since the last pack, in ns:
    /// not measured, so out of every efficiency.
    pub paused_ns: u64,
    /// Those spans, `[from, to)` on the probe's clock (as events' stamps).
    pub paused: Vec<(u64, u64)>,
}

impl Default for Times {
    fn default() -> Times {
        Times {
            first: u64::MAX,
            last: 0,
            init_end: None,
            fin_start: None,
            mpi_ns: 0,
            mpi_all_ns: 0,
            unknown: 0,
            mpi_calls: false,
            init_fin: Vec::new(),
            regions: Vec::new(),
            open: false,
            paused_ns: 0,
            paused: Vec::new(),
        }
    }
}
