//! Making the process single-threaded for a moment, for the calls that
//! refuse to run in a process with more than one thread.
//!
//! `setns` into a mount, user or time namespace, and `unshare` of a user
//! namespace (or of the thread group, signal handlers, memory), fail with
//! `EINVAL` when another thread shares the process, and the probe's own
//! threads (the shipper, the signal helper) make every measured process
//! one from its first instruction: `nsenter -m`, `unshare -U` and any tool
//! that does the same failed under Hark only. The wrappers of those calls
//! (`adapters/ns.rs`) park the probe's threads around the real call: the
//! shipper sends what was queued before and hands its transport back, the
//! helper returns, the probe waits until the kernel has let both threads
//! go, the call runs, and new threads start from where the old ones were
//! (in the namespaces the call entered: they open nothing there).
//!
//! Why not start the threads lazily instead: a program records before
//! `main` (its loader's and its own reads), and the threads would then
//! start at its first event, before the call all the same.
//!
//! Nothing here is on the hot path. A thread of the program that records
//! meanwhile (only possible where the call allows other threads, as
//! `unshare(CLONE_NEWNS)` does) fills its buffer as ever; one that needs a
//! fresh buffer with the pool empty drops (lossy) or waits (lossless) for
//! the length of the call.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::local::Internal;
use super::signals;

/// The shipping thread's work, and the thread that runs it.
pub(crate) struct Shipper {
    /// The work, while no thread runs it. It returns true when it parked
    /// (its transport kept for the next run), false when the stream ended.
    body: Mutex<Option<Box<dyn FnMut() -> bool + Send>>>,
    /// Whether a shipper should run: false from a park to the resume. The
    /// thread that parks and the resume decide under `body`'s lock.
    wanted: AtomicBool,
    /// The kernel's id of the latest shipping thread, 0 until it runs.
    tid: AtomicI32,
}

impl Shipper {
    pub(crate) fn new() -> Shipper {
        Shipper {
            body: Mutex::new(None),
            wanted: AtomicBool::new(true),
            tid: AtomicI32::new(0),
        }
    }

    /// Starts the first shipping thread, running `body`.
    pub(crate) fn start(
        &'static self,
        body: impl FnMut() -> bool + Send + 'static,
    ) -> std::io::Result<()> {
        *hark_sync::lock(&self.body) = Some(Box::new(body));
        self.spawn()
    }

    fn spawn(&'static self) -> std::io::Result<()> {
        self.tid.store(0, Ordering::Release);
        std::thread::Builder::new()
            .name("hark-shipper".into())
            .spawn(move || {
                signals::block_handled_signals();
                let _in = Internal::enter();
                self.tid.store(gettid(), Ordering::Release);
                self.run();
            })
            .map(|_| ())
    }

    /// The thread's life: the work until it ends, or until it parks while
    /// no shipper is wanted (then the work waits for the next thread).
    fn run(&self) {
        let Some(mut body) = hark_sync::lock(&self.body).take() else {
            return;
        };
        loop {
            let parked = body();
            let mut slot = hark_sync::lock(&self.body);
            if parked && self.wanted.load(Ordering::Acquire) {
                // Resumed before it parked: it goes on in this thread.
                continue;
            }
            if parked {
                *slot = Some(body);
            }
            return;
        }
    }

    /// Asks the shipper to park (`ask` queues the request behind what is
    /// queued) and waits, until `deadline`, for its thread to be gone.
    fn park(&self, ask: impl FnOnce(), deadline: Instant) -> bool {
        {
            let _slot = hark_sync::lock(&self.body);
            self.wanted.store(false, Ordering::Release);
        }
        ask();
        gone(&self.tid, deadline)
    }

    /// Starts a shipper again after [`Shipper::park`]: a new thread if the
    /// last one parked, else (it had not yet when its park gave up waiting)
    /// that one goes on.
    fn resume(&'static self) -> std::io::Result<()> {
        let slot = hark_sync::lock(&self.body);
        self.wanted.store(true, Ordering::Release);
        if slot.is_some() {
            drop(slot);
            return self.spawn();
        }
        Ok(())
    }
}

/// Parks the stream's shipper (`ask` queues the request) and the signal
/// helper, and waits until the kernel has let both threads go, at most
/// `wait`. False if they were not gone in time: the call then runs as it
/// would have, and [`resume`] still puts everything back.
pub(crate) fn park(shipper: &Shipper, ask: impl FnOnce(), wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    let helper = signals::stop_helper();
    let shipped = shipper.park(ask, deadline);
    let helped = !helper || gone(&signals::HELPER_TID, deadline);
    shipped && helped
}

/// Starts the shipper and the signal helper again after [`park`].
pub(crate) fn resume(shipper: &'static Shipper) -> std::io::Result<()> {
    let started = shipper.resume();
    signals::start_helper();
    started
}

/// Waits until the thread whose id `tid` will hold (0 until it runs) has
/// started and the kernel has released it, at most until `deadline`.
/// Released means no longer in the thread group: `tgkill` no longer finds
/// it. A joined thread is not yet released (it has cleared its id, but may
/// still share the process's file system state, which `setns` checks).
fn gone(tid: &AtomicI32, deadline: Instant) -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    loop {
        let t = tid.load(Ordering::Acquire);
        // SAFETY: signal 0 only checks that the thread exists.
        if t != 0 && unsafe { libc::syscall(libc::SYS_tgkill, pid, t, 0) } != 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            if e == Some(libc::ESRCH) {
                return true;
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}
