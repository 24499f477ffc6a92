//! Shipping: the bounded buffer pool (N_A of *Event Streaming for Online
//! Performance Measurements Reduction*), the ordered queue of things to
//! send, and the background thread that writes them.
//!
//! Threads fill buffers (see `core::local`); a full buffer is queued as a
//! pack *in place*: its first [`PACK_FRONT`] bytes were reserved for the
//! frame header, which the shipper fills just before the one `send`, so an
//! event is never copied between the record and the socket. Definitions and
//! the rank frame travel through the same queue as encoded bytes, so the
//! stream holds them before any pack queued after them.
//!
//! Back-pressure: at most `HARK_BUFFERS` buffers exist. When a thread needs
//! one and none is free, lossy mode (the default) drops its events and
//! counts them; lossless mode waits until the shipper returns one, but only
//! while the server is alive. A server that fails (error, or no progress for
//! `HARK_SEND_TIMEOUT_MS`) costs one warning; from then on the shipper keeps
//! recycling buffers and counts their events as dropped, so the program
//! never stalls on a dead server.
//!
//! Buffers are allocated on demand and never freed: a buffer a thread is
//! still writing into at exit may be shipped by `finish` while that thread
//! races on, and must stay valid memory.
//!
//! On one node the buffers are the slots of a shared-memory ring (`shm`):
//! the shipper then publishes a pack instead of sending it, and the buffer
//! returns to the pool when the reader releases it, not when it is sent.
//! A socket's kernel buffer takes a partial pack (a thread's flush at a
//! fork, at its exit, on the timer) or a definition for the bytes it
//! holds; a ring slot is held whole until the reader comes. So while the
//! reader lags, the shipper gathers small packs into one slot (the
//! *stage*), handing their buffers straight back, and definitions into
//! one message, and sends them when the reader has caught up (or before
//! anything that must follow them): under load, a few flushes and
//! definitions, a slot each, had used up the pool and made the program's
//! next buffer a drop.

pub(crate) mod control;
pub(crate) mod counts;
pub(crate) mod forward;
pub(crate) mod ping;
pub(crate) mod reach;
pub(crate) mod shm;
pub(crate) mod transport;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use hark_wire::{
    write_pack_header, ClockSource, End, EndReason, Event, Kind, EVENT_SIZE, HEADER_SIZE,
    PACK_HEADER_SIZE,
};

use hark_ring::SlotState;
use shm::RingOut;
use transport::Transport;

/// Bytes reserved at the front of every buffer for the pack's frame header.
pub(crate) const PACK_FRONT: usize = HEADER_SIZE + PACK_HEADER_SIZE;

/// Buffers the shipper allocates at start, before any thread asks.
const PREALLOCATED: usize = 1;

/// A pack of at most `capacity / SMALL_PACK` events is small: on a ring
/// whose reader lags it waits in the stage (module doc).
const SMALL_PACK: usize = 8;

/// How often an idle shipper holding a stage looks whether the reader has
/// caught up.
const STAGE_LOOK: Duration = Duration::from_millis(1);

/// What the shipper holds back while a ring's reader lags (module doc).
#[derive(Default)]
struct Staged {
    /// Small packs gathered in one ring slot: the slot and its events.
    pack: Option<(Buf, usize)>,
    /// Definition frames, and their bytes. They go before anything else
    /// staged: a definition's id is fresh, never reused, so it may reach
    /// the server early but must not reach it after an event that uses it.
    defs: Vec<Vec<u8>>,
    defs_bytes: usize,
}

impl Staged {
    fn is_empty(&self) -> bool {
        self.pack.is_none() && self.defs.is_empty()
    }
}

/// Whether `bytes` begins with a `Defs` frame's header.
pub(crate) fn is_defs(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_SIZE && bytes[0..4] == (Kind::Defs as u32).to_le_bytes()
}

/// A pack buffer: `pack_size` bytes, never freed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Buf(pub *mut u8);
// SAFETY: a buffer is owned by exactly one of: a thread slot, the queue, the
// shipper, the free list; ownership moves under the pool's lock.
unsafe impl Send for Buf {}

enum Item {
    Pack {
        buf: Buf,
        events: usize,
    },
    Bytes(Vec<u8>),
    End(EndReason),
    /// The shipper is to stop, after what is queued before, and hand its
    /// transport back ([`Ship::push_park`]).
    Park,
}

struct Inner {
    queue: VecDeque<Item>,
    free: Vec<Buf>,
    allocated: usize,
    done: bool,
    /// The `End` has gone out (or could not) and the transport is closed.
    closed: bool,
    /// Ring slots published and not yet known to be released, with their
    /// message numbers, oldest first.
    in_flight: VecDeque<(u64, Buf)>,
    /// Free ring slots kept for copies (definitions, `End`), outside the
    /// pool: a copy waits only for the reader, never for the program's
    /// threads, whose packs may be queued behind it.
    copy_free: Vec<Buf>,
}

