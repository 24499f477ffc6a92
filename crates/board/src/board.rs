//! The board: the type interner, the registry of levels and their
//! sensitivity tables, job creation, the worker pool, draining and shutdown.
//!
//! Locking plan. One `RwLock` guards the registry (levels, their sensitivity
//! tables, the every-level registrations). Submitting takes it for reading
//! only; creating or retiring a level and registering or removing a knowledge
//! source take it for writing, which is rare. Operations never run under it.
//! Below it, per knowledge source, one small lock guards the sensitivity
//! FIFOs of a join and one sharded lock per key the order of a serial
//! knowledge source; the job queues have their own locks (see `queue.rs`).
//! Lock order is always registry → join → key shard → queue.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::{self, IdHash};
use crate::error::ErrorKind;
use crate::place::Placement;
use crate::queue::{lock, QueueKind, Queues};
use crate::stats::{KsCounters, LevelCounters};
use crate::{
    Context, Entry, EntryKind, EntryType, Error, KnowledgeSource, KsId, KsStats, Level, LevelStats,
    Operation, Stats, Typed,
};

/// How to build a [`Board`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Number of worker threads (at least one).
    pub workers: usize,
    /// Which job queues to use; the default is the faster one measured
    /// (see `docs/board.md`).
    pub queues: QueueKind,
}

impl Config {
    /// `workers` workers, default queues.
    pub fn new(workers: usize) -> Config {
        Config {
            workers,
            queues: QueueKind::default(),
        }
    }

    /// The same with other job queues.
    pub fn queues(mut self, queues: QueueKind) -> Config {
        self.queues = queues;
        self
    }
}

/// A parallel blackboard: levels of entries, knowledge sources sensitive to
/// entry types, and a pool of workers running their jobs.
///
/// `Board` is a cheap handle (`Clone`, `Send`, `Sync`): give a clone to each
/// thread that submits entries. When the last handle is dropped, the board
/// drains and its workers stop ([`Board::shutdown`]). Operations should not
/// capture a `Board` (that keeps it alive forever); they get a [`Context`].
#[derive(Clone)]
pub struct Board {
    owner: Arc<Owner>,
}

struct Owner {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        shutdown(&self.shared, &self.threads);
    }
}

pub(crate) struct Shared {
    workers: usize,
    types: RwLock<Types>,
    registry: RwLock<Registry>,
    queues: Queues,
    next_ks: AtomicU64,
    /// Jobs created and not finished, on all levels.
    outstanding: AtomicUsize,
    drain_waiters: AtomicUsize,
    drained: Mutex<()>,
    drained_cv: Condvar,
    /// Set by `shutdown`: `Board::submit` refuses from then on.
    closing: AtomicBool,
    /// Set once drained at shutdown: workers leave.
    stop: AtomicBool,
    /// Where the workers run and how many take jobs.
    place: Placement,
}

#[derive(Default)]
struct Types {
    ids: HashMap<Arc<str>, EntryType>,
    names: Vec<Arc<str>>,
}

#[derive(Default)]
struct Registry {
    levels: HashMap<u32, LevelSlot, IdHash>,
    /// Retired levels, kept for their statistics while they hold entries.
    retired: Vec<(Level, Arc<str>, Arc<LevelCounters>)>,
    everywhere: Vec<(KsId, Arc<Factory>)>,
    next_level: u32,
}

type Factory = dyn Fn(Level) -> KnowledgeSource + Send + Sync;

struct LevelSlot {
    name: Arc<str>,
    counters: Arc<LevelCounters>,
    /// The sensitivity table: by type index, every (knowledge source,
    /// sensitivity index) sensitive to it.
    table: Vec<Vec<(Arc<KsInst>, usize)>>,
    ks: Vec<Arc<KsInst>>,
}

/// One knowledge source on one level.
pub(crate) struct KsInst {
    pub(crate) id: KsId,
    pub(crate) name: Arc<str>,
    pub(crate) level: Level,
    op: Arc<Operation>,
    arity: usize,
    removed: AtomicBool,
    /// The sensitivity FIFOs of a join (arity > 1): per sensitivity, the
    /// entries waiting with the key each was submitted with.
    joins: Mutex<Vec<Fifo>>,
    /// For serial knowledge sources: per key, the jobs waiting behind the
    /// running one. A key is present while one of its jobs is queued or
    /// running. Sharded so that keys do not contend.
    serial: Option<Box<[Mutex<KeyShard>]>>,
    pub(crate) level_counters: Arc<LevelCounters>,
    pub(crate) counters: KsCounters,
}

