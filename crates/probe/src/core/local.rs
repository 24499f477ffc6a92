//! Per-thread state: the reentrancy flag and the thread's slot (its current
//! buffer), and the record path.
//!
//! The hot path reads one `const`-initialised thread-local (no lazy state,
//! no destructor, so it is valid even while the thread is being torn down),
//! checks the slot's fill level against its capacity, stores the 48-byte
//! event and bumps the level. Everything else — the first event of a thread,
//! a full buffer, no buffer — goes to the cold path.
//!
//! When no buffer is to be had (lossy mode, pool exhausted), the thread
//! writes into a small scratch buffer of its own whose contents are counted
//! as dropped when it fills: dropping stays on the hot path instead of
//! taking the cold path, and its lock, for every event.
//!
//! A slot lives on the heap and in the stream's registry, never freed, so
//! that `finish` can collect the partial buffers of every thread, alive or
//! not. Its fill level and capacity are atomics only so that `finish` and
//! the shipper's flush requests can touch them from another thread; the
//! owner's relaxed loads and stores are plain moves on x86.

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
    /// Events in the current buffer; `cap` or more when there is none.
    len: AtomicUsize,
    /// Events the current buffer holds (a pack buffer's, or the scratch's);
    /// lowered to 0 by the shipper to ask for an early flush (see
    /// [`request_flush`]). The hot path compares against it.
    cap: AtomicUsize,
    /// A pack buffer's capacity.
    pack_cap: usize,
    thread: u16,
    /// What the slot writes into. Only the cold path, the thread-exit flush
    /// and `finish` touch it, under this lock.
    own: Mutex<Own>,
    stream: &'static Stream,
}

/// What a slot is writing into.
pub(crate) struct Own {
    buf: Option<Buf>,
    /// Events the current buffer (pack or scratch) holds; the slot's `cap`
    /// may be lowered to 0 to ask the owner for an early flush.
    cap: usize,
    /// True when `base` points into `scratch`: events there are dropped.
    dropping: bool,
    scratch: Option<Buf>,
}

/// Bytes of a scratch buffer.
const SCRATCH_SIZE: usize = 16 << 10;

/// A thread's probe state. Wrappers look it up once per call (see
/// [`enter`]); the guard they hold keeps its address for the rest of the call.
/// All zeros is its initial state (null slot, not inside, no OpenMP task):
/// see [`tls`].
#[repr(C)]
pub(crate) struct Local {
    slot: Cell<*const Slot>,
    inside: Cell<bool>,
    omp: OmpThread,
}

/// What the OpenMP adapters keep per thread for their events, here rather
/// than in a `thread_local!` of their own: in a preloaded library each of
/// those is a call to `__tls_get_addr` per access, on every barrier.
/// All zeros: no implicit task, no wait begun.
#[repr(C)]
pub(crate) struct OmpThread {
    /// The region instance of the thread's innermost implicit task, plus 1
    /// (0: none the probe saw; see [`OmpThread::instance`]).
    instance1: Cell<u64>,
    /// The thread's number in that task's team.
    pub(crate) num: Cell<i32>,
    /// When the thread began its current barrier wait (OMPT reports the two
    /// ends in two callbacks).
    pub(crate) wait: Cell<u64>,
    /// When the thread began to wait for a lock (as `wait`).
    pub(crate) lock: Cell<u64>,
    /// The OMPT adapter's per-thread stacks of regions and tasks, once it
    /// made them (null before, and again once they are dropped): reached
    /// here with two instructions, not through a `thread_local!`'s
    /// `__tls_get_addr`, at every fork, join and implicit task.
    pub(crate) stacks: Cell<*mut std::ffi::c_void>,
}

impl OmpThread {
    /// The region instance of the thread's innermost implicit task
    /// (`EXTRA_NONE`: none the probe saw).
    #[inline(always)]
    pub(crate) fn instance(&self) -> u64 {
        self.instance1.get().wrapping_sub(1)
    }

    /// Enters the implicit task of region `instance` as thread `num` of its
    /// team; returns the task it was in (for [`OmpThread::restore`]).
    #[inline(always)]
    pub(crate) fn enter_task(&self, instance: u64, num: i32) -> (u64, i32) {
        let outer = (self.instance1.get(), self.num.get());
        self.instance1.set(instance.wrapping_add(1));
        self.num.set(num);
        outer
    }