/// The pool, the queue and the counters of one stream.
pub(crate) struct Ship {
    inner: Mutex<Inner>,
    work: Condvar,
    freed: Condvar,
    done: Condvar,
    pack_size: usize,
    max_buffers: usize,
    /// Threads that have recorded: each may hold a buffer while it fills
    /// it, so the bound is never below `threads + 2` (else threads that
    /// hold half-filled buffers and wait, say at a barrier, would starve
    /// the others, and in lossless mode deadlock them).
    threads: AtomicUsize,
    lossless: bool,
    /// Events the program recorded, delivered or not.
    pub written: AtomicU64,
    /// Events recorded but not delivered (no free buffer, or no server).
    pub dropped: AtomicU64,
    packs: AtomicU64,
    /// The next pack's number, kept while the shipper is parked.
    seq: AtomicU64,
    alive: AtomicBool,
    /// The shared-memory ring, when the stream uses one (set before any
    /// buffer is allocated).
    ring: OnceLock<RingOut>,
    /// Ring slots handed to the pool so far.
    next_slot: AtomicU32,
    /// Sampled out by a service: the shipper sends each pack's totals
    /// instead of the pack, their timestamps read with this clock
    /// (`counts`), from a time on. Read by the shipper only, never on the
    /// hot path.
    counting: Mutex<Option<(ClockSource, u64)>>,
    /// Moves the transport on from a waiting program thread, for a
    /// transport that only progresses inside the program's own calls
    /// (streams over MPI); set before the first buffer is taken.
    progress: OnceLock<fn() -> u64>,
}

/// Events one buffer holds.
pub(crate) fn capacity(pack_size: usize) -> usize {
    (pack_size - PACK_FRONT) / EVENT_SIZE
}

