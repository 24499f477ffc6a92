//! The node-local shared-memory ring between one probe (the writer) and
//! one reader (the analysis server, or later an analyser rank).
//!
//! A ring is one `memfd` mapped by both processes: a header page, a queue of
//! published messages, a state word per slot, and `slots` fixed-size slots.
//! The writer owns every slot it has not published: the probe's threads fill
//! pack buffers *in* the slots, so publishing a pack copies nothing. The
//! reader reads each published slot in place, in order, then releases it;
//! the writer reclaims released slots by watching one counter. Both sides
//! sleep on a futex in the shared page when there is nothing to do, and the
//! other side wakes them only when they said they sleep.
//!
//! - [`Writer`]: [`Writer::create`] makes the ring and its descriptor (to
//!   hand over with `SCM_RIGHTS`); [`Writer::publish`] queues a slot,
//!   [`Writer::consumed`] says how far the reader got.
//! - [`Reader`]: [`Reader::open`] maps a handed-over descriptor and checks
//!   its header; [`Reader::next`] waits for the next message, which is read
//!   in place and given back with [`Reader::release`];
//!   [`Reader::abandoned_events`] counts what a dead writer left in slots it
//!   never published.
//!
//! The layout is in `docs/wire.md`, section "Shared-memory ring".
//!
//! ```
//! use hark_ring::{Reader, SlotState, Writer};
//! use std::time::Duration;
//!
//! let (w, fd) = Writer::create(4, 4096).unwrap();
//! w.slot_mut(2)[..5].copy_from_slice(b"hello");
//! w.set_state(2, SlotState::Filling);
//! w.publish(2, 5);
//!
//! let r = Reader::open(fd).unwrap();
//! let m = r.next(Duration::from_millis(10)).unwrap().unwrap();
//! assert_eq!((m.slot, &m.bytes[..]), (2, &b"hello"[..]));
//! r.release(m);
//! assert_eq!(w.consumed(), 1);
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// The first eight bytes of a ring.
pub const MAGIC: [u8; 8] = *b"HARKRING";
/// The layout's version, in the header after the magic.
pub const VERSION: u32 = 1;
/// Most slots a ring may have.
pub const MAX_SLOTS: u32 = 4096;
/// Largest slot (the probe's largest pack).
pub const MAX_SLOT_SIZE: usize = 64 << 20;
/// Bytes of the header page.
const PAGE: usize = 4096;
/// Bytes of one event record: what [`Reader::abandoned_events`] counts in.
const RECORD: usize = 48;

// Header offsets. Counters sit on their own cache lines.
const AT_VERSION: usize = 8;
const AT_SLOTS: usize = 12;
const AT_SLOT_SIZE: usize = 16;
const AT_DATA: usize = 24;
const AT_RECORDS: usize = 32;
const AT_HEAD: usize = 64;
const AT_READER_SLEEPS: usize = 72;
const AT_TAIL: usize = 128;
const AT_WRITER_SLEEPS: usize = 136;

/// Who holds a slot, as the writer announces it (the reader reads it only
/// to count what a dead writer left behind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SlotState {
    /// With the writer, unused; its bytes are zero.
    Free = 0,
    /// With the writer: event records are being written into it from
    /// [`Writer::set_records_at`] on, one after another.
    Filling = 1,
    /// With the writer: it holds another kind of message being prepared.
    Other = 2,
    /// Published: with the reader until released (the reader zeroes the
    /// bytes it was given and sets it back to `Free`).
    Published = 3,
}

/// Why a descriptor could not be opened as a ring.
#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// One mapping of a ring, with its geometry.
struct Map {
    base: *mut u8,
    len: usize,
    slots: u32,
    slot_size: usize,
    data: usize,
    records_at: usize,
}

