//! LLVM's OpenMP runtime (libomp, and the vendor runtimes built on it)
//! through its `__kmpc_*` entry points, which clang, flang and the vendor
//! compilers compile OpenMP constructs into: the same events as the
//! libgomp wrappers (`gomp.rs`) and the OMPT tool (`ompt.rs`), without
//! making the runtime a tool host. A runtime with an OMPT tool does more
//! work at every barrier and fork whatever the tool does (about 220
//! instructions a barrier, 310 a region in libomp 14), which alone is half
//! of what an event may cost; these wrappers add about what the libgomp
//! ones do. `HARK_OMPT=1` chooses the OMPT tool instead, and then every
//! wrapper here only passes its call on.
//!
//! - `__kmpc_fork_call` is variadic (the outlined function's shared
//!   arguments follow it): an entry point in assembly hands the named
//!   arguments, where the rest lie and the caller's return address to
//!   [`fork`], which forks the team with one argument, the region's
//!   [`Fork`], and [`task`] in place of the outlined function; each thread
//!   of the team then calls the outlined function with the program's
//!   arguments ([`invoke`], as libomp's own `__kmp_invoke_microtask`) as its
//!   implicit task, which ends where its end-barrier wait starts, as with
//!   libgomp. A region not recorded (recording off, or OMPT chosen) is
//!   forked by the real function, jumped to with the caller's arguments.
//! - `__kmpc_serialized_parallel`/`__kmpc_end_serialized_parallel` bracket
//!   a region the program runs on the calling thread alone (`if(0)`).
//! - `__kmpc_barrier` is a barrier wait (implicit when the construct's
//!   `ident_t` says so), as are `__kmpc_omp_taskwait`,
//!   `__kmpc_end_taskgroup` and the reductions' `__kmpc_reduce`,
//!   `__kmpc_reduce_nowait` and `__kmpc_end_reduce` (implicit);
//!   `__kmpc_critical`, `__kmpc_critical_with_hint`, `__kmpc_ordered`,
//!   `omp_set_lock` and `omp_set_nest_lock` lock waits; loop starts
//!   (`__kmpc_for_static_init_*`, `__kmpc_dispatch_init_*`),
//!   `__kmpc_single`, `__kmpc_master`, `__kmpc_masked` and
//!   `__kmpc_omp_task_alloc` marks.
//!
//! The runtime calls some of these itself, through its PLT: its hidden
//! helper team's fork, the serialization of a team it forks, the barriers
//! and critical sections of its GOMP compatibility layer. Those calls, told
//! by a return address or an `ident_t` inside libomp ([`in_runtime`]),
//! pass on unrecorded.
//!
//! A construct is named by the caller's return address, as OMPT names it.
//! No wrapper holds the probe's guard while the real function runs (the
//! runtime's threads start inside the first fork: `gomp.rs`).
//!
//! `omp_set_lock` and `omp_set_nest_lock` are libgomp's too, so a gcc
//! program's lock waits are recorded as well; the wrappers reach
//! libgomp's default (`OMP_3.0`) versions, as every program built since
//! gcc 4.4 does.
// The wrappers carry the runtime's own names.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};

use hark_wire::op;

use super::gomp::{self, mark, wait, Region};
use super::real;
use crate::core;

/// libomp's `ident_t`: where a construct is, and what it is.
#[repr(C)]
pub struct Ident {
    reserved_1: i32,
    flags: i32,
    reserved_2: i32,
    reserved_3: i32,
    psource: *const c_char,
}

// `ident_t` flags (libomp's `kmp.h`).
const IDENT_BARRIER_IMPL: i32 = 0x40;
const IDENT_WORK_LOOP: i32 = 0x200;
const IDENT_WORK_SECTIONS: i32 = 0x400;
const IDENT_WORK_DISTRIBUTE: i32 = 0x800;

/// The construct's flags, 0 without an `ident_t`.
fn flags(loc: *const Ident) -> i32 {
    // SAFETY: the runtime's `ident_t`, static in the program, or null.
    unsafe { loc.as_ref() }.map_or(0, |l| l.flags)
}

/// 0 not read yet, 1 these wrappers record, 2 the OMPT tool does.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Whether LLVM's runtime is measured through OMPT (`HARK_OMPT`) rather
/// than through these wrappers.
pub(super) fn ompt_chosen() -> bool {
    match MODE.load(Ordering::Relaxed) {
        0 => read_mode(),
        m => m == 2,
    }
}

