//! Flushing on fatal signals: SIGTERM, SIGINT, SIGSEGV, SIGBUS, SIGFPE and
//! SIGABRT, whose default action ends the process and, without this, the
//! stream with it (the last second of events lost, the loss unknown).
//!
//! A signal handler may only do async-signal-safe work, and `finish` takes
//! locks and allocates. So the work is split: the handler stores the signal
//! in an atomic word and wakes a helper thread with a raw `futex` call (both
//! async-signal-safe); the helper, an ordinary thread, runs `finish` (every
//! thread's buffer, the `End`, the wait for the shipper) and says so in
//! another atomic; the handler waits for that with `nanosleep`, at most
//! `HARK_DRAIN_TIMEOUT_MS`. If the signal interrupted a thread holding a
//! lock the helper needs (inside `malloc`, or the probe's own cold path),
//! the helper blocks, the wait times out, and the process ends as it would
//! have, with the stream marked partial by the server: never a deadlock.
//!
//! Then the signal takes its course with its original disposition: the
//! default action is restored and the signal raised again (it stays pending
//! until the handler returns; a fault re-executes the faulting instruction).
//!
//! **Where a fault was.** For SIGSEGV, SIGBUS and SIGFPE the handler also
//! keeps the faulting address, the instruction's address and, when that is
//! in the null page (a call through a null function pointer, which leaves
//! no frame to unwind), the caller's return address. The helper, once the
//! stream is finished, writes one line on stderr naming them as
//! `file+offset (symbol+offset)`: an MPI library's own crash report
//! stops at such a frame, and without one (MPICH) nothing says where a
//! rank died.
//!
//! **A handler the program installs.** The probe installs its handlers at
//! load, before `main`, for the signals not ignored then (a signal ignored
//! at load, as under `nohup`, is left alone), in front of any handler a
//! library's constructor set before (UCX sets one for SIGSEGV).
//! The program's later `sigaction` and `signal` calls for those signals do
//! not replace the probe's handler: the probe keeps the program's action
//! and calls it from its own handler (`SA_SIGINFO` or not, `SA_RESETHAND`
//! honoured; the program's `sa_mask` is not applied), and the calls report
//! the program's previous action, as if nothing stood between. A library
//! that reaches the C library's `sigaction` past the probe's (UCX looks it
//! up with its own `dlsym`) is put behind the probe again once MPI is
//! initialised (when the probe learns the rank). So an MPI
//! library's crash handler (Open MPI installs one for SIGSEGV, SIGBUS,
//! SIGFPE and SIGABRT) still runs, after the probe has flushed. For
//! SIGTERM and SIGINT a program's handler may well let the program go on
//! (Python turns SIGINT into `KeyboardInterrupt`): the probe then only calls
//! it, and the program's own exit closes the stream. For the four fault
//! signals it flushes first: they end the process almost always, and a
//! program that recovers from one merely stops being recorded.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use hark_wire::EndReason;

use super::{callsite, stream};

/// The signals handled, and whether each is a fault (flush even when the
/// program has a handler of its own).
const SIGNALS: [(c_int, bool); 6] = [
    (libc::SIGTERM, false),
    (libc::SIGINT, false),
    (libc::SIGSEGV, true),
    (libc::SIGBUS, true),
    (libc::SIGFPE, true),
    (libc::SIGABRT, true),
];

/// Above every signal number handled.
const SLOTS: usize = 32;

/// The program's action for a handled signal: its handler (`SIG_DFL`,
/// `SIG_IGN` or a function) and its flags. `OWNED` says the probe's handler
/// is installed for the signal; only then are these used.
static CHAIN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(libc::SIG_DFL) }; SLOTS];
static CHAIN_FLAGS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static OWNED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

