//! What the probe remembers about MPI objects between calls: communicators
//! (id, members as world ranks, collective sequence number), requests (what
//! they will complete), matched messages, windows and files.
//!
//! Keys are the library's handles as words. Lookups take a lock, but the hot
//! paths avoid them: `MPI_COMM_WORLD` has its own slot, and a request is only
//! looked up when it completes.

use super::abi::Abi;
use super::mpi_call;
use hark_wire::{Def, PEER_ANY, PEER_NONE, PEER_NULL, PEER_ROOT};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// A multiplicative hasher: keys are handles (pointers or small ints), so a
/// cryptographic hash would only cost time.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ (n as u64 >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Map<V> = HashMap<usize, V, BuildHasherDefault<WordHasher>>;

/// A communicator the probe has defined.
#[derive(Debug)]
pub(crate) struct Comm {
    /// Id in the stream's definitions.
    pub id: u32,
    /// World rank of each (local) rank.
    pub members: Box<[i32]>,
    /// World rank of each remote rank; empty for intra-communicators.
    pub remote: Box<[i32]>,
    /// This process's rank in it (in the local group).
    pub me: i32,
    /// Collectives started on it so far.
    pub seq: AtomicU32,
}

impl Comm {
    /// The world rank of `rank`, a peer rank as passed to point-to-point or
    /// collective calls (remote group for inter-communicators), or a `PEER_*`.
    #[inline]
    pub fn peer(&self, abi: &Abi, rank: i32) -> i32 {
        let group = if self.remote.is_empty() {
            &self.members
        } else {
            &self.remote
        };
        match usize::try_from(rank) {
            Ok(r) => group.get(r).copied().unwrap_or(PEER_NONE),
            Err(_) if rank == abi.any_source => PEER_ANY,
            Err(_) if rank == abi.proc_null => PEER_NULL,
            Err(_) if rank == abi.root => PEER_ROOT,
            Err(_) => PEER_NONE,
        }
    }

    /// The next collective sequence number on this communicator.
    #[inline]
    pub fn next_seq(&self) -> i32 {
        self.seq.fetch_add(1, Ordering::Relaxed) as i32
    }

    /// Size of the group a rooted or all-to-all collective exchanges with:
    /// the remote group for inter-communicators.
    pub fn peers(&self) -> usize {
        if self.remote.is_empty() {
            self.members.len()
        } else {
            self.remote.len()
        }
    }
}

/// A communicator from the registry: `MPI_COMM_WORLD` is borrowed (no
/// reference count to touch on the hottest path), others are shared.
pub(crate) enum CommRef {
    World(&'static Arc<Comm>),
    Other(Arc<Comm>),
}

impl std::ops::Deref for CommRef {
    type Target = Comm;
    #[inline(always)]
    fn deref(&self) -> &Comm {
        match self {
            CommRef::World(c) => c,
            CommRef::Other(c) => c,
        }
    }
}

impl CommRef {
    /// A shared handle, for what outlives the call (requests, messages).
    pub fn arc(&self) -> Arc<Comm> {
        match self {
            CommRef::World(c) => Arc::clone(c),
            CommRef::Other(c) => c.clone(),
        }
    }
}

/// What a pending request will complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReqKind {
    Send,
    Recv,
    /// Collective, I/O or one-sided.
    Other,
    /// `MPI_Comm_idup`: the new communicator is defined at completion.
    Idup {
        newcomm: usize,
        parent: u32,
    },
}

/// A request the probe follows to completion.
#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub kind: ReqKind,
    pub id: u64,
    pub comm: Option<Arc<Comm>>,
    /// Id for `obj` (communicator, window or file).
    pub obj: u32,
    /// World rank of the posted peer, or a `PEER_*`.
    pub peer: i32,
    pub tag: i32,
    pub bytes: u64,
    pub persistent: bool,
    pub cancelled: bool,
}

#[derive(Default)]
struct Tables {
    comms: RwLock<Map<Arc<Comm>>>,
    // A queue per handle: Open MPI hands out one shared, already completed
    // request object for every send it finished inline, so several pending
    // requests can have the same handle. They complete in posting order.
    requests: Mutex<Map<VecDeque<Req>>>,
    messages: Mutex<Map<Arc<Comm>>>,
    windows: RwLock<Map<(u32, Arc<Comm>)>>,
    files: RwLock<Map<u32>>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(Tables::default)
}

static WORLD: OnceLock<(usize, Arc<Comm>)> = OnceLock::new();
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// A fresh request id (never 0: 0 marks the receive side of a blocking call).
pub(crate) fn next_request_id() -> u64 {
    NEXT_REQUEST.fetch_add(1, Ordering::Relaxed)
}

