//! Where the workers run ([`crate::Board::place_workers`]): a set of CPUs
//! they are bound to, and how many of them take jobs.
//!
//! Generic on purpose: the board does not know why some cores are to be
//! avoided (for Hark, the cores the measured program is bound to); it only
//! moves its workers when told. Each worker applies a new placement to
//! itself before its next job, so a placement never interrupts one.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::cpus;
use crate::queue::lock;

/// The board's placement, shared by its workers.
pub(crate) struct Placement {
    /// The CPUs the workers may use when unplaced: the creating thread's.
    anywhere: Option<Vec<usize>>,
    cpus: Mutex<Option<Vec<usize>>>,
    /// Bumped at each change; a worker re-binds itself when it sees a new one.
    generation: AtomicU64,
    /// Workers with a lower index take jobs; the others sleep.
    active: AtomicUsize,
    parked: Mutex<()>,
    unparked: Condvar,
}

impl Placement {
    pub(crate) fn new(workers: usize) -> Placement {
        Placement {
            anywhere: cpus::of_thread(0),
            cpus: Mutex::new(None),
            generation: AtomicU64::new(0),
            active: AtomicUsize::new(workers),
            parked: Mutex::new(()),
            unparked: Condvar::new(),
        }
    }

    /// Binds the workers to `cpus` (`None`: back to where they started) and
    /// lets `cpus.len()` of them, at least one, take jobs.
    pub(crate) fn set(&self, cpus: Option<&[usize]>, workers: usize) {
        let cpus = cpus.filter(|c| !c.is_empty());
        let active = cpus.map_or(workers, |c| c.len().clamp(1, workers));
        *lock(&self.cpus) = cpus.map(<[usize]>::to_vec);
        self.generation.fetch_add(1, Ordering::SeqCst);
        let _parked = lock(&self.parked);
        self.active.store(active, Ordering::SeqCst);
        self.unparked.notify_all();
    }

    /// How many workers take jobs.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Re-binds the calling worker if the placement changed since `seen`.
    pub(crate) fn follow(&self, seen: &mut u64) {
        let now = self.generation.load(Ordering::Acquire);
        if now == *seen {
            return;
        }
        *seen = now;
        let cpus = lock(&self.cpus).clone();
        if let Some(cpus) = cpus.as_ref().or(self.anywhere.as_ref()) {
            cpus::bind_thread(0, cpus);
        }
    }

    /// Sleeps while worker `index` is not among the active ones (returns at
    /// once if it is, or if `stop` is set; wakes at least every 100 ms).
    pub(crate) fn park(&self, index: usize, stop: &AtomicBool) {
        let parked = lock(&self.parked);
        if index >= self.active.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
            // The timeout is only a safety net; `set` and `wake_all` notify.
            let _ = self
                .unparked
                .wait_timeout(parked, Duration::from_millis(100));
        }
    }

    /// Wakes every parked worker (at shutdown).
    pub(crate) fn wake_all(&self) {
        let _parked = lock(&self.parked);
        self.unparked.notify_all();
    }
}
