//! Performance counters through `perf_event_open` (`docs/probe.md`,
//! "Counters").
//!
//! The counters chosen (`HARK_COUNTERS`) are opened on the thread that
//! starts the stream (the main thread), with `inherit`, so that the
//! threads it starts later are counted into them. They form kernel groups
//! ([`part_of`]: the software counters, the hardware ones, each clock
//! alone), each read in one `read()` (`PERF_FORMAT_GROUP`) with the times
//! it was enabled and running, so a group's counts are consistent and
//! multiplexing is scaled out (`count × enabled / running`). Linux takes
//! `inherit` with a group read for counting events (this probe does not
//! sample; 6.18 here does); where a kernel refuses it (`EINVAL`), the
//! counter is opened without, and only the main thread is counted.
//!
//! Who reads it:
//! - the shipping thread, every `HARK_CPU_MS` and at the end
//!   ([`op::COUNTER_SLICE`]): the per-rank, per-thread and per-slice counts;
//! - a program's thread at each region end ([`op::COUNTER_REGION`]), the
//!   difference to its reading at the region's begin: the per-region
//!   counts. Threads other than the main one open their own group (without
//!   `inherit`) at their first region.
//!
//! A `read()` of a group costs about 1.3 µs in this VM (`BENCHMARKS.md`),
//! two with the default counters here (software group and `task-clock`):
//! too much for every MPI call, so counts inside MPI functions are not
//! read (the per-MPI-function counts are not done). `rdpmc` would only
//! serve hardware counters and there is no PMU here to measure it on.
//!
//! A counter that cannot be opened is said once per process as a
//! [`op::COUNTER_REFUSED`] event with the `errno`; `hark` prints one line
//! naming them and why.

use hark_wire::counters::{CounterEvent, EVENTS, TYPE_SOFTWARE};
use hark_wire::{op, Event};
use std::cell::RefCell;
use std::os::fd::RawFd;
use zerocopy::little_endian::{I32, U16, U32, U64};

/// Counters in one group at most (the table's length).
const MAX: usize = 24;

