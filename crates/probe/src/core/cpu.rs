//! CPU availability: did the process have a CPU?
//!
//! The shipping thread reads, every `HARK_CPU_MS` and once more when the
//! stream ends, the main thread's counters from `/proc/self/task/<pid>`:
//! `schedstat` (ns on a CPU, ns runnable but waiting for one) and `sched`
//! (ns on a CPU, migrations, voluntary and involuntary switches). What
//! changed since the last reading goes to the server as one
//! [`op::CPU_TASK`] event. Nothing here runs on a program's thread while it
//! works: the hot path never sees it.
//!
//! The files are opened once, when the stream starts on a program's thread,
//! and moved to high descriptor numbers: the shipper itself opens nothing
//! while the program runs (a descriptor it opened could take a number the
//! program just freed to reuse; `the_probe_s_threads_open_no_file_while_the_program_runs`).
//! So only the main thread, where an MPI rank computes, is read: threads
//! the program starts later would need files opened on the shipper.
//!
//! Kernels without `schedstat` (no `CONFIG_SCHEDSTATS`) give no waiting
//! time; the event then says so (`extra` is `EXTRA_NONE`) and the server
//! estimates it from the switches (`docs/analyses.md`). Kernels without
//! `sched` (no `CONFIG_SCHED_DEBUG`) give the switches in `status` and no
//! migrations.

use hark_wire::{op, Event, EXTRA_NONE};
use std::os::fd::RawFd;
use zerocopy::little_endian::{I32, U16, U32, U64};

/// One thread's counters at one reading.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Reading {
    run_ns: u64,
    wait_ns: Option<u64>,
    voluntary: u64,
    involuntary: u64,
    migrations: u64,
}

/// The main thread's files, opened once (-1 for one the kernel lacks).
#[derive(Clone, Copy)]
struct Files {
    schedstat: RawFd,
    sched: RawFd,
    status: RawFd,
}

/// The sampler's memory between readings.
pub(crate) struct Sampler {
    files: Option<Files>,
    last: Option<Reading>,
    /// The timestamp (`clock::stamp`) of the last reading.
    last_stamp: u64,
    /// What the last reading replaced, for [`Sampler::unread`].
    undo: Option<(Option<Reading>, u64)>,
}

impl Sampler {
    /// A sampler that has opened and read nothing yet.
    pub(crate) fn new() -> Sampler {
        Sampler {
            files: None,
            last: None,
            last_stamp: 0,
            undo: None,
        }
    }

    /// Opens the main thread's files, on a program's thread as the stream
    /// starts (module doc), and takes the baseline reading at `stamp`.
    pub(crate) fn open(&mut self, stamp: u64) {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let base = format!("/proc/self/task/{pid}");
        let files = Files {
            schedstat: open_high(&format!("{base}/schedstat")),
            sched: open_high(&format!("{base}/sched")),
            status: open_high(&format!("{base}/status")),
        };
        self.files = Some(files);
        self.last = read(&files);
        self.last_stamp = stamp;
    }

    /// Reads the counters and returns what changed since the last reading
    /// as one event over `[last, stamp]`; none before [`Sampler::open`] or
    /// when the kernel gives nothing.
    pub(crate) fn sample(&mut self, stamp: u64) -> Option<Event> {
        let files = self.files?;
        let now = read(&files)?;
        let before = self.last.replace(now);
        self.undo = Some((before, self.last_stamp));
        let from = std::mem::replace(&mut self.last_stamp, stamp);
        Some(event(0, from, stamp, &before.unwrap_or_default(), &now))
    }

    /// Forgets the last reading (it could not be sent): the next one
    /// covers its time.
    pub(crate) fn unread(&mut self) {
        if let Some((last, stamp)) = self.undo.take() {
            (self.last, self.last_stamp) = (last, stamp);
        }
    }
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
        let mut s = Sampler::new();
        assert!(s.sample(1).is_none(), "nothing before the files are open");
        s.open(1);
        let e = s
            .sample(2)
            .expect("a reading (the kernel has `sched` or `schedstat`)");
        assert_eq!((e.op(), e.start.get(), e.end.get()), (op::CPU_TASK, 1, 2));
    }
}
