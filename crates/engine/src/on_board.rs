//! The knowledge sources on the board: one level per program.
//!
//! ```text
//!  server reader ─"frames"─▶ unpack ─"batches"──▶ analyses: summary, mpi-profile, ...  (serial by stream)
//!  (keyed by stream)        (serial    │
//!                           by stream) ├"p2p-ops"─▶ match-p2p ────────┐       (serial by receiver)
//!                                      └"arrivals"▶ match-collectives ┤       (serial by instance)
//!                                                                     └"waits"▶ analyses-of-waits:
//!                                                                               wait-states, efficiency, ...
//!                                                                               (serial by stream)
//! ```
//!
//! Each arrow is an entry kind ([`hark_board::EntryKind`]) declared once
//! below with its payload type (`FRAMES: EntryKind<StreamFrame>`,
//! `BATCHES: EntryKind<Unpacked>`, ...): who publishes an entry and who reads
//! it say its payload's type in their signatures, with no string and no
//! downcast in between.
//!
//! `unpack` unifies a stream's definitions and runs its [`Unpacker`] once
//! (`unpack.rs`): it publishes the pack with the messages it completed
//! (`batches`), each send and receive for matching (`p2p-ops`, keyed by the
//! receiving rank, so every message channel lives on one key), and each
//! entry into a blocking collective (`arrivals`, keyed by communicator and
//! sequence number). The matchers publish the wait states they find
//! (`waits`), keyed by the stream of the rank that waited. `analyses` folds a
//! batch into the state of every analysis whose spec names events, one after
//! the other in one job, and `analyses-of-waits` the wait states into those
//! whose spec names waits: a job per analysis and pack cost more than the
//! folds of most packs (a pack of samples holds one to six events), and one
//! worker folding a pack keeps it in its cache. Ranks run in parallel.
//!
//! States live in one map per level, a row's states of every analysis
//! behind one lock (and one map per matcher); [`OnBoard::finish`] drains the
//! level, takes them out and folds them through a [`Partial`], as a merge
//! of partials from several servers would.
//!
//! [`OnBoard::snapshot`] never makes a worker wait: states are copy on
//! write. Each sits in an `Arc` behind its row's lock; a snapshot holds a
//! row's lock only to take second references, and saves the states outside
//! any lock. A worker that folds into a state a snapshot still reads folds
//! into a copy of its own instead ([`Contention::copies`]). So a worker
//! waits at most for a row's reference counts to be taken, never for a
//! copy.

mod flow;

use crate::exchange::{program_key, Exchange, Link, Parcel};
use crate::matching::{Instances, P2pMatcher};
use crate::partial::{Partial, RankAccounting};
use crate::program::rank_record;
use crate::program::{rank_accounting, ProgramAnalysis};
use crate::stream::{StreamAccounting, StreamInfo};
use crate::unpack::{Arrival, Derived, Msg, P2pOp, Parts, Times, Unpacker, Wait};
use flow::{split_by, Counted, Flow, Part};
use hark_analyses::internal::FxHashMap;
use hark_analyses::{DynAnalysis, DynRank};
use hark_analyses::{Error, ErrorKind};
use hark_analyses::{Input, Sensitivity};
use hark_board::{Board, Context, EntryKind, KnowledgeSource, KsId, Level, Typed};
use hark_model::Program;
use hark_sync::lock;
use hark_wire::{Def, Event, PackBytes, EVENT_SIZE};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Stream input, which the server submits through [`OnBoard::defs`],
/// [`OnBoard::pack`] and the like, keyed by stream: `unpack` reads it.
const FRAMES: EntryKind<StreamFrame> = EntryKind::new("frames");
/// A pack with what unpacking derived of it, keyed by stream: every
/// analysis sensitive to events reads it.
const BATCHES: EntryKind<Unpacked> = EntryKind::new("batches");
/// Point-to-point operations to match, keyed by receiving rank:
/// `match-p2p` reads them.
const P2P_OPS: EntryKind<Counted<P2pOp>> = EntryKind::new("p2p-ops");
/// Arrivals at collectives, keyed by instance: `match-collectives` reads
/// them.
const ARRIVALS: EntryKind<Counted<Arrival>> = EntryKind::new("arrivals");
/// Wait states, keyed by the stream of the rank that waited: every analysis
/// sensitive to waits reads them.
const WAITS: EntryKind<Waits> = EntryKind::new("waits");

/// A "frames" entry: one frame of one stream that the analyses consume
/// (not a wire frame: only what the analyses read of one).
struct StreamFrame {
    info: Arc<StreamInfo>,
    what: What,
}

enum What {
    Defs(Vec<Def>),
    Pack(Arc<Batch>),
    /// A service paused (`true`) or resumed the stream at this time of
    /// its probe's clock.
    Paused(bool, u64),
}

/// One pack of one stream. Its drop gives its bytes back to the program's
/// in-flight count, which is what the server throttles on, and its buffer to
/// the program's pool.
struct Batch {
    /// The events, in a copy or in the buffer a socket's pack was read
    /// into (`OnBoard::pack_owned`).
    pack: PackBytes,
    /// A sampled-out stream's totals in place of events.
    counts: Option<hark_wire::Counts>,
    flow: Arc<Flow>,
    /// Its stream's bytes in flight ([`StreamInfo::in_flight`]).
    stream: Arc<AtomicU64>,
}

impl Batch {
    /// The pack's events.
    fn events(&self) -> &[Event] {
        self.pack.events()
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let bytes = std::mem::size_of_val(self.events()) as u64;
        self.flow.in_flight.fetch_sub(bytes, Ordering::Relaxed);
        self.stream.fetch_sub(bytes, Ordering::Relaxed);
        let pack = std::mem::take(&mut self.pack);
        self.flow.give_back(pack.into_buffer());
    }
}

/// A "batches" entry: a pack and what unpacking it derived for the
/// per-rank analyses (the messages its requests completed, its times).
struct Unpacked {
    info: Arc<StreamInfo>,
    batch: Arc<Batch>,
    msgs: Vec<Msg>,
    /// `None` where the tracker does not gather them.
    times: Option<Times>,
    /// The batch's events without those recorded while paused, if it held
    /// any: what the analyses fold.
    kept: Option<Vec<Event>>,
    /// The pages of the batch's events ([`hark_wire::op::page`]).
    pages: u32,
}