/// Defines the real `MPI_COMM_WORLD` (identity members), the program's own
/// world when worlds are virtualised (`program`: its members are its world
/// ranks in the universe), and `MPI_COMM_SELF`. The hot slot holds the world
/// the program sees.
pub(crate) fn init_world(abi: &Abi, world_rank: i32, world_size: i32, program: Option<usize>) {
    let world = Arc::new(Comm {
        id: crate::core::next_id(),
        members: (0..world_size).collect(),
        remote: Box::new([]),
        me: world_rank,
        seq: AtomicU32::new(0),
    });
    define(&world);
    let members = program.and_then(|h| Some((h, mpi_call::members(abi, h, false)?)));
    match members {
        None => {
            let _ = WORLD.set((abi.comm_world, world));
        }
        Some((handle, members)) => {
            insert_comm(abi.comm_world, world);
            let mine = Arc::new(Comm {
                id: crate::core::next_id(),
                members: members.into(),
                remote: Box::new([]),
                me: mpi_call::rank_size(handle).0,
                seq: AtomicU32::new(0),
            });
            define(&mine);
            let _ = WORLD.set((handle, mine));
        }
    }
    let me = Arc::new(Comm {
        id: crate::core::next_id(),
        members: Box::new([world_rank]),
        remote: Box::new([]),
        me: 0,
        seq: AtomicU32::new(0),
    });
    define(&me);
    insert_comm(abi.comm_self, me);
}

fn define(c: &Comm) {
    crate::core::define(Def::Comm {
        id: c.id,
        members: c.members.to_vec(),
        remote: c.remote.to_vec(),
    });
}

fn insert_comm(handle: usize, c: Arc<Comm>) {
    if let Ok(mut m) = tables().comms.write() {
        m.insert(handle, c);
    }
}

/// The communicator behind `handle`, defining it on first sight (one made
/// before the probe started, by a call it does not wrap, or while paused).
/// `None` for `MPI_COMM_NULL` or when MPI cannot describe it.
#[inline]
pub(crate) fn comm(abi: &Abi, handle: usize) -> Option<CommRef> {
    if let Some(c) = known_comm(handle) {
        return Some(c);
    }
    learn_comm(abi, handle).map(CommRef::Other)
}

/// The communicator behind `handle` if already known; never calls MPI and
/// never panics. `MPI_COMM_WORLD` is found inline, the others out of line.
#[inline(always)]
pub(crate) fn known_comm(handle: usize) -> Option<CommRef> {
    if let Some((h, w)) = WORLD.get() {
        if *h == handle {
            return Some(CommRef::World(w));
        }
    }
    known_other(handle)
}

#[inline(never)]
fn known_other(handle: usize) -> Option<CommRef> {
    let c = tables().comms.read().ok()?.get(&handle)?.clone();
    Some(CommRef::Other(c))
}

/// Registers a communicator just created, whether or not seen before (a
/// handle can be reused after `MPI_Comm_free`).
pub(crate) fn new_comm(abi: &Abi, handle: usize) -> Option<Arc<Comm>> {
    if handle == abi.comm_null {
        return None;
    }
    if let Ok(mut m) = tables().comms.write() {
        m.remove(&handle);
    }
    learn_comm(abi, handle)
}

#[cold]
#[inline(never)]
fn learn_comm(abi: &Abi, handle: usize) -> Option<Arc<Comm>> {
    if handle == abi.comm_null || WORLD.get().is_none() {
        return None;
    }
    let members = mpi_call::members(abi, handle, false)?;
    let remote = if mpi_call::is_inter(handle) {
        mpi_call::members(abi, handle, true)?
    } else {
        Vec::new()
    };
    let c = Arc::new(Comm {
        id: crate::core::next_id(),
        members: members.into(),
        remote: remote.into(),
        me: mpi_call::rank_size(handle).0,
        seq: AtomicU32::new(0),
    });
    define(&c);
    insert_comm(handle, c.clone());
    Some(c)
}

/// Forgets a freed communicator.
pub(crate) fn free_comm(handle: usize) -> Option<Arc<Comm>> {
    tables().comms.write().ok()?.remove(&handle)
}

/// Remembers a posted request.
pub(crate) fn add_request(handle: usize, r: Req) {
    if let Ok(mut m) = tables().requests.lock() {
        m.entry(handle).or_default().push_back(r);
    }
}

/// The request behind `handle` (the oldest, if several share it): removed
/// unless it is persistent, in which case it stays until `MPI_Request_free`.
pub(crate) fn complete_request(handle: usize) -> Option<Req> {
    let mut m = tables().requests.lock().ok()?;
    let q = m.get_mut(&handle)?;
    let r = q.front_mut()?;
    let out = if r.persistent {
        let out = r.clone();
        r.cancelled = false;
        out
    } else {
        q.pop_front()?
    };
    if q.is_empty() {
        m.remove(&handle);
    }
    Some(out)
}

/// The (oldest) request behind `handle`, left registered.
pub(crate) fn request(handle: usize) -> Option<Req> {
    tables()
        .requests
        .lock()
        .ok()?
        .get(&handle)?
        .front()
        .cloned()
}

/// Forgets a request (`MPI_Request_free`).
pub(crate) fn free_request(handle: usize) {
    if let Ok(mut m) = tables().requests.lock() {
        if let Some(q) = m.get_mut(&handle) {
            q.pop_front();
            if q.is_empty() {
                m.remove(&handle);
            }
        }
    }
}