    /// Back in the task [`OmpThread::enter_task`] returned.
    #[inline(always)]
    pub(crate) fn restore(&self, (instance1, num): (u64, i32)) {
        self.instance1.set(instance1);
        self.num.set(num);
    }
}

thread_local! {
    // Registered on a thread's first event: its destructor ships the thread's
    // partial buffer when the thread exits.
    static EXIT_FLUSH: ExitFlush = const { ExitFlush };
}

/// This thread's `Local`, lent to `f` (as `LocalKey::with`, but never fails:
/// the state has no destructor and lives as long as the thread).
#[inline(always)]
fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    // SAFETY: `tls::get` is this thread's `Local`, valid while the thread
    // runs; the reference does not escape `f`.
    f(unsafe { &*tls::get() })
}

/// Where each thread's `Local` lives.
///
/// On x86-64 Linux it sits in the static TLS block and is reached with the
/// initial-exec model: two instructions (`fs:0` plus an offset from the
/// GOT). Rust's `thread_local!` in a shared library uses the general-dynamic
/// model, a call to `__tls_get_addr` on every access — the largest single
/// cost of the hot path before this, and stable Rust cannot choose the
/// model. The static TLS block has room for a preloaded library (and glibc
/// keeps surplus for a few small ones opened later with `dlopen`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tls {
    use super::Local;

    const _: () = assert!(size_of::<Local>() == 56 && align_of::<Local>() <= 8);

    // 56 zero bytes of thread-local storage: a `Local` with a null slot, not
    // inside, no OpenMP task. Hidden: the name never leaves libhark.so.
    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl hark_probe_local",
        ".hidden hark_probe_local",
        ".type hark_probe_local,@tls_object",
        ".size hark_probe_local,56",
        "hark_probe_local:",
        ".zero 56",
        ".popsection",
    );

    /// This thread's `Local`.
    #[inline(always)]
    pub(super) fn get() -> *const Local {
        let p: *const Local;
        // SAFETY: reads the thread pointer and the symbol's TLS offset from
        // the GOT; both are valid for as long as the thread runs.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + hark_probe_local@GOTTPOFF]",
                p = out(reg) p,
                options(pure, readonly, nostack),
            );
        }
        p
    }
}

/// Elsewhere: a `const` thread-local without destructor.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tls {
    use super::{Local, OmpThread};
    use std::cell::Cell;

    thread_local! {
        static LOCAL: Local = const {
            Local {
                slot: Cell::new(std::ptr::null()),
                inside: Cell::new(false),
                omp: OmpThread {
                    instance1: Cell::new(0),
                    num: Cell::new(0),
                    wait: Cell::new(0),
                    lock: Cell::new(0),
                    stacks: Cell::new(std::ptr::null_mut()),
                },
            }
        };
    }

    #[inline(always)]
    pub(super) fn get() -> *const Local {
        LOCAL.with(|l| l as *const Local)
    }
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
    with_local(|l| l.inside.replace(v))
}

/// Enters the probe on this thread: this thread's `Local`, or `None` if the
/// thread is already inside (the flag is then left set, as it was). One
/// thread-local access; the caller leaves with [`leave`].
#[inline(always)]
pub(crate) fn enter() -> Option<*const Local> {
    with_local(|l| {
        if l.inside.replace(true) {
            None
        } else {
            Some(l as *const Local)
        }
    })
}

/// Leaves the probe entered with [`enter`], through the `Local` it returned.
#[inline(always)]
pub(crate) fn leave(l: &Local) {
    l.inside.set(false);
}

/// This thread's OpenMP state, lent to `f`.
#[inline(always)]
pub(crate) fn omp<R>(f: impl FnOnce(&OmpThread) -> R) -> R {
    with_local(|l| f(&l.omp))
}

impl Local {
    /// The OpenMP state of the thread whose `Local` this is.
    #[inline(always)]
    pub(crate) fn omp(&self) -> &OmpThread {
        &self.omp
    }
}