impl Unpacked {
    /// The events the analyses fold.
    fn events(&self) -> &[Event] {
        self.kept.as_deref().unwrap_or(self.batch.events())
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        self.batch
            .flow
            .pools
            .msgs
            .give_back(std::mem::take(&mut self.msgs));
    }
}

/// A "waits" entry.
struct Waits {
    info: Arc<StreamInfo>,
    waits: Counted<Wait>,
}

/// One analysis's state of one row.
struct Slot {
    /// Shared only while a snapshot saves it (see the module doc).
    state: Arc<dyn DynRank>,
    analysed: u64,
}

/// Every analysis's state of one row, by the analysis's index in the
/// program; made at the analysis's first input.
struct Row {
    slots: Vec<Option<Slot>>,
}

impl Row {
    fn new(analyses: usize) -> Row {
        Row {
            slots: (0..analyses).map(|_| None).collect(),
        }
    }
}

/// The analyses one fold runs (those sensitive to one entry kind), with
/// their index in the program.
type Folds = Arc<[(usize, Arc<dyn DynAnalysis>)]>;

/// Times one analysis panicked while folding, and the last message: the
/// folds of a row run in one job, so a panic is caught per analysis and
/// counted here, not by the board.
#[derive(Default)]
struct Trouble {
    panics: AtomicU64,
    last: Mutex<Option<String>>,
}

impl Trouble {
    fn record(&self, name: &str, panic: &(dyn std::any::Any + Send)) {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        self.panics.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last) = Some(format!("analysis `{name}` panicked: {message}"));
    }
}

/// How often workers met a snapshot (or each other) on a state:
/// [`OnBoard::contention`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    /// Times a worker found the lock of the states it was about to fold
    /// into held, and waited. Besides snapshots, a row's batches and its
    /// wait states are folded into its states by two knowledge sources.
    pub stalls: u64,
    /// Times a worker copied a state because a snapshot still read it.
    pub copies: u64,
}

/// [`Contention`]'s counters.
#[derive(Default)]
struct ContentionCounters {
    stalls: AtomicU64,
    copies: AtomicU64,
}

impl ContentionCounters {
    /// Locks a state for a worker, counting a wait.
    fn lock<'a, S>(&self, m: &'a Mutex<S>) -> std::sync::MutexGuard<'a, S> {
        match m.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.stalls.fetch_add(1, Ordering::Relaxed);
                lock(m)
            }
        }
    }

    /// The state to fold into: the worker's own, or a copy of it made now
    /// if a snapshot still reads it.
    fn own<'a>(&self, state: &'a mut Arc<dyn DynRank>) -> &'a mut dyn DynRank {
        if Arc::get_mut(state).is_none() {
            *state = Arc::from(state.duplicate());
            self.copies.fetch_add(1, Ordering::Relaxed);
        }
        Arc::get_mut(state).expect("a state just copied is not shared")
    }

    /// [`ContentionCounters::own`] for a matcher.
    fn own_clone<'a, T: Clone>(&self, m: &'a mut Arc<T>) -> &'a mut T {
        if Arc::get_mut(m).is_none() {
            self.copies.fetch_add(1, Ordering::Relaxed);
        }
        Arc::make_mut(m)
    }
}

/// A keyed map of states, each behind its own lock.
type Keyed<S> = Mutex<FxHashMap<u64, Arc<Mutex<S>>>>;

fn slot_of<S>(map: &Keyed<S>, key: u64, make: impl FnOnce() -> S) -> Arc<Mutex<S>> {
    hark_sync::lock(map)
        .entry(key)
        .or_insert_with(|| Arc::new(Mutex::new(make())))
        .clone()
}

/// Every matcher of `map` (its key, and it): copied for a snapshot, or
/// taken at the end. The map's lock is held only to list them, each
/// matcher's only to take a reference (as for states, see the module doc).
fn copy_or_take<T: Clone + Default>(map: &Keyed<Arc<T>>, take: bool) -> Vec<(u64, T)> {
    let all: Vec<(u64, Arc<Mutex<Arc<T>>>)> =
        lock(map).iter().map(|(&k, m)| (k, m.clone())).collect();
    all.into_iter()
        .map(|(k, m)| {
            let shared = if take {
                std::mem::take(&mut *lock(&m))
            } else {
                lock(&m).clone()
            };
            (k, Arc::try_unwrap(shared).unwrap_or_else(|s| (*s).clone()))
        })
        .collect()
}

/// Processes folded into one row: every knowledge source's state, their
/// summed accounting and counts.
struct Folded {
    meta: hark_analyses::RankMeta,
    accounting: RankAccounting,
    states: Vec<Box<dyn DynRank>>,
    forgotten: u64,
    ignored_defs: u64,
    waits: Vec<Wait>,
}

/// Everything the level's knowledge sources keep.
#[derive(Default)]
struct States {
    /// Per row: every analysis's state.
    rows: Keyed<Row>,
    /// Per analysis: its panics while folding.
    troubles: Vec<Trouble>,
    unpackers: Keyed<Unpacker>,
    p2p: Keyed<Arc<P2pMatcher>>,
    collectives: Keyed<Arc<Instances>>,
    /// Streams by world rank, for routing waits.
    streams: RwLock<BTreeMap<i32, Arc<StreamInfo>>>,
    /// The row of processes folded together ([`OnBoard::fold_away`]).
    folded: Mutex<Option<Folded>>,
    /// What is in flight on the level.
    flow: Arc<Flow>,
    contention: ContentionCounters,
    /// The level's link to other analysers, if its keys are routed
    /// (`crate::exchange`).
    link: Option<Arc<Link>>,
    /// What went wrong with entries injected from other analysers.
    problems: Mutex<Vec<String>>,
}

/// The entry types of a level.
#[derive(Clone, Copy)]
struct Types {
    frames: Typed<StreamFrame>,
    batches: Typed<Unpacked>,
    p2p: Typed<Counted<P2pOp>>,
    arrivals: Typed<Counted<Arrival>>,
    waits: Typed<Waits>,
}