/// 1 when the helper is asked to flush (0: not yet); the futex word.
static REQUEST: AtomicU32 = AtomicU32::new(0);
/// Set by the helper when the flush is done (or found nothing to do).
static FLUSHED: AtomicBool = AtomicBool::new(false);
/// Only the first signal flushes.
static FLUSHING: AtomicBool = AtomicBool::new(false);
/// The process whose helper thread is running (a forked child has none
/// until its stream starts).
static HELPER_PID: AtomicU32 = AtomicU32::new(0);
/// The helper thread's kernel id, 0 until it runs (see `core::park`).
pub(crate) static HELPER_TID: AtomicI32 = AtomicI32::new(0);
/// The fault the handler saw first: signal (0: none), faulting address,
/// instruction address, and the return address on top of the stack when
/// the instruction address is in the null page (else 0).
static FAULT: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
/// The value of [`REQUEST`] that asks the helper to return without
/// flushing: the process is to be single-threaded for a moment.
const PARK: u32 = 2;

/// Installs the handlers (at load, once per process image), in front of
/// any a library's constructor has set already (UCX's, for SIGSEGV).
pub(crate) fn install() {
    for (sig, _) in SIGNALS {
        // SAFETY: a zeroed sigaction is a valid "query" argument.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying the current action; `old` is writable.
        if unsafe { real_sigaction(sig, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction == libc::SIG_IGN
        {
            continue;
        }
        let i = sig as usize;
        CHAIN_FLAGS[i].store(old.sa_flags, Ordering::Release);
        CHAIN[i].store(old.sa_sigaction, Ordering::Release);
        // SAFETY: installing a handler that stays loaded.
        if unsafe { real_sigaction(sig, &ours(), std::ptr::null_mut()) } == 0 {
            OWNED[i].store(true, Ordering::Release);
        }
    }
}

/// Puts the probe's handler back in front where a library replaced it
/// without going through the probe's `sigaction` (UCX resolves the C
/// library's with its own `dlsym`): the library's action becomes the one
/// chained to. Called once MPI is initialised.
pub(crate) fn reassert() {
    for (sig, _) in SIGNALS {
        let i = sig as usize;
        if !OWNED[i].load(Ordering::Acquire) {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid "query" argument.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying the current action; `now` is writable.
        if unsafe { real_sigaction(sig, std::ptr::null(), &mut now) } != 0
            || now.sa_sigaction == handler as *const () as usize
        {
            continue;
        }
        CHAIN_FLAGS[i].store(now.sa_flags, Ordering::Release);
        CHAIN[i].store(now.sa_sigaction, Ordering::Release);
        // SAFETY: installing a handler that stays loaded.
        unsafe { real_sigaction(sig, &ours(), std::ptr::null_mut()) };
    }
}

/// The probe's action.
fn ours() -> libc::sigaction {
    // SAFETY: a zeroed sigaction is valid; the mask is then emptied.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is a valid sigset to fill.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    act
}

/// Starts the helper thread for this process's stream (at its start, also
/// in a forked child). Its signal mask blocks the handled signals, so that
/// a process-directed SIGTERM lands on a thread that can wait for it.
pub(crate) fn start_helper() {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if HELPER_PID.load(Ordering::Acquire) == pid {
        return;
    }
    REQUEST.store(0, Ordering::Relaxed);
    FLUSHED.store(false, Ordering::Relaxed);
    FLUSHING.store(false, Ordering::Relaxed);
    HELPER_TID.store(0, Ordering::Release);
    let spawned = std::thread::Builder::new()
        .name("hark-signals".into())
        .stack_size(256 << 10)
        .spawn(|| {
            block_handled_signals();
            let _in = super::local::Internal::enter();
            // SAFETY: gettid has no preconditions.
            HELPER_TID.store(unsafe { libc::gettid() }, Ordering::Release);
            while REQUEST.load(Ordering::Acquire) == 0 {
                // SAFETY: waits while the word is 0; spurious wake-ups loop.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        REQUEST.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        0u32,
                        std::ptr::null::<libc::timespec>(),
                    )
                };
            }
            if REQUEST.load(Ordering::Acquire) == PARK {
                return;
            }
            let _ = std::panic::catch_unwind(|| stream::finish(EndReason::Signal));
            let _ = std::panic::catch_unwind(report_fault);
            FLUSHED.store(true, Ordering::Release);
        });
    if spawned.is_ok() {
        HELPER_PID.store(pid, Ordering::Release);
    }
}

/// Asks this process's helper thread, if it runs, to return without
/// flushing (`core::park`); true if it was running. Until
/// [`start_helper`] runs again, a fatal signal is not flushed.
pub(crate) fn stop_helper() -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if HELPER_PID
        .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    // A signal already being flushed keeps its request.
    if REQUEST
        .compare_exchange(0, PARK, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        // SAFETY: wakes the helper waiting on the word.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                REQUEST.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            )
        };
    }
    true
}