/// Whether this thread is inside the probe now.
#[inline(always)]
pub(crate) fn is_inside() -> bool {
    with_local(|l| l.inside.get())
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
pub(crate) fn record(ev: Event) {
    with_local(|l| record_in(l, ev))
}

/// Appends `ev` to the buffer of the thread whose `Local` `l` is (the
/// calling thread's: `Local`s are thread-locals, and a guard cannot leave
/// its thread).
///
/// The event is stored field by field, its `thread` field from the slot.
/// Copying it whole would load it back in 16-byte pieces from the stack
/// where the caller has just built it field by field — each load then waits
/// for several smaller stores to retire (a store-forwarding stall, measured
/// as the hottest instruction of the record path).
#[inline(always)]
pub(crate) fn record_in(l: &Local, ev: Event) {
    let slot = l.slot.get();
    if !slot.is_null() {
        // SAFETY: slots are leaked, so a non-null slot pointer stays valid.
        let s = unsafe { &*slot };
        let n = s.len.load(Ordering::Relaxed);
        if n < s.cap.load(Ordering::Relaxed) {
            // SAFETY: `len < cap` means `base` points at a live buffer with
            // room for `cap` events, owned by this thread.
            let at = unsafe { s.base.load(Ordering::Relaxed).add(n) };
            // Exhaustive, so that a new field cannot be forgotten here.
            let Event {
                start,
                end,
                bytes,
                extra,
                op,
                thread: _,
                obj,
                peer,
                tag,
            } = ev;
            // SAFETY: as above; `Event` and its fields have alignment 1, so
            // each field of the slot's next event is a valid place to write.
            unsafe {
                use std::ptr::addr_of_mut;
                addr_of_mut!((*at).start).write(start);
                addr_of_mut!((*at).end).write(end);
                addr_of_mut!((*at).bytes).write(bytes);
                addr_of_mut!((*at).extra).write(extra);
                addr_of_mut!((*at).op).write(op);
                addr_of_mut!((*at).thread).write(U16::new(s.thread));
                addr_of_mut!((*at).obj).write(obj);
                addr_of_mut!((*at).peer).write(peer);
                addr_of_mut!((*at).tag).write(tag);
            }
            s.len.store(n + 1, Ordering::Release);
            return;
        }
    }
    // Handed over in six registers, not through memory: an `Event` passed by
    // value would be built on the stack before the fast path's bounds check,
    // on every call.
    let [a, b, c, d, e, f] = zerocopy::transmute!(ev);
    record_slow(a, b, c, d, e, f);
}

// Runs on a thread's first event, when its buffer is full, and while no
// buffer is to be had.
#[cold]
#[inline(never)]
fn record_slow(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64) {
    let ev: Event = zerocopy::transmute!([a, b, c, d, e, f]);
    let _ = std::panic::catch_unwind(|| {
        let Some(stream) = stream::current() else {
            return;
        };
        if !stream.start() {
            return;
        }
        let mut slot = with_local(|l| l.slot.get());
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
            cap: AtomicUsize::new(cap),
            pack_cap: cap,
            thread,
            own: Mutex::new(Own {
                buf: None,
                cap,
                dropping: false,
                scratch: None,
            }),
            stream,
        }))
    });
    with_local(|l| l.slot.set(slot));
    stream.open_thread_cpu(slot.thread);
    // Fails only while the thread is being torn down; its buffer then waits
    // in the registry for `finish`.
    let _ = EXIT_FLUSH.try_with(|_| ());
    slot
}

/// Ships this thread's buffer now if its next event would have to (it is
/// full, or the shipper asked for it), so that the cost falls where the
/// caller chooses: inside a wait it times (an OpenMP barrier), not after
/// it, where it would pass for the program's own time.
#[inline(always)]
pub(crate) fn reserve() {
    with_local(|l| {
        let slot = l.slot.get();
        if slot.is_null() {
            return;
        }
        // SAFETY: slots are leaked, so a non-null slot pointer stays valid.
        let s = unsafe { &*slot };
        if s.len.load(Ordering::Relaxed) >= s.cap.load(Ordering::Relaxed) {
            reserve_slow(s);
        }
    })
}

#[cold]
#[inline(never)]
fn reserve_slow(s: &Slot) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut own = hark_sync::lock(&s.own);
        settle(s, &mut own);
    }));
}