/// A program installed on a board level.
pub struct OnBoard {
    board: Board,
    level: Level,
    program: ProgramAnalysis,
    types: Types,
    states: Arc<States>,
    ids: Vec<KsId>,
    flow: Arc<Flow>,
}

fn board_error(e: hark_board::Error) -> Error {
    Error::new(ErrorKind::Board(e.to_string()))
}

/// Where derived entries go: the board from inside a knowledge source
/// (its context), or from outside (entries injected from another analyser,
/// trackers flushed at the end).
trait Submit {
    fn publish_keyed<T: std::any::Any + Send + Sync>(
        &mut self,
        kind: Typed<T>,
        key: u64,
        payload: T,
        bytes: usize,
    );
    fn error(&mut self, what: String);
}

impl Submit for Context<'_> {
    #[inline]
    fn publish_keyed<T: std::any::Any + Send + Sync>(
        &mut self,
        kind: Typed<T>,
        key: u64,
        payload: T,
        bytes: usize,
    ) {
        Context::publish_keyed(self, kind, key, payload, bytes);
    }
    fn error(&mut self, what: String) {
        self.report_error(what);
    }
}

/// Submits to a level from outside its knowledge sources.
struct Direct<'a> {
    board: &'a Board,
    level: Level,
    states: &'a States,
}

/// Problems of injected entries kept for the diagnostics.
const MAX_PROBLEMS: usize = 16;

impl Submit for Direct<'_> {
    fn publish_keyed<T: std::any::Any + Send + Sync>(
        &mut self,
        kind: Typed<T>,
        key: u64,
        payload: T,
        bytes: usize,
    ) {
        // Refused only once the level is retired, after its last drain.
        let _ = self
            .board
            .publish_keyed(self.level, kind, key, payload, bytes);
    }
    fn error(&mut self, what: String) {
        let mut p = lock(&self.states.problems);
        if p.len() < MAX_PROBLEMS && !p.contains(&what) {
            p.push(what);
        }
    }
}

/// Items of the level's link that another analyser owns, split off by
/// destination.
fn away<T: Copy>(items: &mut Vec<T>, me: u32, n: usize, owner: impl Fn(&T) -> u32) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    if items.iter().all(|i| owner(i) == me) {
        return out;
    }
    out.resize_with(n, Vec::new);
    items.retain(|i| {
        let o = owner(i);
        if o == me || o as usize >= n {
            return true;
        }
        out[o as usize].push(*i);
        false
    });
    out
}

/// Sends waits to the streams of the ranks that waited: on this analyser,
/// or through the level's link to the analyser of the rank.
fn route(sub: &mut impl Submit, states: &States, kind: Typed<Waits>, mut waits: Vec<Wait>) {
    if let Some(link) = &states.link {
        let x = &link.exchange;
        let gone = away(&mut waits, x.me(), x.analysers() as usize, |w| {
            x.owner_of(w.waiter)
        });
        for (to, w) in gone.into_iter().enumerate() {
            if !w.is_empty() {
                link.send(to as u32, Vec::new(), Vec::new(), w);
            }
        }
    }
    if waits.is_empty() {
        states.flow.pools.waits.give_back(waits);
        return;
    }
    let streams = hark_sync::read(&states.streams);
    for (rank, waits, pooled) in split_by(&states.flow, waits, |w| w.waiter as u32 as u64) {
        let rank = rank as u32 as i32;
        let Some(info) = streams.get(&rank) else {
            sub.error(format!(
                "{} waits of world rank {rank}, which has no stream in this program, were ignored",
                waits.len()
            ));
            if pooled {
                states.flow.pools.waits.give_back(waits);
            }
            continue;
        };
        let waits = Counted::new(waits, pooled, &states.flow);
        let bytes = waits.bytes as usize;
        let waits = Waits {
            info: info.clone(),
            waits,
        };
        sub.publish_keyed(kind, info.row(), waits, bytes);
    }
}

/// Publishes what a pack yielded: matching inputs by key, as the tracker
/// split them; those whose key another analyser owns go through the
/// level's link.
fn publish(sub: &mut impl Submit, types: Types, st: &States, derived: Derived) {
    let flow = &st.flow;
    let mut parts = derived.ops.parts;
    let mut arrivals = derived.arrivals;
    if let Some(link) = &st.link {
        let x = &link.exchange;
        let (me, n) = (x.me(), x.analysers() as usize);
        // Operations come by receiving rank: a part goes whole to the
        // analyser that owns its rank.
        let mut ops_away: Vec<Vec<P2pOp>> = Vec::new();
        parts.retain_mut(|(rank, ops)| {
            let o = x.owner_of(*rank as u32 as i32);
            if o == me || o as usize >= n {
                return true;
            }
            if ops_away.is_empty() {
                ops_away.resize_with(n, Vec::new);
            }
            ops_away[o as usize].append(ops);
            false
        });
        // One look-up of the communicator's members per communicator of
        // the pack.
        let owners: Mutex<Vec<(u32, u32)>> = Mutex::default();
        let mut arrivals_away = away(&mut arrivals, me, n, |a| {
            let mut o = lock(&owners);
            if let Some(&(_, owner)) = o.iter().find(|(c, _)| *c == a.comm) {
                return owner;
            }
            let owner = link.owner_of_comm_id(a.comm);
            o.push((a.comm, owner));
            owner
        });
        for to in 0..n {
            let o = ops_away.get_mut(to).map(std::mem::take).unwrap_or_default();
            let a = arrivals_away
                .get_mut(to)
                .map(std::mem::take)
                .unwrap_or_default();
            if !o.is_empty() || !a.is_empty() {
                link.send(to as u32, o, a, Vec::new());
            }
        }
    }
    for spare in derived.ops.spare {
        flow.pools.ops.give_back(spare);
    }
    for (rank, ops) in parts {
        let ops = Counted::new(ops, true, flow);
        let bytes = ops.bytes as usize;
        sub.publish_keyed(types.p2p, rank, ops, bytes);
    }
    for (key, arrivals, pooled) in split_instances(flow, arrivals) {
        let arrivals = Counted::new(arrivals, pooled, flow);
        let bytes = arrivals.bytes as usize;
        sub.publish_keyed(types.arrivals, key, arrivals, bytes);
    }
}

