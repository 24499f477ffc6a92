//! The server's [`Sink`]: every connection's frames, from its reader thread,
//! onto its program's board level.
//!
//! A connection's `Hello` finds or creates its program — a program is the
//! pair (job, executable name); MPMD applications of one executable are told
//! apart later, by `MPI_APPNUM`, when the program is folded — and opens a
//! stream on it. Definitions and packs go to the board keyed by the
//! connection, in stream order; the rank frame, the end-of-stream totals and
//! the close are kept here, in the connection's record, for accounting.
//!
//! Who may speak: with a secret (`hark run` always has one), a `Hello`
//! that neither proves nor carries it is refused. A stream's identity must
//! be consistent: its world rank below its world size (in its `Hello` and
//! its `Rank` frame), and its pid its own on its host within its job — a
//! second stream naming the pid of a live one waits a moment for that one
//! to close (the same process after `exec`) and is refused if it does not.
//! A stream naming the pid and launcher rank of one that ended, as the same
//! program, is that process after `exec`: it continues the earlier
//! stream's row (`StreamInfo::continuing`), so a rank that re-execs itself
//! is one rank.
//! Rank streams are keyed by (job, program, world rank): a second stream
//! claiming a rank that another still streams — in its `Hello` or later in
//! its `Rank` frame — is refused, never merged. Every refusal is counted
//! and named in the diagnostics. A child
//! (`Hello.parent` set: forked by a rank's process, or started with `exec`
//! below it under its name) is analysed on a level of its own and folded
//! into the program's `children`, never into its ranks; one that calls
//! `MPI_Init` is refused.
//!
//! Back-pressure: a reader whose program has more than `max_in_flight` bytes
//! of events waiting for the analyses stops reading until it drops below.
//! The socket fills, the probe's buffers fill, and the probe (by default)
//! drops and counts what it cannot send: memory stays bounded and the loss
//! is reported, never hidden.

use hark_analyses::clock::HostClock;
use hark_analyses::DynAnalysis;
use hark_board::Board;
use hark_engine::{Config, OnBoard, ProgramAnalysis, StreamAccounting, StreamInfo};
use hark_model::{Accounting, ChildProcess, FileIo, Program};
use hark_transport::{Closed, ConnId, Sink};
use hark_wire::{Action, ClockReference, ClockSync, Frame, Hello, PackBytes};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

/// Handshake offsets smaller than this are taken as transmission delay
/// between hosts whose clocks agree (one host, or NTP): the probe's own
/// realtime reading is then the better estimate. Larger ones are clock
/// disagreement, and are applied.
const TRUSTED_SKEW_NS: i64 = 1_000_000;

/// What converts a stream's probe clock to the common timeline (the server's
/// `CLOCK_REALTIME`, ns since the epoch): `common = probe + offset`.
pub(crate) fn timeline_offset(hello: &Hello, clock_offset_ns: i64) -> i64 {
    // Saturating: a Hello's clock fields are whatever was sent.
    let to_host_realtime = (hello.realtime_ns as i64).saturating_sub(hello.clock_ns as i64);
    if clock_offset_ns.saturating_abs() > TRUSTED_SKEW_NS {
        to_host_realtime.saturating_add(clock_offset_ns)
    } else {
        to_host_realtime
    }
}

pub(crate) struct ProgramSlot {
    pub(crate) job: String,
    pub(crate) name: String,
    pub(crate) on: Arc<OnBoard>,
    pub(crate) conns: Vec<u64>,
    /// The earliest handshake of its own streams (not its children's) by
    /// their hosts' realtime clocks, as the probes read them when they made
    /// it; `u64::MAX` before the first.
    pub(crate) first_ns: u64,
    /// The program's forked children, analysed on a level of their own so
    /// that they never become ranks; installed at the first child.
    pub(crate) children: Option<Arc<OnBoard>>,
    pub(crate) child_conns: Vec<u64>,
}

impl ProgramSlot {
    /// Where the program comes among the others: by its first handshake,
    /// then its first connection. A process's handshake is made as it
    /// starts, so a launched command comes before what it starts; the order
    /// of arrival, and the server's timeline (which takes a handshake that
    /// arrived late as clock skew), can say otherwise: a parent's shipping
    /// thread may send its handshake after a short-lived child's.
    pub(crate) fn order(&self) -> (u64, Option<u64>) {
        (self.first_ns, self.conns.iter().min().copied())
    }
}

pub(crate) struct Conn {
    /// The job, for telling which streams claim the same rank.
    pub(crate) job: String,
    /// A child's stream (`Hello.parent` set): never a rank.
    pub(crate) child: bool,
    pub(crate) info: Arc<StreamInfo>,
    pub(crate) on: Arc<OnBoard>,
    pub(crate) acc: Mutex<StreamAccounting>,
    pub(crate) outcome: Mutex<Option<Closed>>,
    /// Events (and buffers) a probe that died had recorded but not yet
    /// published to its shared-memory ring.
    pub(crate) lost: Mutex<Option<(u64, u64)>>,
    /// It came after its program's first `rows` streams: if it ends
    /// without a world rank, it is folded into the program's row of other
    /// processes (see [`State::fold_finished`]).
    pub(crate) foldable: bool,
}

/// Counters for the live status line.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    /// Every `on_close`, with or without a hello.
    pub(crate) closed: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) broken: AtomicU64,
    /// Connections closed as unreadable before their `Hello` was accepted.
    pub(crate) rejected: AtomicU64,
    pub(crate) throttled_ns: AtomicU64,
    /// Streams refused at their `Hello` (no secret, or a rank already
    /// streaming) or cut off at a `Rank` frame claiming one.
    pub(crate) refused: AtomicU64,
}