/// Blocks the handled asynchronous signals on the calling thread (the
/// probe's own threads), so that they go to a program thread.
pub(crate) fn block_handled_signals() {
    // SAFETY: a zeroed sigset, then filled with valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

extern "C" fn handler(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(&(_, fault)) = SIGNALS.iter().find(|(s, _)| *s == sig) else {
        return;
    };
    let i = sig as usize;
    let chained = CHAIN[i].load(Ordering::Acquire);
    let flags = CHAIN_FLAGS[i].load(Ordering::Acquire);
    // A fault cannot be ignored (returning would fault again): the kernel
    // applies the default action to an ignored one, and so does the probe.
    let default = chained == libc::SIG_DFL || (fault && chained == libc::SIG_IGN);
    if chained == libc::SIG_IGN && !fault {
        return;
    }
    if fault && sig != libc::SIGABRT {
        keep_fault(sig, info, ctx);
    }
    if default || fault {
        flush();
    }
    if default {
        // SAFETY: restoring the default action and raising the signal are
        // async-signal-safe; it stays blocked, so it is delivered (with its
        // default action) when this handler returns.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            real_sigaction(sig, &act, std::ptr::null_mut());
            OWNED[i].store(false, Ordering::Release);
            libc::raise(sig);
        }
        return;
    }
    if flags & libc::SA_RESETHAND != 0 {
        CHAIN[i].store(libc::SIG_DFL, Ordering::Release);
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this as an `SA_SIGINFO` handler.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(chained) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the program installed this as a plain handler.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(chained) };
        f(sig);
    }
}

/// From the handler: has the helper finish the stream, and waits for it
/// (bounded). Async-signal-safe: atomics, `futex`, `clock_gettime` and
/// `nanosleep` only.
fn flush() {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if HELPER_PID.load(Ordering::Acquire) != pid || FLUSHING.swap(true, Ordering::AcqRel) {
        return;
    }
    let Some(s) = stream::current() else {
        return;
    };
    REQUEST.store(1, Ordering::Release);
    // SAFETY: wakes the helper waiting on the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            REQUEST.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
    let limit = s.cfg.drain_timeout + Duration::from_millis(100);
    let step = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    let mut waited = Duration::ZERO;
    while !FLUSHED.load(Ordering::Acquire) && waited < limit {
        // SAFETY: `step` is a valid timespec; nanosleep is async-signal-safe.
        unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        waited += Duration::from_millis(1);
    }
}

