//! CPU availability: did each of the process's threads have a CPU?
//!
//! The shipping thread reads, every `HARK_CPU_MS` and once more when the
//! stream ends, each measured thread's counters from
//! `/proc/self/task/<tid>`: `schedstat` (ns on a CPU, ns runnable but
//! waiting for one) and `sched` (ns on a CPU, migrations, voluntary and
//! involuntary switches). What changed since the last reading goes to the
//! server as one [`op::CPU_TASK`] event per thread, numbered as the
//! thread's events are. Nothing here runs on a program's thread while it
//! works: the hot path never sees it.
//!
//! The files are opened on the thread they describe, never on the shipper,
//! and moved to high descriptor numbers: the shipper itself opens nothing
//! while the program runs (a descriptor it opened could take a number the
//! program just freed to reuse; `the_probe_s_threads_open_no_file_while_the_program_runs`).
//! The main thread's are opened as the stream starts; any other thread's
//! when it first records (`local::register`, the cold path of its first
//! event), and handed to the shipper through [`Joining`]. A thread's first
//! reading counts from its start (the kernel's counters start at zero with
//! the thread); the main thread's from the end of the probe's start, so
//! that the probe's own start is not counted as the program's. A thread that
//! ends takes its last reading and closes its files itself
//! ([`Sampler::ended`]); one that ends unseen is dropped when its files
//! answer `ESRCH`.
//!
//! At most [`MAX_THREADS`] threads of a process are read, and only while
//! their descriptors fit above the program's (`move_out_of_the_way`); the
//! probe says once on stderr when it skips one.
//!
//! Kernels without `schedstat` (no `CONFIG_SCHEDSTATS`) give no waiting
//! time; the event then says so (`extra` is `EXTRA_NONE`) and the server
//! estimates it from the switches (`docs/analyses.md`). Kernels without
//! `sched` (no `CONFIG_SCHED_DEBUG`) give the switches in `status` and no
//! migrations.

use hark_wire::{op, Event, EXTRA_NONE};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use zerocopy::little_endian::{I32, U16, U32, U64};

/// Threads read per process, the main one included.
pub(crate) const MAX_THREADS: usize = 256;

/// One thread's counters at one reading.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Reading {
    run_ns: u64,
    wait_ns: Option<u64>,
    voluntary: u64,
    involuntary: u64,
    migrations: u64,
}

/// One thread's files, opened once on it (-1 for one the kernel lacks).
#[derive(Clone, Copy)]
struct Files {
    schedstat: RawFd,
    sched: RawFd,
    status: RawFd,
}

impl Files {
    fn close(&self) {
        for fd in [self.schedstat, self.sched, self.status] {
            if fd >= 0 {
                // SAFETY: the descriptor is ours and closed once; the raw
                // system call bypasses the probe's `close` wrapper.
                unsafe { libc::syscall(libc::SYS_close, fd) };
            }
        }
    }
}

/// One measured thread.
pub(crate) struct Thread {
    /// Its number in the stream (`Event::thread`).
    number: u16,
    /// Its kernel id.
    tid: i32,
    /// Whether it is the main thread.
    main: bool,
    files: Files,
    last: Option<Reading>,
    /// The timestamp (`clock::stamp`) of the last reading.
    last_stamp: u64,
    /// What the last reading replaced, for [`Sampler::unread`].
    undo: Option<(Option<Reading>, u64)>,
}

/// Threads that opened their files (here, or their counters:
/// `counters.rs`) and wait for the shipper to take them (a short lock: the
/// reading itself holds the shipper's).
pub(crate) struct Joining<T> {
    threads: Mutex<Vec<T>>,
    /// Threads opened so far, for [`MAX_THREADS`].
    opened: AtomicUsize,
    /// The main thread's number once it recorded ([`NO_NUMBER`] before):
    /// an atomic, so that it never waits for a reading.
    main: AtomicU32,
}

const NO_NUMBER: u32 = u32::MAX;

impl<T> Joining<T> {
    pub(crate) fn new() -> Joining<T> {
        Joining {
            threads: Mutex::new(Vec::new()),
            opened: AtomicUsize::new(0),
            main: AtomicU32::new(NO_NUMBER),
        }
    }

    /// The main thread first recorded as thread `number`: its readings
    /// carry that number from the next one on.
    pub(crate) fn main_is(&self, number: u16) {
        self.main.store(number as u32, Ordering::Relaxed);
    }

    /// Counts one more thread opened; false past [`MAX_THREADS`].
    pub(crate) fn admit(&self) -> bool {
        self.opened.fetch_add(1, Ordering::Relaxed) < MAX_THREADS
    }