pub(crate) struct State {
    /// See `ServerConfig::probe_realtime`.
    pub(crate) probe_realtime: bool,
    /// See `ServerConfig::handshakes`.
    pub(crate) handshakes: HashMap<(String, u32), i64>,
    pub(crate) board: Board,
    pub(crate) analyses: Vec<Arc<dyn DynAnalysis>>,
    pub(crate) config: Config,
    pub(crate) max_in_flight: u64,
    pub(crate) programs: Mutex<Vec<ProgramSlot>>,
    pub(crate) conns: RwLock<HashMap<u64, Arc<Conn>>>,
    pub(crate) counters: Counters,
    /// Why connections broke, for the report (bounded: the first few).
    pub(crate) problems: Mutex<Vec<String>>,
    /// Per job: world rank 0's handshake offset, the clock reference of
    /// every stream of the job that aligned itself with rank 0.
    pub(crate) clock_references: Mutex<HashMap<String, i64>>,
    /// Per (job, host): the best measurements against the server, which
    /// the host's processes share when theirs agree.
    pub(crate) host_clocks: Mutex<HashMap<HostKey, SharedHostClock>>,
    /// Which stream holds each (job, program, world rank), for refusing a
    /// second one.
    pub(crate) ranks: Mutex<HashMap<RankKey, Holder>>,
    /// Which stream is each live (job, host, pid), for refusing a second
    /// stream naming a live process.
    pub(crate) pids: Mutex<HashMap<PidKey, u64>>,
    /// The run's secret: a `Hello` without it is refused. `None` accepts
    /// every stream (a server started by hand or by a test).
    pub(crate) secret: Option<String>,
    /// Why connections were rejected before their `Hello`, with how many
    /// times each (bounded: the first few reasons).
    pub(crate) rejected: Mutex<Vec<(String, u64)>>,
    /// Closed streams to fold into their program's row of other processes
    /// once the board is done with them ([`State::fold_finished`]).
    pub(crate) folding: Folding,
    /// This state, for the thread that retries `folding`.
    pub(crate) me: Weak<State>,
    /// Keeps the readers and workers off the cores bound ranks use.
    pub(crate) placement: Arc<crate::place::Placement>,
    /// Where `--trace` keeps raw events, if asked.
    pub(crate) trace: Option<crate::trace::Store>,
    /// See `ServerConfig::exchange` and `Server::set_exchange`.
    pub(crate) exchange: std::sync::OnceLock<Arc<hark_engine::exchange::Exchange>>,
    /// Parcels from other analysers for a program no stream here has
    /// named yet, with their source, in arrival order.
    pub(crate) parked: Mutex<Vec<(u32, hark_engine::exchange::Parcel)>>,
}

/// Closed streams waiting to be folded away, and the passes that fold them.
#[derive(Default)]
pub(crate) struct Folding {
    /// Closed streams not yet folded.
    waiting: Mutex<Vec<u64>>,
    /// Held by a pass for all of it, so that passes never overlap and a
    /// count never misses the streams a pass holds; `true` once the run's
    /// end has taken the programs: from then on no pass folds anything,
    /// as a stream folded while programs are folded would be in neither
    /// its own row nor the row of others.
    pass: Mutex<bool>,
    /// Whether a thread is retrying the streams that wait.
    retrying: AtomicBool,
}

const MAX_PROBLEMS: usize = 32;

/// How often streams the board still held at their close are tried again.
pub(crate) const FOLD_RETRY: Duration = Duration::from_millis(20);

impl State {
    fn conn(&self, id: ConnId) -> Option<Arc<Conn>> {
        hark_sync::read(&self.conns).get(&id.0).cloned()
    }

    fn problem(&self, what: String) {
        let mut p = hark_sync::lock(&self.problems);
        if p.len() < MAX_PROBLEMS {
            p.push(what);
        }
    }

    /// One diagnostic per reason connections were rejected for.
    pub(crate) fn rejections(&self) -> Vec<String> {
        let total = self.counters.rejected.load(Ordering::Relaxed);
        let reasons = hark_sync::lock(&self.rejected);
        let named: u64 = reasons.iter().map(|(_, n)| n).sum();
        let mut out: Vec<String> = reasons
            .iter()
            .map(|(why, n)| {
                format!("{n} connection(s) were rejected before their handshake was read: {why}")
            })
            .collect();
        if total > named {
            out.push(format!(
                "{} more connection(s) were rejected for other reasons",
                total - named
            ));
        }
        out
    }

    /// `f` of each program, in the order of [`ProgramSlot::order`].
    pub(crate) fn in_order<T>(&self, f: impl Fn(&ProgramSlot) -> T) -> Vec<T> {
        let mut programs: Vec<_> = hark_sync::lock(&self.programs)
            .iter()
            .map(|p| (p.order(), f(p)))
            .collect();
        programs.sort_by_key(|p| p.0);
        programs.into_iter().map(|(_, t)| t).collect()
    }

    /// Each program's level and its streams, in the order of
    /// [`ProgramSlot::order`].
    fn levels(&self) -> Vec<(Arc<OnBoard>, Vec<u64>)> {
        self.in_order(|p| (p.on.clone(), p.conns.clone()))
    }

    /// Every program's model as analysed so far, in the order of
    /// [`ProgramSlot::order`].
    pub(crate) fn snapshot(&self) -> Vec<Program> {
        let programs = self.levels();
        let conns = hark_sync::read(&self.conns);
        let mut out = Vec::new();
        for (on, ids) in programs {
            out.extend(on.snapshot(&ranks_of(&conns, &ids)));
        }
        out
    }

