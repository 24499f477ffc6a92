//! Unpacking a stream: one pass over each pack, once for every knowledge
//! source, that publishes what the events imply ([`Unpacker`], one per
//! stream, run by the board's `unpack` knowledge source).
//!
//! It follows requests as the [`RequestTable`] does (which message each
//! completion completes; one decoding of each event and one map of
//! requests serve the messages and the matching), keeps each thread's
//! region stack, and turns the pack into derived entries:
//!
//! - [`Msg`]s: the point-to-point messages the pack completed, for the
//!   per-rank knowledge sources (the `batches` entry: events and messages);
//! - [`P2pOp`]s: each send when it is posted and each receive when it
//!   completes, with the times of the call that posted it and of the call
//!   that waited for it, for message matching (keyed by the receiving rank);
//! - [`Arrival`]s: each rank's entry into a blocking collective, for the
//!   collective instances (keyed by communicator and sequence number).
//!
//! Times in `P2pOp` and `Arrival` are on the run's common timeline (the
//! stream's clock mapping applied), since they are compared across ranks.

use crate::requests::{MsgOf, Posted, RequestTable};
use hark_analyses::internal::{FxHashMap, Sat};
use hark_analyses::{IdMap, StreamCx, UNDEFINED};
pub use hark_analyses::{Msg, Pattern, Times, Wait};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Event};
use serde::{Deserialize, Serialize};

/// Distinct call paths one stream names before the rest share one name.
const MAX_PATHS: usize = 4096;

/// Open regions one thread keeps track of; deeper ones are ignored.
const MAX_STACK: usize = 1024;

/// Which side of a message a [`P2pOp`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Side {
    Send,
    Recv,
}

/// One side of a point-to-point message, for matching.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct P2pOp {
    pub side: Side,
    /// Global communicator id.
    pub comm: u32,
    /// Which communicator with its members it is (its occurrence,
    /// `unify.rs`): past the caps communicators share `comm`, and messages
    /// on two of them never share a channel, as MPI matches within one
    /// communicator. Set for every communicator, since whether one is
    /// folded depends on the server (analysers over MPI, partials), and
    /// whole: another server renumbers a folded `comm` by it.
    pub occ: u32,
    /// World ranks of sender and receiver.
    pub src: i32,
    pub dst: i32,
    /// Actual tag.
    pub tag: i32,
    /// Order of this side in its stream: sends in posting order, receives
    /// in completion order (a call's receives when the call's completion
    /// records are all read): the order in which the stream publishes them.
    pub seq: u64,
    /// Entry into the call that posted it (common ns).
    pub post_ns: u64,
    /// The call that blocked for it, if one did (enter, leave; common ns):
    /// a blocking send or receive, or a `MPI_Wait*` completing a receive.
    pub block: Blocked,
    /// The blocking call's function (index in `FUNCTIONS`).
    pub func: u16,
    /// Receives: which call of the stream completed it, and how many
    /// receives that call completed (`MPI_Waitall` completes several).
    /// (The stream's call count, wrapping: it only tells apart the calls
    /// whose receives are still being matched.)
    pub call: u32,
    pub in_call: u32,
    /// Region call path when it was posted (sends) or waited for
    /// (receives), and its top-level region (global name id).
    pub path: u32,
    pub region: u32,
    /// Call site of the call (a call path id of the program's tables,
    /// `UNDEFINED` when unknown): the posting call for sends, the call
    /// that waited for receives.
    pub site: u32,
}

/// Enter and leave of the call that blocked for an operation, if one did
/// (`Blocked::get`): an `Option<(u64, u64)>` without its 8 bytes of tag,
/// "none" being an enter time no clock reaches. Operations are the
/// matcher's queues and the tracker's stores, so their size counts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Blocked {
    enter: u64,
    leave: u64,
}

impl Blocked {
    const NONE: u64 = u64::MAX;

    /// Enter and leave, if a call blocked.
    #[inline]
    pub fn get(self) -> Option<(u64, u64)> {
        (self.enter != Blocked::NONE).then_some((self.enter, self.leave))
    }
}

impl From<Option<(u64, u64)>> for Blocked {
    #[inline]
    fn from(b: Option<(u64, u64)>) -> Blocked {
        match b {
            // A call entered at the very end of time is taken as none.
            Some((enter, leave)) => Blocked { enter, leave },
            None => Blocked {
                enter: Blocked::NONE,
                leave: 0,
            },
        }
    }
}

// The size the matcher's bound and the in-flight count were sized with
// (72 bytes before call sites; the call site took it to 80).
const _: () = assert!(std::mem::size_of::<P2pOp>() <= 80);

/// A rank entering a blocking collective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Arrival {
    /// Global communicator id and the collective's sequence number on it:
    /// the probe's, with above it the communicator's occurrence
    /// ([`instance_seq`]), so that the instances of communicators sharing
    /// the id past the caps (`unify.rs`) stay apart.
    pub comm: u32,
    pub seq: i64,
    /// World rank arriving, and the root's (`PEER_NONE` without one).
    pub rank: i32,
    pub root: i32,
    pub func: u16,
    /// Enter and leave, common ns.
    pub enter_ns: u64,
    pub leave_ns: u64,
    pub path: u32,
    pub region: u32,
    /// Members of the communicator: arrivals that complete an instance.
    pub size: u32,
    /// Call site of the collective call, as [`P2pOp::site`].
    pub site: u32,
}