/// Reused vectors a pack's tracker is given for its parts of operations, at
/// most (one per receiving rank the pack sends to, and its own).
const SPARE_PARTS: usize = 8;

/// Keys of the collective instances: an instance's arrivals share one.
const INSTANCE_KEYS: usize = 16;

// A communicator's sequence numbers reach each key `INSTANCE_KEYS` apart
// (`instance_key`), which `Instances::strided` relies on to keep them in
// order.
const _: () = assert!(INSTANCE_KEYS.is_power_of_two());

/// The key of a collective instance's arrivals.
fn instance_key(a: &Arrival) -> usize {
    ((a.comm as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a.seq as u32 as u64) as usize
        % INSTANCE_KEYS
}

/// [`split_by`] for arrivals, whose keys are few and small: counted in an
/// array, not a list searched per arrival.
fn split_instances(flow: &Flow, mut items: Vec<Arrival>) -> Vec<Part<Arrival>> {
    let mut counts = [0usize; INSTANCE_KEYS];
    for a in &items {
        counts[instance_key(a)] += 1;
    }
    let used = counts.iter().filter(|&&n| n > 0).count();
    if used <= 1 {
        return match counts.iter().position(|&n| n > 0) {
            Some(k) => vec![(k as u64, items, true)],
            None => {
                flow.pools.arrivals.give_back(items);
                Vec::new()
            }
        };
    }
    let mut parts: [Vec<Arrival>; INSTANCE_KEYS] =
        std::array::from_fn(|k| Vec::with_capacity(counts[k]));
    for a in items.drain(..) {
        parts[instance_key(&a)].push(a);
    }
    flow.pools.arrivals.give_back(items);
    (parts.into_iter().enumerate())
        .filter(|(_, p)| !p.is_empty())
        .map(|(k, p)| (k as u64, p, false))
        .collect()
}

/// `unpack`: a stream's definitions go to its stream; its packs are
/// unpacked ([`unpack`]).
fn unpack_source(st: Arc<States>, types: Types, cross: bool) -> KnowledgeSource {
    KnowledgeSource::on("unpack", types.frames, move |ctx, frame: &StreamFrame| {
        let info = &frame.info;
        match &frame.what {
            What::Defs(defs) => info.define(defs),
            What::Pack(batch) => unpack(ctx, &st, types, cross, info, batch),
            What::Paused(pause, at) => {
                let track = slot_of(&st.unpackers, info.conn(), || Unpacker::new(cross));
                st.contention.lock(&track).paused(*pause, *at);
            }
        }
    })
}

/// Unpacks one pack of a stream: publishes it as a batch with what its
/// stream's tracker derived of it, and the derived operations to match.
#[inline]
fn unpack(
    ctx: &mut Context<'_>,
    st: &States,
    types: Types,
    cross: bool,
    info: &Arc<StreamInfo>,
    batch: &Arc<Batch>,
) {
    let world = info.world_rank();
    if world >= 0 {
        note_stream(st, world, info);
    }
    let (mut derived, gathered) = derive(st, info, world, batch, cross);
    let unpacked = Unpacked {
        info: info.clone(),
        batch: batch.clone(),
        msgs: std::mem::take(&mut derived.msgs),
        times: gathered.then(|| std::mem::take(&mut derived.times)),
        kept: derived.kept.take(),
        pages: derived.pages,
    };
    let bytes = unpacked.batch.events().len() * EVENT_SIZE;
    ctx.publish(types.batches, unpacked, bytes);
    publish(ctx, types, st, derived);
}

/// Keeps the stream of world rank `world`, for routing waits, unless it is
/// known already.
#[inline]
fn note_stream(st: &States, world: i32, info: &Arc<StreamInfo>) {
    let known = st
        .streams
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&world);
    if !known {
        hark_sync::write(&st.streams)
            .entry(world)
            .or_insert_with(|| info.clone());
    }
}

/// What the stream's tracker derives of a pack, into pooled buffers, and
/// whether it gathers times.
#[inline]
fn derive(
    st: &States,
    info: &StreamInfo,
    world: i32,
    batch: &Batch,
    cross: bool,
) -> (Derived, bool) {
    let track = slot_of(&st.unpackers, info.conn(), || Unpacker::new(cross));
    let cx = info.cx();
    let mut track = st.contention.lock(&track);
    let spare = (0..track.op_parts().min(SPARE_PARTS))
        .map(|_| st.flow.pools.ops.take())
        .collect();
    let out = Derived {
        msgs: st.flow.pools.msgs.take(),
        arrivals: st.flow.pools.arrivals.take(),
        ops: Parts::with_spare(spare),
        ..Derived::default()
    };
    let derived = track.pack_into(&cx, world, batch.events(), out);
    (derived, track.gathers_times())
}

/// `match-p2p`: matches the point-to-point operations of a receiving rank.
fn match_p2p_source(st: Arc<States>, types: Types) -> KnowledgeSource {
    KnowledgeSource::on("match-p2p", types.p2p, move |ctx, ops: &Counted<P2pOp>| {
        let Some(key) = ctx.key() else { return };
        let m = slot_of(&st.p2p, key, Arc::default);
        let mut waits = st.flow.pools.waits.take();
        {
            let mut m = st.contention.lock(&m);
            let m = st.contention.own_clone(&mut m);
            m.add_all(&ops.items, &mut waits);
        }
        route(ctx, &st, types.waits, waits);
    })
}

/// `match-collectives`: matches the arrivals at a collective's instances.
fn match_collectives_source(st: Arc<States>, types: Types) -> KnowledgeSource {
    KnowledgeSource::on(
        "match-collectives",
        types.arrivals,
        move |ctx, arrivals: &Counted<Arrival>| {
            let Some(key) = ctx.key() else { return };
            let m = slot_of(&st.collectives, key, || {
                Arc::new(Instances::strided(INSTANCE_KEYS.trailing_zeros()))
            });
            let mut waits = st.flow.pools.waits.take();
            {
                let mut m = st.contention.lock(&m);
                let m = st.contention.own_clone(&mut m);
                for a in &arrivals.items {
                    m.add(*a, &mut waits);
                }
            }
            route(ctx, &st, types.waits, waits);
        },
    )
}