const KEY_SHARDS: usize = 16;

/// One sensitivity's FIFO: entries with the key each was submitted with.
type Fifo = VecDeque<(Entry, Option<u64>)>;

/// Per key present, the jobs waiting behind the one queued or running.
type KeyShard = HashMap<Option<u64>, VecDeque<Job>, IdHash>;

/// A job: a knowledge source and one entry per sensitivity.
pub(crate) struct Job {
    ks: Arc<KsInst>,
    entries: Entries,
    key: Option<u64>,
}

/// Most knowledge sources have one sensitivity: keep that entry inline.
enum Entries {
    One(Entry),
    Many(Box<[Entry]>),
}

impl Entries {
    fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }
}

fn shard_of(key: Option<u64>) -> usize {
    // Fibonacci hashing: ranks 0, 1, 2… land on different shards.
    (key.unwrap_or(u64::MAX).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % KEY_SHARDS
}

impl Board {
    /// A board with `workers` worker threads (at least one) and the default
    /// queues. The workers start at once and sleep until there are jobs.
    ///
    /// # Panics
    ///
    /// If the operating system cannot start a thread.
    pub fn new(workers: usize) -> Board {
        Board::with_config(Config::new(workers))
    }

    /// A board built as `config` says.
    ///
    /// # Panics
    ///
    /// If the operating system cannot start a thread.
    pub fn with_config(config: Config) -> Board {
        let workers = config.workers.max(1);
        clock::start();
        let shared = Arc::new(Shared {
            workers,
            types: RwLock::default(),
            registry: RwLock::default(),
            queues: Queues::new(config.queues, workers),
            next_ks: AtomicU64::new(1),
            outstanding: AtomicUsize::new(0),
            drain_waiters: AtomicUsize::new(0),
            drained: Mutex::new(()),
            drained_cv: Condvar::new(),
            closing: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            place: Placement::new(workers),
        });
        let threads = (0..workers)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("hark-board-{i}"))
                    .spawn(move || worker_loop(&shared, i))
                    .expect("the operating system refused to start a board worker thread")
            })
            .collect();
        Board {
            owner: Arc::new(Owner {
                shared,
                threads: Mutex::new(threads),
            }),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.owner.shared
    }

    /// The type named `name`, created on first use. The same name always
    /// gives the same type on this board. Any thread, any time.
    pub fn intern(&self, name: &str) -> EntryType {
        self.shared().intern(name)
    }

    /// The entry type of `kind` on this board, with its payload type: the
    /// handle entries of that kind are published and subscribed with. The
    /// same kind always gives the same handle on this board.
    pub fn typed<T: std::any::Any + Send + Sync>(&self, kind: &EntryKind<T>) -> Typed<T> {
        Typed::new(self.shared().intern(kind.name()))
    }

    /// The name of a type interned on this board.
    pub fn type_name(&self, ty: EntryType) -> Option<Arc<str>> {
        self.shared().type_name(ty)
    }

    /// Creates a level named `name` (names need not be unique) and puts on
    /// it a fresh instance of every knowledge source registered with
    /// [`Board::register_all`]. Entries can be submitted to it as soon as
    /// this returns.
    pub fn create_level(&self, name: &str) -> Level {
        self.shared().create_level(name)
    }

    /// The live level named `name`, if any (the first created, if several).
    pub fn level(&self, name: &str) -> Option<Level> {
        let reg = self
            .shared()
            .registry
            .read()
            .unwrap_or_else(|p| p.into_inner());
        reg.levels
            .iter()
            .filter(|(_, slot)| &*slot.name == name)
            .map(|(&id, _)| Level(id))
            .min()
    }

    /// Retires a level: from now on it refuses entries and registrations,
    /// its knowledge sources are removed (their jobs not yet started are
    /// dropped unrun; running jobs finish). Entries it still holds are freed
    /// when their last job ends.
    ///
    /// To finish a program's analysis first, call [`Board::drain_level`],
    /// read the results, then retire. Returns false if the level was not live.
    pub fn retire_level(&self, level: Level) -> bool {
        self.shared().retire_level(level)
    }

    /// Submits `entry` to `level` with no key. Any thread.
    ///
    /// The entry is looked up in the level's sensitivity table; each matching
    /// sensitivity gets a reference; jobs whose sensitivities are all
    /// satisfied are queued for the workers before this returns. Fails if the
    /// level is unknown or retired or the board is shutting down.
    pub fn submit(&self, level: Level, entry: Entry) -> Result<(), Error> {
        self.shared().submit(level, None, entry, false)
    }

    /// Submits `entry` to `level` with `key` (for example the rank it comes
    /// from); serial knowledge sources run the jobs of one key in order.
    pub fn submit_keyed(&self, level: Level, key: u64, entry: Entry) -> Result<(), Error> {
        self.shared().submit(level, Some(key), entry, false)
    }

    /// Publishes `payload` as an entry of `kind`, accounted at `bytes`, to
    /// `level` with `key` ([`Board::submit_keyed`]).
    #[inline]
    pub fn publish_keyed<T: std::any::Any + Send + Sync>(
        &self,
        level: Level,
        kind: Typed<T>,
        key: u64,
        payload: T,
        bytes: usize,
    ) -> Result<(), Error> {
        self.submit_keyed(level, key, kind.entry(payload, bytes))
    }

    /// Registers a knowledge source on one level. Entries submitted after
    /// this returns reach it; entries submitted before do not.
    pub fn register(&self, level: Level, ks: KnowledgeSource) -> Result<KsId, Error> {
        self.shared().register(level, ks)
    }

    /// Registers a knowledge source on every level, present and future:
    /// `make` is called once per level (now for the live ones, and whenever
    /// a level is created) and gives that level's instance, so per-level
    /// state lives in what `make` captures into each operation.
    ///
    /// `make` runs while the registry is locked: it must not call the board.
    pub fn register_all<F>(&self, make: F) -> Result<KsId, Error>
    where
        F: Fn(Level) -> KnowledgeSource + Send + Sync + 'static,
    {
        self.shared().register_all(Arc::new(make))
    }

    /// Removes a registration from every level it is on. Jobs of it not yet
    /// started are dropped unrun, entries waiting in its joins are freed; a
    /// running job finishes. Returns whether the registration existed.
    pub fn remove(&self, id: KsId) -> bool {
        self.shared().remove(id)
    }

    /// Waits until no job is queued or running on any level — including the
    /// jobs those jobs made. Entries waiting for an incomplete join do not
    /// count (they may wait forever).
    ///
    /// Never call it from an operation (it would wait for itself).
    ///
    /// # Panics
    ///
    /// If called from an operation of this board (instead of waiting
    /// forever); the panic is contained and counted like any other.
    pub fn drain(&self) {
        let shared = self.shared();
        shared.refuse_waiting_on_a_worker("drain");
        shared.wait_until(|| shared.outstanding.load(Ordering::SeqCst) == 0);
    }

    /// Waits until no job is queued or running on `level`. Other levels go
    /// on. Never call it from an operation.
    ///
    /// # Panics
    ///
    /// As [`Board::drain`].
    pub fn drain_level(&self, level: Level) {
        self.shared().refuse_waiting_on_a_worker("drain_level");
        let counters = {
            let reg = self
                .shared()
                .registry
                .read()
                .unwrap_or_else(|p| p.into_inner());
            match reg.levels.get(&level.0) {
                Some(slot) => slot.counters.clone(),
                None => match reg.retired.iter().find(|r| r.0 == level) {
                    Some(r) => r.2.clone(),
                    None => return,
                },
            }
        };
        self.shared()
            .wait_until(|| counters.jobs_outstanding.load(Ordering::SeqCst) == 0);
    }

    /// Refuses further submissions from outside, drains, and stops the
    /// workers. Operations may still submit while draining. Idempotent;
    /// dropping the last handle does the same.
    pub fn shutdown(&self) {
        shutdown(&self.owner.shared, &self.owner.threads);
    }

    /// Places the workers: they run only on the CPUs numbered in `cpus`, and
    /// only as many of them as there are such CPUs (at least one) take jobs;
    /// the others sleep until placed again. `None` (or an empty list) puts
    /// them all back where they started: on the CPUs of the thread that made
    /// the board, all taking jobs. Any thread, any time: each worker moves
    /// itself before its next job, and queued jobs are run by the workers
    /// left. The caller decides which cores to use and why.
    pub fn place_workers(&self, cpus: Option<&[usize]>) {
        let shared = self.shared();
        shared.place.set(cpus, shared.workers);
        // Sleeping workers move (or park) now, not at their next job.
        shared.queues.wake_all();
    }

    /// How many workers take jobs now ([`Board::place_workers`]).
    pub fn active_workers(&self) -> usize {
        self.shared().place.active()
    }

    /// A snapshot of the board's counters. Any thread, any time, cheap
    /// enough to call a few times a second.
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// The counters of the knowledge sources on `level` alone (none if it
    /// is not a live level): what [`Board::stats`] lists of them, without
    /// going through every level.
    pub fn knowledge_sources_on(&self, level: Level) -> Vec<KsStats> {
        let reg = hark_sync::read(&self.shared().registry);
        reg.levels.get(&level.0).map_or_else(Vec::new, |slot| {
            slot.ks.iter().map(|ks| ks_stats(ks)).collect()
        })
    }

    /// Loads the knowledge sources of a plugin ([`crate::Plugin::load`]).
    ///
    /// # Safety
    ///
    /// See [`crate::Plugin::load`].
    pub unsafe fn load_plugin(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<crate::Plugin, Error> {
        // SAFETY: the caller upholds `Plugin::load`'s contract.
        unsafe { crate::Plugin::load(self, path.as_ref()) }
    }
}