impl P2pOp {
    /// Renumbers its ids into another server's tables (a parcel from
    /// another analyser, `exchange.rs`).
    pub(crate) fn remap(&mut self, ids: &IdMap) {
        let (comm, occurrence) = self.comm_use();
        self.comm = ids.comm_at(comm, occurrence);
        self.region = ids.name(self.region);
        self.path = ids.path(self.path);
        self.site = ids.path(self.site);
    }

    /// Its communicator and occurrence, for [`IdMap::resolve`].
    pub(crate) fn comm_use(&self) -> (u32, u32) {
        (self.comm, self.occ)
    }
}

impl Arrival {
    pub(crate) fn remap(&mut self, ids: &IdMap) {
        let (comm, occurrence) = self.comm_use();
        self.comm = ids.comm_at(comm, occurrence);
        self.region = ids.name(self.region);
        self.path = ids.path(self.path);
        self.site = ids.path(self.site);
    }

    /// Its communicator and occurrence, for [`IdMap::resolve`].
    pub(crate) fn comm_use(&self) -> (u32, u32) {
        (self.comm, occurrence_of(self.seq))
    }
}

/// Entries of [`Times::regions`] a region's end looks back through for its
/// name before it makes a new one.
const RECENT_REGIONS: usize = 8;

/// Folding a region's end into a pack's [`Times`].
trait RegionEnded {
    /// A call of top-level region `name` ended.
    fn region_ended(&mut self, name: u32, inside: u64, mpi: u64);
}

impl RegionEnded for Times {
    #[inline]
    fn region_ended(&mut self, name: u32, inside: u64, mpi: u64) {
        let recent = self.regions.len().saturating_sub(RECENT_REGIONS);
        match self.regions[recent..]
            .iter_mut()
            .rev()
            .find(|r| r.0 == name)
        {
            Some(r) => {
                r.1.sat(inside);
                r.2.sat(mpi);
            }
            None => self.regions.push((name, inside, mpi)),
        }
    }
}

/// Items by the board key they are published under, each key's in the
/// order they were made: the tracker splits as it goes, so that nothing
/// walks (and copies) a pack's operations again to split them.
pub(crate) struct Parts<T> {
    /// (key, items), keys in the order first used.
    pub parts: Vec<(u64, Vec<T>)>,
    /// The parts pushed to last and before it (sends to a neighbour and
    /// one's own receives alternate).
    last: usize,
    before: usize,
    /// Where each key's part is, once there are more than a few.
    index: FxHashMap<u64, usize>,
    /// Empty vectors to make parts of before allocating (reused ones, whose
    /// memory is already mapped); what is left is the caller's again.
    pub spare: Vec<Vec<T>>,
}

impl<T> Default for Parts<T> {
    fn default() -> Self {
        Parts::with_spare(Vec::new())
    }
}

/// Parts found by a scan before an index is kept.
const SCANNED_PARTS: usize = 8;

/// Keys whose last size a tracker remembers (a stream naming ever more
/// peers must not grow it).
const MAX_SIZES: usize = 1 << 12;

impl<T> Parts<T> {
    /// No parts yet, with empty vectors `spare` to make them of.
    pub(crate) fn with_spare(spare: Vec<Vec<T>>) -> Self {
        Parts {
            parts: Vec::new(),
            last: 0,
            before: 0,
            index: FxHashMap::default(),
            spare,
        }
    }

    /// Parts made so far.
    pub(crate) fn len(&self) -> usize {
        self.parts.len()
    }

    /// Adds `item` under `key`; a new part is made as large as `sizes` says
    /// the key's was in the last pack, so that it does not grow by copies.
    #[inline(always)]
    fn push(&mut self, key: u64, item: T, sizes: &FxHashMap<u64, usize>) {
        let at = match (self.parts.get(self.last), self.parts.get(self.before)) {
            (Some(p), _) if p.0 == key => self.last,
            (_, Some(p)) if p.0 == key => self.before,
            _ => self.find(key, sizes),
        };
        if at != self.last {
            self.before = self.last;
            self.last = at;
        }
        self.parts[at].1.push(item);
    }

    #[inline(never)]
    fn find(&mut self, key: u64, sizes: &FxHashMap<u64, usize>) -> usize {
        let found = if self.parts.len() <= SCANNED_PARTS {
            self.parts.iter().position(|p| p.0 == key)
        } else {
            if self.index.is_empty() {
                self.index = (self.parts.iter().enumerate())
                    .map(|(i, p)| (p.0, i))
                    .collect();
            }
            self.index.get(&key).copied()
        };
        found.unwrap_or_else(|| {
            // A little over the last size, so that a pack slightly
            // larger than the last does not double the part.
            let n = sizes.get(&key).map_or(0, |n| n + n / 16 + 8);
            let mut part = self.spare.pop().unwrap_or_default();
            part.reserve(n);
            self.parts.push((key, part));
            if !self.index.is_empty() {
                self.index.insert(key, self.parts.len() - 1);
            }
            self.parts.len() - 1
        })
    }

    /// Remembers each part's size in `sizes`, for the next pack.
    fn remember(&self, sizes: &mut FxHashMap<u64, usize>) {
        if sizes.len() + self.parts.len() > MAX_SIZES {
            sizes.clear();
        }
        for (k, v) in &self.parts {
            sizes.insert(*k, v.len());
        }
    }
}