#[cold]
#[inline(never)]
fn read_mode() -> bool {
    let setting = &hark_settings::OMPT;
    let text = std::env::var(setting.name).ok();
    let ompt = setting.flag(text.as_deref()).value;
    MODE.store(if ompt { 2 } else { 1 }, Ordering::Relaxed);
    ompt
}

/// What the threads of one recorded team share: the program's outlined
/// function with its arguments, and the region.
struct Fork {
    microtask: *const c_void,
    argc: usize,
    /// At least four words (the register arguments [`invoke`] loads).
    argv: *const usize,
    region: Region,
    /// The team's actual size, as its threads see it.
    size: AtomicI32,
}

/// Shared arguments kept on the forking thread's stack; more go to the
/// heap.
const INLINE_ARGS: usize = 16;

type ForkCall = unsafe extern "C" fn(*mut Ident, i32, *const c_void, ...);

/// The real `__kmpc_fork_call`.
fn real_fork() -> Option<ForkCall> {
    real!(c"__kmpc_fork_call": ForkCall)
}

/// `__kmpc_fork_call(loc, argc, microtask, ...)`: forks a team running
/// `microtask(&gtid, &tid, args...)` and joins it. Hands the named
/// arguments, the six argument registers as they were (the first three
/// shared arguments are in the last three), the caller's stack arguments
/// (the rest) and the caller's return address to [`fork`]; when that
/// returns the real function instead of running the region, jumps to it
/// with the caller's arguments, as if called from the program (an OMPT
/// tool names the region by that return address).
///
/// # Safety
/// As libomp's.
#[unsafe(naked)]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __kmpc_fork_call() {
    std::arch::naked_asm!(
        "mov r11, qword ptr [rsp]",
        "push rbp",
        "mov rbp, rsp",
        // The six registers; rsp stays 16-byte aligned.
        "sub rsp, 48",
        "mov [rsp], rdi",
        "mov [rsp + 8], rsi",
        "mov [rsp + 16], rdx",
        "mov [rsp + 24], rcx",
        "mov [rsp + 32], r8",
        "mov [rsp + 40], r9",
        // rdi, rsi, rdx still hold loc, argc and microtask.
        "mov rcx, rsp",
        "lea r8, [rbp + 16]",
        "mov r9, r11",
        "call {fork}",
        "test rax, rax",
        "jz 2f",
        "mov r11, rax",
        "mov rdi, [rsp]",
        "mov rsi, [rsp + 8]",
        "mov rdx, [rsp + 16]",
        "mov rcx, [rsp + 24]",
        "mov r8, [rsp + 32]",
        "mov r9, [rsp + 40]",
        // Pointers only: no vector register holds an argument.
        "xor eax, eax",
        "leave",
        "jmp r11",
        "2:",
        "leave",
        "ret",
        fork = sym fork,
    )
}

/// Forks the team through [`task`] with the program's shared arguments,
/// read from the registers and stack [`__kmpc_fork_call`] left them in,
/// and returns 0; or, when the region is not recorded (recording off, or
/// the OMPT tool records), returns the real `__kmpc_fork_call` for the
/// entry point to jump to.
unsafe extern "C" fn fork(
    loc: *mut Ident,
    argc: i32,
    microtask: *const c_void,
    regs: *const usize,
    stack: *const usize,
    ret: usize,
) -> usize {
    let Some(f) = real_fork() else {
        return 0;
    };
    // The runtime's own forks (its hidden helper team) are not the
    // program's.
    let region = if ompt_chosen() || in_runtime(ret) {
        None
    } else {
        gomp::region(ret)
    };
    let Some(region) = region else {
        return f as usize;
    };
    let n = usize::try_from(argc).unwrap_or(0);
    // SAFETY: the caller passed `argc` arguments: the first three in the
    // last three argument registers, the others on its stack.
    let arg = |i: usize| unsafe {
        if i < 3 {
            *regs.add(3 + i)
        } else {
            *stack.add(i - 3)
        }
    };
    // Only the words read are written: [`invoke`] loads the first four
    // whatever `argc`, and passes them on unread when there are fewer.
    let mut inline = [const { std::mem::MaybeUninit::<usize>::uninit() }; INLINE_ARGS];
    let heap: Vec<usize>;
    let argv = if n <= INLINE_ARGS {
        for (i, a) in inline.iter_mut().enumerate().take(n.max(4)) {
            a.write(if i < n { arg(i) } else { 0 });
        }
        inline.as_ptr().cast::<usize>()
    } else {
        heap = (0..n).map(arg).collect();
        heap.as_ptr()
    };
    let team = Fork {
        microtask,
        argc: n,
        argv,
        region,
        size: AtomicI32::new(0),
    };
    let level = gomp::level() + 1;
    let t0 = core::stamp();
    // SAFETY: the runtime's fork with one argument, the team, which
    // outlives the call (it joins every thread that reads it).
    unsafe { f(loc, 1, task as *const c_void, &team as *const Fork) };
    gomp::parallel_done(region, t0, level, team.size.load(Ordering::Relaxed));
    0
}

