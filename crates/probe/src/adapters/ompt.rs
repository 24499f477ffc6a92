//! OpenMP through OMPT, the tool interface of LLVM's `libomp` (and the
//! vendor runtimes built on it): `libhark.so` exports `ompt_start_tool`,
//! which the runtime looks up when it starts, and registers callbacks that
//! record the same events as the libgomp wrappers (`gomp.rs`, `op::OMP_*`).
//! Chosen with `HARK_OMPT=1`, and off x86-64; otherwise the tool declines
//! and the runtime's entry points are wrapped instead (`kmpc.rs`), which
//! costs a program less.
//!
//! - `parallel_begin`/`_end` on the forking thread: the region, its team
//!   size and its construct (the caller's return address, as symbol and
//!   offset); the region instance travels in the parallel's `ompt_data_t`.
//! - `implicit_task` begin starts a thread's implicit task; its end is the
//!   start of the thread's wait at the region's end barrier (the
//!   `sync_region_wait` of kind implicit), where libgomp's adapter ends it
//!   too; a team without that barrier ends it at the callback's end.
//! - `sync_region_wait`: barrier, `taskwait` and `taskgroup` waits;
//!   `mutex_acquire`→`mutex_acquired`: lock, critical and ordered waits;
//!   `work`, `masked`, `task_create`: marks.
//!
//! Only the subset of `omp-tools.h` used here is defined. A runtime
//! without OMPT (libgomp) never calls `ompt_start_tool`.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use hark_wire::{op, Event, EXTRA_NONE};

use crate::core;

/// `ompt_data_t`: a word the tool keeps per parallel region or task.
#[repr(C)]
pub union OmptData {
    value: u64,
    ptr: *mut c_void,
}

type Lookup = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type Initialize = unsafe extern "C" fn(Lookup, c_int, *mut OmptData) -> c_int;
type Finalize = unsafe extern "C" fn(*mut OmptData);
type SetCallback = unsafe extern "C" fn(c_int, *const c_void) -> c_int;

/// `ompt_start_tool_result_t`.
#[repr(C)]
pub struct StartToolResult {
    initialize: Initialize,
    finalize: Finalize,
    tool_data: OmptData,
}

// Callback ids and enumerators of `omp-tools.h` (OpenMP 5.1).
const CB_PARALLEL_BEGIN: c_int = 3;
const CB_PARALLEL_END: c_int = 4;
const CB_TASK_CREATE: c_int = 5;
const CB_IMPLICIT_TASK: c_int = 7;
const CB_SYNC_REGION_WAIT: c_int = 16;
const CB_WORK: c_int = 20;
const CB_MASKED: c_int = 21;
const CB_MUTEX_ACQUIRE: c_int = 26;
const CB_MUTEX_ACQUIRED: c_int = 27;
const SCOPE_BEGIN: c_int = 1;
const SCOPE_END: c_int = 2;
const TASK_INITIAL: c_int = 1;
const TASK_IMPLICIT: c_int = 2;

/// The tool's one result, handed to the runtime (which never writes it
/// but through `tool_data`, which the probe does not use).
struct Result(std::cell::UnsafeCell<StartToolResult>);
// SAFETY: the runtime reads it once, at start; nothing else touches it.
unsafe impl Sync for Result {}

static RESULT: Result = Result(std::cell::UnsafeCell::new(StartToolResult {
    initialize,
    finalize,
    tool_data: OmptData { value: 0 },
}));

/// Parallel regions forked so far in this process (`op::OMP_*` `extra`).
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// A thread's regions and tasks, reached through the pointer in its
/// [`core::OmpThread`] (`stacks`).
#[derive(Default)]
struct Stacks {
    /// Regions this thread forked and has not joined, innermost last.
    forked: Vec<Forked>,
    /// This thread's open implicit tasks, innermost last. The innermost
    /// one's instance and number are also in the thread's
    /// [`core::OmpThread`], where the events of its waits read them.
    tasks: Vec<Task>,
}

/// Owns a thread's [`Stacks`]; dropped when the thread exits, when it
/// clears the pointer, so that a later callback finds none.
struct Owner(Box<UnsafeCell<Stacks>>);

impl Drop for Owner {
    fn drop(&mut self) {
        core::omp_thread(|o| o.stacks.set(std::ptr::null_mut()));
    }
}

thread_local! {
    static OWNER: Owner = Owner(Box::default());
}