/// `analyses`: every analysis sensitive to events folds each batch into
/// its row's state, one after the other in one job. A job per analysis and
/// pack cost more than most packs' folds (a pack of samples holds one to
/// six events), and one worker folding a pack keeps it in its cache.
fn batches_source(st: Arc<States>, types: Types, folds: Folds) -> KnowledgeSource {
    KnowledgeSource::on("analyses", types.batches, move |_, t: &Unpacked| {
        let input = Input {
            events: t.events(),
            msgs: &t.msgs,
            times: t.times.as_ref(),
            waits: &[],
            counts: t.batch.counts.as_ref(),
            pages: Some(t.pages),
        };
        let analysed = hark_wire::accounted(t.batch.events())
            + t.batch.counts.as_ref().map_or(0, |c| c.events);
        fold_row(&st, &folds, &t.info, &input, analysed);
    })
}

/// `analyses-of-waits`: every analysis sensitive to wait states folds each
/// stream's wait states into its state, in one job.
fn waits_source(st: Arc<States>, types: Types, folds: Folds) -> KnowledgeSource {
    KnowledgeSource::on("analyses-of-waits", types.waits, move |_, w: &Waits| {
        let input = Input {
            waits: &w.waits.items,
            ..Input::default()
        };
        fold_row(&st, &folds, &w.info, &input, 0);
    })
}

/// Folds `input` into the states of `info`'s row of every analysis of
/// `folds`, counting `analysed` events for each that did not panic. A
/// panic costs only its analysis this input (see [`Trouble`]).
fn fold_row(st: &States, folds: &Folds, info: &StreamInfo, input: &Input<'_>, analysed: u64) {
    let row = slot_of(&st.rows, info.row(), || Row::new(st.troubles.len()));
    let mut row = st.contention.lock(&row);
    let cx = info.cx();
    for (index, analysis) in folds.iter() {
        let slot = row.slots[*index].get_or_insert_with(|| Slot {
            state: analysis.new_rank().into(),
            analysed: 0,
        });
        let folded = catch_unwind(AssertUnwindSafe(|| {
            st.contention.own(&mut slot.state).fold(&cx, input);
        }));
        match folded {
            Ok(()) => slot.analysed += analysed,
            Err(panic) => st.troubles[*index].record(analysis.spec().name, &*panic),
        }
    }
}

impl OnBoard {
    /// Creates a level named after `program` on `board` and registers on it
    /// `unpack`, the matchers and every analysis of `program`.
    pub fn install(board: &Board, program: ProgramAnalysis) -> Result<OnBoard, Error> {
        OnBoard::install_linked(board, program, None)
    }

    /// [`OnBoard::install`], for one analyser of several
    /// (`crate::exchange`): the level keeps the cross-rank entries whose key
    /// it owns and puts the others in `exchange`'s outbox for their owner;
    /// [`OnBoard::inject`] takes in what other analysers sent it. `job` and
    /// the program's name name the program across analysers.
    pub fn install_exchanging(
        board: &Board,
        program: ProgramAnalysis,
        exchange: Arc<Exchange>,
        job: &str,
    ) -> Result<OnBoard, Error> {
        let link = Link::new(
            exchange,
            program_key(job, program.name()),
            program.shared().clone(),
        );
        OnBoard::install_linked(board, program, Some(Arc::new(link)))
    }

    fn install_linked(
        board: &Board,
        program: ProgramAnalysis,
        link: Option<Arc<Link>>,
    ) -> Result<OnBoard, Error> {
        let level = board.create_level(program.name());
        let types = Types {
            frames: board.typed(&FRAMES),
            batches: board.typed(&BATCHES),
            p2p: board.typed(&P2P_OPS),
            arrivals: board.typed(&ARRIVALS),
            waits: board.typed(&WAITS),
        };
        let flow: Arc<Flow> = Arc::default();
        let states = Arc::new(States {
            flow: flow.clone(),
            troubles: program
                .analyses()
                .iter()
                .map(|_| Trouble::default())
                .collect(),
            link,
            ..States::default()
        });
        let mut ids = Vec::new();
        let mut register = |ks: KnowledgeSource| -> Result<(), Error> {
            ids.push(
                board
                    .register(level, ks.serial_by_key())
                    .map_err(board_error)?,
            );
            Ok(())
        };

        // Matching runs only when some knowledge source wants wait states.
        let cross = program.cross();
        register(unpack_source(states.clone(), types, cross))?;
        if cross {
            register(match_p2p_source(states.clone(), types))?;
            register(match_collectives_source(states.clone(), types))?;
        }
        let sensitive = |to: Sensitivity| -> Folds {
            (program.analyses().iter().enumerate())
                .filter(|(_, a)| a.spec().sensitivities.contains(&to))
                .map(|(i, a)| (i, a.clone()))
                .collect()
        };
        let (events, waits) = (
            sensitive(Sensitivity::Events),
            sensitive(Sensitivity::Waits),
        );
        if !events.is_empty() {
            register(batches_source(states.clone(), types, events))?;
        }
        if !waits.is_empty() {
            register(waits_source(states.clone(), types, waits))?;
        }
        Ok(OnBoard {
            board: board.clone(),
            level,
            program,
            types,
            states,
            ids,
            flow,
        })
    }

    /// The program's level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The program.
    pub fn program(&self) -> &ProgramAnalysis {
        &self.program
    }

    /// Waits until every entry submitted so far on the level is analysed;
    /// the level stays open.
    pub fn drain(&self) {
        self.board.drain_level(self.level);
    }

    /// Bytes of events submitted and not yet analysed by every analysis;
    /// the server stops reading while this is too high.
    pub fn in_flight(&self) -> u64 {
        self.flow.in_flight.load(Ordering::Relaxed)
    }