/// What every thread of a recorded team runs in place of the outlined
/// function: the function with the program's arguments, as the thread's
/// implicit task.
unsafe extern "C" fn task(gtid: *mut i32, tid: *mut i32, team: *const Fork) {
    // SAFETY: the team `fork` passed, alive until every thread of the
    // team has left this function.
    let team = unsafe { &*team };
    let Region {
        instance,
        construct,
    } = team.region;
    // SAFETY: the runtime's pointer to this thread's number in the team.
    let thread = unsafe { *tid };
    let size = gomp::team_size();
    let outer = core::omp_thread(|o| o.enter_task(instance, thread));
    let t0 = core::stamp();
    // SAFETY: the program's outlined function with its own arguments.
    unsafe { invoke(team.microtask, gtid, tid, team.argc, team.argv) };
    let t1 = core::stamp();
    team.size.store(size, Ordering::Relaxed);
    gomp::implicit_task(t0, t1, instance, construct, thread, size);
    core::omp_thread(|o| o.restore(outer));
}

/// Calls `microtask(gtid, tid, argv[0], …, argv[argc − 1])`, the outlined
/// function's ABI, for any `argc`: the first four arguments in registers,
/// the rest on the stack. `argv` has at least four words.
///
/// # Safety
/// `microtask` takes `argc` pointer arguments after the two ids.
#[unsafe(naked)]
unsafe extern "C" fn invoke(
    microtask: *const c_void,
    gtid: *mut i32,
    tid: *mut i32,
    argc: usize,
    argv: *const usize,
) {
    std::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "mov r10, rdi",
        "mov r11, r8",
        // Arguments beyond the fourth go on the stack, the last first,
        // with rsp 16-byte aligned at the call.
        "mov rax, rcx",
        "sub rax, 4",
        "jle 3f",
        "test al, 1",
        "jz 2f",
        "sub rsp, 8",
        "2:",
        "push qword ptr [r11 + 8 * rax + 24]",
        "dec rax",
        "jnz 2b",
        "3:",
        "mov rdi, rsi",
        "mov rsi, rdx",
        "mov rdx, qword ptr [r11]",
        "mov rcx, qword ptr [r11 + 8]",
        "mov r8, qword ptr [r11 + 16]",
        "mov r9, qword ptr [r11 + 24]",
        // No vector registers: the outlined function may be variadic.
        "xor eax, eax",
        "call r10",
        "leave",
        "ret",
    )
}

/// A region `__kmpc_serialized_parallel` opened and its end closes: the
/// calling thread runs it alone.
struct Serial {
    region: Region,
    t0: u64,
    level: i32,
    /// When the thread's implicit task started.
    mine: u64,
    /// The implicit task the thread was in before.
    outer: (u64, i32),
}

thread_local! {
    /// Serialized regions this thread opened, innermost last (`None`: one
    /// not recorded).
    static SERIAL: RefCell<Vec<Option<Serial>>> = const { RefCell::new(Vec::new()) };
}