/// This thread's [`Stacks`] lent to `f`; `None` once the thread is being
/// torn down.
#[inline(always)]
fn with_stacks<R>(f: impl FnOnce(&mut Stacks) -> R) -> Option<R> {
    let mut p = core::omp_thread(|o| o.stacks.get()).cast::<Stacks>();
    if p.is_null() {
        p = stacks_slow()?;
    }
    // SAFETY: `p` is this thread's `Stacks`, alive until its owner's drop
    // clears the pointer, and no `f` calls `with_stacks`: this is the only
    // reference.
    Some(f(unsafe { &mut *p }))
}

/// Makes this thread's [`Stacks`] on its first region or task.
#[cold]
#[inline(never)]
fn stacks_slow() -> Option<*mut Stacks> {
    let p = OWNER.try_with(|o| o.0.get()).ok()?;
    core::omp_thread(|o| o.stacks.set(p.cast()));
    Some(p)
}

/// A region this thread forked.
#[derive(Clone, Copy)]
struct Forked {
    instance: u64,
    t0: u64,
    construct: u32,
    /// The team's actual size, once its thread 0 started.
    size: u32,
    /// Where the program forked it (the master's end barrier has it too).
    codeptr: usize,
}

/// An implicit task of this thread.
#[derive(Clone, Copy)]
struct Task {
    instance: u64,
    t0: u64,
    num: i32,
    size: i32,
    construct: u32,
    /// Recorded already, at the start of its wait at the region's end.
    ended: bool,
    /// The implicit task the thread was in before ([`core::OmpThread`]).
    outer: (u64, i32),
}

/// Called by an OMPT runtime when it starts: Hark's tool.
///
/// # Safety
/// As the OpenMP specification's `ompt_start_tool`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn ompt_start_tool(
    _omp_version: c_uint,
    _runtime_version: *const c_char,
) -> *mut StartToolResult {
    // Declined without an address (a passive probe records nothing), and
    // unless chosen (`HARK_OMPT`) where the runtime's entry points are
    // wrapped instead (`kmpc.rs`): an OMPT runtime with a tool does more
    // work at every barrier and fork.
    let passive = std::env::var_os(hark_settings::ADDR.name).is_none_or(|a| a.is_empty());
    #[cfg(target_arch = "x86_64")]
    let chosen = super::kmpc::ompt_chosen();
    #[cfg(not(target_arch = "x86_64"))]
    let chosen = true;
    if passive || !chosen {
        return std::ptr::null_mut();
    }
    RESULT.0.get()
}

unsafe extern "C" fn initialize(lookup: Lookup, _device: c_int, _data: *mut OmptData) -> c_int {
    // SAFETY: the runtime's lookup function with a NUL-terminated name.
    let set = unsafe { lookup(c"ompt_set_callback".as_ptr()) };
    if set.is_null() {
        return 0;
    }
    // SAFETY: the entry point the runtime returned under that name.
    let set: SetCallback = unsafe { std::mem::transmute::<*mut c_void, SetCallback>(set) };
    let callbacks: [(c_int, *const c_void); 9] = [
        (CB_PARALLEL_BEGIN, parallel_begin as *const c_void),
        (CB_PARALLEL_END, parallel_end as *const c_void),
        (CB_TASK_CREATE, task_create as *const c_void),
        (CB_IMPLICIT_TASK, implicit_task as *const c_void),
        (CB_SYNC_REGION_WAIT, sync_region_wait as *const c_void),
        (CB_WORK, work as *const c_void),
        (CB_MASKED, masked as *const c_void),
        (CB_MUTEX_ACQUIRE, mutex_acquire as *const c_void),
        (CB_MUTEX_ACQUIRED, mutex_acquired as *const c_void),
    ];
    for (which, cb) in callbacks {
        // SAFETY: a callback id with a function of the type the
        // specification gives for it.
        unsafe { set(which, cb) };
    }
    // Non-zero: keep the tool active.
    1
}

unsafe extern "C" fn finalize(_data: *mut OmptData) {}

/// Records `ev` with this thread's team number and region instance.
#[inline(always)]
fn record(mut ev: Event) {
    let Some(g) = core::enter() else {
        return;
    };
    let o = g.omp();
    ev.extra.set(o.instance());
    ev.peer.set(o.num.get());
    g.record(ev);
}