    /// Queues a thread for the shipper.
    pub(crate) fn push(&self, t: T) {
        hark_sync::lock(&self.threads).push(t);
    }

    /// Moves the queued threads to `into`; the main thread's number, once
    /// it recorded.
    pub(crate) fn take(&self, into: &mut Vec<T>) -> Option<u16> {
        into.append(&mut hark_sync::lock(&self.threads));
        let main = self.main.load(Ordering::Relaxed);
        (main != NO_NUMBER).then_some(main as u16)
    }
}

impl Joining<Thread> {
    /// On a program's thread other than the main one, as it first records:
    /// opens its files and queues them; when it is not read (too many
    /// threads, or no room for high descriptors), why, for the caller to say.
    pub(crate) fn open_this_thread(&self, number: u16, stamp: u64) -> Result<(), String> {
        if !self.admit() {
            return Err(format!(
                "more than {MAX_THREADS} threads in this process; the CPU availability of the \
                 others is not read"
            ));
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let Some(files) = open_files(tid, true) else {
            return Err(format!(
                "no room for the descriptors of thread {tid}'s CPU counters above the program's \
                 (raise `ulimit -n`); its CPU availability and that of later threads may be missing"
            ));
        };
        let t = Thread {
            number,
            tid,
            main: false,
            files,
            // Its counters started at zero with the thread.
            last: None,
            last_stamp: stamp,
            undo: None,
        };
        self.push(t);
        Ok(())
    }
}

/// The sampler's memory between readings.
pub(crate) struct Sampler {
    threads: Vec<Thread>,
}

impl Sampler {
    /// A sampler that has opened and read nothing yet.
    pub(crate) fn new() -> Sampler {
        Sampler {
            threads: Vec::new(),
        }
    }

    /// Opens the main thread's files, on a program's thread as the stream
    /// starts (module doc), and takes the baseline reading at `stamp`.
    pub(crate) fn open(&mut self, joining: &Joining<Thread>, stamp: u64) {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let Some(files) = open_files(pid, false) else {
            return;
        };
        joining.admit();
        self.threads.push(Thread {
            number: 0,
            tid: pid,
            main: true,
            files,
            last: read(&files),
            last_stamp: stamp,
            undo: None,
        });
    }

    /// Takes the threads that opened their files since the last reading,
    /// and the main thread's number.
    pub(crate) fn take_joining(&mut self, joining: &Joining<Thread>) {
        if let Some(main) = joining.take(&mut self.threads) {
            if let Some(t) = self.threads.iter_mut().find(|t| t.main) {
                t.number = main;
            }
        }
    }

    /// Reads every thread's counters and appends to `out` what changed
    /// since the last reading, one event over `[last, stamp]` per thread.
    /// A thread that is gone is dropped and its files closed.
    pub(crate) fn sample(&mut self, stamp: u64, out: &mut Vec<Event>) {
        self.threads.retain_mut(|t| {
            t.undo = None;
            let Some(now) = read(&t.files) else {
                if gone(&t.files) {
                    t.files.close();
                    return false;
                }
                return true;
            };
            out.push(t.advance(now, stamp));
            true
        });
    }

    /// Forgets the last readings but the first `sent` events of the last
    /// [`Sampler::sample`] (the rest could not be sent): the next ones
    /// cover their time.
    pub(crate) fn unread(&mut self, sent: usize) {
        let read = self.threads.iter_mut().filter(|t| t.undo.is_some());
        for t in read.skip(sent) {
            if let Some((last, stamp)) = t.undo.take() {
                (t.last, t.last_stamp) = (last, stamp);
            }
        }
    }

