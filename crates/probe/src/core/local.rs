//! Per-thread state: the reentrancy flag and the thread's slot (its current
//! buffer), and the record path.
//!
//! The hot path reads one `const`-initialised thread-local (no lazy state,
//! no destructor, so it is valid even while the thread is being torn down),
//! checks the slot's fill level against its capacity, stores the 48-byte
//! event and bumps the level. Everything else — the first event of a thread,
//! a full buffer, no buffer — goes to the cold path.
//!
//! A slot lives on the heap and in the stream's registry, never freed, so
//! that `finish` can collect the partial buffers of every thread, alive or
//! not. Its fill level is an atomic only so that `finish` can read it from
//! another thread; the owner's loads and stores are plain moves on x86.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use hark_wire::Event;
use zerocopy::little_endian::U16;

use super::stream::{self, Stream};
use crate::ship::{Buf, PACK_FRONT};

/// One thread's place in a stream.
pub(crate) struct Slot {
    /// Where event 0 of the current buffer goes. Stays valid memory even
    /// after the buffer is gone (buffers are never freed).
    base: AtomicPtr<Event>,
    /// Events in the current buffer; `cap` when there is no buffer.
    len: AtomicUsize,
    cap: usize,
    thread: u16,
    /// The buffer this slot owns, if any. Only the cold path, the thread-exit
    /// flush and `finish` touch it, under this lock.
    own: Mutex<Option<Buf>>,
    stream: &'static Stream,
}

struct Local {
    slot: Cell<*const Slot>,
    inside: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local { slot: Cell::new(std::ptr::null()), inside: Cell::new(false) }
    };
    // Registered on a thread's first event: its destructor ships the thread's
    // partial buffer when the thread exits.
    static EXIT_FLUSH: ExitFlush = const { ExitFlush };
}

struct ExitFlush;

impl Drop for ExitFlush {
    fn drop(&mut self) {
        let _g = Internal::enter();
        let _ = std::panic::catch_unwind(flush_this_thread);
    }
}

/// Whether this thread is inside the probe; sets it and returns the old value.
#[inline(always)]
pub(crate) fn swap_inside(v: bool) -> bool {
    LOCAL.with(|l| l.inside.replace(v))
}

/// Marks this thread as inside the probe for the probe's own work (init,
/// shipping, warnings), restoring the previous state on drop.
pub(crate) struct Internal(bool);

impl Internal {
    pub(crate) fn enter() -> Internal {
        Internal(swap_inside(true))
    }
}

impl Drop for Internal {
    fn drop(&mut self) {
        swap_inside(self.0);
    }
}

/// Appends `ev` to this thread's buffer.
#[inline(always)]
pub(crate) fn record(mut ev: Event) {
    let slot = LOCAL.with(|l| l.slot.get());
    if !slot.is_null() {
        // SAFETY: slots are leaked, so a non-null slot pointer stays valid.
        let s = unsafe { &*slot };
        let n = s.len.load(Ordering::Relaxed);
        if n < s.cap {
            ev.thread = U16::new(s.thread);
            // SAFETY: `len < cap` means `base` points at a live buffer with
            // room for `cap` events, owned by this thread.
            unsafe { s.base.load(Ordering::Relaxed).add(n).write(ev) };
            s.len.store(n + 1, Ordering::Release);
            return;
        }
    }
    record_slow(ev);
}

// Runs on a thread's first event, when its buffer is full, and while no
// buffer is to be had.
#[cold]
#[inline(never)]
fn record_slow(ev: Event) {
    let _ = std::panic::catch_unwind(|| {
        let Some(stream) = stream::current() else {
            return;
        };
        if !stream.start() {
            return;
        }
        let mut slot = LOCAL.with(|l| l.slot.get());
        // SAFETY: slots are leaked.
        if slot.is_null() || !std::ptr::eq(unsafe { &*slot }.stream, stream) {
            slot = register(stream);
        }
        // SAFETY: as above.
        refill(unsafe { &*slot }, ev);
    });
}

fn register(stream: &'static Stream) -> *const Slot {
    let cap = crate::ship::capacity(stream.cfg.pack_size);
    let slot: &'static Slot = stream.register(|thread| {
        Box::leak(Box::new(Slot {
            base: AtomicPtr::new(std::ptr::null_mut()),
            len: AtomicUsize::new(cap),
            cap,
            thread,
            own: Mutex::new(None),
            stream,
        }))
    });
    LOCAL.with(|l| l.slot.set(slot));
    // Fails only while the thread is being torn down; its buffer then waits
    // in the registry for `finish`.
    let _ = EXIT_FLUSH.try_with(|_| ());
    slot
}

/// Ships the slot's buffer (full or not) and starts a new one with `ev`.
fn refill(s: &Slot, mut ev: Event) {
    let ship = &s.stream.ship;
    let mut own = s.own.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(buf) = own.take() {
        let n = s.len.load(Ordering::Acquire).min(s.cap);
        s.len.store(s.cap, Ordering::Relaxed);
        ship.push_pack(buf, n);
    }
    if !s.stream.recording_allowed() {
        return;
    }
    match ship.take_buffer() {
        Some(buf) => {
            // SAFETY: buffers are `pack_size` bytes, of which PACK_FRONT are
            // the header and `cap` events follow.
            let base = unsafe { buf.0.add(PACK_FRONT) } as *mut Event;
            ev.thread = U16::new(s.thread);
            // SAFETY: the buffer is ours and holds at least one event.
            unsafe { base.write(ev) };
            *own = Some(buf);
            s.base.store(base, Ordering::Relaxed);
            s.len.store(1, Ordering::Release);
        }
        None => {
            ship.written.fetch_add(1, Ordering::Relaxed);
            ship.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Takes the slot's buffer for shipping, with its fill level. After this
/// the slot has no buffer; a racing owner that still writes does so into
/// memory nobody reads.
pub(crate) fn take(s: &Slot) -> Option<(Buf, usize)> {
    let mut own = s.own.lock().unwrap_or_else(|p| p.into_inner());
    let buf = own.take()?;
    let n = s.len.swap(s.cap, Ordering::Acquire).min(s.cap);
    Some((buf, n))
}

fn flush_this_thread() {
    let slot = LOCAL.with(|l| l.slot.get());
    if slot.is_null() {
        return;
    }
    // SAFETY: slots are leaked.
    let s = unsafe { &*slot };
    if let Some((buf, n)) = take(s) {
        s.stream.ship.push_pack(buf, n);
    }
}

/// In a forked child: this thread's slot belongs to the parent's stream.
pub(crate) fn forget_slot() {
    LOCAL.with(|l| l.slot.set(std::ptr::null()));
}