    /// Submits a stream's definitions (in stream order with its packs).
    pub fn defs(&self, info: &Arc<StreamInfo>, defs: Vec<Def>) -> Result<(), Error> {
        let bytes = std::mem::size_of_val(&defs[..]);
        self.submit(info, What::Defs(defs), bytes)
    }

    /// A service paused (`pause`) or resumed the stream at `at` on its
    /// probe's clock, as the probe answered (in stream order with its
    /// packs): what it records meanwhile keeps matching in step and enters
    /// no analysis.
    pub fn paused(&self, info: &Arc<StreamInfo>, pause: bool, at: u64) -> Result<(), Error> {
        self.submit(info, What::Paused(pause, at), 16)
    }

    /// Submits a copy of a stream's pack of events (in stream order with
    /// its definitions). The copy goes into a reused buffer.
    pub fn pack(&self, info: &Arc<StreamInfo>, events: &[Event]) -> Result<(), Error> {
        // Numbered 0: the analyses go by stream order.
        let pack = PackBytes::copy_of(0, events, self.flow.take());
        self.submit_pack(info, pack)
    }

    /// A buffer for a socket's reader to read a pack into
    /// ([`OnBoard::pack_owned`]): one a pack was in before, if one is free.
    /// With none, the reader is better off copying its pack out
    /// ([`OnBoard::pack`]) than growing a new buffer by halves.
    pub fn pack_buffer(&self) -> Option<Vec<u8>> {
        self.flow.pooled()
    }

    /// Submits a stream's pack read from a socket with its buffer, which
    /// the analyses keep instead of a copy (in stream order with its
    /// definitions).
    pub fn pack_owned(&self, info: &Arc<StreamInfo>, pack: PackBytes) -> Result<(), Error> {
        self.submit_pack(info, pack)
    }

    fn submit_pack(&self, info: &Arc<StreamInfo>, pack: PackBytes) -> Result<(), Error> {
        let n = std::mem::size_of_val(pack.events());
        self.flow.in_flight.fetch_add(n as u64, Ordering::Relaxed);
        info.in_flight.fetch_add(n as u64, Ordering::Relaxed);
        let batch = Arc::new(Batch {
            pack,
            counts: None,
            flow: self.flow.clone(),
            stream: info.in_flight.clone(),
        });
        self.submit(info, What::Pack(batch), n)
    }

    /// Submits a sampled-out stream's totals in place of a pack (in stream
    /// order with its packs): the per-function analyses fold them, the
    /// analyses that need events see an empty batch.
    pub fn counts(&self, info: &Arc<StreamInfo>, counts: hark_wire::Counts) -> Result<(), Error> {
        let bytes = std::mem::size_of_val(&counts.cells[..]);
        let batch = Arc::new(Batch {
            pack: PackBytes::default(),
            counts: Some(counts),
            flow: self.flow.clone(),
            stream: info.in_flight.clone(),
        });
        self.submit(info, What::Pack(batch), bytes)
    }

    fn submit(&self, info: &Arc<StreamInfo>, what: What, bytes: usize) -> Result<(), Error> {
        let frame = StreamFrame {
            info: info.clone(),
            what,
        };
        // Keyed by row: the frames of a process's stream after `exec` are
        // unpacked, and folded, after those of the stream before it.
        self.board
            .publish_keyed(self.level, self.types.frames, info.row(), frame, bytes)
            .map_err(board_error)
    }

    /// Takes in a parcel another analyser's level of the same program sent
    /// this one (`crate::exchange`): its ids are translated into this
    /// level's, and its operations, arrivals and wait states are submitted
    /// as if published here. Parcels from one analyser must come in the
    /// order it sent them. Fails, changing nothing, on a level that is not
    /// linked, or on a parcel out of order.
    pub fn inject(&self, from: u32, parcel: Parcel) -> Result<(), Error> {
        let Some(link) = &self.states.link else {
            return Err(Error::new(ErrorKind::Partial(
                "a parcel from another analyser came to a level that exchanges nothing".into(),
            )));
        };
        link.exchange.count_received(&parcel, parcel.size);
        let Parcel {
            ops,
            arrivals,
            waits,
            ..
        } = link.receive(from, parcel)?;
        let mut sub = Direct {
            board: &self.board,
            level: self.level,
            states: &self.states,
        };
        let flow = &self.flow;
        for (rank, ops, _) in split_by(flow, ops, |op| op.dst as u32 as u64) {
            let ops = Counted::new(ops, false, flow);
            let bytes = ops.bytes as usize;
            sub.publish_keyed(self.types.p2p, rank, ops, bytes);
        }
        for (key, arrivals, _) in split_instances(flow, arrivals) {
            let arrivals = Counted::new(arrivals, false, flow);
            let bytes = arrivals.bytes as usize;
            sub.publish_keyed(self.types.arrivals, key, arrivals, bytes);
        }
        route(&mut sub, &self.states, self.types.waits, waits);
        Ok(())
    }

    /// Publishes what every stream's unpacker still holds (receives of a
    /// call cut by the end of its stream), routed as a pack's would be: an
    /// analyser does this once its streams ended, before it tells the
    /// others it sends no more (`docs/analysers.md`).
    pub fn flush_unpackers(&self) {
        let tracks: Vec<Arc<Mutex<Unpacker>>> =
            lock(&self.states.unpackers).values().cloned().collect();
        let mut sub = Direct {
            board: &self.board,
            level: self.level,
            states: &self.states,
        };
        for t in tracks {
            let derived = lock(&t).flush();
            publish(&mut sub, self.types, &self.states, derived);
        }
    }

    /// Analyses and knowledge sources of this level that panicked or
    /// reported errors.
    fn troubles(&self) -> Vec<String> {
        let failed = |name: &str, panics: u64, last: Option<&str>| {
            let last = last.unwrap_or("no message");
            format!(
                "analysis `{name}` failed {panics} times while analysing and skipped those inputs (last: {last}); its results are incomplete"
            )
        };
        let analyses = (self.program.analyses().iter().zip(&self.states.troubles))
            .filter(|(_, t)| t.panics.load(Ordering::Relaxed) > 0)
            .map(|(a, t)| {
                let panics = t.panics.load(Ordering::Relaxed);
                failed(a.spec().name, panics, lock(&t.last).as_deref())
            });
        let board = self.board.knowledge_sources_on(self.level);
        let sources = board
            .iter()
            .filter(|k| self.ids.contains(&k.id) && (k.panics > 0 || k.errors > 0))
            .map(|k| {
                let last = k.last_error.as_deref();
                if k.panics > 0 {
                    failed(&k.name, k.panics, last)
                } else {
                    let last = last.unwrap_or("no message");
                    format!(
                        "analysis `{}` reported {} problems (last: {last})",
                        k.name, k.errors
                    )
                }
            });
        analyses.chain(sources).collect()
    }

