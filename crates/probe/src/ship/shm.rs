//! The node-local path: a shared-memory ring ([`hark_ring`]) instead of
//! copying packs into the socket.
//!
//! At connect, the probe makes a `memfd` ring whose slots *are* its pack
//! buffers, and sends its `Hello` and a `Ring` frame with the descriptor
//! attached (`SCM_RIGHTS`) on the Unix socket. From then on the shipper
//! publishes a full buffer by writing its header and one queue entry: the
//! events stay where the thread wrote them, and the server reads them there.
//! Definitions and the `End` are copied into a slot of their own. A slot
//! comes back to the pool when the reader has released it.
//!
//! The socket stays open and silent: it is how each side sees the other
//! die. The probe treats the reader as gone when the socket reaches its end,
//! or when the reader releases nothing for `HARK_SEND_TIMEOUT_MS` while the
//! probe waits for a slot — as a socket send would time out.
//!
//! Shared memory is used when `HARK_ADDR` is a Unix socket and `HARK_SHM`
//! is not `0`; if the ring cannot be made, the stream falls back to the
//! socket (with a warning when `HARK_SHM=1` asked for it).

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hark_ring::Writer;
use hark_wire::{encode_ring, Def, Frame, Kind, HEADER_SIZE};

use super::transport::SharedFd;
use super::PACK_FRONT;

/// Longest a waiting writer sleeps before it looks at the socket again.
const LOOK: Duration = Duration::from_millis(10);

/// Most bytes of ring slots a process reserves (address space: the pages
/// cost memory only once used, and the pool's bound decides how many are).
const RING_BYTES: usize = 1 << 30;

/// The writing end of a stream's ring.
pub(crate) struct RingOut {
    pub(crate) w: Writer,
    socket: &'static SharedFd,
    send_timeout: Duration,
    /// The reader's last release count seen, and when it changed.
    progress: Mutex<(u64, Instant)>,
}

/// Why the ring could not be handed over.
pub(crate) enum HandOver {
    /// No ring could be made here: stream over the socket instead.
    Unavailable(io::Error),
    /// The socket failed while handing it over: the server is gone.
    Failed(io::Error),
}

/// Slots kept out of the pool for copied frames: two for definitions, and
/// the last one for the `End` alone, so that the `End` never waits for the
/// reader (a launcher may kill a process soon after another exits).
const COPY_SLOTS: u32 = 3;

/// Slots for a pool of at most `buffers` buffers of `pack_size` bytes: room
/// for many threads (the pool grows with them), within [`RING_BYTES`], and
/// [`COPY_SLOTS`] more.
pub(crate) fn slots(buffers: usize, pack_size: usize) -> u32 {
    let roomy = (RING_BYTES / pack_size).min(1024);
    let pool = buffers
        .max(roomy)
        .min((hark_ring::MAX_SLOTS - COPY_SLOTS) as usize);
    pool as u32 + COPY_SLOTS
}

impl RingOut {
    /// Makes a ring of `slots` slots of `pack_size` bytes and sends `hello`
    /// and the `Ring` frame, with the ring's descriptor, on `socket`.
    pub(crate) fn hand_over(
        socket: &'static SharedFd,
        hello: &[u8],
        slots: u32,
        pack_size: usize,
        send_timeout: Duration,
    ) -> Result<RingOut, HandOver> {
        let (mut w, fd) = Writer::create(slots, pack_size).map_err(HandOver::Unavailable)?;
        w.set_records_at(PACK_FRONT);
        let mut bytes = hello.to_vec();
        encode_ring(&mut bytes);
        let fd = fd.into_raw_fd();
        let sent = hark_ring::send_with_fd(socket.get(), &bytes, fd);
        // SAFETY: our own descriptor, no longer needed (the mapping holds
        // the memory); the raw syscall bypasses the probe's `close` wrapper.
        unsafe { libc::syscall(libc::SYS_close, fd) };
        sent.map_err(HandOver::Failed)?;
        Ok(RingOut {
            w,
            socket,
            send_timeout,
            progress: Mutex::new((0, Instant::now())),
        })
    }

    /// A ring for a test, over a socket the test holds the other end of.
    #[cfg(test)]
    pub(crate) fn for_test(mut w: Writer, socket: &'static SharedFd) -> RingOut {
        w.set_records_at(PACK_FRONT);
        RingOut {
            w,
            socket,
            send_timeout: Duration::from_secs(60),
            progress: Mutex::new((0, Instant::now())),
        }
    }

    /// Slots below this are pack buffers of the pool; the rest are kept
    /// for copied frames, the last for the `End`.
    pub(crate) fn pool_slots(&self) -> u32 {
        self.w.slots().saturating_sub(COPY_SLOTS)
    }

    /// The slot kept for the `End`, published once and never reused.
    pub(crate) fn end_slot(&self) -> u32 {
        self.w.slots() - 1
    }

