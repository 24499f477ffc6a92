//! Definitions: ids for files and names, the descriptor → file table, and
//! the log of every definition this process made.
//!
//! A definition goes into the same ordered queue as packs, under the table's
//! lock, so it reaches the stream before any event that can carry its id. The
//! log lets a forked child's new stream start with the definitions it
//! inherited (its descriptors still point at the parent's files).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use hark_wire::{Def, NameKind};

use super::stream;

/// Definitions kept for forked children; beyond this many, a child's stream
/// may see ids it has no definition for (readers must tolerate that).
const LOG_MAX: usize = 1 << 16;
/// Descriptors tracked; higher ones are recorded with file id 0.
const FD_MAX: usize = 1 << 16;

struct Table {
    log: Vec<Def>,
    files: BTreeMap<String, u32>,
    names: BTreeMap<(u8, String), u32>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    log: Vec::new(),
    files: BTreeMap::new(),
    names: BTreeMap::new(),
});
static NEXT_ID: AtomicU32 = AtomicU32::new(1);
static FDS: [AtomicU32; FD_MAX] = [const { AtomicU32::new(0) }; FD_MAX];

fn table() -> MutexGuard<'static, Table> {
    hark_sync::lock(&TABLE)
}

/// A fresh id (never 0).
pub(crate) fn next_id() -> u32 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Queues `def` on the stream and logs it.
pub(crate) fn define(def: Def) {
    let stream = stream::current().filter(|s| s.start());
    let mut t = table();
    push(&mut t, stream, def);
}

/// Queues `defs` on the stream, in one frame, only if it is running, and
/// logs them: a
/// definition made from inside a wrapped call before the stream started
/// must not start it there (over MPI the stream starts at a point every
/// rank reaches alike); the stream sends the log when it starts.
pub(crate) fn define_if_running(defs: Vec<Def>) {
    let mut t = table();
    if let Some(s) = stream::current().filter(|s| s.is_running()) {
        // One frame for them all: over MPI each frame is a message.
        let mut bytes = Vec::new();
        Def::encode_all(&defs, &mut bytes);
        s.ship.push_bytes(bytes);
    }
    for def in defs {
        push(&mut t, None, def);
    }
}

fn push(t: &mut Table, stream: Option<&'static stream::Stream>, def: Def) {
    if let Some(s) = stream {
        let mut bytes = Vec::new();
        Def::encode_all(std::slice::from_ref(&def), &mut bytes);
        s.ship.push_bytes(bytes);
    }
    if t.log.len() < LOG_MAX {
        t.log.push(def);
    }
}

/// Every definition made so far (for a new stream's start).
pub(crate) fn snapshot() -> Vec<Def> {
    table().log.clone()
}

/// The id of the file at `path`, defining it on first sight.
pub(crate) fn file_id(path: &str) -> u32 {
    let stream = stream::current().filter(|s| s.start());
    let mut t = table();
    if let Some(&id) = t.files.get(path) {
        return id;
    }
    let id = next_id();
    t.files.insert(path.to_string(), id);
    push(
        &mut t,
        stream,
        Def::File {
            id,
            path: path.to_string(),
        },
    );
    id
}

/// The id of a region, counter or mark name, defining it on first sight.
pub(crate) fn name_id(kind: NameKind, name: &str) -> u32 {
    let stream = stream::current().filter(|s| s.start());
    let mut t = table();
    let key = (kind as u8, name.to_string());
    if let Some(&id) = t.names.get(&key) {
        return id;
    }
    let id = next_id();
    t.names.insert(key, id);
    push(
        &mut t,
        stream,
        Def::Name {
            id,
            kind,
            name: name.to_string(),
        },
    );
    id
}

/// Attributes descriptor `fd` to file `id` (0 forgets it).
pub(crate) fn set_fd(fd: i32, id: u32) {
    if let Some(slot) = usize::try_from(fd).ok().and_then(|i| FDS.get(i)) {
        slot.store(id, Ordering::Relaxed);
    }
}

/// The table's entry for `fd` (0: unknown or out of range).
#[inline]
pub(crate) fn fd_lookup(fd: i32) -> u32 {
    usize::try_from(fd)
        .ok()
        .and_then(|i| FDS.get(i))
        .map_or(0, |slot| slot.load(Ordering::Relaxed))
}

/// The file id of descriptor `fd`: what it was opened as, `<stdin>`,
/// `<stdout>` or `<stderr>` for the standard ones, 0 if unknown.
pub(crate) fn fd_file(fd: i32) -> u32 {
    let Some(slot) = usize::try_from(fd).ok().and_then(|i| FDS.get(i)) else {
        return 0;
    };
    match slot.load(Ordering::Relaxed) {
        0 if (0..=2).contains(&fd) => {
            let id = file_id(["<stdin>", "<stdout>", "<stderr>"][fd as usize]);
            slot.store(id, Ordering::Relaxed);
            id
        }
        id => id,
    }
}

thread_local! {
    static FORK_GUARD: RefCell<Option<MutexGuard<'static, Table>>> = const { RefCell::new(None) };
}

/// Held across `fork` so the child never inherits the table locked by a
/// thread that does not exist in it.
pub(crate) fn lock_for_fork() {
    let g = table();
    let _ = FORK_GUARD.try_with(|f| *f.borrow_mut() = Some(g));
}

/// Releases the lock taken by [`lock_for_fork`], in parent and child.
pub(crate) fn unlock_after_fork() {
    let _ = FORK_GUARD.try_with(|f| f.borrow_mut().take());
}