/// What one pack yields.
#[derive(Default)]
pub(crate) struct Derived {
    pub msgs: Vec<Msg>,
    /// By receiving world rank (as `u32`).
    pub ops: Parts<P2pOp>,
    pub arrivals: Vec<Arrival>,
    pub times: Times,
    /// The pack's events without those recorded while paused, when it
    /// held any: what the analyses fold instead of the pack.
    pub kept: Option<Vec<Event>>,
    /// The pages ([`op::page`]) of the pack's events.
    pub pages: u32,
}

/// When a stream's recording was paused, on the probe's clock: from its
/// `PAUSE` and `RESUME` markers (`MPI_Pcontrol`, `hark_pause`) and from
/// its answers to a service's pause and resume ([`Pauses::apply`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pauses {
    /// Closed spans, `[from, to)`.
    spans: Vec<(u64, u64)>,
    /// The span still open: paused since.
    open: Option<u64>,
    /// Closed spans not yet handed on in a pack's [`Times`].
    unsaid: Vec<(u64, u64)>,
}

impl Pauses {
    /// Paused (`true`) or resumed at `at`; a repeat is ignored. Returns
    /// how long the span a resume closes lasted.
    pub(crate) fn apply(&mut self, pause: bool, at: u64) -> u64 {
        match (pause, self.open) {
            (true, None) => self.open = Some(at),
            (false, Some(from)) => {
                self.open = None;
                if at > from {
                    self.spans.push((from, at));
                    self.unsaid.push((from, at));
                    return at - from;
                }
            }
            _ => {}
        }
        0
    }

    /// Whether any pause is known (the common case is none: one check).
    #[inline(always)]
    fn any(&self) -> bool {
        self.open.is_some() || !self.spans.is_empty()
    }

    /// Whether an event that started at `t` was recorded while paused.
    fn covers(&self, t: u64) -> bool {
        self.open.is_some_and(|from| t >= from)
            || self
                .spans
                .iter()
                .rev()
                .any(|&(from, to)| t >= from && t < to)
    }
}

impl Derived {
    #[inline(always)]
    fn op(&mut self, op: P2pOp, sizes: &FxHashMap<u64, usize>) {
        self.ops.push(op.dst as u32 as u64, op, sizes);
    }
}

/// A collective instance's sequence number: the probe's, `seq`, on the
/// `occurrence`-th communicator with its members. The occurrence is there
/// for every communicator, folded or not: another analyser of the job, or
/// a partial merged, may have folded this one into an id that others
/// share (`unify.rs`).
#[inline]
pub(crate) fn instance_seq(occurrence: u32, seq: i32) -> i64 {
    (occurrence as i64) << 32 | seq as u32 as i64
}

/// The occurrence in an [`instance_seq`].
#[inline]
pub(crate) fn occurrence_of(instance_seq: i64) -> u32 {
    (instance_seq >> 32) as u32
}

/// The pattern a blocking collective of class `name` can show, if any.
fn pattern_of_collective(name: &str) -> Option<Pattern> {
    Some(match name {
        "MPI_Barrier" => Pattern::WaitBarrier,
        "MPI_Allreduce"
        | "MPI_Allgather"
        | "MPI_Allgatherv"
        | "MPI_Alltoall"
        | "MPI_Alltoallv"
        | "MPI_Alltoallw"
        | "MPI_Reduce_scatter"
        | "MPI_Reduce_scatter_block" => Pattern::WaitNxN,
        "MPI_Bcast" | "MPI_Scatter" | "MPI_Scatterv" => Pattern::LateBroadcast,
        "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" => Pattern::EarlyReduce,
        _ => return None,
    })
}

/// The pattern of each MPI function (by index in `FUNCTIONS`): a
/// collective's name is compared once, not per call.
pub(crate) fn collective_pattern(func: usize) -> Option<Pattern> {
    static TABLE: std::sync::OnceLock<Vec<Option<Pattern>>> = std::sync::OnceLock::new();
    TABLE
        .get_or_init(|| {
            FUNCTIONS
                .iter()
                .map(|f| pattern_of_collective(f.name))
                .collect()
        })
        .get(func)
        .copied()
        .flatten()
}

/// Receives of the call being completed on one thread, held until all the
/// call's completion records are seen (a pack may cut them).
#[derive(Default)]
struct OpenCall {
    call: u32,
    details_left: u64,
    recvs: Vec<P2pOp>,
}

/// One thread's call paths already found: `root` the empty stack's, and
/// `below[d]` the name at depth `d` with the path of the stack up to and
/// with it, valid while the stack under `d` is unchanged.
#[derive(Default)]
struct Known {
    root: Option<(u32, u32)>,
    below: Vec<Option<(u32, (u32, u32))>>,
}

impl Known {
    /// The path of `stack`, if found before.
    fn get(&self, stack: &[u32]) -> Option<(u32, u32)> {
        match stack.split_last() {
            None => self.root,
            Some((&name, under)) => match self.below.get(under.len()) {
                Some(&Some((n, c))) if n == name => Some(c),
                _ => None,
            },
        }
    }

