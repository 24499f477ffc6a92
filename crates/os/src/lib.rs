//! The few operating-system calls the `hark` binary makes, behind safe
//! functions, so that the binary itself has no `unsafe` (the probe shares
//! [`perf`]'s `perf_event_open`).
//!
//! Each function here wraps one call (or a few) whose safety does not
//! depend on its caller: identity ([`uid`], [`in_my_groups`]), processes
//! ([`process_gone`]), signals ([`forward_signals_to`], [`flag_on_signals`],
//! [`ignore_signals`]), limits ([`raise_fd_limit`]), the allocator
//! ([`set_mmap_threshold`], [`set_arena_max`]), the local time
//! ([`local_time`]), the network interfaces ([`ipv4_interfaces`]), software
//! performance events held open ([`hold_software_events`]), and
//! directories handled by descriptor, never by path ([`Dir`]). Signal handlers installed here only load or store
//! atomics and call `kill`, which are async-signal-safe.
//!
//! ```
//! let me = hark_os::uid();
//! assert!(!hark_os::process_gone(std::process::id() as i32));
//! # let _ = me;
//! ```

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod dir;
mod net;
pub mod perf;

pub use dir::{euid, make_fifo, Dir, Stat};
pub use net::{ipv4_interfaces, Interface};
pub use perf::{hold_software_events, HeldEvents};

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

pub use libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Whether `gid` is this process's effective group or one of its
/// supplementary ones.
pub fn in_my_groups(gid: u32) -> bool {
    // SAFETY: getegid has no preconditions.
    if unsafe { libc::getegid() } == gid {
        return true;
    }
    let mut groups = vec![0 as libc::gid_t; 1024];
    // SAFETY: the buffer holds `groups.len()` entries; getgroups writes at
    // most that many and returns how many, or -1.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    n > 0 && groups[..n as usize].contains(&gid)
}

/// Whether no process `pid` exists (`kill(pid, 0)` fails with `ESRCH`). A
/// process of another user that exists is not gone.
pub fn process_gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let failed = unsafe { libc::kill(pid, 0) } == -1;
    failed && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The process the forwarding handler sends to (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and has no memory preconditions.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// From now on, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 sent to this process
/// go on to `pid` (a command `hark` started), until [`stop_forwarding`].
pub fn forward_signals_to(pid: u32) {
    CHILD.store(pid as i32, Ordering::Relaxed);
    handle(&[SIGTERM, SIGHUP, SIGUSR1, SIGUSR2], forward, true);
}

/// Stops forwarding signals: the command has ended (the handlers stay, and
/// do nothing).
pub fn stop_forwarding() {
    CHILD.store(0, Ordering::Relaxed);
}

/// Set by the signals [`flag_on_signals`] names.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn set_flag(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// From now on, each of `signals` sets the returned flag instead of ending
/// the process. `restart`: system calls the signal interrupts start again
/// (`SA_RESTART`) rather than fail with `EINTR`. The flag is one per
/// process, whichever signals set it.
pub fn flag_on_signals(signals: &[i32], restart: bool) -> &'static AtomicBool {
    handle(signals, set_flag, restart);
    &SIGNALLED
}

/// Installs `handler` for `signals`; the handlers above only touch atomics
/// and call `kill`, which are async-signal-safe.
fn handle(signals: &[i32], handler: extern "C" fn(libc::c_int), restart: bool) {
    for &sig in signals {
        // SAFETY: the handler is one of this file's async-signal-safe
        // functions; the sigaction struct is fully initialised (zeroed,
        // then the handler, flags and an empty mask set).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            if restart {
                action.sa_flags = libc::SA_RESTART;
            }
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Ignores each of `signals` from now on (a terminal's Ctrl-C, say, which
/// reaches the command `hark` started by itself).
pub fn ignore_signals(signals: &[i32]) {
    for &sig in signals {
        // SAFETY: setting a signal's disposition to SIG_IGN has no
        // preconditions and installs no handler code.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
}

/// This process's CPU time so far (user and system, every thread), as
/// `getrusage` counts it; with `children`, plus that of its children that
/// ended and were reaped.
pub fn cpu_time(children: bool) -> std::time::Duration {
    match children {
        true => rusage_cpu(libc::RUSAGE_SELF) + rusage_cpu(libc::RUSAGE_CHILDREN),
        false => rusage_cpu(libc::RUSAGE_SELF),
    }
}

/// The calling thread's CPU time so far (user and system), as
/// `getrusage(RUSAGE_THREAD)` counts it: what a thread of this process
/// spent, apart from the others (`hark replay` subtracts its writers').
pub fn thread_cpu_time() -> std::time::Duration {
    rusage_cpu(libc::RUSAGE_THREAD)
}

/// User and system time of `who` (`RUSAGE_SELF`, `_CHILDREN`, `_THREAD`).
fn rusage_cpu(who: libc::c_int) -> std::time::Duration {
    // SAFETY: an all-zero rusage is valid; getrusage writes into it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is writable for one rusage.
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec.max(0) as u64, t.tv_usec.max(0) as u32 * 1000)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// `hark run -v`'s words for what analysing cost: `N s CPU for E events:
/// R M events per CPU-second` (R in millions; `unmeasurable` for no CPU
/// time at all), so that users and benchmarks read the same number.
pub fn cpu_rate(events: u64, cpu: std::time::Duration) -> String {
    let secs = cpu.as_secs_f64();
    let rate = match secs > 0.0 {
        true => format!("{:.3} M events per CPU-second", events as f64 / secs / 1e6),
        false => "an unmeasurable M events per CPU-second (no CPU time counted)".into(),
    };
    format!("{secs:.3} s CPU for {events} events: {rate}")
}

/// Raises this process's soft limit of open files to its hard limit.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is valid for writing; setrlimit only raises the soft
    // limit to the hard one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Sets glibc's `M_MMAP_THRESHOLD` to `bytes`: allocations at least this
/// large are mapped on their own. Does nothing outside glibc. Call before
/// threads start.
pub fn set_mmap_threshold(bytes: i32) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = bytes;
}

/// Sets glibc's `M_ARENA_MAX` to `arenas`. Does nothing outside glibc. Call
/// before threads start.
pub fn set_arena_max(arenas: i32) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = arenas;
}

/// A moment in the local time zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalTime {
    /// The year (2025).
    pub year: i32,
    /// The month, 1 to 12.
    pub month: i32,
    /// The day of the month, 1 to 31.
    pub day: i32,
    /// The hour, 0 to 23.
    pub hour: i32,
    /// The minute, 0 to 59.
    pub minute: i32,
    /// The second, 0 to 60.
    pub second: i32,
}

/// `secs` since the epoch in the local time zone; `None` if the C library
/// cannot convert it.
pub fn local_time(secs: i64) -> Option<LocalTime> {
    let now = secs as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills in; both pointers
    // are valid for the call.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return None;
        }
        tm
    };
    Some(LocalTime {
        year: tm.tm_year + 1900,
        month: tm.tm_mon + 1,
        day: tm.tm_mday,
        hour: tm.tm_hour,
        minute: tm.tm_min,
        second: tm.tm_sec,
    })
}
