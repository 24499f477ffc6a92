//! Performance counters through `perf_event_open` (`docs/probe.md`,
//! "Counters").
//!
//! The counters chosen (`HARK_COUNTERS`) are opened on the thread that
//! starts the stream (the main thread), with `inherit`, so that the
//! threads it starts later are counted into them: that group counts the
//! whole process. Each of the program's other threads opens its own group
//! (without `inherit`) at its first event ([`Joining::open_this_thread`],
//! as `cpu.rs` opens its files; at most [`MAX_THREADS`] per process). The
//! counters form kernel groups ([`part_of`]: the software counters, the
//! hardware ones, each clock alone), each read in one `read()`
//! (`PERF_FORMAT_GROUP`) with the times it was enabled and running, so a
//! group's counts are consistent and multiplexing is scaled out
//! (`count × enabled / running`). Linux takes `inherit` with a group read
//! for counting events (this probe does not sample; 6.18 here does); where
//! a kernel refuses it (`EINVAL`), the counter is opened without, and the
//! threads not read on their own are not counted.
//!
//! Who reads it:
//! - the shipping thread, every `HARK_CPU_MS` and at the end
//!   ([`op::COUNTER_SLICE`]): each thread's own group under its number,
//!   then the whole process's; the main thread's row is the whole less
//!   the other rows ([`Slicer`]), so the rows add up to the whole and
//!   nothing is counted twice. A thread that ends takes its own last
//!   reading ([`Slicer::ended`]);
//! - a program's thread at each region end ([`op::COUNTER_REGION`]), the
//!   difference to its reading at the region's begin: the per-region
//!   counts, from the thread's own group (the main thread's: the whole
//!   process's, threads it started included).
//!
//! - under `HARK_COUNTERS_IN_MPI` only, a program's thread at each MPI
//!   call's entry and exit ([`mpi_entry`], [`mpi_exit`]), the difference
//!   added to that function's sums on that thread ([`InMpi`]), which the
//!   shipper sends with its slice readings ([`op::COUNTER_MPI`]).
//!
//! A `read()` of a group costs about 1.3 µs in this VM (`BENCHMARKS.md`),
//! two with the default counters here (software group and `task-clock`):
//! too much for every MPI call by default, hence the opt-in. `rdpmc` would
//! only serve hardware counters and there is no PMU here to measure it on.
//!
//! A counter that cannot be opened is said once per process as a
//! [`op::COUNTER_REFUSED`] event with the `errno`; `hark` prints one line
//! naming them and why.

use hark_os::perf::{
    perf_event_open, FLAG_EXCLUDE_HV, FLAG_INHERIT, FORMAT_GROUP, FORMAT_TOTAL_TIME_ENABLED,
    FORMAT_TOTAL_TIME_RUNNING,
};
use hark_wire::counters::{CounterEvent, EVENTS, TYPE_SOFTWARE};
use hark_wire::{op, Event};
use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use zerocopy::little_endian::{I32, U16, U32, U64};

