//! The job queues between the producers of jobs and the workers.
//!
//! Two designs are kept behind one type so the benchmark can compare them:
//!
//! - [`QueueKind::LockedFifos`] — the design of *Event Streaming for Online
//!   Performance Measurements Reduction* (section III-B): an array of FIFOs,
//!   each behind its own lock. A job goes to a randomly chosen FIFO;
//!   a worker sweeps them from a random start, first with `try_lock` so that
//!   two workers do not queue up on one lock.
//! - [`QueueKind::WorkStealing`] — one global injector (for jobs made outside
//!   the workers) plus one deque per worker: a job made by a worker goes to
//!   its own deque; an idle worker takes from its deque, then the injector,
//!   then steals from the others (crossbeam-deque).
//!
//! Idle workers never spin for long: after a short back-off (a few spins,
//! then a few yields) a worker sleeps on a condition variable. Producers only
//! touch that condition variable's lock when some worker is asleep; the
//! `sleepers` counter and the `queued` counter are both `SeqCst`, so either
//! the producer sees the sleeper and wakes it, or the sleeper sees the job
//! before sleeping (the store-load pattern of Dekker's algorithm). A timed
//! wait backs this up anyway.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use crate::board::Job;

/// Which job queue design a board uses ([`crate::Config::queues`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QueueKind {
    /// An array of FIFOs each behind a lock, pushed at random and swept from
    /// a random start (the design of *Event Streaming for Online Performance
    /// Measurements Reduction*).
    LockedFifos,
    /// Work-stealing deques: per-worker deques plus a global injector.
    #[default]
    WorkStealing,
}

#[repr(align(128))]
struct Padded<T>(T);

pub(crate) struct Queues {
    kind: Inner,
    /// Jobs in the queues (pushed, not yet popped).
    queued: AtomicUsize,
    sleepers: AtomicUsize,
    idle: Mutex<()>,
    wake: Condvar,
}

enum Inner {
    Fifos(Box<[Padded<Mutex<VecDeque<Job>>>]>),
    Stealing {
        injector: Box<Injector<Job>>,
        stealers: Box<[Stealer<Job>]>,
        /// Handed out to the worker threads at start.
        locals: Mutex<Vec<Option<Worker<Job>>>>,
    },
}

thread_local! {
    /// This thread's random state (xorshift), seeded from its address.
    static RNG: Cell<u64> = const { Cell::new(0) };
    /// The deque of the worker running on this thread, if it is a worker
    /// of a work-stealing board (identified by the queues' address).
    static LOCAL: Cell<(usize, *const Worker<Job>)> = const { Cell::new((0, std::ptr::null())) };
}