    /// [`crate::Server::contention`].
    pub(crate) fn contention(&self) -> hark_engine::Contention {
        let programs = hark_sync::lock(&self.programs);
        let mut sum = hark_engine::Contention::default();
        for on in programs
            .iter()
            .flat_map(|p| std::iter::once(&p.on).chain(&p.children))
        {
            let c = on.contention();
            sum.stalls += c.stalls;
            sum.copies += c.copies;
        }
        sum
    }

    /// Folds every closed stream waiting in `folding` that the board is
    /// done with into its program's row of other processes, and forgets
    /// it: its connection record, its place in the program, its states.
    /// What stays per process is nothing, so a run of 40,000 short
    /// processes costs what a run of 1,000 does.
    ///
    /// A stream the board still holds (its last packs not yet analysed)
    /// waits, and a thread tries again every [`FOLD_RETRY`] until none
    /// waits: the next close may never come (a burst of processes, then
    /// one long one), and until then each waiting stream keeps its row.
    pub(crate) fn fold_finished(&self) {
        let retrying = &self.folding.retrying;
        if self.fold_pass() > 0 && !retrying.swap(true, Ordering::AcqRel) {
            let Some(me) = self.me.upgrade() else {
                retrying.store(false, Ordering::Release);
                return;
            };
            let spawned = std::thread::Builder::new()
                .name("hark-fold".into())
                .spawn(move || me.retry_folding());
            if spawned.is_err() {
                // No thread now: the next close or the run's end folds them.
                retrying.store(false, Ordering::Release);
            }
        }
    }

    /// The retrying thread of [`State::fold_finished`]. It ends when no
    /// stream waits, when the run's end has taken the programs, or when it
    /// alone holds the state (the server is gone).
    fn retry_folding(self: Arc<State>) {
        let retrying = &self.folding.retrying;
        loop {
            std::thread::sleep(FOLD_RETRY);
            if Arc::strong_count(&self) == 1 {
                retrying.store(false, Ordering::Release);
                return;
            }
            if self.fold_pass() == 0 {
                retrying.store(false, Ordering::Release);
                // A stream deferred after that pass, while the flag was
                // still set, was left to this thread.
                if !self.left_to_fold() || retrying.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        }
    }

    /// How many closed streams wait to be folded away.
    pub(crate) fn folding(&self) -> usize {
        let _pass = hark_sync::lock(&self.folding.pass);
        hark_sync::lock(&self.folding.waiting).len()
    }

    /// Whether a later pass may fold a stream that waits.
    fn left_to_fold(&self) -> bool {
        let ended = hark_sync::lock(&self.folding.pass);
        !*ended && !hark_sync::lock(&self.folding.waiting).is_empty()
    }

    /// One pass of [`State::fold_finished`]; returns how many streams
    /// wait for a later one (none once the run's end took the programs).
    fn fold_pass(&self) -> usize {
        let ended = hark_sync::lock(&self.folding.pass);
        if *ended {
            return 0;
        }
        let waiting = std::mem::take(&mut *hark_sync::lock(&self.folding.waiting));
        if waiting.is_empty() {
            return 0;
        }
        let mut later = Vec::new();
        let mut gone: Vec<(u64, Arc<OnBoard>)> = Vec::new();
        for id in waiting {
            let taken = {
                let mut conns = hark_sync::write(&self.conns);
                match conns.get(&id) {
                    // Only the map holds the record, and only the record
                    // the stream: nothing of it is on the board any more.
                    Some(c) if Arc::strong_count(c) == 1 && Arc::strong_count(&c.info) == 1 => {
                        conns.remove(&id)
                    }
                    Some(_) => {
                        later.push(id);
                        None
                    }
                    None => None,
                }
            };
            let Some(c) = taken else { continue };
            let acc = hark_sync::lock(&c.acc).clone();
            if !c.on.fold_away(&c.info, &acc) {
                // A knowledge source cannot fold it: it keeps its row.
                hark_sync::write(&self.conns).insert(id, c);
                continue;
            }
            let h = c.info.hello();
            if let Some((events, packs)) = *hark_sync::lock(&c.lost) {
                self.problem(format!(
                    "pid {} on {} died with {events} recorded events in {packs} buffers it had not shipped; they are lost",
                    h.pid, h.host
                ));
            }
            if let Some(Closed::Broken(why)) = &*hark_sync::lock(&c.outcome) {
                self.problem(format!(
                    "the stream of pid {} on {} broke: {why}; what arrived before is kept",
                    h.pid, h.host
                ));
            }
            gone.push((id, c.on.clone()));
        }
        if !gone.is_empty() {
            let mut programs = hark_sync::lock(&self.programs);
            for slot in programs.iter_mut() {
                if gone.iter().any(|(_, on)| Arc::ptr_eq(on, &slot.on)) {
                    slot.conns.retain(|id| !gone.iter().any(|(g, _)| g == id));
                }
            }
        }
        let mut waiting = hark_sync::lock(&self.folding.waiting);
        waiting.extend(later);
        drop(ended);
        waiting.len()
    }

    /// Folds every program, in order of first handshake.
    pub(crate) fn fold(&self) -> Vec<Program> {
        let programs = self.take_drained();
        let conns = hark_sync::read(&self.conns);
        let mut out = Vec::new();
        for slot in programs {
            let mut folded = slot.on.finish(ranks_of(&conns, &slot.conns));
            let children = match &slot.children {
                Some(on) => children_of(&conns, &slot.child_conns, on),
                None => Vec::new(),
            };
            for p in &mut folded {
                for id in slot.conns.iter().chain(&slot.child_conns) {
                    if let Some(c) = conns.get(id) {
                        stream_problems(c, &mut p.diagnostics);
                    }
                }
            }
            // Each child goes to the program (of an MPMD launch) holding
            // its parent's world rank, else to the first.
            for child in children {
                let at = folded
                    .iter()
                    .position(|p| p.rank_info.iter().any(|r| r.world_rank == child.world_rank))
                    .unwrap_or(0);
                if let Some(p) = folded.get_mut(at) {
                    if child.partial {
                        p.diagnostics.push(format!(
                            "child process pid {} on {} (of pid {}, world rank {}) ended without its end-of-stream record (killed or crashed?); the {} events that arrived are kept",
                            child.pid, child.host, child.parent_pid, child.world_rank, child.accounting.events_received
                        ));
                    }
                    p.children.push(child);
                }
            }
            out.extend(folded);
        }
        out
    }
}

impl State {
    /// Each program's partial result, in order of first handshake, for
    /// an analyser rank whose partials merge with other ranks' (streams
    /// over MPI carry no forked children: `docs/analysers.md`). Lost and
    /// broken streams are named in the returned diagnostics.
    pub(crate) fn fold_partials(&self) -> (Vec<hark_engine::Partial>, Vec<String>) {
        let programs = self.take_drained();
        let conns = hark_sync::read(&self.conns);
        let mut problems = Vec::new();
        let mut out = Vec::new();
        for slot in programs {
            for c in slot.conns.iter().filter_map(|id| conns.get(id)) {
                stream_problems(c, &mut problems);
            }
            out.push(slot.on.finish_partial(ranks_of(&conns, &slot.conns)));
        }
        (out, problems)
    }