/// Defines `$name(loc, gtid)` as an entry point that hands the arguments
/// and the caller's return address to `$inner`; when that returns the real
/// function instead of doing the work, it jumps to it with the caller's
/// arguments, as if called from the program (as [`__kmpc_fork_call`]).
macro_rules! return_address_entry {
    ($($name:ident => $inner:ident;)*) => {$(
        /// Entry point: see [`return_address_entry`].
        ///
        /// # Safety
        /// As libomp's.
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name() {
            std::arch::naked_asm!(
                "mov rdx, qword ptr [rsp]",
                // Two arguments kept, and rsp 16-byte aligned at the call.
                "push rdi",
                "push rsi",
                "sub rsp, 8",
                "call {inner}",
                "add rsp, 8",
                "pop rsi",
                "pop rdi",
                "test rax, rax",
                "jz 2f",
                "jmp rax",
                "2:",
                "ret",
                inner = sym $inner,
            )
        }
    )*};
}

return_address_entry! {
    __kmpc_serialized_parallel => serialized;
    __kmpc_end_serialized_parallel => end_serialized;
}

/// Opens a serialized region and returns 0, or returns the real
/// `__kmpc_serialized_parallel` for the entry point to jump to when the
/// region is not recorded.
unsafe extern "C" fn serialized(loc: *mut Ident, gtid: i32, ret: usize) -> usize {
    type F = unsafe extern "C" fn(*mut Ident, i32);
    let Some(f) = real!(c"__kmpc_serialized_parallel": F) else {
        return 0;
    };
    // The runtime's own (serializing a team it forks: the region is the
    // fork's, recorded there), and its end passes on too.
    if in_runtime(ret) {
        return f as usize;
    }
    let region = if ompt_chosen() {
        None
    } else {
        gomp::region(ret)
    };
    let Some(region) = region else {
        let _ = SERIAL.try_with(|s| s.borrow_mut().push(None));
        return f as usize;
    };
    let level = gomp::level() + 1;
    let t0 = core::stamp();
    // SAFETY: the caller's arguments, passed on.
    unsafe { f(loc, gtid) };
    let outer = core::omp_thread(|o| o.enter_task(region.instance, 0));
    let serial = Serial {
        region,
        t0,
        level,
        mine: core::stamp(),
        outer,
    };
    let _ = SERIAL.try_with(|s| s.borrow_mut().push(Some(serial)));
    0
}

/// Closes the region `__kmpc_serialized_parallel` opened and returns 0, or
/// returns the real `__kmpc_end_serialized_parallel` for the entry point to
/// jump to when it was not recorded.
unsafe extern "C" fn end_serialized(loc: *mut Ident, gtid: i32, ret: usize) -> usize {
    type F = unsafe extern "C" fn(*mut Ident, i32);
    let Some(f) = real!(c"__kmpc_end_serialized_parallel": F) else {
        return 0;
    };
    if in_runtime(ret) {
        return f as usize;
    }
    let open = SERIAL
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
        .flatten();
    let Some(s) = open else {
        return f as usize;
    };
    let t1 = core::stamp();
    let Region {
        instance,
        construct,
    } = s.region;
    gomp::implicit_task(s.mine, t1, instance, construct, 0, 1);
    core::omp_thread(|o| o.restore(s.outer));
    // SAFETY: the caller's arguments, passed on.
    unsafe { f(loc, gtid) };
    gomp::parallel_done(s.region, s.t0, s.level, 1);
    0
}

/// Where libomp itself is loaded, `[start, end)`, once known (`end` 0:
/// not yet).
static RUNTIME: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];

/// Whether `addr` (a return address, an `ident_t`) is libomp's own: the
/// runtime calls some of its entry points itself, through its PLT (its
/// hidden helper team's fork, the serialization of a team it forks, its
/// GOMP compatibility layer's barriers), and those calls are not the
/// program's.
#[inline(always)]
fn in_runtime(addr: usize) -> bool {
    let end = RUNTIME[1].load(Ordering::Acquire);
    let (start, end) = if end == 0 {
        runtime_range()
    } else {
        (RUNTIME[0].load(Ordering::Relaxed), end)
    };
    (start..end).contains(&addr)
}

/// Finds where the object defining the real `__kmpc_fork_call` is loaded.
#[cold]
#[inline(never)]
fn runtime_range() -> (usize, usize) {
    let at = real_fork().map_or(0, |f| f as usize as u64);
    // None found (no libomp: a libgomp program's `omp_set_lock`): an empty
    // range, not looked for again.
    let (start, end) =
        core::callsite::object_span(at).map_or((1, 1), |(s, e)| (s as usize, e as usize));
    RUNTIME[0].store(start, Ordering::Relaxed);
    RUNTIME[1].store(end, Ordering::Release);
    (start, end)
}