fn shutdown(shared: &Arc<Shared>, threads: &Mutex<Vec<JoinHandle<()>>>) {
    shared.closing.store(true, Ordering::SeqCst);
    let me = std::thread::current().id();
    let handles: Vec<JoinHandle<()>> = lock(threads).drain(..).collect();
    if handles.iter().any(|h| h.thread().id() == me) {
        // The last handle was dropped by an operation: draining here would
        // wait for ourselves. Tell the workers to stop when idle instead.
        shared.stop.store(true, Ordering::SeqCst);
        shared.queues.wake_all();
        shared.place.wake_all();
        return;
    }
    shared.wait_until(|| shared.outstanding.load(Ordering::SeqCst) == 0);
    shared.stop.store(true, Ordering::SeqCst);
    shared.queues.wake_all();
    shared.place.wake_all();
    for h in handles {
        // A worker never panics (operations are caught); ignore if it did.
        let _ = h.join();
    }
}

thread_local! {
    /// The board whose worker runs on this thread, if any (its address).
    static WORKER_OF: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Shared {
    fn refuse_waiting_on_a_worker(&self, what: &str) {
        if WORKER_OF.with(|w| w.get()) == self as *const Shared as usize {
            panic!(
                "Board::{what} was called from an operation of the same board: it would wait for \
                 itself forever (operations must not wait for the board)"
            );
        }
    }

    pub(crate) fn intern(&self, name: &str) -> EntryType {
        if let Some(&ty) = self
            .types
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .ids
            .get(name)
        {
            return ty;
        }
        let mut types = hark_sync::write(&self.types);
        if let Some(&ty) = types.ids.get(name) {
            return ty;
        }
        let ty = EntryType(types.names.len() as u32);
        let name: Arc<str> = name.into();
        types.names.push(name.clone());
        types.ids.insert(name, ty);
        ty
    }

    pub(crate) fn type_name(&self, ty: EntryType) -> Option<Arc<str>> {
        let types = hark_sync::read(&self.types);
        types.names.get(ty.0 as usize).cloned()
    }

    fn create_level(&self, name: &str) -> Level {
        let mut reg = hark_sync::write(&self.registry);
        let level = Level(reg.next_level);
        reg.next_level += 1;
        let mut slot = LevelSlot {
            name: name.into(),
            counters: Arc::new(LevelCounters::default()),
            table: Vec::new(),
            ks: Vec::new(),
        };
        for (id, make) in &reg.everywhere {
            let ks = make(level);
            // A factory that gives an invalid knowledge source for this level
            // leaves the level without it; `register_all` checked the first.
            if !ks.sensitivities.is_empty() {
                slot.add(*id, level, ks);
            }
        }
        reg.levels.insert(level.0, slot);
        level
    }

    fn retire_level(&self, level: Level) -> bool {
        let mut reg = hark_sync::write(&self.registry);
        let Some(slot) = reg.levels.remove(&level.0) else {
            return false;
        };
        for ks in &slot.ks {
            ks.retire();
        }
        reg.retired
            .push((level, slot.name.clone(), slot.counters.clone()));
        true
    }

    pub(crate) fn submit(
        &self,
        level: Level,
        key: Option<u64>,
        entry: Entry,
        from_op: bool,
    ) -> Result<(), Error> {
        if !from_op && self.closing.load(Ordering::Relaxed) {
            return Err(Error::new(
                ErrorKind::ShutDown,
                "the board is shutting down and takes no more entries",
            ));
        }
        let reg = hark_sync::read(&self.registry);
        let Some(slot) = reg.levels.get(&level.0) else {
            return Err(unknown_level(&reg, level));
        };
        entry.charge(&slot.counters);
        slot.counters
            .entries_submitted
            .fetch_add(1, Ordering::Relaxed);
        if let Some(sensitive) = slot.table.get(entry.ty().0 as usize) {
            for (ks, at) in sensitive {
                self.offer(ks, *at, &entry, key);
            }
        }
        Ok(())
    }

    /// Gives `entry` to sensitivity `at` of `ks`; makes a job if that was
    /// its last unsatisfied sensitivity.
    fn offer(&self, ks: &Arc<KsInst>, at: usize, entry: &Entry, key: Option<u64>) {
        if ks.arity == 1 {
            self.make_job(Job {
                ks: ks.clone(),
                entries: Entries::One(entry.clone()),
                key,
            });
            return;
        }
        let mut fifos = lock(&ks.joins);
        if ks.removed.load(Ordering::Relaxed) {
            return;
        }
        fifos[at].push_back((entry.clone(), key));
        if fifos.iter().any(|f| f.is_empty()) {
            ks.counters.entries_waiting.fetch_add(1, Ordering::Relaxed);
            return;
        }
        ks.counters
            .entries_waiting
            .fetch_sub(ks.arity - 1, Ordering::Relaxed);
        let mut job_key = None;
        let entries: Box<[Entry]> = fifos
            .iter_mut()
            .enumerate()
            .map(|(i, f)| {
                let (e, k) = f.pop_front().expect("checked non-empty above");
                if i == 0 {
                    job_key = k;
                }
                e
            })
            .collect();
        // Made under the join lock so that jobs of a serial knowledge source
        // are made in the order their joins completed.
        self.make_job(Job {
            ks: ks.clone(),
            entries: Entries::Many(entries),
            key: job_key,
        });
    }

    fn make_job(&self, job: Job) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        job.ks
            .level_counters
            .jobs_outstanding
            .fetch_add(1, Ordering::SeqCst);
        job.ks.counters.jobs_pending.fetch_add(1, Ordering::Relaxed);
        let ks = job.ks.clone();
        if let Some(shards) = &ks.serial {
            let mut keys = lock(&shards[shard_of(job.key)]);
            if let Some(waiting) = keys.get_mut(&job.key) {
                waiting.push_back(job);
                return;
            }
            keys.insert(job.key, VecDeque::new());
        }
        self.queues.push(job);
    }

    fn run_job(self: &Arc<Shared>, job: Job) {
        let Job { ks, entries, key } = job;
        ks.counters.jobs_pending.fetch_sub(1, Ordering::Relaxed);
        if ks.removed.load(Ordering::Acquire) {
            ks.counters.jobs_cancelled.fetch_add(1, Ordering::Relaxed);
        } else {
            let started = clock::ticks();
            let mut ctx = Context {
                shared: self,
                ks: &ks,
                key,
            };
            let result = catch_unwind(AssertUnwindSafe(|| (ks.op)(&mut ctx, entries.as_slice())));
            let ticks = clock::ticks().wrapping_sub(started);
            ks.counters.busy_ticks.fetch_add(ticks, Ordering::Relaxed);
            ks.counters.jobs_run.fetch_add(1, Ordering::Relaxed);
            if let Err(panic) = result {
                let message = panic_message(&*panic);
                ks.counters.record_error(
                    true,
                    format!("knowledge source '{}' panicked: {message}", ks.name),
                );
            }
        }
        // Free the entries before letting the next job of this key go, so
        // memory is given back in the order it was taken.
        drop(entries);
        if let Some(shards) = &ks.serial {
            let mut keys = lock(&shards[shard_of(key)]);
            let next = keys.get_mut(&key).and_then(|w| w.pop_front());
            match next {
                // To the shared queue, not this worker's own: keys rotate
                // fairly over the workers instead of sticking to one.
                Some(next) => self.queues.push_shared(next),
                None => {
                    keys.remove(&key);
                }
            }
        }
        self.job_done(&ks.level_counters);
    }

    fn job_done(&self, level: &LevelCounters) {
        let level_left = level.jobs_outstanding.fetch_sub(1, Ordering::SeqCst) - 1;
        let left = self.outstanding.fetch_sub(1, Ordering::SeqCst) - 1;
        if (left == 0 || level_left == 0) && self.drain_waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.drained);
            self.drained_cv.notify_all();
        }
    }

    fn wait_until(&self, done: impl Fn() -> bool) {
        if done() {
            return;
        }
        let mut g = lock(&self.drained);
        self.drain_waiters.fetch_add(1, Ordering::SeqCst);
        while !done() {
            // Notified when a count reaches zero; the timeout is a net.
            g = self
                .drained_cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        self.drain_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn register(&self, level: Level, ks: KnowledgeSource) -> Result<KsId, Error> {
        check(&ks)?;
        let mut reg = hark_sync::write(&self.registry);
        if !reg.levels.contains_key(&level.0) {
            return Err(unknown_level(&reg, level));
        }
        let id = KsId(self.next_ks.fetch_add(1, Ordering::Relaxed));
        reg.levels
            .get_mut(&level.0)
            .expect("checked above")
            .add(id, level, ks);
        Ok(id)
    }

    fn register_all(&self, make: Arc<Factory>) -> Result<KsId, Error> {
        let mut reg = hark_sync::write(&self.registry);
        let id = KsId(self.next_ks.fetch_add(1, Ordering::Relaxed));
        let mut levels: Vec<u32> = reg.levels.keys().copied().collect();
        levels.sort_unstable();
        let made: Vec<(u32, KnowledgeSource)> =
            levels.iter().map(|&l| (l, make(Level(l)))).collect();
        if made.is_empty() {
            // No level yet: check what the factory makes on a probe level.
            check(&make(Level(u32::MAX)))?;
        }
        for (_, ks) in &made {
            check(ks)?;
        }
        for (l, ks) in made {
            reg.levels
                .get_mut(&l)
                .expect("listed above")
                .add(id, Level(l), ks);
        }
        reg.everywhere.push((id, make));
        Ok(id)
    }

    pub(crate) fn remove(&self, id: KsId) -> bool {
        let mut reg = hark_sync::write(&self.registry);
        let before = reg.everywhere.len();
        reg.everywhere.retain(|(i, _)| *i != id);
        let mut found = reg.everywhere.len() != before;
        for slot in reg.levels.values_mut() {
            if slot.ks.iter().any(|k| k.id == id) {
                found = true;
                slot.ks.retain(|k| {
                    if k.id == id {
                        k.retire();
                    }
                    k.id != id
                });
                for list in &mut slot.table {
                    list.retain(|(k, _)| k.id != id);
                }
            }
        }
        found
    }

    fn stats(&self) -> Stats {
        let mut reg = hark_sync::write(&self.registry);
        // Retired levels leave the statistics once they hold nothing.
        reg.retired.retain(|(_, _, c)| {
            c.entries_live.load(Ordering::Relaxed) > 0
                || c.jobs_outstanding.load(Ordering::Relaxed) > 0
        });
        let reg = std::sync::RwLockWriteGuard::downgrade(reg);
        let mut stats = Stats {
            workers: self.workers,
            jobs_outstanding: self.outstanding.load(Ordering::Relaxed),
            jobs_queued: self.queues.queued(),
            ..Stats::default()
        };
        let live = reg
            .levels
            .iter()
            .map(|(&l, s)| (Level(l), &s.name, &s.counters, false));
        let retired = reg.retired.iter().map(|(l, n, c)| (*l, n, c, true));
        for (level, name, c, retired) in live.chain(retired) {
            stats.levels.push(LevelStats {
                level,
                name: name.to_string(),
                retired,
                entries_live: c.entries_live.load(Ordering::Relaxed),
                bytes_live: c.bytes_live.load(Ordering::Relaxed),
                entries_submitted: c.entries_submitted.load(Ordering::Relaxed),
                refused: c.refused.load(Ordering::Relaxed),
                jobs_outstanding: c.jobs_outstanding.load(Ordering::Relaxed),
            });
        }
        stats.levels.sort_by_key(|l| l.level);
        for slot in reg.levels.values() {
            stats
                .knowledge_sources
                .extend(slot.ks.iter().map(|ks| ks_stats(ks)));
        }
        stats.knowledge_sources.sort_by_key(|k| (k.level, k.id));
        stats
    }
}

/// A knowledge source's counters as they are now.
fn ks_stats(ks: &KsInst) -> KsStats {
    let c = &ks.counters;
    KsStats {
        id: ks.id,
        name: ks.name.to_string(),
        level: ks.level,
        jobs_run: c.jobs_run.load(Ordering::Relaxed),
        busy: Duration::from_nanos(clock::to_nanos(c.busy_ticks.load(Ordering::Relaxed))),
        jobs_pending: c.jobs_pending.load(Ordering::Relaxed),
        entries_waiting: c.entries_waiting.load(Ordering::Relaxed),
        jobs_cancelled: c.jobs_cancelled.load(Ordering::Relaxed),
        panics: c.panics.load(Ordering::Relaxed),
        errors: c.errors.load(Ordering::Relaxed),
        last_error: lock(&c.last_error).clone(),
    }
}

fn check(ks: &KnowledgeSource) -> Result<(), Error> {
    if ks.sensitivities.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidKnowledgeSource,
            format!(
                "knowledge source '{}' has no sensitivity: give it at least one entry type",
                ks.name
            ),
        ));
    }
    Ok(())
}