    /// Each program's partial result so far, in order of first handshake,
    /// as [`State::snapshot`] takes it but not folded (an analyser rank's
    /// share of a live view).
    pub(crate) fn snapshot_partials(&self) -> Vec<hark_engine::Partial> {
        let programs = self.levels();
        let conns = hark_sync::read(&self.conns);
        programs
            .into_iter()
            .map(|(on, ids)| on.snapshot_partial(&ranks_of(&conns, &ids)))
            .collect()
    }

    /// Takes every program once its board level has analysed all it was
    /// given, in order of first handshake. Streams still waiting to be
    /// folded away are folded now, once the board is done with them, so
    /// that which processes keep a row does not depend on how fast the
    /// analyses ran.
    fn take_drained(&self) -> Vec<ProgramSlot> {
        let levels: Vec<Arc<OnBoard>> = self
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| p.on.clone())
            .collect();
        for on in &levels {
            on.drain();
        }
        drop(levels);
        self.fold_finished();
        *hark_sync::lock(&self.folding.pass) = true;
        let mut programs = std::mem::take(&mut *hark_sync::lock(&self.programs));
        // Readers say hello in whatever order their threads run.
        programs.sort_by_key(ProgramSlot::order);
        programs
    }
}

/// What went wrong with stream `c`, if anything, for the diagnostics: a
/// process that died holding unshipped buffers, a stream that broke.
fn stream_problems(c: &Conn, out: &mut Vec<String>) {
    let h = c.info.hello();
    if let Some((events, packs)) = *hark_sync::lock(&c.lost) {
        out.push(format!(
            "pid {} on {} died with {events} recorded events in {packs} buffers it had not \
             shipped; they are lost",
            h.pid, h.host
        ));
    }
    if let Some(Closed::Broken(why)) = &*hark_sync::lock(&c.outcome) {
        out.push(format!(
            "the stream of pid {} on {} broke: {why}; what arrived before is kept",
            h.pid, h.host
        ));
    }
}

/// Folds a program's forked children on their own level, and describes
/// each: its parent, its accounting and its I/O.
fn children_of(conns: &HashMap<u64, Arc<Conn>>, ids: &[u64], on: &OnBoard) -> Vec<ChildProcess> {
    let mut out = Vec::new();
    for p in on.finish(ranks_of(conns, ids)) {
        for (i, r) in p.rank_info.iter().enumerate() {
            let parent_pid = ids
                .iter()
                .filter_map(|id| conns.get(id))
                .map(|c| c.info.hello())
                .find(|h| h.pid == r.pid && h.host == r.host)
                .map_or(0, |h| h.parent);
            let per_file = |bytes: fn(&FileIo) -> &Vec<u64>| -> u64 {
                p.io.files
                    .iter()
                    .map(|f| bytes(f).get(i).copied().unwrap_or(0))
                    .sum()
            };
            out.push(ChildProcess {
                world_rank: r.world_rank,
                parent_pid,
                pid: r.pid,
                host: r.host.clone(),
                accounting: Accounting {
                    partial_ranks: 0,
                    partial_children: u64::from(r.partial),
                    ..r.accounting.clone()
                },
                partial: r.partial,
                io: p.io.per_rank.get(i).cloned().unwrap_or_default(),
                read_bytes: per_file(|f| &f.read_bytes),
                write_bytes: per_file(|f| &f.write_bytes),
            });
        }
    }
    out.sort_by_key(|c| (c.world_rank, c.pid));
    out
}

/// The streams `ids` with their accounting so far.
fn ranks_of(
    conns: &HashMap<u64, Arc<Conn>>,
    ids: &[u64],
) -> Vec<(Arc<StreamInfo>, StreamAccounting)> {
    ids.iter()
        .filter_map(|id| conns.get(id))
        .map(|c| {
            let acc = hark_sync::lock(&c.acc).clone();
            (c.info.clone(), acc)
        })
        .collect()
}