unsafe extern "C" fn parallel_begin(
    _task: *mut OmptData,
    _frame: *const c_void,
    parallel: *mut OmptData,
    requested: c_uint,
    _flags: c_int,
    codeptr: *const c_void,
) {
    let instance = INSTANCES.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff;
    let construct = match core::enter() {
        Some(_g) => {
            std::panic::catch_unwind(|| super::gomp::construct(codeptr as usize)).unwrap_or(0)
        }
        None => 0,
    };
    if !parallel.is_null() {
        // SAFETY: the runtime's word for this region: every thread of the
        // team reads instance and construct from it.
        unsafe { (*parallel).value = instance << 32 | construct as u64 };
    }
    let forked = Forked {
        instance,
        t0: core::stamp(),
        construct,
        size: requested,
        codeptr: codeptr as usize,
    };
    with_stacks(|s| s.forked.push(forked));
}

unsafe extern "C" fn parallel_end(
    _parallel: *mut OmptData,
    _task: *mut OmptData,
    _flags: c_int,
    _codeptr: *const c_void,
) {
    let t1 = core::stamp();
    let Some((f, level)) =
        with_stacks(|s| Some((s.forked.pop()?, s.forked.len() as u64 + 1))).flatten()
    else {
        return;
    };
    let Some(g) = core::enter() else {
        return;
    };
    let mut ev = Event::new(op::OMP_PARALLEL, f.t0, t1);
    ev.obj.set(f.construct);
    ev.tag.set(f.size as i32);
    ev.bytes.set(level);
    ev.extra.set(f.instance);
    ev.peer.set(g.omp().num.get());
    g.record(ev);
}

unsafe extern "C" fn implicit_task(
    endpoint: c_int,
    parallel: *mut OmptData,
    _task: *mut OmptData,
    actual: c_uint,
    index: c_uint,
    flags: c_int,
) {
    if flags & TASK_INITIAL != 0 || flags & TASK_IMPLICIT == 0 {
        return;
    }
    if endpoint == SCOPE_BEGIN {
        let word = if parallel.is_null() {
            EXTRA_NONE
        } else {
            // SAFETY: the runtime's word for this region, set at its begin.
            unsafe { (*parallel).value }
        };
        let (instance, construct) = (word >> 32, word as u32);
        if index == 0 {
            with_stacks(|s| {
                if let Some(f) = s.forked.last_mut().filter(|f| f.instance == instance) {
                    f.size = actual;
                }
            });
        }
        let outer = core::omp_thread(|o| o.enter_task(instance, index as i32));
        let task = Task {
            instance,
            t0: core::stamp(),
            num: index as i32,
            size: actual as i32,
            construct,
            ended: false,
            outer,
        };
        with_stacks(|s| s.tasks.push(task));
    } else if endpoint == SCOPE_END {
        let Some(task) = with_stacks(|s| s.tasks.pop()).flatten() else {
            return;
        };
        // Most tasks were recorded when their end-barrier wait began: no
        // clock read for those (a `rdtsc` costs more than the rest here).
        let t1 = (!task.ended).then(core::stamp);
        core::omp_thread(|o| o.restore(task.outer));
        if let Some(t1) = t1 {
            record_task(&task, t1);
        }
    }
}

/// Records `task` as ended at `t1`.
fn record_task(task: &Task, t1: u64) {
    let Some(g) = core::enter() else {
        return;
    };
    let mut ev = Event::new(op::OMP_IMPLICIT_TASK, task.t0, t1);
    ev.obj.set(task.construct);
    ev.extra.set(task.instance);
    ev.peer.set(task.num);
    ev.tag.set(task.size);
    g.record(ev);
}

/// Whether a barrier wait of `kind` at `codeptr` is the one at the end of
/// this thread's region. LLVM reports it late on a team's other threads
/// (when they are woken for the next region), so its start ends the
/// implicit task and its end is not used: the analysis counts the wait up
/// to the region's join, as with libgomp.
#[inline(always)]
fn is_region_end(kind: c_int, codeptr: *const c_void) -> bool {
    match kind {
        // implicit at a parallel's end (OpenMP 5.1)
        9 => true,
        // implicit: a worksharing construct's end has its own code address
        2 => codeptr.is_null() || forked_at(codeptr),
        _ => false,
    }
}

/// Whether the innermost region this thread forked was forked at `codeptr`.
#[inline(never)]
fn forked_at(codeptr: *const c_void) -> bool {
    with_stacks(|s| s.forked.last().map(|f| f.codeptr) == Some(codeptr as usize)).unwrap_or(false)
}