    /// The program's partial result: each state saved from a reference
    /// taken under its lock (see the module doc), or taken at the end.
    fn partial(&self, ranks: &[(Arc<StreamInfo>, StreamAccounting)], take: bool) -> Partial {
        let mut partial = self.program.empty_partial();
        let analyses = self.program.analyses();
        for streams in rows(ranks) {
            // The latest image of the process speaks for the row (it holds
            // the rank); the row began with the first.
            let (info, _) = streams[streams.len() - 1];
            let conn = info.row();
            let mut analysed = u64::MAX;
            let mut saved: Vec<Vec<u8>> = Vec::new();
            // Under the row's lock, only second references: the states are
            // saved outside it, while the worker goes on (into copies, if
            // it folds meanwhile).
            let held: Vec<Option<(Arc<dyn DynRank>, u64)>> = {
                let row = lock(&self.states.rows).get(&conn).cloned();
                match row {
                    Some(row) => (lock(&row).slots.iter())
                        .map(|s| s.as_ref().map(|s| (s.state.clone(), s.analysed)))
                        .collect(),
                    None => vec![None; analyses.len()],
                }
            };
            for (a, slot) in analyses.iter().zip(held) {
                let events = a.spec().sensitivities.contains(&Sensitivity::Events);
                match slot {
                    Some((state, done)) => {
                        if events {
                            analysed = analysed.min(done);
                        }
                        saved.push(state.save());
                    }
                    None => {
                        if events {
                            analysed = 0;
                        }
                        saved.push(a.new_rank().save());
                    }
                }
            }
            let mut accounting = row_accounting(&streams);
            accounting.analysed = if analysed == u64::MAX { 0 } else { analysed };
            let mut meta = info.meta();
            let first = streams[0].0.meta();
            (meta.hello_ns, meta.conn) = (first.hello_ns, first.conn);
            for (info, _) in &streams {
                let (forgotten, abort_code) = lock(&self.states.unpackers)
                    .get(&info.conn())
                    .map_or((0, None), |t| {
                        let t = lock(t);
                        (t.forgotten(), t.abort_code())
                    });
                accounting.abort_code = accounting.abort_code.or(abort_code);
                partial.add_counts(forgotten, info.ignored_defs());
            }
            partial.push_saved_rank(meta, accounting, rank_record(&info.clock()), saved);
        }
        let p2p: BTreeMap<i32, P2pMatcher> = copy_or_take(&self.states.p2p, take)
            .into_iter()
            .map(|(k, m)| (k as u32 as i32, m))
            .collect();
        let mut collectives = Instances::default();
        for (_, m) in copy_or_take(&self.states.collectives, take) {
            partial.add_waits(collectives.merge(m));
        }
        partial.set_matching(p2p, collectives);
        if let Some(row) = &mut *lock(&self.states.folded) {
            partial.push_saved_rank(
                row.meta.clone(),
                row.accounting.clone(),
                // Processes without a world rank are put on the timeline by
                // their handshakes alone.
                hark_model::RankClock {
                    method: "handshake".into(),
                    ..Default::default()
                },
                row.states.iter().map(|s| s.save()).collect(),
            );
            partial.add_counts(row.forgotten, row.ignored_defs);
            if take {
                partial.add_waits(std::mem::take(&mut row.waits));
            } else {
                partial.add_waits(row.waits.iter().cloned());
            }
        }
        for t in self.troubles() {
            partial.add_panic(t);
        }
        for p in lock(&self.states.problems).iter() {
            partial.add_panic(p.clone());
        }
        partial
    }

    /// Folds a finished process's stream into the program's row of folded
    /// processes ("N other processes") and forgets its own states, so that
    /// what the level keeps does not grow with the processes a run starts.
    /// Counts stay exact: every knowledge source adds the process's state to
    /// the row's ([`hark_analyses::RankState::absorb`]), and its accounting is
    /// summed.
    ///
    /// The caller (the server) makes sure nothing of the stream is still on
    /// the board: it holds the only reference to `info` left. Returns false,
    /// changing nothing, when a knowledge source cannot fold this process
    /// (see [`hark_analyses::RankState::absorbs`]); it then keeps its row.
    pub fn fold_away(&self, info: &StreamInfo, acc: &StreamAccounting) -> bool {
        let conn = info.row();
        let analyses = self.program.analyses();
        let held = lock(&self.states.rows).get(&conn).cloned();
        let held = held.as_ref().map(|r| lock(r));
        let none: Vec<Option<Slot>> = (0..analyses.len()).map(|_| None).collect();
        let slots = held.as_ref().map_or(&none, |r| &r.slots);
        let mut folded = lock(&self.states.folded);
        let row = folded.get_or_insert_with(|| Folded {
            meta: hark_analyses::RankMeta {
                world_rank: -1,
                host: info.hello().host.clone(),
                argv: info.hello().argv.clone(),
                hello_ns: u64::MAX,
                conn: u64::MAX,
                pid: 0,
                ..Default::default()
            },
            accounting: RankAccounting {
                end: Some((0, 0)),
                ..RankAccounting::default()
            },
            states: analyses.iter().map(|a| a.new_rank()).collect(),
            forgotten: 0,
            ignored_defs: 0,
            waits: Vec::new(),
        });
        let can = row.states.iter().zip(slots).all(|(into, slot)| match slot {
            Some(s) => into.absorbs(&*s.state),
            None => true,
        });
        if !can {
            return false;
        }
        let mut analysed = u64::MAX;
        for ((a, into), slot) in analyses.iter().zip(&mut row.states).zip(slots) {
            let events = a.spec().sensitivities.contains(&Sensitivity::Events);
            match slot {
                Some(s) => {
                    into.absorb(&*s.state);
                    if events {
                        analysed = analysed.min(s.analysed);
                    }
                }
                None if events => analysed = 0,
                None => {}
            }
        }
        drop(held);
        lock(&self.states.rows).remove(&conn);
        let track = lock(&self.states.unpackers).remove(&info.conn());
        if let Some(t) = track {
            let mut t = lock(&t);
            let derived = t.flush();
            for (dst, ops) in derived.ops.parts {
                let m = slot_of(&self.states.p2p, dst, Arc::default);
                let mut m = lock(&m);
                let m = self.states.contention.own_clone(&mut m);
                for op in &ops {
                    m.add(op, &mut row.waits);
                }
            }
            row.forgotten += t.forgotten();
        }
        let mut accounting = rank_accounting(acc);
        accounting.analysed = if analysed == u64::MAX { 0 } else { analysed };
        row.accounting
            .add(&accounting, info.hello().pid, &info.hello().host);
        row.ignored_defs += info.ignored_defs();
        if row.meta.host != info.hello().host {
            row.meta.host = "(several hosts)".into();
        }
        row.meta.folded += 1;
        true
    }