impl Sink for State {
    fn on_hello(&self, conn: ConnId, hello: &Hello, clock_offset_ns: i64) {
        self.placement.reader(conn.0);
        let Some(earlier) = self.admit(conn, hello) else {
            return;
        };
        let child = hello.parent != 0;
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        let recorded = self.handshakes.get(&(hello.host.clone(), hello.pid));
        let offset = recorded.copied().unwrap_or_else(|| {
            timeline_offset(
                hello,
                if self.probe_realtime {
                    0
                } else {
                    clock_offset_ns
                },
            )
        });
        // The program's time slices start at its first handshake.
        let origin = hello.clock_ns.saturating_add_signed(offset);
        let install = || {
            let analysis = ProgramAnalysis::new(
                &hello.program,
                origin,
                self.analyses.clone(),
                self.config.clone(),
            );
            match self.exchange.get() {
                Some(x) if !child => {
                    OnBoard::install_exchanging(&self.board, analysis, x.clone(), &hello.job)
                }
                _ => OnBoard::install(&self.board, analysis),
            }
            .map(Arc::new)
        };
        let (on, info, foldable) = {
            let mut programs = hark_sync::lock(&self.programs);
            let found = programs
                .iter()
                .position(|p| p.job == hello.job && p.name == hello.program);
            let index = match found {
                Some(i) => i,
                None => match install() {
                    Ok(on) => {
                        programs.push(ProgramSlot {
                            job: hello.job.clone(),
                            name: hello.program.clone(),
                            on,
                            conns: Vec::new(),
                            first_ns: u64::MAX,
                            children: None,
                            child_conns: Vec::new(),
                        });
                        programs.len() - 1
                    }
                    Err(e) => {
                        drop(programs);
                        self.release(conn.0);
                        self.problem(format!("{conn} was not analysed: {e}"));
                        return;
                    }
                },
            };
            let slot = &mut programs[index];
            let on = if child {
                let on = match &slot.children {
                    Some(on) => on.clone(),
                    None => match install() {
                        Ok(on) => {
                            slot.children = Some(on.clone());
                            on
                        }
                        Err(e) => {
                            drop(programs);
                            self.release_pid(conn.0);
                            self.problem(format!("{conn} was not analysed: {e}"));
                            return;
                        }
                    },
                };
                slot.child_conns.push(conn.0);
                on
            } else {
                slot.conns.push(conn.0);
                slot.first_ns = slot.first_ns.min(hello.realtime_ns);
                slot.on.clone()
            };
            let info = on.program().stream_info(conn.0, hello.clone(), offset);
            // Under the lock: the store's Hellos go in the order the
            // programs were installed in, so that a replay of the store
            // gives each program the origin (its first handshake) it had.
            if let Some(store) = &self.trace {
                store.open(conn.0, hello);
            }
            // The same process after `exec`, as the same program: one row
            // (a row of its own, not folded with others).
            if let Some(e) = earlier.filter(|e| continues(e, &on, hello)) {
                let info = info.continuing(&e.info);
                (on, Arc::new(info), false)
            } else {
                // Past the first `rows` streams of the program (those
                // still held, plus those folded away already).
                let foldable =
                    !child && slot.conns.len() as u64 + slot.on.folded() > self.config.rows as u64;
                (on, Arc::new(info), foldable)
            }
        };

        hark_sync::write(&self.conns).insert(
            conn.0,
            Arc::new(Conn {
                job: hello.job.clone(),
                child,
                info: info.clone(),
                on,
                acc: Mutex::new(StreamAccounting::default()),
                outcome: Mutex::new(None),
                lost: Mutex::new(None),
                foldable,
            }),
        );
        // After the insertion, so that a reference set meanwhile is seen
        // either here or by `clock_reference`'s walk of the connections.
        let reference = self
            .clock_references
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&hello.job)
            .copied();
        if let Some(r) = reference {
            info.set_clock_reference(r);
        }
        // Last: a replay connects stream k+1 once k streams are accepted
        // whole, each installed with its program's origin.
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
    }

    fn pack_buffer(&self, conn: ConnId) -> Option<Vec<u8>> {
        self.conn(conn)?.on.pack_buffer()
    }

    fn on_pack(&self, conn: ConnId, pack: PackBytes) {
        let Some(c) = self.conn(conn) else { return };
        if let Some(store) = &self.trace {
            store.frame(conn.0, &c.info, &pack.frame());
        }
        self.received(&c, hark_wire::accounted(pack.events()));
        if let Err(e) = c.on.pack_owned(&c.info, pack) {
            self.problem(format!("{conn}: {e}"));
        }
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        let Some(c) = self.conn(conn) else { return };
        if let Some(store) = &self.trace {
            // A clock frame is stored once applied (below).
            if !matches!(frame, Frame::Clock(_)) {
                store.frame(conn.0, &c.info, &frame);
            }
        }
        let submitted = match frame {
            Frame::Pack { events, .. } => {
                self.received(&c, hark_wire::accounted(events));
                c.on.pack(&c.info, events)
            }
            Frame::Counts(counts) => {
                // A sampled-out probe's totals: its events count as received.
                hark_sync::lock(&c.acc).received += counts.events;
                self.counters
                    .events
                    .fetch_add(counts.events, Ordering::Relaxed);
                c.on.counts(&c.info, counts)
            }
            Frame::Defs(defs) => c.on.defs(&c.info, defs),
            Frame::Rank(r) if c.child => {
                // A child calls no `MPI_Init` (a forked one cannot): this
                // is the rank's MPI program, started below a process of its
                // own name that holds the rank (a wrapper), whose row it
                // cannot take over.
                let parent = c.info.hello().parent;
                self.cut(
                    conn,
                    &format!(
                        "it called MPI_Init as world rank {} below pid {parent}, a process of the same program name that holds the rank (a wrapper?); start the MPI program with `exec` from the wrapper, or under another name",
                        r.world_rank
                    ),
                );
                return;
            }
            Frame::Rank(r) if !(0..r.world_size).contains(&r.world_rank) => {
                self.cut(
                    conn,
                    &format!(
                        "its Rank frame claims world rank {} of a world of {}, which has no such rank",
                        r.world_rank, r.world_size
                    ),
                );
                return;
            }
            Frame::Rank(r) => {
                let hello = c.info.hello();
                let claimed = self.claim(&c.job, &hello.program, r.world_rank, conn.0, hello);
                if let Err(holder) = claimed {
                    self.cut(
                        conn,
                        &format!(
                            "its Rank frame claims world rank {}, which is already streaming from pid {} on {}",
                            r.world_rank, holder.pid, holder.host
                        ),
                    );
                    return;
                }
                c.info.set_rank(r);
                Ok(())
            }
            Frame::Clock(sync) => {
                match sync.reference {
                    ClockReference::Server => {
                        let host = self.host_clock(c.info.hello(), sync);
                        c.info.align_sharing(sync, Some(host));
                    }
                    ClockReference::WorldRank0 => c.info.align(sync),
                }
                if let Some(store) = &self.trace {
                    store.clock(conn.0, &c.info, sync);
                }
                if c.info.world_rank() == 0 {
                    self.clock_reference(&c.info);
                }
                Ok(())
            }
            Frame::End(end) => {
                hark_sync::lock(&c.acc).end = Some(end);
                Ok(())
            }
            Frame::Cpus(cpus) => {
                self.placement.cpus(conn.0, &c.info.hello().host, &cpus);
                Ok(())
            }
            // The probe's answer to a service's pause or resume: when, on
            // its clock.
            Frame::Control(k) if matches!(k.action, Action::Pause | Action::Resume) => {
                c.on.paused(&c.info, k.action == Action::Pause, k.seq)
            }
            // The reader has applied it to the packs after it.
            // The readers never hand on clock pings (a connection of their
            // own, answered by the transport).
            Frame::Hello(_)
            | Frame::Ring
            | Frame::Control(_)
            | Frame::Scale(_)
            | Frame::ClockPing
            | Frame::ClockPong(_) => Ok(()),
            // The transport takes a forwarder's frames apart before a sink.
            Frame::Node(_) | Frame::Mux { .. } | Frame::Gone(_) => Ok(()),
        };
        if let Err(e) = submitted {
            self.problem(format!("{conn}: {e}"));
        }
    }

    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        if let Some(c) = self.conn(conn) {
            *hark_sync::lock(&c.lost) = Some((events, packs));
        }
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        self.placement.closed(conn.0);
        self.counters.closed.fetch_add(1, Ordering::Relaxed);
        if let Closed::Broken(_) = outcome {
            self.counters.broken.fetch_add(1, Ordering::Relaxed);
        }
        // A rank keeps its pid here after its stream closed: its image
        // after `exec` may say hello after the close was read, and
        // continues its row ([`continues`]).
        if !self.conn(conn).is_some_and(|c| holds_a_rank(&c)) {
            self.release_pid(conn.0);
        }
        match self.conn(conn) {
            Some(c) => {
                self.counters.open.fetch_sub(1, Ordering::Relaxed);
                *hark_sync::lock(&c.outcome) = Some(outcome);
                if c.foldable && c.info.world_rank() < 0 {
                    drop(c);
                    hark_sync::lock(&self.folding.waiting).push(conn.0);
                    self.fold_finished();
                }
            }
            None => {
                if let Closed::Broken(why) = outcome {
                    self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                    let mut reasons = hark_sync::lock(&self.rejected);
                    match reasons.iter().position(|(w, _)| *w == why) {
                        Some(i) => reasons[i].1 += 1,
                        None if reasons.len() < MAX_PROBLEMS => reasons.push((why, 1)),
                        None => {}
                    }
                }
            }
        }
    }
}

