//! What is in flight on a level and the buffers it reuses: the bytes the
//! server throttles its readers on, and the pools that keep steady
//! streaming from allocating.
//!
//! The pools are the process's, shared by every level while any is
//! open: a program's first packs take the buffers of programs before it.
//! With a pool per level, each program (each job of a service, each copy
//! of a replay) allocated, zeroed and page-faulted its own megabyte per
//! pack until its pool filled (BENCHMARKS.md, "What the kernel took").
//! When the last level goes, the pools are emptied, so that an idle
//! service holds no buffer (as when each level had its own).

use crate::unpack::{Arrival, Msg, P2pOp, Wait};
use hark_sync::lock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Derived items in flight: their bytes count in the program's in-flight
/// total, which the server throttles its readers on, until the last job
/// over them is done — so matching that falls behind slows the readers
/// instead of growing the server. Their vector goes back to its pool.
pub(super) struct Counted<T: Pooled> {
    pub(super) items: Vec<T>,
    /// The vector's bytes (its capacity: what it holds in memory).
    pub(super) bytes: u64,
    /// Whether the vector goes back to its pool.
    pooled: bool,
    flow: Arc<Flow>,
}

impl<T: Pooled> Counted<T> {
    pub(super) fn new(items: Vec<T>, pooled: bool, flow: &Arc<Flow>) -> Counted<T> {
        let bytes = (items.capacity() * std::mem::size_of::<T>()) as u64;
        flow.in_flight.fetch_add(bytes, Ordering::Relaxed);
        Counted {
            items,
            bytes,
            pooled,
            flow: flow.clone(),
        }
    }
}

impl<T: Pooled> Drop for Counted<T> {
    fn drop(&mut self) {
        self.flow.in_flight.fetch_sub(self.bytes, Ordering::Relaxed);
        if self.pooled {
            T::pool(&self.flow).give_back(std::mem::take(&mut self.items));
        }
    }
}

/// Derived vectors kept for reuse, per item type: a pack's worth each, so
/// few (the pool is refilled as each pack's entries are done).
const DERIVED_POOL: usize = 16;

/// Vectors kept for reuse, of one item type.
pub(super) struct Pool<T> {
    bufs: Mutex<Vec<Vec<T>>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            bufs: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Pool<T> {
    pub(super) fn take(&self) -> Vec<T> {
        lock(&self.bufs).pop().unwrap_or_default()
    }

    pub(super) fn give_back(&self, mut buf: Vec<T>) {
        if buf.capacity() == 0 {
            return;
        }
        buf.clear();
        let mut bufs = lock(&self.bufs);
        if bufs.len() < DERIVED_POOL {
            bufs.push(buf);
        }
    }
}

/// Derived items whose vectors are reused through a pool of the
/// [`Flow`]'s.
pub(super) trait Pooled: Sized {
    fn pool(flow: &Flow) -> &Pool<Self>;
}

impl Pooled for P2pOp {
    fn pool(flow: &Flow) -> &Pool<Self> {
        &flow.pools.ops
    }
}
impl Pooled for Arrival {
    fn pool(flow: &Flow) -> &Pool<Self> {
        &flow.pools.arrivals
    }
}
impl Pooled for Wait {
    fn pool(flow: &Flow) -> &Pool<Self> {
        &flow.pools.waits
    }
}

/// Buffers kept for reuse: enough for the packs in flight at the default
/// limits, so that steady streaming allocates (and page-faults) nothing.
const POOL: usize = 64;

/// The buffers every level reuses (see the module documentation).
#[derive(Default)]
pub(super) struct Pools {
    /// Levels open: the [`Flow`]s alive.
    levels: Mutex<usize>,
    /// Pack buffers, with their lengths kept: a socket's reader reads into
    /// them without zeroing them again.
    packs: Mutex<Vec<Vec<u8>>>,
    pub(super) msgs: Pool<Msg>,
    pub(super) ops: Pool<P2pOp>,
    pub(super) arrivals: Pool<Arrival>,
    pub(super) waits: Pool<Wait>,
}

static POOLS: LazyLock<Pools> = LazyLock::new(Pools::default);

/// What is in flight on a level, and the buffers to reuse: packs, and what
/// the trackers and matchers derive from them.
pub(super) struct Flow {
    pub(super) in_flight: AtomicU64,
    pub(super) pools: &'static Pools,
}

impl Default for Flow {
    fn default() -> Flow {
        Flow::of(LazyLock::force(&POOLS))
    }
}

impl Flow {
    /// A level's flow, counted among the levels `pools` serves.
    fn of(pools: &'static Pools) -> Flow {
        *lock(&pools.levels) += 1;
        Flow {
            in_flight: AtomicU64::new(0),
            pools,
        }
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        let pools = self.pools;
        // Under the count's lock: a level opening meanwhile counts itself
        // once the pools are empty, not while they are being emptied.
        let mut levels = lock(&pools.levels);
        *levels -= 1;
        if *levels == 0 {
            lock(&pools.packs).clear();
            lock(&pools.msgs.bufs).clear();
            lock(&pools.ops.bufs).clear();
            lock(&pools.arrivals.bufs).clear();
            lock(&pools.waits.bufs).clear();
        }
    }
}

impl Flow {
    /// A pack buffer from the pool, if one is free.
    pub(super) fn pooled(&self) -> Option<Vec<u8>> {
        lock(&self.pools.packs).pop()
    }