/// Runs `call` for the construct at `loc`, timed as a wait of kind
/// `op`/`tag` unless OMPT records or the runtime calls itself.
#[inline(always)]
fn waiting<R>(loc: *const Ident, op: u16, tag: i32, call: impl FnOnce() -> R) -> R {
    if ompt_chosen() || in_runtime(loc as usize) {
        return call();
    }
    wait(op, tag, call)
}

/// Records a mark of kind `op`/`tag` for the construct at `loc` unless
/// OMPT records or the runtime calls itself (the program's calls always
/// carry their construct's `ident_t`).
#[inline(always)]
fn marking(loc: *const Ident, op: u16, tag: i32) {
    if !(ompt_chosen() || loc.is_null() || in_runtime(loc as usize)) {
        mark(op, tag);
    }
}

/// `__kmpc_barrier`: an explicit barrier, or one a construct implies.
///
/// # Safety
/// As libomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __kmpc_barrier(loc: *mut Ident, gtid: i32) {
    let Some(f) = real!(c"__kmpc_barrier": unsafe extern "C" fn(*mut Ident, i32)) else {
        return;
    };
    let tag = if flags(loc) & IDENT_BARRIER_IMPL != 0 {
        op::OMP_SYNC_IMPLICIT
    } else {
        op::OMP_SYNC_EXPLICIT
    };
    // SAFETY: the caller's arguments, passed on.
    waiting(loc, op::OMP_BARRIER, tag, || unsafe { f(loc, gtid) })
}

/// Entry points that may wait, each timed as one `$op` event of kind
/// `$tag` (`waiting`): `$name(loc, gtid, ...)`.
macro_rules! waits {
    ($($(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) $(-> $r:ty)? = $sym:literal => $op:ident, $tag:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As libomp's.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name(loc: *mut Ident, gtid: i32 $(, $a: $t)*) $(-> $r)? {
            let Some(f) = real!($sym: unsafe extern "C" fn(*mut Ident, i32 $(, $t)*) $(-> $r)?) else {
                return Default::default();
            };
            // SAFETY: the caller's arguments, passed on.
            waiting(loc, op::$op, op::$tag, || unsafe { f(loc, gtid $(, $a)*) })
        }
    )*};
}

waits! {
    /// `__kmpc_omp_taskwait`.
    __kmpc_omp_taskwait() -> i32 = c"__kmpc_omp_taskwait" => OMP_BARRIER, OMP_SYNC_TASKWAIT;
    /// `__kmpc_end_taskgroup`: waits for the group's tasks.
    __kmpc_end_taskgroup() = c"__kmpc_end_taskgroup" => OMP_BARRIER, OMP_SYNC_TASKGROUP;
    /// `__kmpc_reduce`: starts a blocking reduction, which may wait for the
    /// team (a tree reduction's gather) or for a lock (a critical one).
    __kmpc_reduce(
        num_vars: i32,
        reduce_size: usize,
        reduce_data: *mut c_void,
        reduce_func: *const c_void,
        lck: *mut c_void
    ) -> i32 = c"__kmpc_reduce" => OMP_BARRIER, OMP_SYNC_IMPLICIT;
    /// `__kmpc_reduce_nowait`: as `__kmpc_reduce`, without the barrier at
    /// its end.
    __kmpc_reduce_nowait(
        num_vars: i32,
        reduce_size: usize,
        reduce_data: *mut c_void,
        reduce_func: *const c_void,
        lck: *mut c_void
    ) -> i32 = c"__kmpc_reduce_nowait" => OMP_BARRIER, OMP_SYNC_IMPLICIT;
    /// `__kmpc_end_reduce`: the barrier at a blocking reduction's end.
    __kmpc_end_reduce(lck: *mut c_void) = c"__kmpc_end_reduce" => OMP_BARRIER, OMP_SYNC_IMPLICIT;
    /// `__kmpc_critical`: waits for a critical section.
    __kmpc_critical(crit: *mut c_void) = c"__kmpc_critical" => OMP_LOCK_WAIT, OMP_MUTEX_CRITICAL;
    /// `__kmpc_critical_with_hint`: waits for a critical section.
    __kmpc_critical_with_hint(crit: *mut c_void, hint: u32)
        = c"__kmpc_critical_with_hint" => OMP_LOCK_WAIT, OMP_MUTEX_CRITICAL;
    /// `__kmpc_ordered`: waits for this iteration's turn.
    __kmpc_ordered() = c"__kmpc_ordered" => OMP_LOCK_WAIT, OMP_MUTEX_ORDERED;
}