/// Whether stream `c` is a rank's, by the launcher's rank variable, with a
/// row of its own.
fn holds_a_rank(c: &Conn) -> bool {
    c.info.hello().rank >= 0 && !c.foldable
}

/// Whether the stream saying `hello` on level `on` is the process of the
/// ended stream `earlier` after `exec` (same job, host and pid, which
/// `State::own_identity` matched): the same program, and the same rank by
/// the launcher's variable, which no other process of the job carries.
/// Processes without a rank variable are not matched: a pid alone may
/// come back in a long run.
fn continues(earlier: &Conn, on: &Arc<OnBoard>, hello: &Hello) -> bool {
    Arc::ptr_eq(&earlier.on, on) && holds_a_rank(earlier) && earlier.info.hello().rank == hello.rank
}

/// Who streams a rank.
#[derive(Clone)]
pub(crate) struct Holder {
    conn: u64,
    pid: u32,
    host: String,
}

/// A rank's key: (job, program, world rank).
pub(crate) type RankKey = (String, String, i32);

/// A host's key: (job, host).
pub(crate) type HostKey = (String, String);

/// A host's best clock measurements, shared by the streams of the host.
pub(crate) type SharedHostClock = Arc<Mutex<HostClock>>;

/// A process's key: (job, host, pid).
pub(crate) type PidKey = (String, String, u32);

/// How long a stream naming the pid of a live one waits for that one to
/// close: a process that calls `exec` has its old stream closed by the
/// kernel, but the server may read that close after the new image's
/// `Hello`.
const EXEC_GRACE: Duration = Duration::from_secs(2);

impl State {
    /// World rank 0 of a job measured its clock: its handshake becomes the
    /// reference of every stream of the job, present and future. The first
    /// one holds: processes the job spawns later (`MPI_Comm_spawn`) have a
    /// world, and a rank 0, of their own.
    fn clock_reference(&self, rank0: &StreamInfo) {
        self.set_clock_reference(&rank0.hello().job, rank0.clock().handshake_ns());
    }