    /// `c` is the path of `stack`.
    fn set(&mut self, stack: &[u32], c: (u32, u32)) {
        match stack.split_last() {
            None => self.root = Some(c),
            Some((&name, under)) => {
                let d = under.len();
                if self.below.len() <= d {
                    self.below.resize(d + 1, None);
                }
                self.below[d] = Some((name, c));
            }
        }
    }

    /// `name` is entered at depth `d`: what was found under another name
    /// there no longer holds, nor anything deeper.
    fn enter(&mut self, d: usize, name: u32) {
        if !matches!(self.below.get(d), Some(Some((n, _))) if *n == name) {
            self.below.truncate(d);
        }
    }
}

/// One thread's tracking state.
struct Thread {
    /// Open regions (global name ids).
    stack: Vec<u32>,
    /// The stack's call path and top-level region, while the stack does
    /// not change.
    current: Option<(u32, u32)>,
    /// The call paths found for the stack's prefixes, so that a region
    /// entered again (a loop's) or left finds its path without hashing
    /// the stack.
    known: Known,
    /// The last MPI call (function, enter, leave), which detail records
    /// belong to.
    last_call: Option<(u16, u64, u64)>,
    /// Receives of the call whose details are being read.
    open: OpenCall,
    /// For [`Times`]: depth of open regions, the top-level one (global
    /// name id), its entry time and the MPI time inside it so far. Depth
    /// counts begins and ends whatever their names, as the efficiencies
    /// always did (the call-path stacks above match names).
    top: (u32, u32, u64, u64),
}

impl Default for Thread {
    fn default() -> Thread {
        Thread {
            stack: Vec::new(),
            current: None,
            known: Known::default(),
            last_call: None,
            open: OpenCall::default(),
            top: (0, UNDEFINED, 0, 0),
        }
    }
}

impl Thread {
    /// A region begins or ends at `start` (common ns): the top-level
    /// regions' times.
    fn top(&mut self, code: u16, name: u32, start: u64, times: &mut Times) {
        let t = &mut self.top;
        if code == op::REGION_BEGIN {
            if t.0 == 0 {
                *t = (0, name, start, 0);
            }
            t.0 += 1;
        } else if t.0 > 0 {
            t.0 -= 1;
            if t.0 == 0 && t.1 != UNDEFINED {
                times.region_ended(t.1, start.saturating_sub(t.2), t.3);
            }
        }
    }
}

/// One stream's unpacking state: its outstanding requests, each thread's
/// region stack and the call paths it named.
#[derive(Default)]
pub(crate) struct Unpacker {
    /// Publish sends, receives and arrivals for matching: only when some
    /// knowledge source is sensitive to wait states.
    cross: bool,
    tracker: RequestTable,
    /// By the events' thread index: one place for all a thread's state,
    /// looked up once per event.
    threads: Vec<Thread>,
    /// Call path ids by region stack.
    paths: FxHashMap<Vec<u32>, u32>,
    /// Members per global communicator (looked up once each).
    sizes: FxHashMap<u32, u32>,
    sends: u64,
    recvs: u64,
    /// Calls so far, wrapping (`P2pOp::call`).
    calls: u32,
    /// How many messages and arrivals the last pack yielded, and how many
    /// operations per key: the next one's vectors are made that large at
    /// once, instead of growing (and copying) a dozen times per pack.
    yielded: (usize, usize),
    op_sizes: FxHashMap<u64, usize>,
    /// How many parts of operations the last pack yielded.
    op_parts: usize,
    /// The error code of the stream's `MPI_Abort` (its event's tag), once
    /// one was seen.
    abort_code: Option<i32>,
    /// When the stream was paused.
    pauses: Pauses,
    /// Paused time of spans closed and not yet handed on in a pack's
    /// [`Times`].
    paused_ns: u64,
    /// Set while an event recorded during a pause is tracked: the
    /// operations it yields keep matching in step but judge no wait.
    neutral: bool,
}

/// Builds `kept`, the pack's events without those recorded while paused,
/// once the first paused one (the `i`-th of `events`) is met.
#[inline(always)]
fn keep(kept: &mut Option<Vec<Event>>, events: &[Event], i: usize, paused: bool) {
    match (kept.as_mut(), paused) {
        (Some(k), false) => k.push(events[i]),
        (None, true) => *kept = Some(events[..i].to_vec()),
        _ => {}
    }
}

/// The op code of `MPI_Abort`, whose event carries its error code.
fn abort_op() -> u16 {
    static OP: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *OP.get_or_init(|| op::mpi_op("MPI_Abort").unwrap_or(u16::MAX))
}

impl Unpacker {
    /// A stream's unpacker; `cross`: publish what matching needs.
    pub(crate) fn new(cross: bool) -> Unpacker {
        Unpacker {
            cross,
            ..Unpacker::default()
        }
    }

    /// How many parts of operations the last pack yielded: about as many
    /// spare vectors as the next one will want (`Parts::with_spare`).
    pub(crate) fn op_parts(&self) -> usize {
        self.op_parts
    }

    /// Whether its packs' [`Times`] are gathered (only when some knowledge
    /// source looks across ranks: otherwise they stay empty).
    pub(crate) fn gathers_times(&self) -> bool {
        self.cross
    }

    /// Requests the tracker forgot, for the diagnostics.
    pub(crate) fn forgotten(&self) -> u64 {
        self.tracker.forgotten
    }