const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
const FORMAT_GROUP: u64 = 1 << 3;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr` as of its first version (64 bytes,
/// `PERF_ATTR_SIZE_VER0`), which every kernel with `perf_event_open` takes.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Counts at one reading, one entry per member in [`Group::members`]
/// order, each with the times its kernel group was enabled and running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    enabled: [u64; MAX],
    running: [u64; MAX],
    values: [u64; MAX],
}

/// The counters open on one thread: kernel groups each read with one
/// `read()` (module doc: the software counters, each clock alone, the
/// hardware counters), and the counter numbers of their members in order.
#[derive(Debug)]
pub(crate) struct Group {
    /// Each kernel group's leader and number of members.
    parts: Vec<(RawFd, usize)>,
    members: Vec<u16>,
    /// Every descriptor, closed with the group.
    fds: Vec<RawFd>,
}

/// What opening the chosen counters gave.
pub(crate) struct Opened {
    pub group: Option<Group>,
    /// Counters refused, with the `errno` the kernel gave.
    pub refused: Vec<(u16, i32)>,
}

/// Which kernel group a counter goes in: 0 the software counters, 1 the
/// hardware ones, 2 and up a clock alone.
///
/// A clock is never in a group: under a `task-clock` or `cpu-clock`
/// leader, Linux 6.18 (this VM) counts the other software members as 0
/// with `inherit` and only part of them without (measured: 391 of 1026
/// page faults); as a member, `task-clock` reads 0 on any thread but the
/// main one. Alone, it counts right everywhere. Hardware counters have a
/// group of their own so that one that cannot be scheduled on the PMU
/// leaves the software counts whole.
fn part_of(e: &CounterEvent, n: u16) -> usize {
    match (e.kind, e.name.ends_with("-clock")) {
        (TYPE_SOFTWARE, false) => 0,
        (TYPE_SOFTWARE, true) => 2 + n as usize,
        _ => 1,
    }
}

/// Opens `chosen` on the calling thread (`inherit` for the threads it
/// starts when asked and the kernel allows it).
pub(crate) fn open(chosen: &[u16], inherit: bool) -> Opened {
    let mut g = Group {
        parts: Vec::new(),
        members: Vec::new(),
        fds: Vec::new(),
    };
    let mut refused = Vec::new();
    let mut by_part: Vec<(usize, u16)> = chosen
        .iter()
        .take(MAX)
        .filter_map(|&n| EVENTS.get(n as usize).map(|e| (part_of(e, n), n)))
        .collect();
    by_part.sort_by_key(|p| p.0);
    let mut current: Option<usize> = None;
    for (part, n) in by_part {
        let ev = &EVENTS[n as usize];
        let leader = match current {
            Some(p) if p == part => g.parts.last().map_or(-1, |l| l.0),
            _ => -1,
        };
        let mut r = open_one(ev, leader, inherit);
        if r == Err(libc::EINVAL) && inherit {
            // A kernel that refuses `inherit` with a group read.
            r = open_one(ev, leader, false);
        }
        match r {
            Ok(fd) => {
                if leader < 0 {
                    g.parts.push((fd, 0));
                    current = Some(part);
                }
                if let Some(last) = g.parts.last_mut() {
                    last.1 += 1;
                }
                g.members.push(n);
                g.fds.push(fd);
            }
            Err(e) => refused.push((n, e)),
        }
    }
    Opened {
        group: (!g.members.is_empty()).then_some(g),
        refused,
    }
}

/// Injected by Hark's tests: every counter is refused with this `errno`.
#[cfg(feature = "test-hooks")]
fn injected() -> Option<i32> {
    std::env::var(hark_settings::TEST_COUNTERS_ERRNO.name)
        .ok()?
        .parse()
        .ok()
        .filter(|&e: &i32| e > 0)
}

/// Opens one counter, in the group of `leader` (-1 to lead one), at a
/// high descriptor; its `errno` if the kernel refuses. A kernel that
/// refuses counting in the kernel (`perf_event_paranoid` 2 for a user
/// without `CAP_PERFMON`) gets a second try counting user space only.
fn open_one(ev: &CounterEvent, leader: RawFd, inherit: bool) -> Result<RawFd, i32> {
    #[cfg(feature = "test-hooks")]
    if let Some(e) = injected() {
        return Err(e);
    }
    let mut r = syscall_open(ev, leader, inherit, false);
    if matches!(r, Err(libc::EACCES) | Err(libc::EPERM)) {
        r = syscall_open(ev, leader, inherit, true);
    }
    r.map(crate::ship::transport::move_out_of_the_way)
}

fn syscall_open(
    ev: &CounterEvent,
    leader: RawFd,
    inherit: bool,
    user_only: bool,
) -> Result<RawFd, i32> {
    let mut flags = FLAG_EXCLUDE_HV;
    if inherit {
        flags |= FLAG_INHERIT;
    }
    if user_only {
        flags |= FLAG_EXCLUDE_KERNEL;
    }
    let attr = Attr {
        kind: ev.kind,
        size: std::mem::size_of::<Attr>() as u32,
        config: ev.config,
        read_format: FORMAT_GROUP | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
        flags,
        ..Attr::default()
    };
    // SAFETY: `attr` is a valid `perf_event_attr` of the size it says;
    // pid 0 and cpu -1 count the calling thread on any CPU.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            leader as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL))
    } else {
        Ok(fd as RawFd)
    }
}

impl Group {
    /// The counts now; `None` if a read fails.
    pub(crate) fn read(&self) -> Option<Reading> {
        let mut r = Reading {
            enabled: [0; MAX],
            running: [0; MAX],
            values: [0; MAX],
        };
        let mut at = 0;
        for &(leader, len) in &self.parts {
            let mut buf = [0u64; 3 + MAX];
            // SAFETY: `buf` is valid for writes of its size; the raw
            // system call bypasses the probe's own `read` wrapper.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_read,
                    leader,
                    buf.as_mut_ptr(),
                    std::mem::size_of_val(&buf),
                )
            };
            if n < 32 {
                return None;
            }
            let nr = (buf[0] as usize).min(len).min(MAX - at);
            for i in 0..nr {
                r.enabled[at + i] = buf[1];
                r.running[at + i] = buf[2];
                r.values[at + i] = buf[3 + i];
            }
            at += len;
        }
        Some(r)
    }
}

/// One event per counter of `members` for what changed from `before` to
/// `now`, scaled for multiplexing: `op` over `[from, to]`, `obj` as given,
/// `extra` the count before scaling.
pub(crate) fn events(
    members: &[u16],
    op: u16,
    (from, to): (u64, u64),
    obj: u32,
    (before, now): (&Reading, &Reading),
    out: &mut Vec<Event>,
) {
    for (i, &n) in members.iter().enumerate() {
        let enabled = now.enabled[i].saturating_sub(before.enabled[i]);
        let running = now.running[i].saturating_sub(before.running[i]);
        let share = running_share(enabled, running);
        let count = now.values[i].saturating_sub(before.values[i]);
        out.push(Event {
            start: U64::new(from),
            end: U64::new(to.max(from)),
            bytes: U64::new(scaled(count, enabled, running)),
            extra: U64::new(count),
            op: U16::new(op),
            thread: U16::new(0),
            obj: U32::new(obj),
            peer: I32::new(share),
            tag: I32::new(n as i32),
        });
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for &fd in &self.fds {
            // SAFETY: the descriptors are this group's own; the raw system
            // call bypasses the probe's own `close` wrapper.
            unsafe { libc::syscall(libc::SYS_close, fd) };
        }
    }
}

/// `count` corrected for multiplexing: the counter counted `running` of
/// the `enabled` ns, so its count over all of them is estimated as
/// `count × enabled / running`. Never running gives 0.
pub(crate) fn scaled(count: u64, enabled: u64, running: u64) -> u64 {
    if running == 0 {
        return 0;
    }
    if running >= enabled {
        return count;
    }
    (count as u128 * enabled as u128 / running as u128).min(u64::MAX as u128) as u64
}

/// The share of its enabled time a counter was running, in thousandths.
pub(crate) fn running_share(enabled: u64, running: u64) -> i32 {
    if enabled == 0 || running >= enabled {
        return 1000;
    }
    (running as u128 * 1000 / enabled as u128) as i32
}

/// The shipping thread's memory between readings of the main group.
pub(crate) struct Slicer {
    refused: Vec<(u16, i32)>,
    last: Option<(u64, Reading)>,
    /// What the last reading replaced, for [`Slicer::unread`].
    undo: Option<Option<(u64, Reading)>>,
}

impl Slicer {
    /// A slicer with nothing read.
    pub(crate) fn new() -> Slicer {
        Slicer {
            refused: Vec::new(),
            last: None,
            undo: None,
        }
    }

    /// Opens `chosen` on the calling thread (a program's, as the stream
    /// starts) with `inherit`, keeps the refusals to send and takes the
    /// baseline at `stamp`; the group, if any counter opened.
    pub(crate) fn open(&mut self, chosen: &[u16], stamp: u64) -> Option<Group> {
        if chosen.is_empty() {
            return None;
        }
        let o = open(chosen, true);
        self.refused = o.refused;
        self.last = o.group.as_ref().and_then(Group::read).map(|r| (stamp, r));
        o.group
    }

    /// The refusals not yet sent, then what the counters of `group`
    /// counted since the last reading, as events up to `stamp`.
    pub(crate) fn sample(&mut self, group: Option<&Group>, stamp: u64, out: &mut Vec<Event>) {
        for (n, errno) in self.refused.drain(..) {
            let mut e = Event::new(op::COUNTER_REFUSED, stamp, stamp);
            e.tag.set(n as i32);
            e.peer.set(errno);
            out.push(e);
        }
        let Some(now) = group.and_then(Group::read) else {
            return;
        };
        let before = self.last.replace((stamp, now));
        self.undo = Some(before);
        if let (Some((from, b)), Some(g)) = (before, group) {
            events(
                &g.members,
                op::COUNTER_SLICE,
                (from, stamp),
                0,
                (&b, &now),
                out,
            );
        }
    }

    /// Forgets the last reading (it could not be sent).
    pub(crate) fn unread(&mut self) {
        if let Some(last) = self.undo.take() {
            self.last = last;
        }
    }
}

/// A thread's open regions with the counts at their begin, and, on
/// threads other than the main one, the thread's own group.
struct Regions {
    pid: u32,
    /// Whether this is the process's main thread (read once per thread).
    main_thread: bool,
    own: Option<Group>,
    tried: bool,
    open: Vec<(u32, u64, Reading)>,
}

thread_local! {
    static REGIONS: RefCell<Regions> = const {
        RefCell::new(Regions { pid: 0, main_thread: false, own: None, tried: false, open: Vec::new() })
    };
}

/// At a region's begin (after its event) or end (after its event): reads
/// this thread's group (`main` on the main thread, else the thread's own,
/// opened at its first region with `chosen`); at an end, the counts since
/// the matching begin go to `out`. Does nothing without counters.
/// `pid` is the stream's process: a thread state of another (a forked
/// child's copy of its parent's) starts over.
pub(crate) fn at_region(
    (main, chosen, pid): (&Group, &[u16], u32),
    (begin, name, t): (bool, u32, u64),
    out: &mut Vec<Event>,
) {
    let _ = REGIONS.try_with(|r| {
        let mut r = r.borrow_mut();
        let r = &mut *r;
        if r.pid != pid {
            *r = Regions {
                pid,
                // SAFETY: gettid has no preconditions.
                main_thread: unsafe { libc::gettid() } as u32 == pid,
                own: None,
                tried: false,
                open: Vec::new(),
            };
        }
        let main_thread = r.main_thread;
        if !main_thread && !r.tried {
            r.tried = true;
            r.own = open(chosen, false).group;
        }
        let g = if main_thread {
            Some(main)
        } else {
            r.own.as_ref()
        };
        let Some(g) = g else {
            return;
        };
        let Some(now) = g.read() else {
            return;
        };
        if begin {
            if r.open.len() < 256 {
                r.open.push((name, t, now));
            }
            return;
        }
        let Some(at) = r.open.iter().rposition(|(n, _, _)| *n == name) else {
            return;
        };
        let (_, from, before) = r.open[at];
        r.open.truncate(at);
        let span = (from, t);
        events(
            &g.members,
            op::COUNTER_REGION,
            span,
            name,
            (&before, &now),
            out,
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplexed_counts_are_scaled_by_enabled_over_running() {
        // Recorded: counting 250 of 1000 ns, 1e6 cycles seen.
        assert_eq!(scaled(1_000_000, 1000, 250), 4_000_000);
        assert_eq!(running_share(1000, 250), 250);
        assert_eq!(scaled(7, 1000, 1000), 7);
        assert_eq!(running_share(1000, 1000), 1000);
        assert_eq!(scaled(7, 1000, 0), 0);
    }

    #[test]
    fn software_counters_open_here_and_count_page_faults() {
        let chosen: Vec<u16> = ["task-clock", "page-faults"]
            .iter()
            .filter_map(|n| hark_wire::counters::number(n))
            .collect();
        let o = open(&chosen, true);
        let g = o.group.expect("software counters open on any Linux");
        // Fresh pages from the kernel, never from the allocator (which may
        // hand back memory another test already touched), and no huge
        // pages: each of the 64 touches faults once.
        let len = 64 << 12;
        // SAFETY: an anonymous private mapping of `len` bytes, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: `p` is the mapping just made; advice only.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        let before = g.read().expect("a reading");
        for i in (0..len).step_by(4096) {
            // SAFETY: within the mapping, which is writable.
            unsafe { std::ptr::write_volatile((p as *mut u8).add(i), 1) };
        }
        let now = g.read().expect("a reading");
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p, len) };
        let mut out = Vec::new();
        events(
            &g.members,
            op::COUNTER_SLICE,
            (1, 2),
            0,
            (&before, &now),
            &mut out,
        );
        assert_eq!(out.len(), 2);
        let faults = out.iter().find(|e| e.tag.get() == 3).expect("page-faults");
        assert!(faults.bytes.get() >= 64, "{before:?} {now:?}");
        let clock = out.iter().find(|e| e.tag.get() == 0).expect("task-clock");
        assert!(clock.bytes.get() > 0, "{before:?} {now:?}");
    }
}