    /// On thread `tid` as it ends: its last reading, if it is read, and
    /// its files closed.
    pub(crate) fn ended(
        &mut self,
        joining: &Joining<Thread>,
        tid: i32,
        stamp: u64,
    ) -> Option<Event> {
        self.take_joining(joining);
        let i = self.threads.iter().position(|t| t.tid == tid)?;
        let mut t = self.threads.swap_remove(i);
        let ev = read(&t.files).map(|now| t.advance(now, stamp));
        t.files.close();
        ev
    }
}

impl Thread {
    /// The event from the last reading to `now`, taken at `stamp`.
    fn advance(&mut self, now: Reading, stamp: u64) -> Event {
        let before = self.last.replace(now);
        self.undo = Some((before, self.last_stamp));
        let from = std::mem::replace(&mut self.last_stamp, stamp);
        event(self.number, from, stamp, &before.unwrap_or_default(), &now)
    }
}

/// Opens thread `tid`'s files at high descriptor numbers; `None` if none
/// could be opened, or (`high_only`) one could not be moved high. `status`
/// only when `sched` is missing: it gives the switches `sched` would.
fn open_files(tid: i32, high_only: bool) -> Option<Files> {
    let base = format!("/proc/self/task/{tid}");
    let schedstat = open_high(&format!("{base}/schedstat"));
    let sched = open_high(&format!("{base}/sched"));
    let status = if sched < 0 {
        open_high(&format!("{base}/status"))
    } else {
        -1
    };
    let files = Files {
        schedstat,
        sched,
        status,
    };
    let fds = [schedstat, sched, status];
    let low = fds
        .iter()
        .any(|&fd| fd >= 0 && fd < crate::ship::transport::high_floor());
    if fds.iter().all(|&fd| fd < 0) || (high_only && low) {
        files.close();
        return None;
    }
    Some(files)
}

/// Whether the thread whose files these are has ended (`ESRCH`).
fn gone(files: &Files) -> bool {
    let fd = [files.schedstat, files.sched, files.status]
        .into_iter()
        .find(|&fd| fd >= 0);
    let Some(fd) = fd else {
        return true;
    };
    let mut b = [0u8; 1];
    // SAFETY: `b` is valid for one byte; `fd` is ours.
    let n = unsafe { libc::pread(fd, b.as_mut_ptr().cast(), 1, 0) };
    n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Opens `path` read-only, bypassing the probe's own wrappers, at a high
/// descriptor number; -1 if it cannot.
pub(super) fn open_high(path: &str) -> RawFd {
    let Ok(c) = std::ffi::CString::new(path) else {
        return -1;
    };
    // SAFETY: `c` is a valid C string; the raw system call bypasses the
    // probe's `openat` wrapper.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as RawFd;
    if fd < 0 {
        return -1;
    }
    crate::ship::transport::move_out_of_the_way(fd)
}

/// The whole of the file open at `fd`, read from its start.
pub(super) fn pread_all(fd: RawFd, buf: &mut [u8]) -> Option<&str> {
    if fd < 0 {
        return None;
    }
    // SAFETY: `buf` is valid for writes of its length; `fd` is ours.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return None;
    }
    std::str::from_utf8(&buf[..n as usize]).ok()
}

/// The event between two readings; `number` is the thread's.
fn event(number: u16, from: u64, to: u64, before: &Reading, now: &Reading) -> Event {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let small = |v: u64| v.min(i32::MAX as u64) as i32;
    let wait = match (now.wait_ns, before.wait_ns) {
        (Some(n), Some(b)) => d(n, b),
        (Some(n), None) => n,
        _ => EXTRA_NONE,
    };
    Event {
        start: U64::new(from),
        end: U64::new(to.max(from)),
        bytes: U64::new(d(now.run_ns, before.run_ns)),
        extra: U64::new(wait),
        op: U16::new(op::CPU_TASK),
        thread: U16::new(number),
        obj: U32::new(d(now.voluntary, before.voluntary).min(u32::MAX as u64) as u32),
        peer: I32::new(small(d(now.migrations, before.migrations))),
        tag: I32::new(small(d(now.involuntary, before.involuntary))),
    }
}

/// The thread's counters, or `None` when the kernel gives none of them.
fn read(files: &Files) -> Option<Reading> {
    let mut buf = [0u8; 8192];
    let mut r = Reading::default();
    let mut any = false;
    if let Some(text) = pread_all(files.schedstat, &mut buf) {
        let mut f = text.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
        if let (Some(Some(run)), Some(Some(wait))) = (f.next(), f.next()) {
            r.run_ns = run;
            r.wait_ns = Some(wait);
            any = true;
        }
    }
    if let Some(text) = pread_all(files.sched, &mut buf) {
        let s = parse_sched(text);
        if r.wait_ns.is_none() {
            if let Some(run) = s.run_ns {
                r.run_ns = run;
                any = true;
            }
        }
        r.migrations = s.migrations.unwrap_or(0);
        if let (Some(v), Some(i)) = (s.voluntary, s.involuntary) {
            (r.voluntary, r.involuntary) = (v, i);
            return any.then_some(r);
        }
    }
    if let Some(text) = pread_all(files.status, &mut buf) {
        for line in text.lines() {
            let value = |l: &str| l.trim().parse::<u64>().unwrap_or(0);
            if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                r.voluntary = value(v);
            } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                r.involuntary = value(v);
            }
        }
    }
    any.then_some(r)
}

/// What `/proc/<pid>/task/<tid>/sched` says that the sampler uses.
#[derive(Default, Debug, PartialEq, Eq)]
struct Sched {
    run_ns: Option<u64>,
    migrations: Option<u64>,
    voluntary: Option<u64>,
    involuntary: Option<u64>,
}

