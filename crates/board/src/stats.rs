//! Counters kept while the board runs, and the snapshot read from them.
//!
//! Counters are plain relaxed atomics updated by the thread doing the work; a
//! snapshot reads them without stopping anything, so its numbers are each
//! exact at some instant but not all at the same instant.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::{KsId, Level};

/// Live counters of one level.
#[derive(Default)]
pub(crate) struct LevelCounters {
    pub(crate) entries_live: AtomicU64,
    pub(crate) bytes_live: AtomicU64,
    pub(crate) entries_submitted: AtomicU64,
    pub(crate) refused: AtomicU64,
    /// Jobs created on this level and not yet finished (queued, waiting for
    /// their key, or running).
    pub(crate) jobs_outstanding: AtomicUsize,
}

/// Live counters of one knowledge source on one level.
#[derive(Default)]
pub(crate) struct KsCounters {
    pub(crate) jobs_run: AtomicU64,
    /// In `clock` ticks.
    pub(crate) busy_ticks: AtomicU64,
    /// Jobs created and not yet started.
    pub(crate) jobs_pending: AtomicUsize,
    /// Entries queued at a sensitivity, waiting for a join to complete.
    pub(crate) entries_waiting: AtomicUsize,
    pub(crate) jobs_cancelled: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl KsCounters {
    pub(crate) fn record_error(&self, panicked: bool, message: String) {
        let counter = if panicked { &self.panics } else { &self.errors };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(message);
        }
    }
}

/// A snapshot of the whole board ([`crate::Board::stats`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Number of worker threads.
    pub workers: usize,
    /// Jobs created and not yet finished, on every level.
    pub jobs_outstanding: usize,
    /// Jobs sitting in the worker queues right now.
    pub jobs_queued: usize,
    /// One row per live level, and per retired level still holding entries.
    pub levels: Vec<LevelStats>,
    /// One row per knowledge source per level.
    pub knowledge_sources: Vec<KsStats>,
}

/// A snapshot of one level.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LevelStats {
    /// The level.
    pub level: Level,
    /// The name it was created with.
    pub name: String,
    /// Whether it was retired.
    pub retired: bool,
    /// Entries charged to this level and not yet freed.
    pub entries_live: u64,
    /// Bytes of those entries (as given at [`crate::Entry::with_bytes`]).
    pub bytes_live: u64,
    /// Entries submitted to this level so far.
    pub entries_submitted: u64,
    /// Submissions refused because the level was retired (from operations).
    pub refused: u64,
    /// Jobs created on this level and not yet finished.
    pub jobs_outstanding: usize,
}

/// A snapshot of one knowledge source on one level.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KsStats {
    /// The registration it belongs to.
    pub id: KsId,
    /// Its name.
    pub name: String,
    /// The level it runs on.
    pub level: Level,
    /// Jobs run to the end (including those that panicked).
    pub jobs_run: u64,
    /// Time spent in its operation.
    pub busy: Duration,
    /// Jobs created and not yet started: the queue depth.
    pub jobs_pending: usize,
    /// Entries waiting at a sensitivity for the rest of a join.
    pub entries_waiting: usize,
    /// Jobs dropped unrun because the knowledge source was removed first.
    pub jobs_cancelled: u64,
    /// Operations that panicked (contained; the board went on).
    pub panics: u64,
    /// Errors reported by the operation ([`crate::Context::report_error`]).
    pub errors: u64,
    /// The last panic or error message.
    pub last_error: Option<String>,
}