/// Lock acquisitions of the OpenMP API, libomp's and libgomp's alike.
macro_rules! locks {
    ($($name:ident = $sym:literal;)*) => {$(
        /// Waits for an OpenMP lock.
        ///
        /// # Safety
        /// As the runtime's.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name(lock: *mut c_void) {
            let Some(f) = real!($sym: unsafe extern "C" fn(*mut c_void)) else {
                return;
            };
            // SAFETY: the caller's argument, passed on.
            let call = || unsafe { f(lock) };
            // No `ident_t` to tell the runtime's own calls by: it makes none.
            if ompt_chosen() {
                return call();
            }
            wait(op::OMP_LOCK_WAIT, op::OMP_MUTEX_LOCK, call)
        }
    )*};
}

locks! {
    omp_set_lock = c"omp_set_lock";
    omp_set_nest_lock = c"omp_set_nest_lock";
}

/// Constructs one thread of the team runs (`single`, `master`, `masked`):
/// true on that thread, which is marked.
macro_rules! chosen {
    ($($name:ident($($a:ident: $t:ty),*) = $sym:literal => $tag:ident;)*) => {$(
        /// True on the thread that runs the construct.
        ///
        /// # Safety
        /// As libomp's.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name(loc: *mut Ident, gtid: i32 $(, $a: $t)*) -> i32 {
            let Some(f) = real!($sym: unsafe extern "C" fn(*mut Ident, i32 $(, $t)*) -> i32) else {
                return 0;
            };
            // SAFETY: the caller's arguments, passed on.
            let mine = unsafe { f(loc, gtid $(, $a)*) };
            if mine != 0 {
                marking(loc, op::OMP_WORK, op::$tag);
            }
            mine
        }
    )*};
}

chosen! {
    __kmpc_single() = c"__kmpc_single" => OMP_WORK_SINGLE;
    __kmpc_master() = c"__kmpc_master" => OMP_WORK_MASKED;
    __kmpc_masked(filter: i32) = c"__kmpc_masked" => OMP_WORK_MASKED;
}

/// A worksharing construct's start: a loop or sections (`distribute` is
/// not marked, as OMPT's `work` callback is not).
fn work_start(loc: *const Ident) {
    let f = flags(loc);
    if f & IDENT_WORK_DISTRIBUTE != 0 {
        return;
    }
    let tag = if f & IDENT_WORK_SECTIONS != 0 && f & IDENT_WORK_LOOP == 0 {
        op::OMP_WORK_SECTIONS
    } else {
        op::OMP_WORK_LOOP
    };
    marking(loc, op::OMP_WORK, tag);
}

/// Worksharing starts, marked ([`work_start`]) before the real call:
/// `$name(loc, gtid, ...)`.
macro_rules! work_starts {
    ($($(#[$doc:meta])* $name:ident($($a:ident: $t:ty),*) = $sym:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As libomp's.
        #[cfg_attr(not(test), no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(loc: *mut Ident, gtid: i32 $(, $a: $t)*) {
            let Some(f) = real!($sym: unsafe extern "C" fn(*mut Ident, i32 $(, $t)*)) else {
                return;
            };
            work_start(loc);
            // SAFETY: the caller's arguments, passed on.
            unsafe { f(loc, gtid $(, $a)*) }
        }
    )*};
}