impl Ship {
    pub(crate) fn new(pack_size: usize, max_buffers: usize, lossless: bool) -> Ship {
        Ship {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                free: Vec::new(),
                allocated: 0,
                done: false,
                closed: false,
                in_flight: VecDeque::new(),
                copy_free: Vec::new(),
            }),
            work: Condvar::new(),
            freed: Condvar::new(),
            done: Condvar::new(),
            pack_size,
            max_buffers,
            threads: AtomicUsize::new(0),
            lossless,
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            packs: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            alive: AtomicBool::new(true),
            ring: OnceLock::new(),
            next_slot: AtomicU32::new(0),
            counting: Mutex::new(None),
            progress: OnceLock::new(),
        }
    }

    /// Sets the hook that lets a waiting thread move the transport on (see
    /// `progress`).
    pub(crate) fn set_progress(&self, hook: fn() -> u64) {
        let _ = self.progress.set(hook);
    }

    /// Waits for the end of the stream to go out, running the progress
    /// hook (if any) meanwhile; false if it did not in time. With a hook,
    /// `timeout` counts from the last time the transport moved (the hook's
    /// count changed), not from the start: over MPI an analyser that is
    /// alive but behind (its flow control holds its writers back,
    /// `docs/analysers.md`, "Flow control") may take longer than the
    /// timeout for a full pool, and a stream given up while it still takes
    /// chunks never ends there, which leaves the analyser waiting for it.
    pub(crate) fn wait_done_progressing(&self, timeout: Duration) -> bool {
        let Some(&hook) = self.progress.get() else {
            return self.wait_done(timeout);
        };
        let mut deadline = Instant::now() + timeout;
        let mut seen = hook();
        loop {
            let moved = hook();
            if moved != seen {
                seen = moved;
                deadline = Instant::now() + timeout;
            }
            if self.wait_done(Duration::from_millis(1)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }

    /// Sampled out (`out`) or not. When a process becomes sampled out,
    /// the shipper sends totals instead of the events that end at or after
    /// `from` (probe time, in `clock`'s units); one already sampled out
    /// keeps its first switch time. Not sampled out returns to shipping
    /// every event.
    pub(crate) fn set_counting(&self, out: bool, clock: ClockSource, from: u64) {
        let mut c = hark_sync::lock(&self.counting);
        match (out, c.is_some()) {
            (true, false) => *c = Some((clock, from)),
            (false, _) => *c = None,
            (true, true) => {}
        }
    }

    /// Under sampling, splits the `events` events in `buf`: how many lead
    /// it that go out as a pack (those that ended before the switch), and
    /// the `Counts` frames standing for the rest, each small enough for one
    /// buffer (empty when nothing is counted).
    fn split_counted(&self, buf: Buf, events: usize) -> (usize, Vec<u8>) {
        let counting = *hark_sync::lock(&self.counting);
        let mut out = Vec::new();
        let Some((clock, from)) = counting else {
            return (events, out);
        };
        // Samples are no calls to total: they go on as packs.
        if self.accounted(buf, events) == 0 {
            return (events, out);
        }
        // SAFETY: the shipper owns the buffer until it releases it, and its
        // first `events` records after the front are written.
        let bytes = unsafe {
            std::slice::from_raw_parts(buf.0.add(PACK_FRONT).cast_const(), events * EVENT_SIZE)
        };
        let Ok(evs) = Event::slice_from(bytes) else {
            return (events, out);
        };
        // A thread appends its events as its calls end: those before the
        // switch lead the buffer.
        let kept = evs
            .iter()
            .position(|e| e.end.get() >= from)
            .unwrap_or(events);
        if kept == events {
            return (events, out);
        }
        let all = counts::fold(&evs[kept..], clock);
        let per_frame = ((self.pack_size - HEADER_SIZE - hark_wire::COUNTS_FIXED_SIZE)
            / hark_wire::COUNT_SIZE)
            .max(1);
        for cells in all.cells.chunks(per_frame) {
            hark_wire::Counts {
                since_ns: all.since_ns,
                until_ns: all.until_ns,
                events: cells.iter().map(|c| c.calls).sum(),
                cells: cells.to_vec(),
            }
            .encode(&mut out);
        }
        (kept, out)
    }

    /// Makes the pool's buffers the slots of `ring`: call before the first
    /// buffer is allocated (at connect).
    pub(crate) fn use_ring(&self, ring: RingOut) {
        let copies = (ring.pool_slots()..ring.end_slot()).map(|s| Buf(ring.w.slot_ptr(s)));
        self.lock().copy_free.extend(copies);
        let _ = self.ring.set(ring);
    }

    fn ring(&self) -> Option<&RingOut> {
        self.ring.get()
    }

    /// Returns the ring slots the reader has released to the free list.
    fn reclaim(&self, g: &mut Inner) {
        let Some(r) = self.ring() else { return };
        let done = r.w.consumed();
        let before = g.free.len();
        while let Some(&(n, buf)) = g.in_flight.front() {
            if n >= done {
                break;
            }
            g.in_flight.pop_front();
            match r.w.slot_of(buf.0) {
                Some(s) if s >= r.pool_slots() => g.copy_free.push(buf),
                _ => g.free.push(buf),
            }
        }
        if g.free.len() > before {
            r.progressed();
        }
    }

    /// The reader of the ring is gone: from now on events are dropped.
    fn reader_lost(&self, why: &str) {
        if self.alive.swap(false, Ordering::Relaxed) {
            crate::core::warn_once(
                "server-lost",
                &format!(
                    "lost the connection to the Hark server ({why}); \
                     the program runs on and undelivered events are counted as dropped"
                ),
            );
        }
        self.freed.notify_all();
    }

    /// In ring mode, while the pool is exhausted: waits a little for the
    /// reader, noting if it is gone. Called without the lock.
    fn wait_for_reader(&self, r: &RingOut) {
        if let Err(why) = r.wait_for_reader() {
            self.reader_lost(&why);
        }
    }

    // A panic while holding the lock must not stop shipping for good.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        hark_sync::lock(&self.inner)
    }

    /// Whether the server is still taking data.
    pub(crate) fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    /// Bytes of memory the pool holds now.
    pub(crate) fn memory(&self) -> usize {
        self.lock().allocated * self.pack_size
    }

    /// Queues a full (or final) buffer holding `events` events.
    pub(crate) fn push_pack(&self, buf: Buf, events: usize) {
        self.written.fetch_add(events as u64, Ordering::Relaxed);
        if events == 0 {
            self.release(buf);
            return;
        }
        self.push(Item::Pack { buf, events });
    }

    /// Queues `events` the probe made itself off the program's threads
    /// (CPU readings) as one pack, in a buffer taken without waiting; false,
    /// with nothing queued or counted, when no buffer is free or they do not
    /// fit one. Never waiting keeps the shipper, which frees buffers, from
    /// waiting on itself, and a lossless stream from dropping: the caller
    /// keeps what it read for the next try.
    pub(crate) fn push_events(&self, events: &[Event]) -> bool {
        if events.is_empty() || events.len() > capacity(self.pack_size) {
            return false;
        }
        let Some(buf) = self.take_buffer_now() else {
            return false;
        };
        // SAFETY: the buffer is `pack_size` bytes, owned by this caller
        // until pushed, and `events` fit after its front.
        let room = unsafe {
            std::slice::from_raw_parts_mut(buf.0.add(PACK_FRONT), events.len() * EVENT_SIZE)
        };
        room.copy_from_slice(zerocopy::IntoBytes::as_bytes(events));
        // Not counted as written: samples are outside the accounting.
        self.push(Item::Pack {
            buf,
            events: events.len(),
        });
        true
    }

    /// [`Ship::push_events`], waiting up to `wait` (not at all for zero)
    /// for a buffer the shipper frees: for the readings taken as the
    /// stream ends, which have no next reading to go with, when every
    /// buffer of the pool was just queued (`finish` queues each thread's
    /// last one). A transport that progresses only inside the program's
    /// calls is progressed meanwhile.
    pub(crate) fn push_events_within(&self, events: &[Event], wait: Duration) -> bool {
        if self.push_events(events) {
            return true;
        }
        let until = Instant::now() + wait;
        loop {
            if events.is_empty() || Instant::now() >= until || !self.alive() {
                return false;
            }
            if let Some(&hook) = self.progress.get() {
                let _ = hook();
            }
            let g = self.lock();
            drop(self.freed.wait_timeout(g, Duration::from_millis(1)));
            if self.push_events(events) {
                return true;
            }
        }
    }

    /// Of the pack of `events` events in `buf`, how many count in the
    /// accounting (`hark_wire::accounted`: none in a pack of samples).
    fn accounted(&self, buf: Buf, events: usize) -> u64 {
        // SAFETY: a queued or shipped buffer holds `events` written
        // records after its front.
        let bytes = unsafe {
            std::slice::from_raw_parts(buf.0.add(PACK_FRONT).cast_const(), events * EVENT_SIZE)
        };
        Event::slice_from(bytes).map_or(events as u64, hark_wire::accounted)
    }

    /// A free buffer or a new one within the bound, never waiting.
    fn take_buffer_now(&self) -> Option<Buf> {
        let mut g = self.lock();
        if g.done {
            return None;
        }
        if g.free.is_empty() {
            self.reclaim(&mut g);
        }
        if let Some(b) = g.free.pop() {
            return Some(self.filling(b));
        }
        if g.allocated < self.bound() {
            g.allocated += 1;
            drop(g);
            return Some(self.filling(self.allocate()));
        }
        None
    }

    /// Queues encoded frames (definitions, rank, hello).
    pub(crate) fn push_bytes(&self, bytes: Vec<u8>) {
        self.push(Item::Bytes(bytes));
    }

    fn push(&self, item: Item) {
        let mut g = self.lock();
        if g.done {
            // The stream is closed: nothing more can be sent.
            if let Item::Pack { buf, events } = item {
                let n = self.accounted(buf, events);
                self.dropped.fetch_add(n, Ordering::Relaxed);
                g.free.push(buf);
            }
            return;
        }
        g.queue.push_back(item);
        drop(g);
        self.work.notify_one();
    }

    /// A buffer to fill: a free one, a new one while the pool is below its
    /// bound, or in lossless mode one the shipper returns (waiting only
    /// while the server is alive). `None` means the caller drops.
    pub(crate) fn take_buffer(&self) -> Option<Buf> {
        let mut g = self.lock();
        loop {
            if g.done {
                return None;
            }
            if g.free.is_empty() {
                self.reclaim(&mut g);
            }
            if let Some(b) = g.free.pop() {
                return Some(self.filling(b));
            }
            if g.allocated < self.bound() {
                g.allocated += 1;
                drop(g);
                return Some(self.filling(self.allocate()));
            }
            if !self.lossless || !self.alive() {
                // Dropping: a good moment to notice a dead reader, which a
                // lossy writer never waits for (a socket would have failed).
                if let Some(r) = self.ring() {
                    drop(g);
                    if let Err(why) = r.reader_alive() {
                        self.reader_lost(&why);
                    }
                }
                return None;
            }
            match (self.ring(), self.progress.get()) {
                (Some(r), _) => {
                    drop(g);
                    self.wait_for_reader(r);
                    g = self.lock();
                }
                (None, Some(&hook)) => {
                    drop(g);
                    let _ = hook();
                    g = self.lock();
                    g = self
                        .freed
                        .wait_timeout(g, Duration::from_millis(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                (None, None) => g = self.freed.wait(g).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    /// Marks a ring slot as being filled with events (what a reader counts
    /// if this process dies), and returns it.
    fn filling(&self, b: Buf) -> Buf {
        self.set_state(b, SlotState::Filling);
        b
    }

    fn set_state(&self, b: Buf, state: SlotState) {
        if let Some(r) = self.ring() {
            if let Some(slot) = r.w.slot_of(b.0) {
                r.w.set_state(slot, state);
            }
        }
    }

    /// Counts a thread that records (see `threads`).
    pub(crate) fn add_thread(&self) {
        self.threads.fetch_add(1, Ordering::Relaxed);
        // A waiter may now allocate.
        self.freed.notify_all();
    }

    fn bound(&self) -> usize {
        let bound = self
            .max_buffers
            .max(self.threads.load(Ordering::Relaxed) + 2);
        match self.ring() {
            Some(r) => bound.min(r.pool_slots() as usize),
            None => bound,
        }
    }

    /// A new buffer with every page already mapped: a fresh allocation is
    /// zero pages the kernel maps on first touch, and that fault (a few
    /// hundred per MiB) must not land on the hot path.
    /// With a ring, the next unused slot (the bound keeps the count within
    /// the ring's slots), pre-faulted the same way.
    fn allocate(&self) -> Buf {
        let mem = match self.ring() {
            Some(r) => r.w.slot_mut(self.next_slot.fetch_add(1, Ordering::Relaxed)),
            None => Box::leak(vec![0u8; self.pack_size].into_boxed_slice()),
        };
        for page in mem.chunks_mut(4096) {
            // SAFETY: a volatile write to memory we own keeps the touch
            // from being optimised away.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
        Buf(mem.as_mut_ptr())
    }

    /// Allocates up to `n` buffers ahead of need (the shipper does this at
    /// start, off the program's threads).
    pub(crate) fn preallocate(&self, n: usize) {
        for _ in 0..n {
            let mut g = self.lock();
            if g.allocated >= self.bound() {
                return;
            }
            g.allocated += 1;
            drop(g);
            let b = self.allocate();
            self.release(b);
        }
    }

    /// Hands a buffer back to the pool.
    fn release(&self, buf: Buf) {
        self.set_state(buf, SlotState::Free);
        self.lock().free.push(buf);
        self.freed.notify_all();
    }

    /// Asks the shipper to stop once everything queued before has gone, and
    /// to return its transport from [`Ship::run`], so that the process can
    /// be single-threaded for a moment (`setns`, `unshare`); a new shipper
    /// goes on from there.
    pub(crate) fn push_park(&self) {
        self.push(Item::Park);
    }

    /// Queues the end of the stream; the shipper sends it once everything
    /// queued before has gone, then stops.
    pub(crate) fn push_end(&self, reason: EndReason) {
        self.push(Item::End(reason));
    }

    /// Waits up to `timeout` for the shipper to send the end of the stream;
    /// false if it did not finish in time.
    pub(crate) fn wait_done(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        while !g.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .done
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// The shipper thread's body: sends queued items in order until the end
    /// of the stream, or until asked to park ([`Ship::push_park`]): then
    /// it returns the transport, for the next shipper. `on_failure` is told
    /// once if the transport fails.
    ///
    /// Every `flush_every` (if any), `flush` is called to ask threads for
    /// their partial buffers, so that a live server sees slow threads too.
    pub(crate) fn run(
        &self,
        mut transport: Box<dyn Transport>,
        on_failure: &dyn Fn(&str),
        flush_every: Option<Duration>,
        flush: &dyn Fn(),
    ) -> Option<Box<dyn Transport>> {
        self.preallocate(PREALLOCATED);
        let mut seq = self.seq.load(Ordering::Relaxed);
        let mut flusher = Flusher {
            every: flush_every,
            last: Instant::now(),
            flush,
        };
        let mut staged = Staged::default();
        // Set once the `End` is taken: copies may then use pool buffers.
        let ending = std::cell::Cell::new(false);
        loop {
            let item = self.next_item(&mut flusher, &mut staged, &mut seq);
            let mut send =
                |bytes: &[u8]| self.send_out(&mut *transport, on_failure, ending.get(), bytes);
            match item {
                Item::Pack { buf, events } => {
                    self.ship_queued_pack(buf, events, &mut staged, &mut seq, &mut send)
                }
                Item::Bytes(bytes) => self.ship_bytes(bytes, &mut staged, &mut seq, &mut send),
                Item::Park => {
                    // What is staged goes now: the next shipper starts
                    // with an empty stage and the pack numbers after ours.
                    self.ship_staged(&mut staged, &mut seq, &mut send);
                    self.seq.store(seq, Ordering::Relaxed);
                    return Some(transport);
                }
                Item::End(reason) => {
                    ending.set(true);
                    self.ship_end(reason, &mut staged, &mut seq, &mut send);
                    transport.close();
                    self.lock().closed = true;
                    self.done.notify_all();
                    self.freed.notify_all();
                    return None;
                }
            }
        }
    }

    /// Waits for the next queued item, flushing the threads when it is
    /// time and, while idle, shipping what is staged once the ring's reader
    /// has caught up.
    fn next_item(&self, flusher: &mut Flusher, staged: &mut Staged, seq: &mut u64) -> Item {
        loop {
            flusher.flush_if_due();
            let mut g = self.lock();
            if let Some(item) = g.queue.pop_front() {
                return item;
            }
            if !staged.is_empty() {
                // Idle with something staged: it goes once the reader
                // has taken everything before it (a dead reader: it is
                // dropped and counted).
                self.reclaim(&mut g);
                if g.in_flight.is_empty() || !self.alive() {
                    drop(g);
                    let mut copy = |bytes: &[u8]| {
                        self.alive()
                            && self
                                .ring()
                                .is_some_and(|r| self.publish_copy(r, bytes, false))
                    };
                    self.ship_staged(staged, seq, &mut copy);
                    continue;
                }
            }
            let mut wait = flusher.left();
            if !staged.is_empty() {
                wait = Some(wait.map_or(STAGE_LOOK, |w| w.min(STAGE_LOOK)));
            }
            g = match wait {
                Some(wait) => {
                    self.work
                        .wait_timeout(g, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.work.wait(g).unwrap_or_else(|p| p.into_inner()),
            };
            if let Some(item) = g.queue.pop_front() {
                return item;
            }
        }
    }

    /// Sends `bytes` through the ring if there is one, else the transport;
    /// false if they could not go. A failing transport marks the stream
    /// dead and tells `on_failure`.
    fn send_out(
        &self,
        transport: &mut dyn Transport,
        on_failure: &dyn Fn(&str),
        ending: bool,
        bytes: &[u8],
    ) -> bool {
        if !self.alive() {
            return false;
        }
        if let Some(r) = self.ring() {
            return self.publish_copy(r, bytes, ending);
        }
        match transport.send(bytes) {
            Ok(()) => true,
            Err(e) => {
                self.alive.store(false, Ordering::Relaxed);
                // Wake lossless waiters: they must not wait on a dead server.
                self.freed.notify_all();
                on_failure(&e.to_string());
                false
            }
        }
    }

    /// A full (or flushed) buffer of `events` events: its sampled-out
    /// events go as totals, and the rest as a pack, or staged with other
    /// small packs while a ring's reader lags.
    fn ship_queued_pack(
        &self,
        buf: Buf,
        events: usize,
        staged: &mut Staged,
        seq: &mut u64,
        send: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        // Sampled out: the events after the switch go as totals.
        let (kept, counts) = self.split_counted(buf, events);
        if !counts.is_empty() {
            self.ship_staged(staged, seq, send);
        }
        if !counts.is_empty() && !send(&counts) {
            self.dropped
                .fetch_add((events - kept) as u64, Ordering::Relaxed);
        }
        if kept == 0 {
            self.release(buf);
            return;
        }
        // A pack of samples stays one of its own (`hark_wire::accounted`).
        let small = kept == events
            && kept <= capacity(self.pack_size) / SMALL_PACK
            && self.accounted(buf, events) > 0
            && self.ring().is_some()
            && self.alive();
        if small {
            if let Some((s, n)) = self.to_stage(staged, buf, kept) {
                // The stage was full: it goes (after the
                // definitions its events may use).
                self.ship_defs(staged, send);
                self.ship_pack(s, n, seq, send);
            }
            return;
        }
        // What was gathered goes first: the stream keeps its order.
        self.ship_staged(staged, seq, send);
        self.ship_pack(buf, kept, seq, send);
    }

    /// A frame other than a pack: definitions are staged on a live ring,
    /// anything else goes after what is staged.
    fn ship_bytes(
        &self,
        bytes: Vec<u8>,
        staged: &mut Staged,
        seq: &mut u64,
        send: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        if self.ring().is_some() && self.alive() && is_defs(&bytes) {
            staged.defs_bytes += bytes.len();
            staged.defs.push(bytes);
            if staged.defs_bytes >= self.pack_size / 2 {
                self.ship_defs(staged, send);
            }
            return;
        }
        self.ship_staged(staged, seq, send);
        send(&bytes);
    }

    /// The end of the stream: what is staged, then the `End` frame with
    /// the totals; anything queued behind it is dropped and counted.
    fn ship_end(
        &self,
        reason: EndReason,
        staged: &mut Staged,
        seq: &mut u64,
        send: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        self.ship_staged(staged, seq, send);
        let mut g = self.lock();
        // Anything queued behind the end cannot be sent any more.
        let behind: Vec<Item> = g.queue.drain(..).collect();
        for item in behind {
            if let Item::Pack { buf, events } = item {
                let n = self.accounted(buf, events);
                self.dropped.fetch_add(n, Ordering::Relaxed);
                g.free.push(buf);
            }
        }
        g.done = true;
        drop(g);
        let end = End {
            events_written: self.written.load(Ordering::Relaxed),
            events_dropped: self.dropped.load(Ordering::Relaxed),
            packs_sent: self.packs.load(Ordering::Relaxed),
            reason,
        };
        let mut bytes = Vec::new();
        end.encode(&mut bytes);
        match self.ring() {
            // Its own slot: the End never waits for the reader.
            Some(r) if self.alive() => {
                let slot = r.end_slot();
                r.w.set_state(slot, SlotState::Other);
                r.w.slot_mut(slot)[..bytes.len()].copy_from_slice(&bytes);
                r.w.publish(slot, bytes.len());
            }
            _ => {
                send(&bytes);
            }
        }
    }
}

/// Asks the program's threads for their partial buffers every `every`, if
/// set.
struct Flusher<'f> {
    every: Option<Duration>,
    last: Instant,
    flush: &'f dyn Fn(),
}

impl Flusher<'_> {
    fn flush_if_due(&mut self) {
        if let Some(every) = self.every {
            if self.last.elapsed() >= every {
                (self.flush)();
                self.last = Instant::now();
            }
        }
    }

    /// How long until the next flush (at least 1 ms), if there are any.
    fn left(&self) -> Option<Duration> {
        self.every
            .map(|every| every.saturating_sub(self.last.elapsed()))
            .map(|left| left.max(Duration::from_millis(1)))
    }
}

impl Ship {
    /// Sends the pack of `events` events in `buf` as pack number `seq`: in
    /// place on a live ring (the reader gives the slot back), else through
    /// `send` (counted as dropped if that fails), after which the buffer
    /// returns to the pool.
    fn ship_pack(
        &self,
        buf: Buf,
        events: usize,
        seq: &mut u64,
        send: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        let len = PACK_FRONT + events * EVENT_SIZE;
        // SAFETY: the buffer is `pack_size` bytes, owned by the shipper
        // until released, and `events` fit in it.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.0, len) };
        write_pack_header(bytes, *seq, events);
        let slot = self.ring().and_then(|r| Some((r, r.w.slot_of(buf.0)?)));
        if let (Some((r, slot)), true) = (slot, self.alive()) {
            let n = r.w.publish(slot, len);
            self.lock().in_flight.push_back((n, buf));
            *seq += 1;
            self.packs.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if send(bytes) {
            *seq += 1;
            self.packs.fetch_add(1, Ordering::Relaxed);
        } else {
            let n = self.accounted(buf, events);
            self.dropped.fetch_add(n, Ordering::Relaxed);
        }
        self.release(buf);
    }

    /// Adds a small pack to the stage: its buffer becomes the stage if
    /// there is none, else its events are copied behind the stage's and
    /// the buffer goes back to the pool at once. Returns a stage too full
    /// to take them, to be shipped (the pack then starts the next one).
    fn to_stage(&self, staged: &mut Staged, buf: Buf, events: usize) -> Option<(Buf, usize)> {
        let Some((s, n)) = staged.pack else {
            staged.pack = Some((buf, events));
            return None;
        };
        if n + events > capacity(self.pack_size) {
            staged.pack = Some((buf, events));
            return Some((s, n));
        }
        let bytes = events * EVENT_SIZE;
        // SAFETY: both buffers are `pack_size` bytes and owned by the
        // shipper; `n + events` records fit in the stage. The stage is a
        // `Filling` slot whose records run on from `PACK_FRONT`, so a
        // reader that finds this process dead counts them
        // (`abandoned_events`). The pack's records are zeroed before its
        // buffer is reused, so that they are not counted twice.
        unsafe {
            let from = buf.0.add(PACK_FRONT);
            std::ptr::copy_nonoverlapping(from, s.0.add(PACK_FRONT + n * EVENT_SIZE), bytes);
            std::ptr::write_bytes(from, 0, bytes);
        }
        self.release(buf);
        staged.pack = Some((s, n + events));
        None
    }

    /// Sends the staged definitions, as few messages as fit in slots.
    fn ship_defs(&self, staged: &mut Staged, send: &mut dyn FnMut(&[u8]) -> bool) {
        let mut chunk = Vec::new();
        for frame in staged.defs.drain(..) {
            if !chunk.is_empty() && chunk.len() + frame.len() > self.pack_size {
                send(&chunk);
                chunk.clear();
            }
            chunk.extend_from_slice(&frame);
        }
        if !chunk.is_empty() {
            send(&chunk);
        }
        staged.defs_bytes = 0;
    }

    /// Sends everything staged: the definitions, then the gathered packs.
    fn ship_staged(&self, staged: &mut Staged, seq: &mut u64, send: &mut dyn FnMut(&[u8]) -> bool) {
        self.ship_defs(staged, send);
        if let Some((s, n)) = staged.pack.take() {
            self.ship_pack(s, n, seq, send);
        }
    }

    /// Copies encoded frames (definitions, `End`) into ring slots of their
    /// own and publishes them; false if the reader is gone. `ending`: the
    /// stream is ending, and pool buffers may serve as well.
    fn publish_copy(&self, r: &RingOut, bytes: &[u8], ending: bool) -> bool {
        for part in shm::fit(bytes.to_vec(), self.pack_size) {
            if part.len() > self.pack_size {
                crate::core::warn_once(
                    "frame-too-big",
                    &format!(
                        "a frame of {} bytes does not fit a {}-byte buffer and was not sent; \
                         raise {}",
                        part.len(),
                        self.pack_size,
                        hark_settings::PACK_SIZE.name
                    ),
                );
                continue;
            }
            let Some(buf) = self.slot_for_copy(r, ending) else {
                return false;
            };
            let slot = r.w.slot_of(buf.0).expect("ring buffers are ring slots");
            r.w.set_state(slot, SlotState::Other);
            r.w.slot_mut(slot)[..part.len()].copy_from_slice(&part);
            let n = r.w.publish(slot, part.len());
            self.lock().in_flight.push_back((n, buf));
        }
        true
    }

    /// A free slot for `publish_copy`: one of those kept for copies, as
    /// soon as the reader releases one; `None` once the reader is gone.
    /// A pool buffer only once the stream is `ending`: before that, a
    /// frame of a few bytes would hold a whole slot the program's threads
    /// need for their events, and while the shipper waits here the frames
    /// queued behind gather into the next copy. At the end, a free buffer
    /// saves waiting for a reader that lags (a launcher may kill the
    /// process soon after another exits).
    fn slot_for_copy(&self, r: &RingOut, ending: bool) -> Option<Buf> {
        loop {
            let mut g = self.lock();
            self.reclaim(&mut g);
            let pool = if ending { g.free.pop() } else { None };
            if let Some(b) = g.copy_free.pop().or(pool) {
                return Some(b);
            }
            drop(g);
            if !self.alive() {
                return None;
            }
            self.wait_for_reader(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_wire::{Def, Event, Frame, FrameReader};
    use std::sync::{Arc, Mutex as StdMutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<StdMutex<Vec<u8>>>, Option<usize>);

    impl Transport for Capture {
        fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            let mut v = hark_sync::lock(&self.0);
            if let Some(limit) = self.1 {
                if v.len() + bytes.len() > limit {
                    return Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
                }
            }
            v.extend_from_slice(bytes);
            Ok(())
        }
        fn close(&mut self) {}
    }

    fn fill(ship: &Ship, n: usize) -> Buf {
        let buf = ship.take_buffer().unwrap();
        for i in 0..n {
            let ev = Event::new(0x503, i as u64, i as u64 + 1);
            // SAFETY: test buffers hold far more than n events.
            unsafe { (buf.0.add(PACK_FRONT) as *mut Event).add(i).write(ev) };
        }
        buf
    }

    fn decode(bytes: &[u8]) -> (Vec<(u64, usize)>, Option<End>) {
        let mut r = FrameReader::new(bytes);
        let (mut packs, mut end) = (Vec::new(), None);
        while let Some(f) = r.next_frame().unwrap() {
            match f {
                Frame::Pack { seq, events } => packs.push((seq, events.len())),
                Frame::End(e) => end = Some(e),
                _ => {}
            }
        }
        (packs, end)
    }

    #[test]
    fn packs_go_out_in_order_with_totals_at_the_end() {
        let ship = Arc::new(Ship::new(4096, 4, false));
        let cap = Capture::default();
        let s = ship.clone();
        let c = cap.clone();
        let t = std::thread::spawn(move || s.run(Box::new(c), &|_| {}, None, &|| {}));
        for n in [3, 5, 0, 7] {
            let b = fill(&ship, n);
            ship.push_pack(b, n);
        }
        ship.push_end(EndReason::Exit);
        assert!(ship.wait_done(Duration::from_secs(5)));
        t.join().unwrap();
        let (packs, end) = decode(&hark_sync::lock(&cap.0));
        assert_eq!(packs, vec![(0, 3), (1, 5), (2, 7)]);
        let end = end.unwrap();
        assert_eq!(
            (end.events_written, end.events_dropped, end.packs_sent),
            (15, 0, 3)
        );
    }

    /// Regression: under load, a forking Python rank under MPICH dropped 7
    /// to 22 of its ~424 events through the ring. Each flush (fork, thread
    /// exit) and each definition took a whole slot while the server's
    /// reader was not scheduled, and the pool of 8 was gone.
    #[test]
    fn flushes_and_definitions_leave_the_pool_to_the_program_while_the_ring_reader_lags() {
        let pack_size = 64 * 1024;
        let (w, fd) = hark_ring::Writer::create(shm::slots(8, pack_size), pack_size).unwrap();
        let mut pair = [0; 2];
        // SAFETY: a socket pair into a local array; `pair[1]` stays open
        // (a reader that lives, but is not scheduled).
        let made =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr()) };
        assert_eq!(made, 0);
        let socket: &'static transport::SharedFd = Box::leak(Box::new(transport::SharedFd::new()));
        socket.set(pair[0]);
        let ship = Arc::new(Ship::new(pack_size, 8, false));
        ship.use_ring(RingOut::for_test(w, socket));
        let s = ship.clone();
        let t =
            std::thread::spawn(move || s.run(Box::new(Capture::default()), &|_| {}, None, &|| {}));
        // 40 rounds of a definition and a flush of 3 events: the rank's
        // pattern, ten times over, with nobody reading.
        for i in 0..40u32 {
            let mut def = Vec::new();
            Def::encode_all(
                &[Def::File {
                    id: i,
                    path: format!("task-{i}.out"),
                }],
                &mut def,
            );
            ship.push_bytes(def);
            let b = ship
                .take_buffer()
                .unwrap_or_else(|| panic!("no buffer for flush {i}: the pool is used up"));
            ship.push_pack(fill_at(b, 3), 3);
            // The shipper runs (the reader is what lags here).
            while !ship.lock().queue.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        ship.push_end(EndReason::Exit);
        // The reader comes at last: everything, in order, nothing dropped.
        let reader = hark_ring::Reader::open(fd).unwrap();
        let (mut files, mut events, mut end) = (Vec::new(), 0, None);
        while end.is_none() {
            let msg = reader
                .next(Duration::from_secs(5))
                .unwrap()
                .expect("a message");
            let mut r = FrameReader::new(&msg.bytes[..]);
            while let Some(f) = r.next_frame().unwrap() {
                match f {
                    Frame::Defs(d) => files.extend(d.iter().map(|d| match d {
                        Def::File { id, .. } => *id,
                        _ => u32::MAX,
                    })),
                    Frame::Pack { events: e, .. } => {
                        // A pack's events come after the definitions
                        // queued before it.
                        assert!(
                            files.len() * 3 >= events + e.len(),
                            "events before their definition"
                        );
                        events += e.len();
                    }
                    Frame::End(e) => end = Some(e),
                    _ => {}
                }
            }
            reader.release(msg);
        }
        assert!(ship.wait_done(Duration::from_secs(5)));
        t.join().unwrap();
        assert_eq!(files, (0..40).collect::<Vec<_>>());
        assert_eq!(events, 120);
        let end = end.unwrap();
        assert_eq!((end.events_written, end.events_dropped), (120, 0));
        // SAFETY: our own descriptors.
        unsafe { libc::close(pair[1]) };
    }

    #[test]
    fn a_dead_transport_turns_events_into_drops_and_never_blocks() {
        let ship = Arc::new(Ship::new(4096, 2, true));
        // Room for one pack only, then the "server" dies.
        let cap = Capture(Default::default(), Some(PACK_FRONT + 10 * EVENT_SIZE));
        let s = ship.clone();
        let c = cap.clone();
        let t = std::thread::spawn(move || s.run(Box::new(c), &|_| {}, None, &|| {}));
        for _ in 0..20 {
            // Lossless, but must not wait forever once the server is gone.
            match ship.take_buffer() {
                Some(b) => {
                    let b2 = fill_at(b, 10);
                    ship.push_pack(b2, 10);
                }
                None => {
                    ship.written.fetch_add(10, Ordering::Relaxed);
                    ship.dropped.fetch_add(10, Ordering::Relaxed);
                }
            }
        }
        ship.push_end(EndReason::Exit);
        assert!(ship.wait_done(Duration::from_secs(5)));
        t.join().unwrap();
        assert_eq!(ship.written.load(Ordering::Relaxed), 200);
        assert_eq!(ship.dropped.load(Ordering::Relaxed), 190);
        let (packs, _) = decode(&hark_sync::lock(&cap.0));
        assert_eq!(packs, vec![(0, 10)]);
    }

    #[test]
    fn a_sampled_out_shipper_sends_the_events_after_the_switch_as_totals() {
        let ship = Arc::new(Ship::new(4096, 4, false));
        let cap = Capture::default();
        let s = ship.clone();
        let c = cap.clone();
        let t = std::thread::spawn(move || s.run(Box::new(c), &|_| {}, None, &|| {}));
        // The shipper reads the state as it takes each pack: wait for it.
        let sent = |n: usize| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while hark_sync::lock(&cap.0).len() < n {
                assert!(Instant::now() < deadline, "the shipper sent nothing");
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let counts_frame = HEADER_SIZE + hark_wire::COUNTS_FIXED_SIZE + hark_wire::COUNT_SIZE;
        // Events i end at i + 1: those ending before 3 go as a pack.
        ship.set_counting(true, ClockSource::Monotonic, 3);
        let b = fill(&ship, 7);
        ship.push_pack(b, 7);
        sent(PACK_FRONT + 2 * EVENT_SIZE + counts_frame);
        // Sampled out again: the first switch time (3) stays, not 100.
        ship.set_counting(true, ClockSource::Monotonic, 100);
        let b = fill(&ship, 4);
        ship.push_pack(b, 4);
        sent(2 * (PACK_FRONT + 2 * EVENT_SIZE + counts_frame));
        // Back to full detail.
        ship.set_counting(false, ClockSource::Monotonic, 0);
        let b = fill(&ship, 5);
        ship.push_pack(b, 5);
        ship.push_end(EndReason::Exit);
        assert!(ship.wait_done(Duration::from_secs(5)));
        t.join().unwrap();
        let bytes = hark_sync::lock(&cap.0);
        let mut r = FrameReader::new(&bytes[..]);
        let mut packs = Vec::new();
        let mut counted = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            match f {
                Frame::Pack { events, .. } => packs.push(events.len()),
                Frame::Counts(c) => counted.push((c.events, c.since_ns, c.until_ns, c.cells)),
                _ => {}
            }
        }
        assert_eq!(
            packs,
            vec![2, 2, 5],
            "the leads of two buffers, then the last"
        );
        assert_eq!(counted.len(), 2);
        // Events 2..7 of the first buffer: starts 2..=6, each 1 ns.
        assert_eq!((counted[0].0, counted[0].1, counted[0].2), (5, 2, 7));
        let cell = counted[0].3[0];
        assert_eq!((cell.op, cell.calls, cell.time_ns), (0x503, 5, 5));
        assert_eq!(counted[1].0, 2, "switched at 3, not at 100");
        assert_eq!(ship.dropped.load(Ordering::Relaxed), 0);
    }

    fn fill_at(buf: Buf, n: usize) -> Buf {
        for i in 0..n {
            // SAFETY: test buffers hold far more than n events.
            unsafe {
                (buf.0.add(PACK_FRONT) as *mut Event)
                    .add(i)
                    .write(Event::new(0x503, 0, 1))
            };
        }
        buf
    }
}