/// Counters in one group at most (the table's length).
const MAX: usize = 24;

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
    /// Whether every counter counts the threads started later (`inherit`).
    inherited: bool,
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
        inherited: inherit,
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
            g.inherited &= r.is_err();
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
/// without `CAP_PERFMON`) gets a second try counting user space only
/// (`hark_os::perf::perf_event_open`).
fn open_one(ev: &CounterEvent, leader: RawFd, inherit: bool) -> Result<RawFd, i32> {
    #[cfg(feature = "test-hooks")]
    if let Some(e) = injected() {
        return Err(e);
    }
    let mut flags = FLAG_EXCLUDE_HV;
    if inherit {
        flags |= FLAG_INHERIT;
    }
    let format = FORMAT_GROUP | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING;
    perf_event_open((ev.kind, ev.config), format, flags, leader)
        .map(crate::ship::transport::move_out_of_the_way)
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

/// Threads read per process, the main one included (as the CPU readings).
pub(crate) const MAX_THREADS: usize = super::cpu::MAX_THREADS;

/// Events a reading that found no free buffer keeps for the next one, at
/// most; past that the counts of the newest are lost.
const MAX_PENDING: usize = 1 << 16;

/// A program's thread other than the main one, with its own group.
pub(crate) struct Thread {
    /// Its number in the stream (`Event::thread`).
    number: u16,
    /// Its kernel id.
    tid: i32,
    group: Arc<Group>,
    /// The last reading and when it was taken (`clock::stamp`).
    last: (u64, Reading),
}

/// Groups that threads opened on themselves at their first event, waiting
/// for the shipper to take them.
pub(crate) type Joining = super::cpu::Joining<Thread>;

impl Joining {
    /// On a program's thread as it first records, as thread `number`: the
    /// main thread (`pid`) gives its number; any other opens `chosen` on
    /// itself, without `inherit`, and queues the group for the shipper
    /// (and for its regions, `at_region`). When it is not read (too many
    /// threads, or no room for high descriptors), why, for the caller to say.
    pub(crate) fn open_this_thread(
        &self,
        (chosen, pid): (&[u16], u32),
        number: u16,
        stamp: u64,
    ) -> Result<(), String> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        if tid as u32 == pid {
            self.main_is(number);
            return Ok(());
        }
        if !self.admit() {
            return Err(format!(
                "more than {MAX_THREADS} threads in this process; the performance counts of the \
                 others are in the main thread's"
            ));
        }
        let Some(group) = open(chosen, false).group else {
            // Refused: the main thread's opening said why.
            return Ok(());
        };
        let floor = crate::ship::transport::high_floor();
        if group.fds.iter().any(|&fd| fd < floor) {
            return Err(format!(
                "no room for the descriptors of thread {tid}'s performance counters above the \
                 program's (raise `ulimit -n`); its counts are in the main thread's"
            ));
        }
        let Some(now) = group.read() else {
            return Ok(());
        };
        let group = Arc::new(group);
        with_regions(pid, |r| {
            r.own = Some(group.clone());
            r.tried = true;
        });
        self.push(Thread {
            number,
            tid,
            group,
            last: (stamp, now),
        });
        Ok(())
    }
}

/// The shipping thread's memory between readings: of the main thread's
/// group (`inherit`: the whole process since the stream started) and of
/// the other threads' own groups.
///
/// The other threads' rows are their own groups' counts. The main
/// thread's row is the whole process less what the other rows hold, so
/// that the rows add up to the process's count and nothing is counted
/// twice: it holds the main thread, the threads not read on their own
/// (the library's, those past [`MAX_THREADS`]) and each read thread's
/// time before its first event.
pub(crate) struct Slicer {
    refused: Vec<(u16, i32)>,
    /// The main group's last reading, and whether its counters `inherit`.
    last: Option<(u64, Reading)>,
    inherited: bool,
    threads: Vec<Thread>,
    /// The main thread's number (0 until it records).
    main_number: u16,
    /// Scaled counts since the baseline, by counter number: the main
    /// group's, those sent for the other threads, those sent for the main
    /// thread's row.
    whole: [u64; MAX],
    others: [u64; MAX],
    main_sent: [u64; MAX],
    /// Readings that found no free buffer, sent before the next ones.
    pending: Vec<Event>,
    /// When the counts inside MPI functions were last taken.
    mpi_from: u64,
}