    /// The best measurements against the server from the job and host of
    /// `hello`, `sync` offered to them (its uncertainty: half its round
    /// trip, and a forwarder's own bound): processes of one host read one
    /// clock, and share one offset when their measurements agree with it
    /// (`hark_analyses::clock::applied_offset_ns`). Only a measurement
    /// that agrees with the probe's own reading of its realtime clock at
    /// the handshake to within its half round trip and [`TRUSTED_SKEW_NS`]
    /// is offered: a process whose clock is off its host's (a test's skew)
    /// keeps its own. (Not the handshake offset: on a loaded node the
    /// server reads a `Hello` milliseconds late, and that delay is in it.)
    /// The host's best is the one with the smallest round trip, and every
    /// stream of the host reads it as it is now (`HostClock`).
    fn host_clock(&self, hello: &Hello, sync: ClockSync) -> SharedHostClock {
        let key = (hello.job.clone(), hello.host.clone());
        let host = hark_sync::lock(&self.host_clocks)
            .entry(key)
            .or_default()
            .clone();
        let own = (hello.realtime_ns as i64).saturating_sub(hello.clock_ns as i64);
        let plausible = sync.offset_ns().abs_diff(own)
            <= sync.uncertainty_ns().saturating_add(TRUSTED_SKEW_NS as u64);
        if plausible {
            hark_sync::lock(&host).offer(&sync);
        }
        host
    }

    /// Per job whose handshakes gave a world size (the launcher's), the
    /// ranks that never connected: every world rank below the size that no
    /// stream named as its own, by its handshake's launcher rank or its
    /// `Rank` frame. Jobs with none missing are left out.
    pub(crate) fn missing_ranks(&self) -> Vec<hark_model::MissingRanks> {
        let mut jobs: std::collections::BTreeMap<String, (u32, std::collections::BTreeSet<u32>)> =
            Default::default();
        for c in hark_sync::read(&self.conns).values().filter(|c| !c.child) {
            let hello = c.info.hello();
            let job = jobs.entry(hello.job.clone()).or_default();
            if hello.size > 0 {
                job.0 = job.0.max(hello.size as u32);
            }
            // The launcher's rank is the job's; MPI's only when the
            // launcher named none (under a virtualised world it is the
            // program's).
            let rank = if hello.rank >= 0 {
                hello.rank
            } else {
                c.info.world_rank()
            };
            if rank >= 0 {
                job.1.insert(rank as u32);
            }
        }
        jobs.into_iter()
            .filter_map(|(job, (size, seen))| crate::missing_of(job, size, &seen))
            .collect()
    }

    /// Makes `reference` (world rank 0's handshake offset) the reference of
    /// every stream of `job`, present and future, unless the job has one.
    pub(crate) fn set_clock_reference(&self, job: &str, reference: i64) {
        {
            let mut refs = self
                .clock_references
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if refs.contains_key(job) {
                return;
            }
            refs.insert(job.to_string(), reference);
        }
        let conns = hark_sync::read(&self.conns);
        for c in conns.values().filter(|c| c.info.hello().job == job) {
            c.info.set_clock_reference(reference);
        }
    }

    /// Makes connection `conn` (whose handshake is `hello`) the stream of
    /// world rank `rank` of program `program` of `job`; fails with the
    /// current holder if another stream holds that rank and is still
    /// streaming (no end record, not closed). A holder with the same pid
    /// and host is the same process after `exec`: it gives way. One
    /// lookup, atomic under the index's lock, however many streams the run
    /// has had.
    fn claim(
        &self,
        job: &str,
        program: &str,
        rank: i32,
        conn: u64,
        hello: &Hello,
    ) -> Result<(), Holder> {
        if rank < 0 {
            return Ok(());
        }
        let mut ranks = hark_sync::lock(&self.ranks);
        let key = (job.to_string(), program.to_string(), rank);
        if let Some(h) = ranks.get(&key) {
            let same_process = h.pid == hello.pid && h.host == hello.host;
            if h.conn != conn && !same_process && self.still_holds(h.conn, rank) {
                return Err(h.clone());
            }
        }
        ranks.insert(
            key,
            Holder {
                conn,
                pid: hello.pid,
                host: hello.host.clone(),
            },
        );
        Ok(())
    }

    /// Gives up every rank connection `conn` holds (it was not set up, or
    /// was cut off), and its pid.
    fn release(&self, conn: u64) {
        hark_sync::lock(&self.ranks).retain(|_, h| h.conn != conn);
        self.release_pid(conn);
    }

    fn release_pid(&self, conn: u64) {
        hark_sync::lock(&self.pids).retain(|_, &mut c| c != conn);
    }

    /// Whether the stream of `hello` may be analysed: its secret, its
    /// identity, its world rank not held by another stream. `None` (the
    /// stream refused, and said why), or the stream this one continues
    /// after an `exec`, if any.
    fn admit(&self, conn: ConnId, hello: &Hello) -> Option<Option<Arc<Conn>>> {
        if let Some(secret) = &self.secret {
            if hello.check_secret(secret) == hark_wire::Credential::Wrong {
                self.refuse(conn, hello, "it did not give this run's secret");
                return None;
            }
        }
        let earlier = match self.own_identity(conn.0, hello) {
            Ok(earlier) => earlier,
            Err(why) => {
                self.refuse(conn, hello, &why);
                return None;
            }
        };
        if hello.parent == 0 {
            if let Err(holder) = self.claim(&hello.job, &hello.program, hello.rank, conn.0, hello) {
                self.refuse(
                    conn,
                    hello,
                    &format!(
                        "world rank {} is already streaming from pid {} on {}",
                        hello.rank, holder.pid, holder.host
                    ),
                );
                return None;
            }
        }
        Some(earlier)
    }