fn parse_sched(text: &str) -> Sched {
    let mut s = Sched::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "se.sum_exec_runtime" => s.run_ns = millis_to_ns(value),
            "se.nr_migrations" => s.migrations = value.parse().ok(),
            "nr_voluntary_switches" => s.voluntary = value.parse().ok(),
            "nr_involuntary_switches" => s.involuntary = value.parse().ok(),
            _ => {}
        }
    }
    s
}

/// `sched` prints times as milliseconds with six decimals (`12.345678`).
fn millis_to_ns(v: &str) -> Option<u64> {
    let (ms, frac) = v.split_once('.').unwrap_or((v, ""));
    let ms: u64 = ms.parse().ok()?;
    let frac = &frac[..frac.len().min(6)];
    let digits: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let scale = 10u64.pow(6 - frac.len() as u32);
    Some(ms.saturating_mul(1_000_000).saturating_add(digits * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_times_are_read_to_the_nanosecond() {
        let text = "x (1, #threads: 1)\n---\nse.sum_exec_runtime                          :          1234.567891\nse.nr_migrations   :   7\nnr_switches : 9\nnr_voluntary_switches : 4\nnr_involuntary_switches : 5\n";
        assert_eq!(
            parse_sched(text),
            Sched {
                run_ns: Some(1_234_567_891),
                migrations: Some(7),
                voluntary: Some(4),
                involuntary: Some(5),
            }
        );
        assert_eq!(millis_to_ns("2.5"), Some(2_500_000));
        assert_eq!(millis_to_ns("3"), Some(3_000_000));
        assert_eq!(millis_to_ns("x"), None);
    }

    #[test]
    fn the_main_thread_is_read_between_two_readings() {
        let (mut s, j) = (Sampler::new(), Joining::<Thread>::new());
        let mut out = Vec::new();
        s.sample(1, &mut out);
        assert!(out.is_empty(), "nothing before the files are open");
        s.open(&j, 1);
        s.sample(2, &mut out);
        let e = out
            .first()
            .expect("a reading (the kernel has `sched` or `schedstat`)");
        assert_eq!((e.op(), e.start.get(), e.end.get()), (op::CPU_TASK, 1, 2));
    }

    #[test]
    fn a_thread_is_read_from_its_start_until_it_ends() {
        let (mut s, j) = (Sampler::new(), Joining::<Thread>::new());
        let (tid, spun) = std::thread::scope(|sc| {
            sc.spawn(|| {
                j.open_this_thread(7, 10).expect("files for this thread");
                let t0 = std::time::Instant::now();
                while t0.elapsed() < std::time::Duration::from_millis(30) {
                    std::hint::black_box(0);
                }
                let own = crate::core::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                let ev = s.ended(&j, tid, 20).expect("its last reading");
                (tid, (ev, own))
            })
            .join()
            .unwrap()
        });
        let (ev, own) = spun;
        assert_eq!((ev.thread.get(), ev.start.get(), ev.end.get()), (7, 10, 20));
        let run = ev.bytes.get();
        assert!(
            run.abs_diff(own) <= own / 20 + 2_000_000,
            "thread {tid}: {run} ns on a CPU by the kernel, {own} ns by its own clock"
        );
        let mut out = Vec::new();
        s.sample(30, &mut out);
        assert!(
            out.iter().all(|e| e.thread.get() != 7),
            "an ended thread is read no more"
        );
    }

    #[test]
    fn threads_past_the_bound_are_not_read_and_say_so() {
        let j = Joining::<Thread>::new();
        j.opened.store(MAX_THREADS, Ordering::Relaxed);
        let e = std::thread::scope(|sc| sc.spawn(|| j.open_this_thread(1, 1)).join().unwrap());
        let e = e.expect_err("the 257th thread is not read");
        assert!(e.contains("more than 256 threads"), "{e}");
        assert!(hark_sync::lock(&j.threads).is_empty());
    }

    #[test]
    fn a_thread_gone_unseen_is_dropped_at_the_next_reading() {
        let (mut s, j) = (Sampler::new(), Joining::<Thread>::new());
        std::thread::scope(|sc| {
            sc.spawn(|| j.open_this_thread(3, 1).expect("files for this thread"));
        });
        s.take_joining(&j);
        assert_eq!(s.threads.len(), 1);
        // The kernel forgets a joined thread a moment after `join` returns.
        for _ in 0..100 {
            s.sample(2, &mut Vec::new());
            if s.threads.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("a thread that ended is still read a second later");
    }
}