impl Slicer {
    /// A slicer with nothing read.
    pub(crate) fn new() -> Slicer {
        Slicer {
            refused: Vec::new(),
            last: None,
            inherited: false,
            threads: Vec::new(),
            main_number: 0,
            whole: [0; MAX],
            others: [0; MAX],
            main_sent: [0; MAX],
            pending: Vec::new(),
            mpi_from: 0,
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
        self.inherited = o.group.as_ref().is_some_and(|g| g.inherited);
        self.mpi_from = stamp;
        self.last = o.group.as_ref().and_then(Group::read).map(|r| (stamp, r));
        o.group
    }

    /// Takes the groups threads opened since the last reading, and the
    /// main thread's number.
    fn take_joining(&mut self, joining: &Joining) {
        if let Some(main) = joining.take(&mut self.threads) {
            self.main_number = main;
        }
    }

    /// The readings not sent yet and the refusals, then what the counters
    /// counted since the last reading, as events up to `stamp`: each
    /// thread's own group first, then the main thread's row (the whole
    /// process, read last, less the other rows), and the counts inside
    /// MPI functions gathered since the last reading. A thread found gone
    /// is read a last time and dropped.
    pub(crate) fn sample(
        &mut self,
        (main, joining, in_mpi): (Option<&Group>, &Joining, &InMpiThreads),
        stamp: u64,
        out: &mut Vec<Event>,
    ) {
        out.append(&mut self.pending);
        for (n, errno) in self.refused.drain(..) {
            let mut e = Event::new(op::COUNTER_REFUSED, stamp, stamp);
            e.tag.set(n as i32);
            e.peer.set(errno);
            out.push(e);
        }
        self.take_joining(joining);
        let mut threads = std::mem::take(&mut self.threads);
        threads.retain_mut(|t| {
            let gone = has_ended(t.tid);
            self.advance(t, stamp, out);
            !gone
        });
        self.threads = threads;
        let span = (std::mem::replace(&mut self.mpi_from, stamp), stamp);
        let (threads, main_number) = (&self.threads, self.main_number);
        let number_of = |tid: i32| {
            threads
                .iter()
                .find(|t| t.tid == tid)
                .map_or(main_number, |t| t.number)
        };
        drain_in_mpi(in_mpi, span, number_of, out);
        let Some(g) = main else {
            return;
        };
        let Some(now) = g.read() else {
            return;
        };
        let Some((from, before)) = self.last.replace((stamp, now)) else {
            return;
        };
        let at = slice_events(
            &g.members,
            self.main_number,
            (from, stamp),
            (&before, &now),
            out,
        );
        for e in &mut out[at..] {
            let n = e.tag.get() as usize;
            if n >= MAX || !self.inherited {
                continue;
            }
            self.whole[n] = self.whole[n].saturating_add(e.bytes.get());
            let row = self.whole[n].saturating_sub(self.others[n]);
            let d = row.saturating_sub(self.main_sent[n]);
            self.main_sent[n] += d;
            e.bytes.set(d);
            e.extra.set(d);
        }
    }

    /// Reads thread `t`'s group: its counts since its last reading go to
    /// `out` under its number, and into the other threads' sums.
    fn advance(&mut self, t: &mut Thread, stamp: u64, out: &mut Vec<Event>) {
        let Some(now) = t.group.read() else {
            return;
        };
        let (from, before) = std::mem::replace(&mut t.last, (stamp, now));
        let at = slice_events(
            &t.group.members,
            t.number,
            (from, stamp),
            (&before, &now),
            out,
        );
        for e in &mut out[at..] {
            if let Some(o) = self.others.get_mut(e.tag.get() as usize) {
                *o = o.saturating_add(e.bytes.get());
            }
        }
    }

    /// On thread `tid` as it ends: its last reading to `out`, and its group
    /// dropped (closed once its regions' hold on it goes too).
    pub(crate) fn ended(&mut self, joining: &Joining, tid: i32, stamp: u64, out: &mut Vec<Event>) {
        self.take_joining(joining);
        let Some(i) = self.threads.iter().position(|t| t.tid == tid) else {
            return;
        };
        let mut t = self.threads.swap_remove(i);
        self.advance(&mut t, stamp, out);
    }

    /// Keeps `unsent` (no free buffer took them) for the next reading.
    pub(crate) fn keep(&mut self, unsent: &[Event]) {
        let room = MAX_PENDING.saturating_sub(self.pending.len());
        self.pending
            .extend_from_slice(&unsent[..unsent.len().min(room)]);
    }
}

/// [`events`] of a time slice, under thread `number`; where in `out` they
/// start.
fn slice_events(
    members: &[u16],
    number: u16,
    span: (u64, u64),
    readings: (&Reading, &Reading),
    out: &mut Vec<Event>,
) -> usize {
    let at = out.len();
    events(members, op::COUNTER_SLICE, span, 0, readings, out);
    for e in &mut out[at..] {
        e.thread.set(number);
    }
    at
}

/// Whether thread `tid` of this process has ended (`tgkill` with no
/// signal answers `ESRCH`).
fn has_ended(tid: i32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, 0) };
    r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// A thread's open regions with the counts at their begin, and, on