/// Ships the slot's buffer (full or not), or counts its scratch as
/// dropped, and starts a new buffer with `ev`.
fn refill(s: &Slot, mut ev: Event) {
    let ship = &s.stream.ship;
    let mut own = hark_sync::lock(&s.own);
    settle(s, &mut own);
    if !s.stream.recording_allowed() {
        return;
    }
    // Not holding the slot's lock while a lossless wait may block: `finish`
    // on another thread must still be able to collect this slot.
    drop(own);
    let taken = ship.take_buffer();
    let mut own = hark_sync::lock(&s.own);
    ev.thread = U16::new(s.thread);
    let (buf, cap, dropping) = match taken {
        Some(buf) => (buf, s.pack_cap, false),
        None => {
            let scratch = *own.scratch.get_or_insert_with(|| {
                Buf(Box::leak(vec![0u8; SCRATCH_SIZE].into_boxed_slice()).as_mut_ptr())
            });
            (scratch, crate::ship::capacity(SCRATCH_SIZE), true)
        }
    };
    // SAFETY: buffers are at least PACK_FRONT bytes plus `cap` events.
    let base = unsafe { buf.0.add(PACK_FRONT) } as *mut Event;
    // SAFETY: the buffer is this slot's and holds at least one event.
    unsafe { base.write(ev) };
    if !dropping {
        own.buf = Some(buf);
    }
    own.dropping = dropping;
    own.cap = cap;
    s.base.store(base, Ordering::Relaxed);
    s.cap.store(cap, Ordering::Relaxed);
    s.len.store(1, Ordering::Release);
}

/// Hands what the slot holds to the shipper (a pack buffer) or to the
/// drop count (the scratch); the slot then holds nothing.
fn settle(s: &Slot, own: &mut Own) {
    let n = s.len.swap(usize::MAX / 2, Ordering::Acquire).min(own.cap);
    let ship = &s.stream.ship;
    if let Some(buf) = own.buf.take() {
        ship.push_pack(buf, n);
    } else if own.dropping {
        ship.written.fetch_add(n as u64, Ordering::Relaxed);
        ship.dropped.fetch_add(n as u64, Ordering::Relaxed);
    }
    own.dropping = false;
}

/// Asks the slot's owner to ship its partial buffer at its next event, so
/// a thread that records slowly does not keep its events for long. The hot
/// path is untouched: the slot's capacity drops to 0, which sends the next
/// `record` down the cold path, where the buffer is shipped as usual.
pub(crate) fn request_flush(s: &Slot) {
    let own = hark_sync::lock(&s.own);
    if own.buf.is_some() && s.len.load(Ordering::Relaxed) > 0 {
        s.cap.store(0, Ordering::Relaxed);
    }
}

/// Ships (or counts as dropped) what the slot holds. After this the slot
/// has nothing; a racing owner that still writes does so into memory nobody
/// reads, and its next event takes the cold path.
pub(crate) fn take(s: &Slot) {
    let mut own = hark_sync::lock(&s.own);
    settle(s, &mut own);
}

/// A dump's flush, some time after [`request_flush`]: ships what the slot
/// holds if its owner has recorded nothing since (its capacity is still
/// 0: a thread blocked in `MPI_Recv`, say). An owner that did record took
/// the cold path, which shipped its buffer itself. An owner records again
/// only through the cold path, under the lock held here, so the buffer
/// cannot be written while it ships — unless the owner was stopped inside
/// the hot path's few instructions, between reading the old capacity and
/// storing its fill level, for the whole wait.
pub(crate) fn take_if_idle(s: &Slot) {
    let mut own = hark_sync::lock(&s.own);
    if own.buf.is_some() && s.len.load(Ordering::Acquire) > 0 && s.cap.load(Ordering::Relaxed) == 0
    {
        settle(s, &mut own);
    }
}

fn flush_this_thread() {
    let slot = with_local(|l| l.slot.get());
    if slot.is_null() {
        return;
    }
    // SAFETY: slots are leaked.
    let slot = unsafe { &*slot };
    slot.stream.end_thread_cpu();
    take(slot);
}

/// In a forked child: this thread's slot belongs to the parent's stream.
pub(crate) fn forget_slot() {
    with_local(|l| l.slot.set(std::ptr::null()));
}