    /// How often workers found a state held, and copied a state a snapshot
    /// read, so far on this level.
    pub fn contention(&self) -> Contention {
        Contention {
            stalls: self.states.contention.stalls.load(Ordering::Relaxed),
            copies: self.states.contention.copies.load(Ordering::Relaxed),
        }
    }

    /// How many processes were folded together so far.
    pub fn folded(&self) -> u64 {
        lock(&self.states.folded)
            .as_ref()
            .map_or(0, |f| f.meta.folded)
    }

    /// The program's model as analysed so far, while it runs (for a live
    /// view). No worker waits for it: each state's lock is held only to
    /// take a reference, the state is saved and folded outside any lock,
    /// and a worker that folds into a state meanwhile folds into a copy
    /// (see the module doc); ranks are not marked partial.
    pub fn snapshot(&self, ranks: &[(Arc<StreamInfo>, StreamAccounting)]) -> Vec<Program> {
        self.partial(ranks, false)
            .finish(self.program.analyses(), true)
    }

    /// The program's partial result so far, while it runs, as
    /// [`OnBoard::snapshot`] takes it but not folded: an analyser rank of
    /// an MPI job merges it with the other ranks' for the live view.
    pub fn snapshot_partial(&self, ranks: &[(Arc<StreamInfo>, StreamAccounting)]) -> Partial {
        self.partial(ranks, false)
    }

    /// Waits until every submitted batch is analysed, then returns the
    /// program's partial result and retires the level. Call once, after
    /// the last submission; later submissions are refused.
    ///
    /// `ranks` are the program's streams with their accounting as the
    /// server kept it (`received`, `end`); `analysed` is filled in here as
    /// the events every analysis consumed.
    pub fn finish_partial(&self, ranks: Vec<(Arc<StreamInfo>, StreamAccounting)>) -> Partial {
        self.board.drain_level(self.level);
        // Receives each tracker still holds (a call cut by the end of the
        // stream) are matched now.
        let tracks: Vec<(u64, Arc<Mutex<Unpacker>>)> = lock(&self.states.unpackers)
            .iter()
            .map(|(&k, t)| (k, t.clone()))
            .collect();
        let mut waits = Vec::new();
        for (_, t) in tracks {
            let derived = lock(&t).flush();
            for (dst, ops) in derived.ops.parts {
                let m = slot_of(&self.states.p2p, dst, Arc::default);
                let mut m = lock(&m);
                let m = self.states.contention.own_clone(&mut m);
                for op in &ops {
                    m.add(op, &mut waits);
                }
            }
        }
        let mut partial = self.partial(&ranks, true);
        partial.add_waits(waits);
        for id in &self.ids {
            self.board.remove(*id);
        }
        self.board.retire_level(self.level);
        partial
    }

    /// [`OnBoard::finish_partial`], folded into the program's model.
    pub fn finish(&self, ranks: Vec<(Arc<StreamInfo>, StreamAccounting)>) -> Vec<Program> {
        self.finish_partial(ranks)
            .finish(self.program.analyses(), false)
    }
}

/// The streams `ranks` by row, in order of each row's first stream: one
/// stream each, or a process's streams before and after `exec` together
/// ([`StreamInfo::continuing`]), in connection order.
type Streams<'a> = Vec<&'a (Arc<StreamInfo>, StreamAccounting)>;

fn rows(ranks: &[(Arc<StreamInfo>, StreamAccounting)]) -> Vec<Streams<'_>> {
    let mut rows: Vec<Streams<'_>> = Vec::with_capacity(ranks.len());
    let mut at: FxHashMap<u64, usize> = FxHashMap::default();
    for r in ranks {
        match at.get(&r.0.row()) {
            Some(&i) => rows[i].push(r),
            None => {
                at.insert(r.0.row(), rows.len());
                rows.push(vec![r]);
            }
        }
    }
    for row in &mut rows {
        row.sort_by_key(|(info, _)| info.conn());
    }
    rows
}

/// The accounting of one row: its streams' events summed. The row is
/// whole when its last stream ended with its record; the events of an
/// earlier one that did not (an `exec` that did not wait for the drain)
/// count as written as they arrived, and the row as partial.
fn row_accounting(streams: &[&(Arc<StreamInfo>, StreamAccounting)]) -> RankAccounting {
    let (last, earlier) = streams.split_last().expect("a row has a stream");
    let mut row = rank_accounting(&last.1);
    for (_, acc) in earlier {
        row.received = row.received.saturating_add(acc.received);
        let (w, d) = acc
            .end
            .as_ref()
            .map_or((acc.received, 0), |e| (e.events_written, e.events_dropped));
        row.end = match acc.end {
            Some(_) => row
                .end
                .map(|(rw, rd)| (rw.saturating_add(w), rd.saturating_add(d))),
            None => None,
        };
    }
    row
}

impl std::fmt::Debug for OnBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnBoard")
            .field("program", &self.program.name())
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}