    /// The error code the process passed to `MPI_Abort`, if it called it.
    pub(crate) fn abort_code(&self) -> Option<i32> {
        self.abort_code
    }

    /// A service's pause (`true`) or resume reached the stream at `at`.
    pub(crate) fn paused(&mut self, pause: bool, at: u64) {
        self.paused_ns += self.pauses.apply(pause, at);
    }

    /// `op` as recorded: while paused (`neutral`), without its times, so
    /// that it pairs in its channel's order but makes no wait state and
    /// no clock-condition violation.
    #[inline(always)]
    fn mark(&self, mut op: P2pOp) -> P2pOp {
        if self.neutral {
            op.post_ns = 0;
            op.block = None.into();
        }
        op
    }

    /// `thread`'s state, made if it is new.
    #[inline(always)]
    fn thread(&mut self, thread: usize) -> &mut Thread {
        if thread >= self.threads.len() {
            self.threads.resize_with(thread + 1, Thread::default);
        }
        &mut self.threads[thread]
    }

    /// The call path of `thread` and its top-level region.
    #[inline(always)]
    fn callpath(&mut self, cx: &StreamCx<'_>, thread: usize) -> (u32, u32) {
        match self.threads.get(thread) {
            Some(Thread {
                current: Some(c), ..
            }) => *c,
            _ => self.find_callpath(cx, thread),
        }
    }

    /// [`Unpacker::callpath`] when the thread's stack changed.
    #[cold]
    fn find_callpath(&mut self, cx: &StreamCx<'_>, thread: usize) -> (u32, u32) {
        let c = self.lookup(cx, thread);
        let t = self.thread(thread);
        t.current = Some(c);
        t.known.set(&t.stack, c);
        c
    }

    #[cold]
    fn lookup(&mut self, cx: &StreamCx<'_>, thread: usize) -> (u32, u32) {
        let stack = self.threads.get(thread).map_or(&[][..], |t| &t.stack[..]);
        // Past the depth the regions keep, a path is its ancestor's.
        let stack = &stack[..stack.len().min(hark_analyses::MAX_REGION_DEPTH)];
        let top = stack.first().copied().unwrap_or(UNDEFINED);
        if let Some(&p) = self.paths.get(stack) {
            return (p, top);
        }
        let other = ["<other>".to_string()];
        let id = if self.paths.len() >= MAX_PATHS {
            cx.path_of_text(&other[0])
        } else {
            cx.path_of(stack)
        };
        let id = id.unwrap_or(UNDEFINED);
        if self.paths.len() < MAX_PATHS {
            self.paths.insert(stack.to_vec(), id);
        }
        (id, top)
    }

    /// Tracks one pack, in stream order.
    pub(crate) fn pack(&mut self, cx: &StreamCx<'_>, me: i32, events: &[Event]) -> Derived {
        self.pack_into(cx, me, events, Derived::default())
    }