work_starts! {
    /// A statically scheduled loop or sections construct, 32-bit bounds.
    __kmpc_for_static_init_4(
        schedtype: i32, plastiter: *mut i32, plower: *mut i32, pupper: *mut i32,
        pstride: *mut i32, incr: i32, chunk: i32
    ) = c"__kmpc_for_static_init_4";
    /// The same, unsigned 32-bit bounds.
    __kmpc_for_static_init_4u(
        schedtype: i32, plastiter: *mut i32, plower: *mut u32, pupper: *mut u32,
        pstride: *mut i32, incr: i32, chunk: i32
    ) = c"__kmpc_for_static_init_4u";
    /// The same, 64-bit bounds.
    __kmpc_for_static_init_8(
        schedtype: i32, plastiter: *mut i32, plower: *mut i64, pupper: *mut i64,
        pstride: *mut i64, incr: i64, chunk: i64
    ) = c"__kmpc_for_static_init_8";
    /// The same, unsigned 64-bit bounds.
    __kmpc_for_static_init_8u(
        schedtype: i32, plastiter: *mut i32, plower: *mut u64, pupper: *mut u64,
        pstride: *mut i64, incr: i64, chunk: i64
    ) = c"__kmpc_for_static_init_8u";
    /// A dynamically scheduled loop, 32-bit bounds.
    __kmpc_dispatch_init_4(schedule: c_int, lb: i32, ub: i32, st: i32, chunk: i32)
        = c"__kmpc_dispatch_init_4";
    /// The same, unsigned 32-bit bounds.
    __kmpc_dispatch_init_4u(schedule: c_int, lb: u32, ub: u32, st: i32, chunk: i32)
        = c"__kmpc_dispatch_init_4u";
    /// The same, 64-bit bounds.
    __kmpc_dispatch_init_8(schedule: c_int, lb: i64, ub: i64, st: i64, chunk: i64)
        = c"__kmpc_dispatch_init_8";
    /// The same, unsigned 64-bit bounds.
    __kmpc_dispatch_init_8u(schedule: c_int, lb: u64, ub: u64, st: i64, chunk: i64)
        = c"__kmpc_dispatch_init_8u";
}

/// `__kmpc_omp_task_alloc`: an explicit task is created.
///
/// # Safety
/// As libomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn __kmpc_omp_task_alloc(
    loc: *mut Ident,
    gtid: i32,
    task_flags: i32,
    sizeof_task: usize,
    sizeof_shareds: usize,
    entry: *const c_void,
) -> *mut c_void {
    type F = unsafe extern "C" fn(*mut Ident, i32, i32, usize, usize, *const c_void) -> *mut c_void;
    let Some(f) = real!(c"__kmpc_omp_task_alloc": F) else {
        return std::ptr::null_mut();
    };
    marking(loc, op::OMP_TASK_CREATE, 0);
    // SAFETY: the caller's arguments, passed on.
    unsafe { f(loc, gtid, task_flags, sizeof_task, sizeof_shareds, entry) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// What the last outlined function called saw: its ids and arguments.
        static SAW: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// An outlined function of `$n` arguments that keeps what it saw.
    macro_rules! outlined {
        ($($name:ident($($a:ident),*);)*) => {$(
            unsafe extern "C" fn $name(gtid: *mut i32, tid: *mut i32 $(, $a: usize)*) {
                // SAFETY: the test's own ids.
                let ids = unsafe { [*gtid as usize, *tid as usize] };
                SAW.with(|s| *s.borrow_mut() = [&ids[..], &[$($a),*]].concat());
            }
        )*};
    }

    outlined! {
        m0();
        m1(a0);
        m4(a0, a1, a2, a3);
        m5(a0, a1, a2, a3, a4);
        m6(a0, a1, a2, a3, a4, a5);
        m9(a0, a1, a2, a3, a4, a5, a6, a7, a8);
        m12(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
    }

    #[test]
    fn invoke_passes_every_argument_in_order_in_registers_and_on_the_stack() {
        let funcs: [(usize, *const c_void); 7] = [
            (0, m0 as *const c_void),
            (1, m1 as *const c_void),
            (4, m4 as *const c_void),
            (5, m5 as *const c_void),
            (6, m6 as *const c_void),
            (9, m9 as *const c_void),
            (12, m12 as *const c_void),
        ];
        for (argc, f) in funcs {
            let mut argv: Vec<usize> = (0..argc).map(|i| 1000 + i).collect();
            argv.resize(argc.max(4), 0);
            let (mut gtid, mut tid) = (7, 3);
            // SAFETY: `f` takes `argc` arguments after the ids; `argv` has
            // at least four words.
            unsafe { invoke(f, &mut gtid, &mut tid, argc, argv.as_ptr()) };
            let want: Vec<usize> = [7, 3]
                .into_iter()
                .chain((0..argc).map(|i| 1000 + i))
                .collect();
            assert_eq!(SAW.with(|s| s.borrow().clone()), want, "argc {argc}");
        }
    }
}