/// Ends this thread's innermost implicit task now (its end-barrier wait
/// starts).
#[inline(never)]
fn end_task() {
    let t1 = core::stamp();
    let task = with_stacks(|s| {
        let task = s.tasks.last_mut().filter(|x| !x.ended)?;
        task.ended = true;
        Some(*task)
    });
    if let Some(Some(task)) = task {
        record_task(&task, t1);
    }
}

/// A wait that recording starts during is recorded as none.
#[cold]
#[inline(never)]
fn wait_unrecorded() {
    core::omp_thread(|o| o.wait.set(u64::MAX));
}

// Every barrier of every thread comes here twice, so the common path (a
// barrier that is not a region's end, while recording) stays short and
// calls nothing it has to come back from but the buffer's slow paths.
unsafe extern "C" fn sync_region_wait(
    kind: c_int,
    endpoint: c_int,
    _parallel: *mut OmptData,
    _task: *mut OmptData,
    codeptr: *const c_void,
) {
    if !core::recording() {
        return wait_unrecorded();
    }
    if is_region_end(kind, codeptr) {
        if endpoint == SCOPE_BEGIN {
            end_task();
        }
        return;
    }
    if endpoint == SCOPE_BEGIN {
        core::omp_thread(|o| o.wait.set(core::stamp()));
        return core::reserve();
    }
    let tag = match kind {
        2 | 8 => op::OMP_SYNC_IMPLICIT,
        1 | 3 | 4 => op::OMP_SYNC_EXPLICIT,
        5 => op::OMP_SYNC_TASKWAIT,
        6 => op::OMP_SYNC_TASKGROUP,
        _ => return,
    };
    let t1 = core::stamp();
    let t0 = core::omp_thread(|o| o.wait.get());
    let mut ev = Event::new(op::OMP_BARRIER, t0.min(t1), t1);
    ev.tag.set(tag);
    record(ev);
}

unsafe extern "C" fn mutex_acquire(
    _kind: c_int,
    _hint: c_uint,
    _impl: c_uint,
    _wait_id: u64,
    _codeptr: *const c_void,
) {
    if !core::recording() {
        // As in `sync_region_wait`.
        core::omp_thread(|o| o.lock.set(u64::MAX));
        return;
    }
    core::omp_thread(|o| o.lock.set(core::stamp()));
    core::reserve();
}

unsafe extern "C" fn mutex_acquired(kind: c_int, _wait_id: u64, _codeptr: *const c_void) {
    let tag = match kind {
        5 => op::OMP_MUTEX_CRITICAL,
        1..=4 => op::OMP_MUTEX_LOCK,
        7 => op::OMP_MUTEX_ORDERED,
        _ => return,
    };
    let t1 = core::stamp();
    let t0 = core::omp_thread(|o| o.lock.get());
    let mut ev = Event::new(op::OMP_LOCK_WAIT, t0.min(t1), t1);
    ev.tag.set(tag);
    record(ev);
}

unsafe extern "C" fn work(
    kind: c_int,
    endpoint: c_int,
    _parallel: *mut OmptData,
    _task: *mut OmptData,
    _count: u64,
    _codeptr: *const c_void,
) {
    let tag = match kind {
        1 | 7 => op::OMP_WORK_LOOP,
        2 => op::OMP_WORK_SECTIONS,
        3 => op::OMP_WORK_SINGLE,
        _ => return,
    };
    if endpoint == SCOPE_BEGIN {
        let t = core::stamp();
        let mut ev = Event::new(op::OMP_WORK, t, t);
        ev.tag.set(tag);
        record(ev);
    }
}

unsafe extern "C" fn masked(
    endpoint: c_int,
    _parallel: *mut OmptData,
    _task: *mut OmptData,
    _codeptr: *const c_void,
) {
    if endpoint == SCOPE_BEGIN {
        let t = core::stamp();
        let mut ev = Event::new(op::OMP_WORK, t, t);
        ev.tag.set(op::OMP_WORK_MASKED);
        record(ev);
    }
}

unsafe extern "C" fn task_create(
    _task: *mut OmptData,
    _frame: *const c_void,
    _new_task: *mut OmptData,
    flags: c_int,
    _deps: c_int,
    _codeptr: *const c_void,
) {
    // Explicit tasks only (flag ompt_task_explicit = 4).
    if flags & 4 != 0 {
        let t = core::stamp();
        record(Event::new(op::OMP_TASK_CREATE, t, t));
    }
}