/// From the handler: notes where the first fault was ([`FAULT`]).
/// Async-signal-safe: reads the signal's context and one stack word.
fn keep_fault(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if FAULT[0]
        .compare_exchange(0, sig as usize, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { info.as_ref().map_or(0, |i| i.si_addr() as usize) };
    let (pc, caller) = pc_and_caller(ctx);
    FAULT[1].store(addr, Ordering::Relaxed);
    FAULT[2].store(pc, Ordering::Relaxed);
    FAULT[3].store(caller, Ordering::Release);
}

/// The faulting instruction's address and, if it lies in the null page,
/// the return address the call left on top of the stack (valid then: the
/// call has just pushed it).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn pc_and_caller(ctx: *mut libc::c_void) -> (usize, usize) {
    // SAFETY: the kernel passes the interrupted thread's ucontext.
    let Some(uc) = (unsafe { ctx.cast::<libc::ucontext_t>().as_ref() }) else {
        return (0, 0);
    };
    let pc = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let sp = uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize;
    let caller = match pc < 4096 && sp != 0 && sp.is_multiple_of(8) {
        // SAFETY: `sp` is the interrupted thread's stack pointer, just
        // pushed to by the call that jumped to `pc`.
        true => unsafe { (sp as *const usize).read() },
        false => 0,
    };
    (pc, caller)
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn pc_and_caller(_ctx: *mut libc::c_void) -> (usize, usize) {
    (0, 0)
}

/// From the helper, after the flush: one line on stderr saying where the
/// fault the handler kept was. Written with one `write`, without the
/// standard error's lock, which the faulting thread may hold.
fn report_fault() {
    let sig = FAULT[0].load(Ordering::Acquire) as c_int;
    if sig == 0 {
        return;
    }
    let [addr, pc, caller] = [1, 2, 3].map(|i| FAULT[i].load(Ordering::Acquire));
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        _ => "SIGFPE",
    };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let rank = match stream::world_rank() {
        -1 => String::new(),
        r => format!("rank {r}, "),
    };
    let at = match pc < 4096 && caller != 0 {
        true => format!(
            "a call through a null function pointer (to {pc:#x}), called from {}",
            place(caller)
        ),
        false => format!("in {}", place(pc)),
    };
    let line = format!("hark: {name} ({rank}pid {pid}) at address {addr:#x}: {at}\n");
    // SAFETY: writes the line's bytes to standard error.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// `addr` as `file+offset (symbol+offset)`: the object holding it and the
/// file address in it, as the probe names objects for call sites (the same
/// in every rank), and the dynamic symbol before it if there is one; the
/// bare address outside every object.
fn place(addr: usize) -> String {
    let Some((path, bias)) = callsite::object_holding(addr as u64) else {
        return format!("{addr:#x}");
    };
    let file = path.rsplit('/').next().unwrap_or_default();
    let mut s = format!("{file}+{:#x}", (addr as u64).wrapping_sub(bias));
    // SAFETY: a zeroed Dl_info is valid for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    let found = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } != 0;
    if found && !info.dli_sname.is_null() {
        // SAFETY: dladdr's symbol name is a valid C string.
        let symbol = unsafe { std::ffi::CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        let off = addr.wrapping_sub(info.dli_saddr as usize);
        s += &format!(" ({symbol}+{off:#x})");
    }
    s
}

/// The program's `sigaction` for `sig`, if the probe's handler stands in
/// front of it: reports the program's previous action in `old` and keeps
/// `act` to chain to. `None`: not a handled signal, call the real one.
///
/// # Safety
/// `act` and `old` are null or valid, as for `sigaction`.
pub(crate) unsafe fn program_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> Option<c_int> {
    let i = usize::try_from(sig).ok().filter(|&i| i < SLOTS)?;
    if !OWNED[i].load(Ordering::Acquire) {
        return None;
    }
    if !old.is_null() {
        // SAFETY: the caller gives a writable sigaction.
        unsafe {
            let mut o: libc::sigaction = std::mem::zeroed();
            o.sa_sigaction = CHAIN[i].load(Ordering::Acquire);
            o.sa_flags = CHAIN_FLAGS[i].load(Ordering::Acquire);
            libc::sigemptyset(&mut o.sa_mask);
            old.write(o);
        }
    }
    if !act.is_null() {
        // SAFETY: the caller gives a readable sigaction.
        let a = unsafe { &*act };
        CHAIN_FLAGS[i].store(a.sa_flags, Ordering::Release);
        CHAIN[i].store(a.sa_sigaction, Ordering::Release);
    }
    Some(0)
}

/// The program's `signal(sig, handler)`, likewise: `None` for a signal the
/// probe does not stand in front of.
pub(crate) fn program_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> Option<libc::sighandler_t> {
    let i = usize::try_from(sig).ok().filter(|&i| i < SLOTS)?;
    if !OWNED[i].load(Ordering::Acquire) {
        return None;
    }
    CHAIN_FLAGS[i].store(0, Ordering::Release);
    Some(CHAIN[i].swap(handler, Ordering::AcqRel))
}

/// The C library's `sigaction`, past the probe's own.
///
/// # Safety
/// As `sigaction`.
unsafe fn real_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    static REAL: crate::real::Real = crate::real::Real::next(c"sigaction");
    let p = REAL.get();
    if p.is_null() {
        return -1;
    }
    // SAFETY: `sigaction`'s signature; the arguments are the caller's.
    unsafe {
        let f: unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int =
            std::mem::transmute(p);
        f(sig, act, old)
    }
}