fn random() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        if x == 0 {
            x = (r as *const Cell<u64> as u64) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// A worker's handle on the queues: its own deque when work-stealing.
pub(crate) struct WorkerQueue {
    local: Option<Box<Worker<Job>>>,
    index: usize,
}

impl Queues {
    pub(crate) fn new(kind: QueueKind, workers: usize) -> Queues {
        let kind = match kind {
            QueueKind::LockedFifos => {
                // Twice as many FIFOs as workers keeps two workers off one
                // lock most of the time; at least four for the producers.
                let n = (2 * workers).max(4);
                Inner::Fifos(
                    (0..n)
                        .map(|_| Padded(Mutex::new(VecDeque::new())))
                        .collect(),
                )
            }
            QueueKind::WorkStealing => {
                let locals: Vec<Worker<Job>> = (0..workers).map(|_| Worker::new_fifo()).collect();
                let stealers = locals.iter().map(|w| w.stealer()).collect();
                Inner::Stealing {
                    injector: Box::new(Injector::new()),
                    stealers,
                    locals: Mutex::new(locals.into_iter().map(Some).collect()),
                }
            }
        };
        Queues {
            kind,
            queued: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            idle: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Called once on each worker thread before its first `pop`.
    pub(crate) fn worker(&self, index: usize) -> WorkerQueue {
        let local = match &self.kind {
            Inner::Fifos(_) => None,
            Inner::Stealing { locals, .. } => {
                // Worker `index` owns deque `index`: the one `stealers[index]`
                // steals from, which it skips when stealing.
                let mut locals = hark_sync::lock(locals);
                locals.get_mut(index).and_then(Option::take).map(Box::new)
            }
        };
        if let Some(w) = &local {
            let ptr: *const Worker<Job> = &**w;
            LOCAL.with(|l| l.set((self as *const Queues as usize, ptr)));
        }
        WorkerQueue { local, index }
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues a job made on this thread: on a work-stealing worker, into its
    /// own deque (the job likely reads what the job before it just wrote).
    pub(crate) fn push(&self, job: Job) {
        self.push_to(job, true)
    }

    /// Queues a job for any worker: into the shared injector when
    /// work-stealing. Used for the next job of a serial key, so that keys do
    /// not stick to the worker that ran them first: if they did, a worker
    /// holding three busy keys would never be helped by one holding one,
    /// whose own deque is never empty (measured: 1.2–1.7x from 1 to 2
    /// workers with four keys, against 1.8–1.9x this way), and one worker
    /// would run one key's whole backlog before looking at the others.
    pub(crate) fn push_shared(&self, job: Job) {
        self.push_to(job, false)
    }

    fn push_to(&self, job: Job, local: bool) {
        match &self.kind {
            Inner::Fifos(fifos) => {
                let i = (random() % fifos.len() as u64) as usize;
                lock(&fifos[i].0).push_back(job);
            }
            Inner::Stealing { injector, .. } => {
                let (owner, ptr) = LOCAL.with(|l| l.get());
                if local && owner == self as *const Queues as usize && !ptr.is_null() {
                    // SAFETY: `ptr` was set by `worker()` on this very thread
                    // to the deque boxed in this thread's `WorkerQueue`, which
                    // lives until the worker loop ends (and clears `LOCAL`).
                    // The owner check makes sure it belongs to these queues.
                    unsafe { (*ptr).push(job) };
                } else {
                    injector.push(job);
                }
            }
        }
        self.queued.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _idle = lock(&self.idle);
            self.wake.notify_one();
        }
    }

    /// Takes a job if there is one, without waiting.
    pub(crate) fn pop(&self, me: &WorkerQueue) -> Option<Job> {
        let job = match &self.kind {
            Inner::Fifos(fifos) => pop_fifos(fifos),
            Inner::Stealing {
                injector, stealers, ..
            } => pop_stealing(me, injector, stealers),
        };
        if job.is_some() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        job
    }

    /// Waits for a job: a short back-off, then sleep until woken. Returns
    /// when a job may be there or `stop` is set.
    pub(crate) fn wait(&self, stop: &AtomicBool) {
        for round in 0..64 {
            if self.queued.load(Ordering::Relaxed) > 0 || stop.load(Ordering::Relaxed) {
                return;
            }
            if round < 32 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let idle = lock(&self.idle);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) == 0 && !stop.load(Ordering::SeqCst) {
            // The timeout is only a safety net; wake-ups come from `push`.
            let _ = self.wake.wait_timeout(idle, Duration::from_millis(100));
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every sleeping worker (at shutdown).
    pub(crate) fn wake_all(&self) {
        let _idle = lock(&self.idle);
        self.wake.notify_all();
    }
}

impl Drop for WorkerQueue {
    fn drop(&mut self) {
        if self.local.is_some() {
            LOCAL.with(|l| l.set((0, std::ptr::null())));
        }
    }
}

fn pop_fifos(fifos: &[Padded<Mutex<VecDeque<Job>>>]) -> Option<Job> {
    let n = fifos.len();
    let start = (random() % n as u64) as usize;
    // First sweep: never wait on a lock another thread holds.
    for k in 0..n {
        if let Ok(mut q) = fifos[(start + k) % n].0.try_lock() {
            if let Some(job) = q.pop_front() {
                return Some(job);
            }
        }
    }
    // Second sweep: a busy lock may hide the only job.
    for k in 0..n {
        if let Some(job) = lock(&fifos[(start + k) % n].0).pop_front() {
            return Some(job);
        }
    }
    None
}

fn pop_stealing(
    me: &WorkerQueue,
    injector: &Injector<Job>,
    stealers: &[Stealer<Job>],
) -> Option<Job> {
    if let Some(local) = &me.local {
        if let Some(job) = local.pop() {
            return Some(job);
        }
    }
    loop {
        let mut retry = false;
        let steal = match &me.local {
            Some(local) => injector.steal_batch_and_pop(local),
            None => injector.steal(),
        };
        match steal {
            Steal::Success(job) => return Some(job),
            Steal::Retry => retry = true,
            Steal::Empty => {}
        }
        let n = stealers.len();
        for k in 0..n {
            let i = (me.index + 1 + k) % n;
            if i == me.index {
                continue;
            }
            match stealers[i].steal() {
                Steal::Success(job) => return Some(job),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
        if !retry {
            return None;
        }
    }
}

pub(crate) use hark_sync::lock;