fn unknown_level(reg: &Registry, level: Level) -> Error {
    if level.0 < reg.next_level {
        Error::new(
            ErrorKind::LevelRetired,
            format!(
                "level {} was retired and takes no more entries or knowledge sources",
                level.0
            ),
        )
    } else {
        Error::new(
            ErrorKind::UnknownLevel,
            format!(
                "level {} does not exist on this board (create it with create_level)",
                level.0
            ),
        )
    }
}

impl LevelSlot {
    fn add(&mut self, id: KsId, level: Level, ks: KnowledgeSource) {
        let arity = ks.sensitivities.len();
        let inst = Arc::new(KsInst {
            id,
            name: ks.name,
            level,
            op: ks.op,
            arity,
            removed: AtomicBool::new(false),
            joins: Mutex::new(vec![VecDeque::new(); if arity > 1 { arity } else { 0 }]),
            serial: ks.serial_by_key.then(|| {
                (0..KEY_SHARDS)
                    .map(|_| Mutex::new(HashMap::default()))
                    .collect()
            }),
            level_counters: self.counters.clone(),
            counters: KsCounters::default(),
        });
        for (at, ty) in ks.sensitivities.iter().enumerate() {
            let i = ty.0 as usize;
            if self.table.len() <= i {
                self.table.resize_with(i + 1, Vec::new);
            }
            self.table[i].push((inst.clone(), at));
        }
        self.ks.push(inst);
    }
}

impl KsInst {
    /// Marks removed (queued jobs will be dropped unrun) and frees the
    /// entries waiting in its joins.
    fn retire(&self) {
        self.removed.store(true, Ordering::Release);
        let mut fifos = lock(&self.joins);
        for f in fifos.iter_mut() {
            f.clear();
        }
        self.counters.entries_waiting.store(0, Ordering::Relaxed);
    }
}

fn worker_loop(shared: &Arc<Shared>, index: usize) {
    WORKER_OF.with(|w| w.set(Arc::as_ptr(shared) as usize));
    let me = shared.queues.worker(index);
    let mut placed = 0;
    loop {
        shared.place.follow(&mut placed);
        if index >= shared.place.active() && !shared.stop.load(Ordering::Relaxed) {
            shared.place.park(index, &shared.stop);
            continue;
        }
        if let Some(job) = shared.queues.pop(&me) {
            shared.run_job(job);
            continue;
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        shared.queues.wait(&shared.stop);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