    /// [`Unpacker::pack`] into `out`'s vectors (empty, perhaps reused: a
    /// pack's worth of fresh memory is page-faulted and zeroed by the
    /// kernel, which costs more than the tracking).
    pub(crate) fn pack_into(
        &mut self,
        cx: &StreamCx<'_>,
        me: i32,
        events: &[Event],
        mut out: Derived,
    ) -> Derived {
        out.msgs.reserve(self.yielded.0);
        out.arrivals.reserve(self.yielded.1);
        if !self.cross {
            // The request tracker alone: the messages.
            for (i, ev) in events.iter().enumerate() {
                let code = ev.op();
                out.pages |= op::page(code);
                if code == op::PAUSE || code == op::RESUME {
                    self.paused_ns += self.pauses.apply(code == op::PAUSE, ev.start.get());
                }
                let paused = self.pauses.any() && self.pauses.covers(ev.start.get());
                keep(&mut out.kept, events, i, paused);
                if code < op::IO_BASE {
                    if let Some(m) = self.tracker.step(ev) {
                        if !paused {
                            out.msgs.push(m);
                        }
                    }
                    if code == abort_op() {
                        self.abort_code = Some(ev.tag.get());
                    }
                }
            }
            self.yielded = (out.msgs.len(), 0);
            return out;
        }
        // The pack's earliest start and latest end, on the probe's clock.
        let (mut first, mut last) = (u64::MAX, 0u64);
        // One decoding of each event serves the messages and matching
        // (`call` and `detail` do what `RequestTable::step` does, with one map
        // of requests).
        for (i, ev) in events.iter().enumerate() {
            let code = ev.op();
            out.pages |= op::page(code);
            let thread = ev.thread.get() as usize;
            let kind = op::kind(code);
            if !matches!(
                kind,
                op::OpKind::Detail | op::OpKind::Unknown | op::OpKind::Sample
            ) {
                first = first.min(ev.start.get());
                last = last.max(ev.end.get());
            }
            if self.pauses.any() || code == op::PAUSE {
                if code == op::PAUSE || code == op::RESUME {
                    self.paused_ns += self.pauses.apply(code == op::PAUSE, ev.start.get());
                }
                let paused = self.pauses.covers(ev.start.get());
                keep(&mut out.kept, events, i, paused);
                if paused {
                    self.paused_event(cx, me, thread, kind, ev, &mut out);
                    continue;
                }
            }
            match kind {
                op::OpKind::Mpi(func) => self.call(cx, me, thread, func, ev, &mut out),
                op::OpKind::Detail => self.detail(cx, me, thread, code, ev, &mut out),
                // An instrumented function is a region of its thread.
                op::OpKind::User
                    if matches!(
                        code,
                        op::REGION_BEGIN | op::REGION_END | op::FUNCTION_ENTER | op::FUNCTION_EXIT
                    ) =>
                {
                    let function = code == op::FUNCTION_ENTER || code == op::FUNCTION_EXIT;
                    let name = if function {
                        cx.function(ev.obj.get())
                    } else {
                        cx.name(ev.obj.get())
                    };
                    let begin = code == op::REGION_BEGIN || code == op::FUNCTION_ENTER;
                    let start = cx.common(ev.start.get());
                    let t = self.thread(thread);
                    let as_region = if begin {
                        op::REGION_BEGIN
                    } else {
                        op::REGION_END
                    };
                    t.top(as_region, name, start, &mut out.times);
                    let (stack, known) = (&mut t.stack, &mut t.known);
                    let changed = if begin {
                        let room = stack.len() < MAX_STACK;
                        if room {
                            known.enter(stack.len(), name);
                            stack.push(name);
                        }
                        room
                    } else if let Some(at) = stack.iter().rposition(|&n| n == name) {
                        stack.truncate(at);
                        true
                    } else {
                        false
                    };
                    // The path is the one found before for this stack, if
                    // any (an unchanged stack keeps its own).
                    if changed {
                        t.current = known.get(stack);
                    }
                }
                op::OpKind::Unknown => out.times.unknown += 1,
                _ => {}
            }
        }
        let times = &mut out.times;
        if first <= last && cx.is_offset() {
            // One offset keeps the order: convert the two ends only.
            (times.first, times.last) = (cx.common(first), cx.common(last));
        } else if first <= last {
            for ev in events {
                if !matches!(
                    op::kind(ev.op()),
                    op::OpKind::Detail | op::OpKind::Unknown | op::OpKind::Sample
                ) {
                    times.first = times.first.min(cx.common(ev.start.get()));
                    times.last = times.last.max(cx.common(ev.end.get()));
                }
            }
        }
        times.open = self.threads.iter().any(|t| t.top.0 > 0);
        times.paused_ns = std::mem::take(&mut self.paused_ns);
        times.paused = std::mem::take(&mut self.pauses.unsaid);
        self.yielded = (out.msgs.len(), out.arrivals.len());
        self.op_parts = out.ops.len();
        out.ops.remember(&mut self.op_sizes);
        out
    }

    /// An event recorded while paused: tracked for matching and requests
    /// (its operations [`Unpacker::mark`]ed), and nothing else: no message,
    /// no time in MPI, in no region.
    #[cold]
    fn paused_event(
        &mut self,
        cx: &StreamCx<'_>,
        me: i32,
        thread: usize,
        kind: op::OpKind,
        ev: &Event,
        out: &mut Derived,
    ) {
        let t = &out.times;
        let saved = (t.mpi_ns, t.mpi_all_ns, t.mpi_calls, out.msgs.len());
        let top = self.threads.get(thread).map(|t| t.top);
        self.neutral = true;
        match kind {
            op::OpKind::Mpi(func) => self.call(cx, me, thread, func, ev, out),
            op::OpKind::Detail => self.detail(cx, me, thread, ev.op(), ev, out),
            _ => {}
        }
        self.neutral = false;
        let t = &mut out.times;
        (t.mpi_ns, t.mpi_all_ns, t.mpi_calls) = (saved.0, saved.1, saved.2);
        out.msgs.truncate(saved.3);
        if let (Some(top), Some(t)) = (top, self.threads.get_mut(thread)) {
            t.top = top;
        }
    }