    /// Waits a little for the reader to release a slot. `Err` says why the
    /// reader counts as gone: its socket ended, or it released nothing for
    /// the send timeout.
    pub(crate) fn wait_for_reader(&self) -> Result<(), String> {
        let seen = self.w.consumed();
        self.w.wait_consumed(seen, LOOK);
        let now = self.w.consumed();
        let mut p = hark_sync::lock(&self.progress);
        if now != p.0 {
            *p = (now, Instant::now());
            return Ok(());
        }
        drop(p);
        self.reader_alive()?;
        let p = hark_sync::lock(&self.progress);
        if p.1.elapsed() >= self.send_timeout {
            return Err(format!(
                "the server took nothing from shared memory for {} ms",
                self.send_timeout.as_millis()
            ));
        }
        Ok(())
    }

    /// `Err` with the reason if the server's end of the socket is gone.
    pub(crate) fn reader_alive(&self) -> Result<(), String> {
        match hark_ring::peer(self.socket.get()) {
            hark_ring::Peer::Alive => Ok(()),
            _ => Err("the server closed its end".into()),
        }
    }

    /// Notes that the reader may have moved (a slot was just reclaimed).
    pub(crate) fn progressed(&self) {
        let now = self.w.consumed();
        let mut p = hark_sync::lock(&self.progress);
        if now != p.0 {
            *p = (now, Instant::now());
        }
    }
}

/// Splits an encoded frame that does not fit in a slot of `room` bytes: a
/// `Defs` frame becomes several, each of whole definitions; anything else
/// (or a single definition too big) is returned whole, and will not fit.
pub(crate) fn fit(bytes: Vec<u8>, room: usize) -> Vec<Vec<u8>> {
    if bytes.len() <= room || bytes.len() < HEADER_SIZE {
        return vec![bytes];
    }
    let defs =
        match super::is_defs(&bytes).then(|| Frame::decode(Kind::Defs, &bytes[HEADER_SIZE..])) {
            Some(Ok(Frame::Defs(d))) if d.len() > 1 => d,
            _ => return vec![bytes],
        };
    let (a, b) = defs.split_at(defs.len() / 2);
    let encode = |d: &[Def]| {
        let mut v = Vec::new();
        Def::encode_all(d, &mut v);
        v
    };
    let mut out = fit(encode(a), room);
    out.extend(fit(encode(b), room));
    out
}

/// The machine's online cores, from `/sys`. Read by the thread that starts
/// the shipper, never by the shipper: a file the shipper opened while the
/// program runs could take a descriptor number the program has just
/// closed to reuse (a shell's `close(1)` before `dup2(file, 1)`), and its
/// `close` would then close the program's file.
pub(crate) fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| hark_settings::cpu_list(&s))
        .unwrap_or_default()
}

/// Takes the calling thread (the shipper) off the cores the program is
/// bound to, when the machine has others of `online` ([`online_cpus`]): it
/// then never preempts the program. With no free core it keeps the
/// program's binding. Returns the cores it now may run on.
pub(crate) fn leave_the_programs_cores(online: &[usize]) -> Vec<usize> {
    let Some(mine) = affinity(0) else {
        return Vec::new();
    };
    let free = complement(&mine, online);
    if free.is_empty() {
        return mine;
    }
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut to: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in &free {
        // SAFETY: `c` is an online CPU number, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut to) };
    }
    // SAFETY: `to` is a valid set; 0 is the calling thread. A failure (a
    // cpuset that forbids those cores) leaves the binding as it was.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&to), &to) } != 0 {
        return mine;
    }
    free
}

/// The cores the process is bound to: its main thread's, which the
/// launcher set before `exec` (Open MPI, MPICH's Hydra and Slurm all do;
/// measured in `docs/probe.md`). Empty if it cannot be read. The server
/// keeps its own threads off these cores (a `Cpus` frame).
pub(crate) fn process_cpus() -> Vec<u32> {
    // SAFETY: getpid has no preconditions.
    affinity(unsafe { libc::getpid() })
        .unwrap_or_default()
        .into_iter()
        .map(|c| c as u32)
        .collect()
}

/// The cores thread `tid` may run on (0: the calling thread), ascending.
fn affinity(tid: libc::pid_t) -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for its size.
    if unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) } != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// The online cores not in `mine`.
fn complement(mine: &[usize], online: &[usize]) -> Vec<usize> {
    online
        .iter()
        .copied()
        .filter(|c| !mine.contains(c) && *c < libc::CPU_SETSIZE as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_wire::NameKind;

    #[test]
    fn the_shipper_gets_the_other_cores() {
        assert_eq!(complement(&[0], &[0, 1]), vec![1]);
        assert_eq!(complement(&[0, 1], &[0, 1]), Vec::<usize>::new());
    }

    #[test]
    fn definitions_too_big_for_a_slot_are_split_into_frames_that_fit() {
        let defs: Vec<Def> = (1..=200)
            .map(|id| Def::Name {
                id,
                kind: NameKind::Region,
                name: format!("region number {id} with a long name"),
            })
            .collect();
        let mut bytes = Vec::new();
        Def::encode_all(&defs, &mut bytes);
        let parts = fit(bytes, 1024);
        assert!(parts.len() > 1 && parts.iter().all(|p| p.len() <= 1024));
        let back: Vec<Def> = parts
            .iter()
            .flat_map(
                |p| match Frame::decode(Kind::Defs, &p[HEADER_SIZE..]).unwrap() {
                    Frame::Defs(d) => d,
                    _ => unreachable!(),
                },
            )
            .collect();
        assert_eq!(back, defs);
    }
}