    /// Checks that a `Hello` names a rank its world has, and a process no
    /// live stream of its job speaks for; then holds its pid for `conn`,
    /// and returns the stream that held it before and has ended (for a
    /// rank: the same process before `exec`, see [`continues`]). The error
    /// says why not.
    fn own_identity(&self, conn: u64, hello: &Hello) -> Result<Option<Arc<Conn>>, String> {
        if hello.rank >= 0 && hello.size >= 0 && hello.rank >= hello.size {
            return Err(format!(
                "it claims world rank {} of a world of {}, which has no such rank",
                hello.rank, hello.size
            ));
        }
        let key = (hello.job.clone(), hello.host.clone(), hello.pid);
        let deadline = std::time::Instant::now() + EXEC_GRACE;
        loop {
            {
                let mut pids = hark_sync::lock(&self.pids);
                match pids.get(&key) {
                    Some(&other) if other != conn && self.streaming(other) => {}
                    held => {
                        let earlier = held.copied().filter(|&other| other != conn);
                        pids.insert(key, conn);
                        drop(pids);
                        // Looked up before the programs' lock is taken.
                        return Ok(
                            earlier.and_then(|id| hark_sync::read(&self.conns).get(&id).cloned())
                        );
                    }
                }
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "pid {} on {} is already streaming in job {:?} on another connection",
                    hello.pid, hello.host, hello.job
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether connection `id` still streams: not closed, no end record.
    /// A connection not registered yet (its `Hello` being handled) does.
    fn streaming(&self, id: u64) -> bool {
        let conns = hark_sync::read(&self.conns);
        let Some(c) = conns.get(&id) else {
            return true;
        };
        hark_sync::lock(&c.outcome).is_none() && hark_sync::lock(&c.acc).end.is_none()
    }

    /// Whether connection `id` still streams world rank `rank`: not closed,
    /// no end record, its rank not changed since. A connection that is not
    /// registered yet (its `Hello` being handled) holds it.
    fn still_holds(&self, id: u64, rank: i32) -> bool {
        let conns = hark_sync::read(&self.conns);
        let Some(c) = conns.get(&id) else {
            return true;
        };
        c.info.world_rank() == rank
            && hark_sync::lock(&c.outcome).is_none()
            && hark_sync::lock(&c.acc).end.is_none()
    }

    /// Refuses a stream at its `Hello`: nothing it sends is analysed.
    fn refuse(&self, conn: ConnId, hello: &Hello, why: &str) {
        self.release_pid(conn.0);
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        self.problem(format!(
            "refused {conn} (pid {} on {}, program {:?}, job {:?}, claiming world rank {}): {why}; nothing it sent is counted",
            hello.pid, hello.host, hello.program, hello.job, hello.rank
        ));
    }

    /// Drops a stream that turned out to claim a rank already streaming:
    /// what it sent is not folded, and nothing more is read into the run.
    fn cut(&self, conn: ConnId, why: &str) {
        let Some(c) = self
            .conns
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&conn.0)
        else {
            return;
        };
        self.release(conn.0);
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
        for p in self
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            p.conns.retain(|&id| id != conn.0);
            p.child_conns.retain(|&id| id != conn.0);
        }
        let h = c.info.hello();
        self.problem(format!(
            "refused {conn} (pid {} on {}, program {:?}, job {:?}): {why}; nothing it sent is counted",
            h.pid, h.host, h.program, h.job
        ));
    }

    /// A pack of `n` events arrived on `c`: counted, and the reader held
    /// back while too much is in flight ([`State::throttle`]).
    fn received(&self, c: &Conn, n: u64) {
        hark_sync::lock(&c.acc).received += n;
        self.counters.events.fetch_add(n, Ordering::Relaxed);
        self.throttle(&c.on, &c.info, n * hark_wire::EVENT_SIZE as u64);
    }

    /// Waits while the program has too many events waiting for analysis,
    /// or, on one analyser of several, while this stream has (see
    /// [`hark_engine::exchange::stream_backlog`]). A stream may always
    /// have one pack (of `pack` bytes, the one about to be submitted) in
    /// flight besides: with packs larger than the bound allows, reading the
    /// next one overlaps the analysis of the last instead of waiting for it.
    fn throttle(&self, on: &OnBoard, info: &StreamInfo, pack: u64) {
        let mut waited = 0u64;
        let stream_max = self.exchange.get().map_or(u64::MAX, |_| {
            hark_engine::exchange::stream_backlog().max(pack)
        });
        while on.in_flight() > self.max_in_flight || info.in_flight() > stream_max {
            std::thread::sleep(Duration::from_micros(200));
            waited += 200_000;
        }
        if waited > 0 {
            self.counters
                .throttled_ns
                .fetch_add(waited, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hark_wire::ClockSource;

    /// A handshake of world rank 0 of 1, pid 1, for the crate's tests.
    pub(crate) fn hello(clock_ns: u64, realtime_ns: u64) -> Hello {
        Hello {
            program: "p".into(),
            argv: vec![],
            host: "h".into(),
            pid: 1,
            rank: 0,
            size: 1,
            job: "j".into(),
            clock: ClockSource::Monotonic,
            clock_ns,
            realtime_ns,
            pack_size: 1 << 20,
            secret: String::new(),
            parent: 0,
        }
    }

    #[test]
    fn a_small_handshake_offset_is_delay_and_the_probes_own_realtime_is_used() {
        let h = hello(5_000, 1_000_000_000);
        let off = timeline_offset(&h, 40_000);
        assert_eq!(5_000u64.saturating_add_signed(off), 1_000_000_000);
    }

    #[test]
    fn a_large_handshake_offset_is_clock_skew_and_is_applied() {
        let h = hello(5_000, 1_000_000_000);
        let off = timeline_offset(&h, 2_000_000_000);
        assert_eq!(5_000u64.saturating_add_signed(off), 3_000_000_000);
        let behind = timeline_offset(&h, -500_000_000);
        assert_eq!(5_000u64.saturating_add_signed(behind), 500_000_000);
    }
}