    pub(super) fn take(&self) -> Vec<u8> {
        self.pooled().unwrap_or_default()
    }

    pub(super) fn give_back(&self, buf: Vec<u8>) {
        if buf.capacity() == 0 {
            return;
        }
        let mut pool = lock(&self.pools.packs);
        if pool.len() < POOL {
            pool.push(buf);
        }
    }
}

/// A part of a split batch: its key, its items, and whether the vector goes
/// back to its pool when done (a whole batch's does; a part is made at its
/// own size and freed, so that pooled vectors all have a batch's size).
pub(super) type Part<T> = (u64, Vec<T>, bool);

/// Splits `items` by `key`, keeping their order within each key, in key
/// order. Each part is allocated once at its size, and a batch with one key
/// (the usual case for waits, all of one rank) is handed on without a copy.
pub(super) fn split_by<T: Pooled>(
    flow: &Flow,
    mut items: Vec<T>,
    key: impl Fn(&T) -> u64,
) -> Vec<Part<T>> {
    let mut counts: Vec<(u64, usize)> = Vec::new();
    for it in &items {
        let k = key(it);
        match counts.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += 1,
            None => counts.push((k, 1)),
        }
    }
    match counts[..] {
        [] => {
            T::pool(flow).give_back(items);
            return Vec::new();
        }
        [(k, _)] => return vec![(k, items, true)],
        _ => {}
    }
    counts.sort_unstable_by_key(|c| c.0);
    let mut parts: Vec<Part<T>> = counts
        .iter()
        .map(|&(k, n)| (k, Vec::with_capacity(n), false))
        .collect();
    for it in items.drain(..) {
        let k = key(&it);
        let at = parts
            .binary_search_by_key(&k, |p| p.0)
            .expect("every key was counted");
        parts[at].1.push(it);
    }
    T::pool(flow).give_back(items);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_share_their_buffers_until_the_last_one_goes() {
        // Pools of the test's own: other tests' levels use the process's.
        let pools: &'static Pools = Box::leak(Box::default());
        let a = Flow::of(pools);
        a.give_back(vec![7u8; 4096]);
        a.pools.ops.give_back(Vec::with_capacity(100));
        // A level opened later takes what an earlier one gave back.
        let b = Flow::of(pools);
        let pack = b.pooled().expect("the first level's buffer");
        assert_eq!((pack.len(), pack[0]), (4096, 7), "its length kept");
        assert!(b.pools.ops.take().capacity() >= 100);
        b.give_back(pack);
        b.pools.ops.give_back(Vec::with_capacity(100));
        // Still held while a level is open ...
        drop(a);
        assert!(lock(&pools.packs).len() == 1 && lock(&pools.ops.bufs).len() == 1);
        // ... and emptied when the last goes.
        drop(b);
        let c = Flow::of(pools);
        assert!(c.pooled().is_none());
        assert_eq!(c.pools.ops.take().capacity(), 0);
    }
}