/// threads other than the main one, the thread's own group.
struct Regions {
    pid: u32,
    /// Whether this is the process's main thread (read once per thread).
    main_thread: bool,
    own: Option<Arc<Group>>,
    tried: bool,
    open: Vec<(u32, u64, Reading)>,
    /// Under `HARK_COUNTERS_IN_MPI`: the group read around MPI calls (the
    /// thread's own; on the main thread one without `inherit`), where the
    /// counts go, and the reading at the current call's entry.
    mpi: Option<(Arc<Group>, Arc<InMpi>)>,
    mpi_tried: bool,
    mpi_at: Option<Reading>,
}

thread_local! {
    static REGIONS: RefCell<Regions> = const {
        RefCell::new(Regions::new(0, false))
    };
}

impl Regions {
    const fn new(pid: u32, main_thread: bool) -> Regions {
        Regions {
            pid,
            main_thread,
            own: None,
            tried: false,
            open: Vec::new(),
            mpi: None,
            mpi_tried: false,
            mpi_at: None,
        }
    }
}

/// Runs `f` on this thread's regions state, started over if it belongs to
/// another process than `pid` (a forked child's copy of its parent's).
fn with_regions<R>(pid: u32, f: impl FnOnce(&mut Regions) -> R) -> Option<R> {
    REGIONS
        .try_with(|r| {
            let mut r = r.try_borrow_mut().ok()?;
            if r.pid != pid {
                // SAFETY: gettid has no preconditions.
                *r = Regions::new(pid, unsafe { libc::gettid() } as u32 == pid);
            }
            Some(f(&mut r))
        })
        .ok()
        .flatten()
}