// SAFETY: the mapping is shared memory that lives as long as `Map`; every
// cross-thread access goes through atomics or through slots whose owner the
// protocol decides.
unsafe impl Send for Map {}
// SAFETY: as above.
unsafe impl Sync for Map {}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` is our own mapping, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Where the queue and the state words start, and where slot 0 starts.
fn geometry(slots: u32) -> (usize, usize, usize) {
    let queue = PAGE;
    let states = queue + slots as usize * 8;
    let data = (states + slots as usize * 4).div_ceil(PAGE) * PAGE;
    (queue, states, data)
}

impl Map {
    fn u64_at(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is an 8-aligned offset inside the header page, which
        // lives as long as `self`.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    fn u32_at(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is a 4-aligned offset inside the header or the state
        // array, which live as long as `self`.
        unsafe { &*(self.base.add(at) as *const AtomicU32) }
    }

    fn entry(&self, n: u64) -> &AtomicU64 {
        let (queue, _, _) = geometry(self.slots);
        self.u64_at(queue + (n % self.slots as u64) as usize * 8)
    }

    fn state(&self, slot: u32) -> &AtomicU32 {
        let (_, states, _) = geometry(self.slots);
        self.u32_at(states + slot as usize * 4)
    }

    fn slot_ptr(&self, slot: u32) -> *mut u8 {
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        // SAFETY: in bounds: the mapping holds `slots` slots from `data`.
        unsafe { self.base.add(self.data + slot as usize * self.slot_size) }
    }

    fn head(&self) -> &AtomicU64 {
        self.u64_at(AT_HEAD)
    }

    fn tail(&self) -> &AtomicU64 {
        self.u64_at(AT_TAIL)
    }
}

fn map_shared(fd: &OwnedFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of a descriptor we hold; the kernel
    // picks the address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Sleeps on `word` while it holds `expected`, at most `timeout`.
fn futex_wait(word: &AtomicU64, expected: u64, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the futex word is the low half of a live, aligned shared
    // counter (little-endian); a shared (not private) futex, since the other
    // side is another process.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr() as *const u32,
            libc::FUTEX_WAIT,
            expected as u32,
            &ts as *const libc::timespec,
        )
    };
}

fn futex_wake(word: &AtomicU64) {
    // SAFETY: as in `futex_wait`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr() as *const u32,
            libc::FUTEX_WAKE,
            i32::MAX,
        )
    };
}

/// Waits until `counter` moves past `seen` or `timeout` passes, telling the
/// other side through `sleeps` that it must wake us.
fn wait_past(counter: &AtomicU64, sleeps: &AtomicU32, seen: u64, timeout: Duration) {
    sleeps.store(1, Ordering::SeqCst);
    // The store above and the load below are ordered against the other
    // side's store of the counter and load of `sleeps` (both SeqCst): one
    // of us sees the other, so a wake is never lost.
    if counter.load(Ordering::SeqCst) == seen {
        futex_wait(counter, seen, timeout);
    }
    sleeps.store(0, Ordering::Relaxed);
}

/// Bumps `counter` and wakes the other side if it sleeps on it.
fn advance(counter: &AtomicU64, sleeps: &AtomicU32) {
    counter.fetch_add(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if sleeps.load(Ordering::SeqCst) != 0 {
        futex_wake(counter);
    }
}

/// What the Unix socket beside a ring says about the other side. Neither
/// side writes to it once the ring is handed over, so it is how each sees
/// the other die: its end arrives when the peer closes it or exits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Nothing to read: the peer is there.
    Alive,
    /// The socket reached its end, or failed: the peer is gone.
    Gone,
    /// Bytes arrived, which the protocol does not allow.
    Spoke,
}

/// Looks at the socket `fd` without waiting or consuming anything.
pub fn peer(fd: std::os::fd::RawFd) -> Peer {
    if fd < 0 {
        return Peer::Gone;
    }
    let mut b = [0u8; 1];
    // SAFETY: peeks at most one byte into a live buffer, without waiting.
    let n = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => Peer::Gone,
        1 => Peer::Spoke,
        _ => match io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Peer::Alive,
            _ => Peer::Gone,
        },
    }
}

/// Sends all of `bytes` on the Unix stream socket `socket`, with the
/// descriptor `fd` attached to the first part (`SCM_RIGHTS`, without
/// `SIGPIPE`): how a writer hands a ring over, after its frames.
pub fn send_with_fd(socket: RawFd, mut bytes: &[u8], fd: RawFd) -> io::Result<()> {
    let mut control = [0u64; 4];
    let mut first = true;
    while !bytes.is_empty() {
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: msghdr is plain data; all zeroes is a valid empty value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if first {
            // SAFETY: CMSG_SPACE is a pure computation.
            let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space;
            // SAFETY: `control` is large enough for one descriptor's
            // control message, which we fill in.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
                (libc::CMSG_DATA(c) as *mut RawFd).write_unaligned(fd);
            }
        }
        // SAFETY: `msg` points at live buffers of the sizes it gives.
        let n = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        first = false;
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The writing end: the probe.
pub struct Writer(Map);

impl Writer {
    /// Creates a ring of `slots` slots of `slot_size` bytes in a new,
    /// close-on-exec `memfd`, mapped here. Returns the writer and the
    /// descriptor to hand to the reader (the mapping does not need it:
    /// close it once handed over). Pages cost memory only once
    /// touched. `records_at` is 0; see [`Writer::set_records_at`].
    pub fn create(slots: u32, slot_size: usize) -> io::Result<(Writer, OwnedFd)> {
        if !(1..=MAX_SLOTS).contains(&slots) || !(PAGE..=MAX_SLOT_SIZE).contains(&slot_size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a ring needs 1 to {MAX_SLOTS} slots of 4 KiB to 64 MiB, not {slots} of {slot_size} bytes"
                ),
            ));
        }
        let (_, _, data) = geometry(slots);
        let len = data + slots as usize * slot_size;
        // SAFETY: a NUL-terminated name; flags are valid.
        let raw = unsafe { libc::memfd_create(c"hark-ring".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: plain ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let base = map_shared(&fd, len)?;
        let map = Map {
            base,
            len,
            slots,
            slot_size,
            data,
            records_at: 0,
        };
        // SAFETY: the header page is ours alone until the descriptor is
        // handed over; the fields are in bounds.
        unsafe {
            base.copy_from_nonoverlapping(MAGIC.as_ptr(), 8);
            base.add(AT_VERSION).cast::<u32>().write(VERSION);
            base.add(AT_SLOTS).cast::<u32>().write(slots);
            base.add(AT_SLOT_SIZE).cast::<u64>().write(slot_size as u64);
            base.add(AT_DATA).cast::<u64>().write(data as u64);
        }
        Ok((Writer(map), fd))
    }

    /// Says where event records start in a `Filling` slot (the probe's pack
    /// header comes first), for [`Reader::abandoned_events`]. Call before
    /// handing the descriptor over.
    pub fn set_records_at(&mut self, at: usize) {
        self.0.records_at = at.min(self.0.slot_size);
        self.0
            .u64_at(AT_RECORDS)
            .store(at as u64, Ordering::Relaxed);
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.0.slots
    }

    /// Where slot `slot` starts. The writer may write it while it holds
    /// the slot (not published, or published and since consumed).
    ///
    /// # Panics
    /// If `slot` is not below [`slots`](Writer::slots).
    pub fn slot_ptr(&self, slot: u32) -> *mut u8 {
        self.0.slot_ptr(slot)
    }

    /// Slot `slot` as bytes, for a writer that holds it.
    #[allow(clippy::mut_from_ref)]
    pub fn slot_mut(&self, slot: u32) -> &mut [u8] {
        // SAFETY: the slot is in bounds; the caller holds it, so nobody else
        // writes it while the borrow lives.
        unsafe { std::slice::from_raw_parts_mut(self.0.slot_ptr(slot), self.0.slot_size) }
    }

    /// The slot that contains `p`, if any.
    pub fn slot_of(&self, p: *const u8) -> Option<u32> {
        let start = self.0.slot_ptr(0) as usize;
        let off = (p as usize).checked_sub(start)?;
        let slot = off / self.0.slot_size;
        (slot < self.0.slots as usize).then_some(slot as u32)
    }

    /// Announces who holds `slot` (see [`SlotState`]).
    pub fn set_state(&self, slot: u32, state: SlotState) {
        self.0.state(slot).store(state as u32, Ordering::Relaxed);
    }

    /// Publishes the first `len` bytes of `slot` as the next message and
    /// returns its number (0, 1, ...). One thread publishes at a time (the
    /// caller serialises). The slot is the reader's until
    /// [`consumed`](Writer::consumed) passes that number.
    ///
    /// # Panics
    /// If `len` exceeds the slot, or the queue is full (more messages
    /// unconsumed than slots: impossible while each holds its own slot).
    pub fn publish(&self, slot: u32, len: usize) -> u64 {
        assert!(
            len <= self.0.slot_size,
            "{len} bytes in a slot of {}",
            self.0.slot_size
        );
        let m = &self.0;
        let n = m.head().load(Ordering::Relaxed);
        assert!(
            n - m.tail().load(Ordering::Acquire) < m.slots as u64,
            "ring queue full"
        );
        m.state(slot)
            .store(SlotState::Published as u32, Ordering::Relaxed);
        m.entry(n)
            .store(((slot as u64) << 32) | len as u64, Ordering::Relaxed);
        // `advance` is SeqCst: the entry and the slot's bytes are visible
        // before the new head.
        advance(m.head(), m.u32_at(AT_READER_SLEEPS));
        n
    }

    /// Messages published so far.
    pub fn published(&self) -> u64 {
        self.0.head().load(Ordering::Relaxed)
    }

    /// Messages the reader has released: every message numbered below this
    /// has given its slot back (zeroed, state `Free`).
    pub fn consumed(&self) -> u64 {
        self.0.tail().load(Ordering::Acquire)
    }

    /// Waits until [`consumed`](Writer::consumed) moves past `seen`, or
    /// `timeout` passes.
    pub fn wait_consumed(&self, seen: u64, timeout: Duration) {
        wait_past(
            self.0.tail(),
            self.0.u32_at(AT_WRITER_SLEEPS),
            seen,
            timeout,
        );
    }
}

/// One published message, read in place. Give it back with
/// [`Reader::release`].
pub struct Message<'a> {
    /// The slot it is in.
    pub slot: u32,
    /// Its bytes, in the shared mapping. The reader may change them (the
    /// server converts timestamps in place); the writer does not touch them
    /// until released. A writer that breaks that rule can only garble its
    /// own stream.
    pub bytes: &'a mut [u8],
}

/// The reading end: the server.
pub struct Reader(Map);

impl Reader {
    /// Maps the ring behind `fd` (handed over by a writer) and checks its
    /// header against the descriptor's size; `fd` is closed on return.
    pub fn open(fd: OwnedFd) -> Result<Reader, Error> {
        let bad = |what: String| Error(format!("the shared-memory ring is unusable: {what}"));
        // SAFETY: `st` is a writable stat buffer; `fd` is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(bad(format!("fstat failed: {}", io::Error::last_os_error())));
        }
        let size = st.st_size as usize;
        if size < PAGE {
            return Err(bad(format!("{size} bytes, less than its header page")));
        }
        let base = map_shared(&fd, PAGE).map_err(|e| bad(format!("mmap failed: {e}")))?;
        let mut head = [0u8; 40];
        // SAFETY: the first page is mapped; we copy 40 bytes out of it.
        unsafe { head.as_mut_ptr().copy_from_nonoverlapping(base, 40) };
        // SAFETY: unmaps the page just mapped.
        unsafe { libc::munmap(base.cast(), PAGE) };
        let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
        if head[..8] != MAGIC {
            return Err(bad("its first bytes are not HARKRING".into()));
        }
        if u32_at(AT_VERSION) != VERSION {
            return Err(bad(format!(
                "layout version {}, this reader knows {VERSION}",
                u32_at(AT_VERSION)
            )));
        }
        let slots = u32_at(AT_SLOTS);
        let slot_size = u64_at(AT_SLOT_SIZE) as usize;
        let data = u64_at(AT_DATA) as usize;
        let records_at = u64_at(AT_RECORDS) as usize;
        if !(1..=MAX_SLOTS).contains(&slots) || !(PAGE..=MAX_SLOT_SIZE).contains(&slot_size) {
            return Err(bad(format!("{slots} slots of {slot_size} bytes")));
        }
        if data != geometry(slots).2 || records_at > slot_size {
            return Err(bad(format!(
                "data at {data} and records at {records_at} do not fit {slots} slots"
            )));
        }
        let len = data + slots as usize * slot_size;
        if size < len {
            return Err(bad(format!("{size} bytes, {len} needed")));
        }
        let base = map_shared(&fd, len).map_err(|e| bad(format!("mmap failed: {e}")))?;
        Ok(Reader(Map {
            base,
            len,
            slots,
            slot_size,
            data,
            records_at,
        }))
    }

    /// The next published message, waiting up to `timeout` for one;
    /// `Err` if the writer published a slot or length out of bounds.
    /// Messages come in order; release each before asking for the next.
    pub fn next(&self, timeout: Duration) -> Result<Option<Message<'_>>, Error> {
        let m = &self.0;
        let n = m.tail().load(Ordering::Relaxed);
        if m.head().load(Ordering::Acquire) == n {
            wait_past(m.head(), m.u32_at(AT_READER_SLEEPS), n, timeout);
            if m.head().load(Ordering::Acquire) == n {
                return Ok(None);
            }
        }
        let e = m.entry(n).load(Ordering::Acquire);
        let (slot, len) = ((e >> 32) as u32, (e & 0xffff_ffff) as usize);
        if slot >= m.slots || len > m.slot_size {
            return Err(Error(format!(
                "message {n} names slot {slot} and {len} bytes; the ring has {} slots of {}",
                m.slots, m.slot_size
            )));
        }
        // SAFETY: in bounds (checked); the slot is ours until released.
        let bytes = unsafe { std::slice::from_raw_parts_mut(m.slot_ptr(slot), len) };
        Ok(Some(Message { slot, bytes }))
    }

    /// Gives a message's slot back: zeroes its bytes (so that a slot being
    /// filled always shows how far it got, see
    /// [`abandoned_events`](Reader::abandoned_events)), marks it free and
    /// advances the count the writer watches.
    pub fn release(&self, msg: Message<'_>) {
        msg.bytes.fill(0);
        let m = &self.0;
        m.state(msg.slot)
            .store(SlotState::Free as u32, Ordering::Relaxed);
        advance(m.tail(), m.u32_at(AT_WRITER_SLEEPS));
    }

    /// Messages published and not yet released.
    pub fn pending(&self) -> u64 {
        let m = &self.0;
        m.head().load(Ordering::Acquire) - m.tail().load(Ordering::Relaxed)
    }

    /// For a writer that died: the event records in slots it was still
    /// `Filling` (never published), and how many such slots held any.
    /// A record counts if any of its bytes is not zero, so one the writer
    /// was killed in the middle of counts too.
    pub fn abandoned_events(&self) -> (u64, u64) {
        let m = &self.0;
        let (mut events, mut slots) = (0u64, 0u64);
        for s in 0..m.slots {
            if m.state(s).load(Ordering::Acquire) != SlotState::Filling as u32 {
                continue;
            }
            // SAFETY: in bounds; the writer is gone, nobody writes it.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    m.slot_ptr(s).add(m.records_at),
                    m.slot_size - m.records_at,
                )
            };
            let n = bytes
                .chunks_exact(RECORD)
                .take_while(|r| r.iter().any(|&b| b != 0))
                .count() as u64;
            if n > 0 {
                events += n;
                slots += 1;
            }
        }
        (events, slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_wrap_around_the_queue_in_order() {
        let (w, fd) = Writer::create(3, 4096).unwrap();
        let r = Reader::open(fd).unwrap();
        // Ten rounds over three slots and three queue entries.
        for n in 0..30u64 {
            let slot = (n % 3) as u32;
            w.slot_mut(slot)[..8].copy_from_slice(&n.to_le_bytes());
            assert_eq!(w.publish(slot, 8), n);
            let m = r.next(Duration::ZERO).unwrap().unwrap();
            assert_eq!(
                (m.slot, u64::from_le_bytes(m.bytes[..8].try_into().unwrap())),
                (slot, n)
            );
            r.release(m);
            assert_eq!(w.consumed(), n + 1);
            assert!(
                w.slot_mut(slot).iter().all(|&b| b == 0),
                "released slots are zeroed"
            );
        }
        assert!(r.next(Duration::ZERO).unwrap().is_none());
    }

    #[test]
    fn a_full_queue_waits_for_the_reader_and_resumes() {
        let (w, fd) = Writer::create(2, 4096).unwrap();
        let r = Reader::open(fd).unwrap();
        w.publish(0, 1);
        w.publish(1, 1);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let m = r.next(Duration::ZERO).unwrap().unwrap();
            r.release(m);
            r
        });
        while w.consumed() == 0 {
            w.wait_consumed(0, Duration::from_secs(5));
        }
        let r = t.join().unwrap();
        assert_eq!(r.pending(), 1);
    }

    #[test]
    fn a_dead_writers_unpublished_records_are_counted() {
        let (mut w, fd) = Writer::create(4, 4096).unwrap();
        w.set_records_at(16);
        let r = Reader::open(fd).unwrap();
        // Slot 1: three whole records and one torn one; slot 2: empty;
        // slot 3: published, so the reader has it, not the dead writer.
        w.set_state(1, SlotState::Filling);
        let s = w.slot_mut(1);
        s[16..16 + 3 * 48].fill(7);
        s[16 + 3 * 48 + 40] = 1;
        w.set_state(2, SlotState::Filling);
        w.slot_mut(3)[16] = 1;
        w.publish(3, 64);
        assert_eq!(r.abandoned_events(), (4, 1));
    }

    #[test]
    fn a_descriptor_that_is_not_a_ring_is_refused_with_the_reason() {
        // SAFETY: a plain memfd of one page of zeroes.
        let fd = unsafe {
            let raw = libc::memfd_create(c"x".as_ptr(), libc::MFD_CLOEXEC);
            assert_eq!(libc::ftruncate(raw, 8192), 0);
            OwnedFd::from_raw_fd(raw)
        };
        let e = Reader::open(fd).err().unwrap().to_string();
        assert!(e.contains("HARKRING"), "{e}");
        let (_w, fd) = Writer::create(2, 4096).unwrap();
        // SAFETY: shrinks the ring's file below what its header claims.
        unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) };
        let e = Reader::open(fd).err().unwrap().to_string();
        assert!(e.contains("needed"), "{e}");
    }

    #[test]
    fn a_writer_that_names_a_slot_out_of_bounds_is_an_error_not_a_crash() {
        let (w, fd) = Writer::create(2, 4096).unwrap();
        let r = Reader::open(fd).unwrap();
        w.0.entry(0).store((9u64 << 32) | 1, Ordering::Relaxed);
        w.0.head().store(1, Ordering::SeqCst);
        let e = r.next(Duration::ZERO).err().unwrap().to_string();
        assert!(e.contains("slot 9"), "{e}");
    }
}