    // Inlined into the loop over a pack: its prologue and epilogue cost
    // as much as a call's own work for most calls.
    #[inline(always)]
    fn call(
        &mut self,
        cx: &StreamCx<'_>,
        me: i32,
        thread: usize,
        func: usize,
        ev: &Event,
        out: &mut Derived,
    ) {
        let (enter, leave) = (cx.common(ev.start.get()), cx.common(ev.end.get()));
        let class = FUNCTIONS[func].class;
        if class == Class::Other && ev.op() == abort_op() {
            self.abort_code = Some(ev.tag.get());
        }
        let t = self.thread(thread);
        t.last_call = Some((func as u16, enter, leave));
        let times = &mut out.times;
        times.mpi_all_ns.sat(ev.duration());
        match class {
            Class::Init => times.init_end = Some(leave),
            Class::Finalize => times.fin_start = Some(enter),
            _ => {
                let d = leave.saturating_sub(enter);
                times.mpi_ns.sat(d);
                times.mpi_calls = true;
                if t.top.0 > 0 {
                    t.top.3.sat(d);
                }
            }
        }
        // A new call: whatever the last one left open is complete (most
        // calls find nothing open: checked here, not in a call).
        let held = t.open.details_left != 0 || !t.open.recvs.is_empty();
        self.calls = self.calls.wrapping_add(1);
        if held {
            self.close_call(thread, out);
        }
        let times = &mut out.times;
        if matches!(class, Class::Init | Class::Finalize) {
            times.init_fin.push((enter, leave));
        }
        let (peer, tag, local) = (ev.peer.get(), ev.tag.get(), ev.obj.get());
        let (comm, occ) = (cx.comm(local), cx.comm_occurrence(local));
        let site = cx.site(ev.callsite());
        match class {
            Class::Send | Class::Sendrecv => out.msgs.extend(Msg::of_call(true, func, ev)),
            Class::Recv => out.msgs.extend(Msg::of_call(false, func, ev)),
            Class::Isend | Class::Irecv | Class::SendInit | Class::RecvInit => {
                let posted = Posted {
                    post_ns: enter,
                    comm,
                    occ,
                    peer,
                    tag,
                    ..Posted::of_call(class, func, ev)
                };
                self.tracker.post(ev.extra(), posted);
            }
            _ => {}
        }
        match class {
            Class::Send | Class::Isend | Class::Sendrecv if peer >= 0 => {
                let block = (class == Class::Send).then_some((enter, leave));
                let path = self.callpath(cx, thread);
                let op = self.send((comm, occ), me, peer, tag, enter, block, func, path, site);
                out.op(op, &self.op_sizes);
            }
            Class::Recv if peer >= 0 => {
                let (path, region) = self.callpath(cx, thread);
                self.recvs += 1;
                let op = self.mark(P2pOp {
                    side: Side::Recv,
                    comm,
                    occ,
                    src: peer,
                    dst: me,
                    tag,
                    seq: self.recvs,
                    post_ns: enter,
                    block: Some((enter, leave)).into(),
                    func: func as u16,
                    call: self.calls,
                    in_call: 1,
                    path,
                    region,
                    site,
                });
                out.op(op, &self.op_sizes);
            }
            Class::Start => {
                let Some(p) = self.tracker.start(ev) else {
                    return;
                };
                if !p.send {
                    p.post_ns = enter;
                } else if p.persistent && p.peer >= 0 {
                    let p = *p;
                    let path = self.callpath(cx, thread);
                    let comm = (p.comm, p.occ);
                    let op = self.send(comm, me, p.peer, p.tag, enter, None, func, path, site);
                    out.op(op, &self.op_sizes);
                }
            }
            Class::RequestMisc if FUNCTIONS[func].name == "MPI_Request_free" => {
                self.tracker.pending.remove(&ev.extra());
            }
            Class::Wait | Class::Test => {
                let open = &mut self.threads[thread].open;
                open.call = self.calls;
                open.details_left = ev.bytes.get();
            }
            Class::Collective if comm != UNDEFINED && collective_pattern(func).is_some() => {
                let (path, region) = self.callpath(cx, thread);
                // Looked up before `entry`, which is not inlined and makes
                // room first: every collective after a communicator's first.
                let size = match self.sizes.get(&comm) {
                    Some(&size) => size,
                    None => *self.sizes.entry(comm).or_insert(cx.comm_size(comm) as u32),
                };
                let a = Arrival {
                    comm,
                    seq: instance_seq(occ, tag),
                    rank: me,
                    root: peer,
                    func: func as u16,
                    enter_ns: enter,
                    leave_ns: leave,
                    path,
                    region,
                    size,
                    site,
                };
                out.arrivals.push(a);
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        (comm, occ): (u32, u32),
        me: i32,
        peer: i32,
        tag: i32,
        enter: u64,
        block: Option<(u64, u64)>,
        func: usize,
        (path, region): (u32, u32),
        site: u32,
    ) -> P2pOp {
        self.sends += 1;
        self.mark(P2pOp {
            side: Side::Send,
            comm,
            occ,
            src: me,
            dst: peer,
            tag,
            seq: self.sends,
            post_ns: enter,
            block: block.into(),
            func: func as u16,
            call: 0,
            in_call: 1,
            path,
            region,
            site,
        })
    }

    fn detail(
        &mut self,
        cx: &StreamCx<'_>,
        me: i32,
        thread: usize,
        code: u16,
        ev: &Event,
        out: &mut Derived,
    ) {
        // Persistent requests stay posted until freed (the next Start sets
        // their time again); others are done once completed or cancelled.
        let posted = self.tracker.complete(ev.extra());
        let last = self.threads.get(thread).and_then(|t| t.last_call);
        out.msgs
            .extend(Msg::of_completion(code, posted, last.map(|l| l.0), ev));
        let Some((func, enter, leave)) = last else {
            return;
        };
        let class = FUNCTIONS[func as usize].class;
        let posted = posted.filter(|p| !p.send);
        if class == Class::Wait || class == Class::Test {
            let open = &mut self.threads[thread].open;
            open.details_left = open.details_left.saturating_sub(1);
        }
        let peer = ev.peer.get();
        if code == op::COMPLETE_RECV && peer >= 0 {
            // The completion names its communicator; if it cannot be
            // described, the posting call's is the same one.
            let (comm, occ) = match cx.comm(ev.obj.get()) {
                UNDEFINED => posted.map_or((UNDEFINED, 0), |p| (p.comm, p.occ)),
                c => (c, cx.comm_occurrence(ev.obj.get())),
            };
            let posted = posted.map(|p| p.post_ns);
            let (post_ns, block) = match class {
                // The receive side of MPI_Sendrecv follows its call.
                Class::Sendrecv => (enter, Some((enter, leave))),
                Class::Wait => (posted.unwrap_or(enter), Some((enter, leave))),
                _ => (posted.unwrap_or(enter), None),
            };
            let (path, region) = self.callpath(cx, thread);
            let op = self.mark(P2pOp {
                side: Side::Recv,
                comm,
                occ,
                src: peer,
                dst: me,
                tag: ev.tag.get(),
                // Numbered when published (`close_call` for the held ones).
                seq: 0,
                post_ns,
                block: block.into(),
                func,
                call: self.calls,
                in_call: 1,
                path,
                region,
                // The detail carries the call site of the call it follows.
                site: cx.site(ev.callsite()),
            });
            if class == Class::Wait || class == Class::Test {
                let open = &mut self.threads[thread].open;
                if open.details_left == 0 && open.recvs.is_empty() {
                    // The call's last record and only receive: published
                    // at once, as `close_call` would.
                    self.recvs += 1;
                    let op = P2pOp {
                        call: open.call,
                        seq: self.recvs,
                        ..op
                    };
                    out.op(op, &self.op_sizes);
                    return;
                }
                open.recvs.push(op);
            } else {
                self.recvs += 1;
                let op = P2pOp {
                    seq: self.recvs,
                    ..op
                };
                out.op(op, &self.op_sizes);
            }
        }
        if (class == Class::Wait || class == Class::Test)
            && self.threads[thread].open.details_left == 0
        {
            self.close_call(thread, out);
        }
    }

    /// Publishes the receives of `thread`'s open call, each knowing how
    /// many the call completed.
    fn close_call(&mut self, thread: usize, out: &mut Derived) {
        let Some(open) = self.threads.get_mut(thread).map(|t| &mut t.open) else {
            return;
        };
        let n = open.recvs.len() as u32;
        for mut op in open.recvs.drain(..) {
            // The call's own number: another thread's calls may come
            // between it and its completion records, and two calls must
            // not share one (the matcher groups a call's receives by it).
            op.call = open.call;
            op.in_call = n;
            // Numbered now, not when its completion record was read: the
            // receives of one stream then reach the matcher in the order
            // of their numbers, which Wrong Order relies on (another
            // thread may publish receives while this call is held).
            self.recvs += 1;
            op.seq = self.recvs;
            out.op(op, &self.op_sizes);
        }
        open.details_left = 0;
    }

    /// Publishes every receive still held (end of stream).
    pub(crate) fn flush(&mut self) -> Derived {
        let mut out = Derived::default();
        for t in 0..self.threads.len() {
            self.close_call(t, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_analyses::Input;

    /// What the unpacker gathers of a pack gives the summary's state that
    /// walking its events gives.
    #[test]
    fn the_unpacker_s_times_give_the_summary_what_the_events_give() {
        let f = |name| op::mpi_op(name).unwrap();
        let mut packs: Vec<Vec<Event>> = Vec::new();
        let mut t = 1_000;
        for p in 0..4u64 {
            let mut pack = Vec::new();
            let mut push = |code: u16, dur: u64| {
                let mut e = Event::new(code, t, t + dur);
                e.peer.set(1);
                e.extra.set(7);
                e.bytes.set(1);
                pack.push(e);
                t += dur + 13;
            };
            if p == 0 {
                push(f("MPI_Init"), 500);
            }
            push(op::REGION_BEGIN, 0);
            push(f("MPI_Isend"), 30 + p);
            push(f("MPI_Waitall"), 90);
            push(op::COMPLETE_SEND, 0);
            push(op::io::WRITE, 40);
            push(0x7ff0, 5);
            push(f("MPI_Recv"), 70 * p);
            push(op::REGION_END, 0);
            if p == 3 {
                push(f("MPI_Finalize"), 800);
            }
            packs.push(pack);
        }
        let cx = StreamCx::bare(0, 10, 64);
        let mut unpacker = Unpacker::new(true);
        let summary = hark_analyses::registry::select(&["summary"])
            .unwrap()
            .remove(0);
        let (mut walked, mut gathered) = (summary.new_rank(), summary.new_rank());
        for pack in &packs {
            let derived = unpacker.pack(&cx, 0, pack);
            let input = Input {
                events: pack,
                ..Input::default()
            };
            walked.fold(&cx, &input);
            let times = Input {
                times: Some(&derived.times),
                ..input
            };
            gathered.fold(&cx, &times);
        }
        assert_eq!(walked.save(), gathered.save());
    }

    #[test]
    fn a_region_called_in_a_loop_has_one_entry_per_pack() {
        let mut t = Times::default();
        for _ in 0..100 {
            t.region_ended(7, 10, 3);
            t.region_ended(9, 1, 0);
        }
        assert_eq!(t.regions, vec![(7, 1000, 300), (9, 100, 0)]);
        // Only the recent entries are looked through: a name last seen
        // further back gets an entry of its own, and the sums stay whole.
        for name in 10..10 + RECENT_REGIONS as u32 {
            t.region_ended(name, 1, 1);
        }
        t.region_ended(7, 5, u64::MAX);
        assert_eq!(t.regions.len(), 3 + RECENT_REGIONS);
        assert_eq!(t.regions.last(), Some(&(7, 5, u64::MAX)));
        t.region_ended(7, 5, 1);
        assert_eq!(t.regions.last(), Some(&(7, 10, u64::MAX)));
    }
}