/// At a region's begin (after its event) or end (after its event): reads
/// this thread's group (`main` on the main thread, else the thread's own,
/// opened at its first event by [`Joining::open_this_thread`] or, when
/// the shipper does not read counters, here at its first region with
/// `chosen`); at an end, the counts since the matching begin go to `out`.
/// Does nothing without counters. `pid` is the stream's process.
pub(crate) fn at_region(
    (main, chosen, pid): (&Group, &[u16], u32),
    (begin, name, t): (bool, u32, u64),
    out: &mut Vec<Event>,
) {
    let _ = with_regions(pid, |r| {
        let main_thread = r.main_thread;
        if !main_thread && !r.tried {
            r.tried = true;
            r.own = open(chosen, false).group.map(Arc::new);
        }
        let g = if main_thread {
            Some(main)
        } else {
            r.own.as_deref()
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

/// Whether MPI calls read the counters (`HARK_COUNTERS_IN_MPI` and a
/// stream with counters): the one load the wrappers pay when they do not.
pub(crate) static IN_MPI: AtomicBool = AtomicBool::new(false);

/// One thread's counts inside MPI functions since the shipper last took
/// them: the thread adds at each call's exit, the shipper drains.
pub(crate) struct InMpi {
    tid: i32,
    by_function: Mutex<Vec<InFunction>>,
}

/// Per MPI function (its op code): calls, counts by counter number, the
/// smallest running share seen.
type InFunction = (u16, u64, [u64; MAX], i32);

/// The threads that counted inside MPI functions, for the shipper.
pub(crate) type InMpiThreads = Mutex<Vec<Arc<InMpi>>>;

/// At an MPI call's entry on a program's thread: reads its group (opened
/// at its first MPI call: the thread's own, or on the main thread one
/// without `inherit`, so that other threads' counts stay out).
pub(crate) fn mpi_entry((chosen, pid): (&[u16], u32), threads: &InMpiThreads) {
    let _ = with_regions(pid, |r| {
        if !r.mpi_tried {
            r.mpi_tried = true;
            if !r.main_thread && !r.tried {
                r.tried = true;
                r.own = open(chosen, false).group.map(Arc::new);
            }
            let g = if r.main_thread {
                open(chosen, false).group.map(Arc::new)
            } else {
                r.own.clone()
            };
            if let Some(g) = g {
                let acc = Arc::new(InMpi {
                    // SAFETY: gettid has no preconditions.
                    tid: unsafe { libc::gettid() },
                    by_function: Mutex::new(Vec::new()),
                });
                hark_sync::lock(threads).push(acc.clone());
                r.mpi = Some((g, acc));
            }
        }
        r.mpi_at = r.mpi.as_ref().and_then(|(g, _)| g.read());
    });
}

/// At an MPI call's exit: what the thread counted since the entry's
/// reading goes to the call's function (`op`).
pub(crate) fn mpi_exit(pid: u32, op: u16) {
    let _ = with_regions(pid, |r| {
        let (Some((g, acc)), Some(before)) = (&r.mpi, r.mpi_at.take()) else {
            return;
        };
        let Some(now) = g.read() else {
            return;
        };
        let mut by = hark_sync::lock(&acc.by_function);
        let at = match by.iter().position(|e| e.0 == op) {
            Some(at) => at,
            None => {
                by.push((op, 0, [0; MAX], 1000));
                by.len() - 1
            }
        };
        let e = &mut by[at];
        e.1 += 1;
        for (i, &n) in g.members.iter().enumerate() {
            let enabled = now.enabled[i].saturating_sub(before.enabled[i]);
            let running = now.running[i].saturating_sub(before.running[i]);
            let count = now.values[i].saturating_sub(before.values[i]);
            if let Some(c) = e.2.get_mut(n as usize) {
                *c = c.saturating_add(scaled(count, enabled, running));
            }
            e.3 = e.3.min(running_share(enabled, running));
        }
    });
}

/// The counts inside MPI functions that `threads` gathered since `from`,
/// as [`op::COUNTER_MPI`] events up to `to` under thread `number_of`
/// their thread id; threads that ended are dropped once drained.
fn drain_in_mpi(
    threads: &InMpiThreads,
    (from, to): (u64, u64),
    number_of: impl Fn(i32) -> u16,
    out: &mut Vec<Event>,
) {
    let mut threads = hark_sync::lock(threads);
    for t in threads.iter() {
        let number = number_of(t.tid);
        for (function, calls, counts, share) in hark_sync::lock(&t.by_function).drain(..) {
            for (n, &c) in counts.iter().enumerate() {
                if c == 0 {
                    continue;
                }
                let mut e = Event::new(op::COUNTER_MPI, from, to.max(from));
                e.thread.set(number);
                e.obj.set(function as u32);
                e.tag.set(n as i32);
                e.bytes.set(c);
                e.extra.set(calls);
                e.peer.set(share);
                out.push(e);
            }
        }
    }
    // Only the list holds a thread that ended (its thread-local is gone).
    threads.retain(|t| Arc::strong_count(t) > 1);
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

    /// Maps `pages` fresh pages and writes to each once: pages from the
    /// kernel, never from the allocator (which may hand back memory
    /// another test already touched), and no huge pages, so each write
    /// faults once.
    fn touch(pages: usize) {
        let len = pages << 12;
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
        for i in (0..len).step_by(4096) {
            // SAFETY: within the mapping, which is writable.
            unsafe { std::ptr::write_volatile((p as *mut u8).add(i), 1) };
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p, len) };
    }

    #[test]
    fn a_thread_s_counts_are_its_own_row_and_the_rows_add_up_to_the_whole() {
        let chosen: Vec<u16> = hark_wire::counters::number("page-faults")
            .into_iter()
            .collect();
        let (mut s, j) = (Slicer::new(), Joining::new());
        // This test's thread plays the main one: its group counts the
        // threads it starts (`inherit`).
        let main = s
            .open(&chosen, 1)
            .expect("software counters open on any Linux");
        assert!(
            main.inherited,
            "Linux 6.18 takes `inherit` with a group read"
        );
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u32;
        std::thread::scope(|sc| {
            sc.spawn(|| {
                j.open_this_thread((&chosen, pid), 5, 2)
                    .expect("a group for this thread");
                touch(256);
            });
        });
        // The kernel forgets a joined thread a moment after `join` returns.
        let mut out = Vec::new();
        for stamp in 3..100 {
            s.sample((Some(&main), &j, &Mutex::new(Vec::new())), stamp, &mut out);
            if s.threads.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(s.threads.is_empty(), "a thread gone is read no more");
        let row = |t: u16| -> u64 {
            out.iter()
                .filter(|e| e.thread.get() == t && e.op() == op::COUNTER_SLICE)
                .map(|e| e.bytes.get())
                .sum()
        };
        assert!(row(5) >= 256, "the thread's own row: {out:?}");
        assert!(
            row(0) < 128,
            "the main row holds the thread's faults again: {out:?}"
        );
        let n = chosen[0] as usize;
        assert_eq!(s.whole[n], s.main_sent[n] + s.others[n], "{out:?}");
    }

    #[test]
    fn counts_inside_mpi_calls_go_to_their_function_summed_over_calls() {
        let chosen: Vec<u16> = hark_wire::counters::number("page-faults")
            .into_iter()
            .collect();
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u32;
        let threads: InMpiThreads = Mutex::new(Vec::new());
        let out = std::thread::scope(|sc| {
            sc.spawn(|| {
                mpi_entry((&chosen, pid), &threads);
                touch(64);
                mpi_exit(pid, 0x123);
                touch(32);
                mpi_entry((&chosen, pid), &threads);
                mpi_exit(pid, 0x123);
                let mut out = Vec::new();
                drain_in_mpi(&threads, (1, 2), |_| 9, &mut out);
                out
            })
            .join()
            .unwrap()
        });
        assert_eq!(out.len(), 1, "{out:?}");
        let e = &out[0];
        assert_eq!(
            (e.op(), e.obj.get(), e.thread.get(), e.extra.get()),
            (op::COUNTER_MPI, 0x123, 9, 2),
            "{e:?}"
        );
        // The 64 pages inside the first call; not the 32 between the calls.
        assert!((64..80).contains(&e.bytes.get()), "{e:?}");
        let mut again = Vec::new();
        drain_in_mpi(&threads, (2, 3), |_| 9, &mut again);
        assert!(again.is_empty(), "drained once: {again:?}");
        assert!(
            hark_sync::lock(&threads).is_empty(),
            "a thread gone is dropped"
        );
    }

    #[test]
    fn software_counters_open_here_and_count_page_faults() {
        let chosen: Vec<u16> = ["task-clock", "page-faults"]
            .iter()
            .filter_map(|n| hark_wire::counters::number(n))
            .collect();
        let o = open(&chosen, true);
        let g = o.group.expect("software counters open on any Linux");
        let before = g.read().expect("a reading");
        touch(64);
        let now = g.read().expect("a reading");
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