/// Marks a request cancelled (`MPI_Cancel`).
pub(crate) fn cancel_request(handle: usize) {
    if let Ok(mut m) = tables().requests.lock() {
        if let Some(r) = m.get_mut(&handle).and_then(|q| q.front_mut()) {
            r.cancelled = true;
        }
    }
}

/// Remembers the communicator of a matched message (`MPI_Mprobe`).
pub(crate) fn add_message(handle: usize, c: Arc<Comm>) {
    if let Ok(mut m) = tables().messages.lock() {
        m.insert(handle, c);
    }
}

/// The communicator of a matched message, consumed by `MPI_Mrecv`.
pub(crate) fn take_message(handle: usize) -> Option<Arc<Comm>> {
    tables().messages.lock().ok()?.remove(&handle)
}

/// Remembers a window: its id (a communicator definition over the window's
/// group) and the communicator it was made on.
pub(crate) fn add_window(handle: usize, c: Arc<Comm>) -> u32 {
    let w = Comm {
        id: crate::core::next_id(),
        members: c.members.clone(),
        remote: Box::new([]),
        me: c.me,
        seq: AtomicU32::new(0),
    };
    define(&w);
    if let Ok(mut m) = tables().windows.write() {
        m.insert(handle, (w.id, c));
    }
    w.id
}

/// A window's id and communicator.
pub(crate) fn window(handle: usize) -> Option<(u32, Arc<Comm>)> {
    tables().windows.read().ok()?.get(&handle).cloned()
}

/// Forgets a freed window, returning its id.
pub(crate) fn free_window(handle: usize) -> Option<u32> {
    tables()
        .windows
        .write()
        .ok()?
        .remove(&handle)
        .map(|(id, _)| id)
}

/// Defines an opened file and remembers its handle.
pub(crate) fn add_file(handle: usize, path: String) -> u32 {
    let id = crate::core::next_id();
    crate::core::define(Def::File { id, path });
    if let Ok(mut m) = tables().files.write() {
        m.insert(handle, id);
    }
    id
}

/// A file's id, 0 if unknown.
pub(crate) fn file(handle: usize) -> u32 {
    tables()
        .files
        .read()
        .ok()
        .and_then(|m| m.get(&handle).copied())
        .unwrap_or(0)
}

/// Forgets a closed file, returning its id (0 if unknown).
pub(crate) fn close_file(handle: usize) -> u32 {
    tables()
        .files
        .write()
        .ok()
        .and_then(|mut m| m.remove(&handle))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_translate_through_the_right_group() {
        let abi = super::super::abi::MPICH;
        let intra = Comm {
            id: 1,
            members: vec![4, 2, 0].into(),
            remote: Box::new([]),
            me: 2,
            seq: AtomicU32::new(0),
        };
        assert_eq!(intra.peer(&abi, 1), 2);
        assert_eq!(intra.peer(&abi, 3), PEER_NONE);
        assert_eq!(intra.peer(&abi, abi.any_source), PEER_ANY);
        assert_eq!(intra.peer(&abi, abi.proc_null), PEER_NULL);
        let inter = Comm {
            id: 2,
            members: vec![0, 1].into(),
            remote: vec![2, 3].into(),
            me: 0,
            seq: AtomicU32::new(0),
        };
        assert_eq!(inter.peer(&abi, 0), 2);
        assert_eq!(inter.peer(&abi, abi.root), PEER_ROOT);
        assert_eq!(inter.peers(), 2);
    }

    #[test]
    fn persistent_requests_survive_completion_until_freed() {
        let r = Req {
            kind: ReqKind::Send,
            id: 7,
            comm: None,
            obj: 1,
            peer: 1,
            tag: 0,
            bytes: 8,
            persistent: true,
            cancelled: false,
        };
        add_request(0x1000, r.clone());
        assert_eq!(complete_request(0x1000).map(|r| r.id), Some(7));
        assert_eq!(complete_request(0x1000).map(|r| r.id), Some(7));
        free_request(0x1000);
        assert!(complete_request(0x1000).is_none());
        add_request(
            0x2000,
            Req {
                persistent: false,
                ..r
            },
        );
        assert!(complete_request(0x2000).is_some());
        assert!(complete_request(0x2000).is_none());
    }

    #[test]
    fn requests_sharing_a_handle_complete_in_posting_order() {
        // Open MPI returns one shared request object for sends it completed
        // inline; each posting must still complete once, in order.
        let r = |id| Req {
            kind: ReqKind::Send,
            id,
            comm: None,
            obj: 1,
            peer: id as i32,
            tag: 0,
            bytes: 8,
            persistent: false,
            cancelled: false,
        };
        for id in [11, 12, 13] {
            add_request(0x3000, r(id));
        }
        let ids: Vec<u64> = (0..4)
            .filter_map(|_| complete_request(0x3000))
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, [11, 12, 13]);
    }
}
