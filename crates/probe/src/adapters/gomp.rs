//! GCC's OpenMP runtime, libgomp, which has no OMPT: its `GOMP_*` entry
//! points, which gcc and gfortran compile OpenMP constructs into, are
//! wrapped so that the same events come out as from an OMPT runtime
//! (`op::OMP_*`, `docs/wire.md`, "OpenMP").
//!
//! - `GOMP_parallel`, the combined `GOMP_parallel_loop_*` and
//!   `GOMP_parallel_sections` (and `GOMP_parallel_start`/`_end` of old
//!   code) run
//!   the region's outlined function through [`task`], so that every thread
//!   of the team records its implicit task, its number in the team and
//!   the team's size. The region's end barrier is inside libgomp, out of
//!   reach: a thread's implicit task ends when its share of the work
//!   returns, where its end-barrier wait starts, and the analysis counts
//!   that wait up to the region's join on the forking thread (as with
//!   libomp, `kmpc.rs` and `ompt.rs`).
//! - `GOMP_barrier`, `GOMP_loop_end` and `GOMP_sections_end` (the
//!   barriers at a loop's and a `sections`' end), their `_cancel` forms,
//!   `GOMP_taskwait` and `GOMP_taskgroup_end` are barrier waits;
//!   `GOMP_critical_start`, `GOMP_critical_name_start` and
//!   `GOMP_ordered_start` lock waits (and `omp_set_lock`, `kmpc.rs`); loop
//!   starts (ordered ones and gcc 9's `GOMP_loop_start` too), sections
//!   starts, `GOMP_single_start` and `GOMP_task` are marks.
//!
//! A program without OpenMP never calls any of these, so it pays nothing.
//! No wrapper holds the probe's guard while the real function runs: the
//! threads libgomp starts on the first fork must not be adopted as the
//! library's own (`threads.rs`).
// The wrappers carry libgomp's own names.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::ffi::{c_int, c_long, c_uint, c_void};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use hark_wire::{op, Event, NameKind, EXTRA_NONE};

use super::real;
use crate::core;

type Outlined = unsafe extern "C" fn(*mut c_void);

/// What the events of one parallel region carry: its instance in this
/// process and its construct's name id. Shared with the libomp wrappers
/// (`kmpc.rs`).
#[derive(Clone, Copy)]
pub(super) struct Region {
    pub(super) instance: u64,
    pub(super) construct: u32,
}

/// What the threads of one team share: the program's outlined function
/// and what the events of its region carry.
struct Team {
    func: Outlined,
    data: *mut c_void,
    region: Region,
    /// The team's actual size, as its threads see it.
    size: AtomicI32,
}

/// Parallel regions this process forked so far: the next one's instance.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// Construct names already defined: (outlined function address, name id).
static CONSTRUCTS: Mutex<Vec<(usize, u32)>> = Mutex::new(Vec::new());

/// Slots of [`SEEN`].
const SEEN_SLOTS: usize = 64;

/// The first constructs of [`CONSTRUCTS`] again, found without its lock:
/// every region looks its construct up. Address `f` sits in the first free
/// slot from `f`'s hash on; a slot is written once, id first, then the
/// address (`Release`), under the lock.
struct Seen {
    addr: [AtomicUsize; SEEN_SLOTS],
    id: [AtomicU32; SEEN_SLOTS],
}

static SEEN: Seen = Seen {
    addr: [const { AtomicUsize::new(0) }; SEEN_SLOTS],
    id: [const { AtomicU32::new(0) }; SEEN_SLOTS],
};

impl Seen {
    /// The slots address `f` may sit in, in order.
    fn slots(f: usize) -> impl Iterator<Item = usize> {
        let h = (f >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        (0..SEEN_SLOTS).map(move |i| (h + i) % SEEN_SLOTS)
    }

    /// The id of `f`, if it has a slot.
    #[inline]
    fn get(&self, f: usize) -> Option<u32> {
        for i in Self::slots(f) {
            match self.addr[i].load(Ordering::Acquire) {
                0 => return None,
                a if a == f => return Some(self.id[i].load(Ordering::Relaxed)),
                _ => {}
            }
        }
        None
    }

    /// Gives `f` the first free slot, if any is left. Only under
    /// `CONSTRUCTS`' lock, for an `f` without one.
    fn put(&self, f: usize, id: u32) {
        if let Some(i) = Self::slots(f).find(|&i| self.addr[i].load(Ordering::Relaxed) == 0) {
            self.id[i].store(id, Ordering::Relaxed);
            self.addr[i].store(f, Ordering::Release);
        }
    }
}

thread_local! {
    /// Regions this thread opened with `GOMP_parallel_start`, innermost
    /// last: whether each was wrapped, and its team and start.
    static OPEN: RefCell<Vec<Option<Open>>> = const { RefCell::new(Vec::new()) };
}

pub(super) fn thread_num() -> i32 {
    real!(c"omp_get_thread_num": unsafe extern "C" fn() -> c_int)
        // SAFETY: the runtime's function without arguments or preconditions.
        .map_or(0, |f| unsafe { f() })
}

pub(super) fn team_size() -> i32 {
    real!(c"omp_get_num_threads": unsafe extern "C" fn() -> c_int)
        // SAFETY: as above.
        .map_or(1, |f| unsafe { f() })
}

pub(super) fn level() -> i32 {
    real!(c"omp_get_level": unsafe extern "C" fn() -> c_int)
        // SAFETY: as above.
        .map_or(0, |f| unsafe { f() })
}

/// The construct name id of the code address `f` (a region's outlined
/// function, or where libomp's fork was called): its symbol
/// (`main._omp_fn.0`, `main+0x4a`), or its object file and offset, which
/// are the same in every rank whatever the load address.
pub(super) fn construct(f: usize) -> u32 {
    if let Some(id) = SEEN.get(f) {
        return id;
    }
    let named = |known: &Vec<(usize, u32)>| known.iter().find(|(a, _)| *a == f).map(|&(_, id)| id);
    if let Some(id) = named(&hark_sync::lock(&CONSTRUCTS)) {
        return id;
    }
    // Named without the lock: `dladdr` and the object list take the
    // loader's lock, which a thread forking inside `dlopen` (from an ELF
    // constructor) holds while it waits for this one.
    let name = symbol(f);
    let mut known = hark_sync::lock(&CONSTRUCTS);
    if let Some(id) = named(&known) {
        return id;
    }
    let id = core::name_id(NameKind::Construct, &name);
    known.push((f, id));
    SEEN.put(f, id);
    id
}

/// `symbol` for the code address `f` when the dynamic symbols name it,
/// else `file+0xoffset` with the offset from the object's load bias (a file
/// address, the same in every rank), which `hark` resolves with the
/// object's full symbol table (`main._omp_fn.0` is local to the program:
/// `dladdr` does not see it). The object is sent first.
fn symbol(f: usize) -> String {
    let object = core::callsite::object_of(f as u64);
    // SAFETY: an all-zero Dl_info is a valid value to be filled in.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    if unsafe { libc::dladdr(f as *const c_void, &mut info) } == 0 {
        return format!("{f:#x}");
    }
    let cstr = |p: *const std::ffi::c_char| {
        // SAFETY: dladdr's strings are NUL-terminated and live as long as
        // the object stays loaded; they are copied at once.
        (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy())
    };
    if let Some(s) = cstr(info.dli_sname) {
        let off = f.saturating_sub(info.dli_saddr as usize);
        return if off == 0 {
            s.into_owned()
        } else {
            format!("{s}+{off:#x}")
        };
    }
    let (file, base) = match object {
        Some((path, bias)) => (path, bias as usize),
        None => (
            cstr(info.dli_fname).unwrap_or_default().into_owned(),
            info.dli_fbase as usize,
        ),
    };
    let name = file.rsplit('/').next().unwrap_or("");
    format!("{name}+{:#x}", f.saturating_sub(base))
}

/// A new region of the construct at code address `f`, if recording is on
/// (`None`: run the region as it is, unwrapped).
pub(super) fn region(f: usize) -> Option<Region> {
    let _g = core::enter()?;
    let construct = std::panic::catch_unwind(|| construct(f)).unwrap_or(0);
    Some(Region {
        instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
        construct,
    })
}

/// A team for `func` and `data`, if recording is on (`None`: run the
/// region as it is, unwrapped).
fn team(func: Outlined, data: *mut c_void) -> Option<Team> {
    Some(Team {
        func,
        data,
        region: region(func as usize)?,
        size: AtomicI32::new(0),
    })
}

/// Records the region forked at `t0`, joined now.
pub(super) fn parallel_done(region: Region, t0: u64, level: i32, size: i32) {
    let t1 = core::stamp();
    let Some(g) = core::enter() else {
        return;
    };
    let mut ev = Event::new(op::OMP_PARALLEL, t0, t1);
    ev.obj.set(region.construct);
    ev.extra.set(region.instance);
    ev.tag.set(size);
    // Forked outside any region (level 1), the thread is number 0 of its
    // initial team.
    ev.peer.set(if level <= 1 {
        0
    } else {
        whereabouts(g.omp()).0
    });
    ev.bytes.set(level.max(1) as u64);
    g.record(ev);
}

/// What every thread of a wrapped team runs in place of the outlined
/// function: the function, as the thread's implicit task, which ends where
/// its wait at the region's end barrier starts.
unsafe extern "C" fn task(arg: *mut c_void) {
    // SAFETY: `arg` is the team `fork` passed, alive until every thread of
    // the team has left this function (libgomp joins them).
    let team = unsafe { &*arg.cast::<Team>() };
    let Region {
        instance,
        construct,
    } = team.region;
    let (thread, size) = (thread_num(), team_size());
    let outer = core::omp_thread(|o| o.enter_task(instance, thread));
    let t0 = core::stamp();
    // SAFETY: the program's outlined function with its own data.
    unsafe { (team.func)(team.data) };
    let t1 = core::stamp();
    team.size.store(size, Ordering::Relaxed);
    implicit_task(t0, t1, instance, construct, thread, size);
    core::omp_thread(|o| o.restore(outer));
}

/// Records a thread's implicit task, `t0` to `t1`, in a team of `size`.
pub(super) fn implicit_task(
    t0: u64,
    t1: u64,
    instance: u64,
    construct: u32,
    thread: i32,
    size: i32,
) {
    if let Some(g) = core::enter() {
        let mut ev = Event::new(op::OMP_IMPLICIT_TASK, t0, t1);
        ev.obj.set(construct);
        ev.extra.set(instance);
        ev.peer.set(thread);
        ev.tag.set(size);
        g.record(ev);
    }
}

/// `GOMP_parallel`: forks a team running `func(data)` and joins it.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_parallel(
    func: Outlined,
    data: *mut c_void,
    num_threads: c_uint,
    flags: c_uint,
) {
    type F = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_uint);
    let Some(f) = real!(c"GOMP_parallel": F) else {
        return;
    };
    // SAFETY: the caller's arguments, or our trampoline and its team.
    fork(func, data, |func, data| unsafe {
        f(func, data, num_threads, flags)
    })
}

/// Runs `call` (a real `GOMP_parallel*` function) with the outlined
/// function and its data: wrapped in [`task`] and its team when recording
/// is on, as they are otherwise; then records the region.
fn fork(func: Outlined, data: *mut c_void, call: impl FnOnce(Outlined, *mut c_void)) {
    let Some(team) = team(func, data) else {
        return call(func, data);
    };
    let lvl = level() + 1;
    let t0 = core::stamp();
    // The team outlives the call, which joins every thread that reads it;
    // they only read it, and its size through an atomic.
    call(task, (&team as *const Team).cast_mut().cast());
    parallel_done(team.region, t0, lvl, team.size.load(Ordering::Relaxed));
}

/// Combined `parallel` + loop constructs with a schedule libgomp sets up
/// before forking (`#pragma omp parallel for schedule(dynamic)`).
macro_rules! parallel_loop {
    ($($name:ident = $sym:literal;)*) => {$(
        /// Forks a team running a loop.
        ///
        /// # Safety
        /// As libgomp's.
        #[cfg_attr(not(test), no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            func: Outlined,
            data: *mut c_void,
            num_threads: c_uint,
            start: c_long,
            end: c_long,
            incr: c_long,
            chunk: c_long,
            flags: c_uint,
        ) {
            type F = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
            let Some(f) = real!($sym: F) else {
                return;
            };
            // SAFETY: the caller's arguments, or our trampoline and its team.
            fork(func, data, |func, data| unsafe {
                f(func, data, num_threads, start, end, incr, chunk, flags)
            })
        }
    )*};
}

parallel_loop! {
    GOMP_parallel_loop_static = c"GOMP_parallel_loop_static";
    GOMP_parallel_loop_dynamic = c"GOMP_parallel_loop_dynamic";
    GOMP_parallel_loop_guided = c"GOMP_parallel_loop_guided";
    GOMP_parallel_loop_nonmonotonic_dynamic = c"GOMP_parallel_loop_nonmonotonic_dynamic";
    GOMP_parallel_loop_nonmonotonic_guided = c"GOMP_parallel_loop_nonmonotonic_guided";
}

/// `GOMP_parallel_loop_runtime`: a combined loop with `OMP_SCHEDULE`'s
/// schedule.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_parallel_loop_runtime(
    func: Outlined,
    data: *mut c_void,
    num_threads: c_uint,
    start: c_long,
    end: c_long,
    incr: c_long,
    flags: c_uint,
) {
    type F = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_long, c_long, c_long, c_uint);
    let Some(f) = real!(c"GOMP_parallel_loop_runtime": F) else {
        return;
    };
    // SAFETY: the caller's arguments, or our trampoline and its team.
    fork(func, data, |func, data| unsafe {
        f(func, data, num_threads, start, end, incr, flags)
    })
}

/// `GOMP_parallel_sections`: a combined `parallel sections`.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_parallel_sections(
    func: Outlined,
    data: *mut c_void,
    num_threads: c_uint,
    count: c_uint,
    flags: c_uint,
) {
    type F = unsafe extern "C" fn(Outlined, *mut c_void, c_uint, c_uint, c_uint);
    let Some(f) = real!(c"GOMP_parallel_sections": F) else {
        return;
    };
    // SAFETY: the caller's arguments, or our trampoline and its team.
    fork(func, data, |func, data| unsafe {
        f(func, data, num_threads, count, flags)
    })
}

/// `GOMP_parallel_start` (gcc before 4.9): forks a team; the caller runs
/// its own share and then calls `GOMP_parallel_end`.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_parallel_start(
    func: Outlined,
    data: *mut c_void,
    num_threads: c_uint,
) {
    type F = unsafe extern "C" fn(Outlined, *mut c_void, c_uint);
    let Some(f) = real!(c"GOMP_parallel_start": F) else {
        return;
    };
    let Some(team) = team(func, data) else {
        let _ = OPEN.try_with(|o| o.borrow_mut().push(None));
        // SAFETY: the caller's arguments, passed on.
        return unsafe { f(func, data, num_threads) };
    };
    let team = Box::new(team);
    let lvl = level() + 1;
    let t0 = core::stamp();
    let arg: *const Team = &*team;
    // SAFETY: as above; the team is kept until `GOMP_parallel_end`.
    unsafe { f(task, arg.cast_mut().cast(), num_threads) };
    let instance = team.region.instance;

    // The caller now runs its share: its implicit task starts here.
    let mine = core::stamp();
    let outer = core::omp_thread(|o| o.enter_task(instance, thread_num()));
    let _ = OPEN.try_with(|o| {
        o.borrow_mut().push(Some(Open {
            team,
            t0,
            level: lvl,
            mine,
            outer,
        }))
    });
}

/// A region opened by `GOMP_parallel_start`, until `GOMP_parallel_end`.
struct Open {
    team: Box<Team>,
    /// Fork time.
    t0: u64,
    /// Nesting level.
    level: i32,
    /// When the forking thread's own share started.
    mine: u64,
    /// The implicit task the forking thread was in before.
    outer: (u64, i32),
}

/// `GOMP_parallel_end`: joins the team `GOMP_parallel_start` forked.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_parallel_end() {
    let Some(f) = real!(c"GOMP_parallel_end": unsafe extern "C" fn()) else {
        return;
    };
    let open = OPEN
        .try_with(|o| o.borrow_mut().pop())
        .ok()
        .flatten()
        .flatten();
    if let Some(Open {
        team,
        t0,
        level,
        mine,
        outer,
    }) = open
    {
        // The forking thread ran the outlined function itself, not through
        // `task`: its share ends here.
        let t1 = core::stamp();
        let (thread, size) = (thread_num(), team_size());
        let Region {
            instance,
            construct,
        } = team.region;
        implicit_task(mine, t1, instance, construct, thread, size);
        core::omp_thread(|o| o.restore(outer));
        // SAFETY: no arguments; the region is the caller's own.
        unsafe { f() };
        parallel_done(team.region, t0, level, size);
        return;
    }
    // SAFETY: as above.
    unsafe { f() }
}

/// This thread's number in its team and the region instance of its
/// innermost implicit task, as far as the probe saw them begin (else its
/// number from libgomp and `EXTRA_NONE`: a region forked while recording
/// was off, or orphaned code outside any).
#[inline(always)]
fn whereabouts(o: &core::OmpThread) -> (i32, u64) {
    match o.instance() {
        EXTRA_NONE => (thread_num(), EXTRA_NONE),
        instance => (o.num.get(), instance),
    }
}

/// Times `call` as an OpenMP wait of kind `op`/`tag`. The probe is not
/// entered while `call` runs: a barrier or `taskwait` runs queued tasks,
/// whose events are the program's.
#[inline(always)]
pub(super) fn wait<R>(op: u16, tag: i32, call: impl FnOnce() -> R) -> R {
    if core::enter().is_none() {
        return call();
    }
    let t0 = core::stamp();
    core::reserve();
    let r = call();
    let t1 = core::stamp();
    if let Some(g) = core::enter() {
        let (thread, instance) = whereabouts(g.omp());
        let mut ev = Event::new(op, t0, t1);
        ev.tag.set(tag);
        ev.peer.set(thread);
        ev.extra.set(instance);
        g.record(ev);
    }
    r
}

/// Records a mark of kind `op`/`tag` now.
#[inline(always)]
pub(super) fn mark(op: u16, tag: i32) {
    if let Some(g) = core::enter() {
        let t = core::stamp();
        let (thread, instance) = whereabouts(g.omp());
        let mut ev = Event::new(op, t, t);
        ev.tag.set(tag);
        ev.peer.set(thread);
        ev.extra.set(instance);
        g.record(ev);
    }
}

/// Entry points without arguments that only wait: each is timed as one
/// `op` event of kind `tag` (`wait`).
macro_rules! waits {
    ($($(#[$doc:meta])* $name:ident = $sym:literal => $op:ident, $tag:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As libgomp's.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name() {
            let Some(f) = real!($sym: unsafe extern "C" fn()) else {
                return;
            };
            // SAFETY: no arguments.
            wait(op::$op, op::$tag, || unsafe { f() })
        }
    )*};
}

waits! {
    /// `GOMP_barrier`: an explicit barrier (or a worksharing construct's end).
    GOMP_barrier = c"GOMP_barrier" => OMP_BARRIER, OMP_SYNC_EXPLICIT;
    /// `GOMP_loop_end`: the barrier at the end of a loop.
    GOMP_loop_end = c"GOMP_loop_end" => OMP_BARRIER, OMP_SYNC_IMPLICIT;
    /// `GOMP_sections_end`: the barrier at the end of a `sections`.
    GOMP_sections_end = c"GOMP_sections_end" => OMP_BARRIER, OMP_SYNC_IMPLICIT;
    /// `GOMP_taskwait`.
    GOMP_taskwait = c"GOMP_taskwait" => OMP_BARRIER, OMP_SYNC_TASKWAIT;
    /// `GOMP_taskgroup_end`: waits for the group's tasks.
    GOMP_taskgroup_end = c"GOMP_taskgroup_end" => OMP_BARRIER, OMP_SYNC_TASKGROUP;
    /// `GOMP_critical_start`: waits for the unnamed critical section.
    GOMP_critical_start = c"GOMP_critical_start" => OMP_LOCK_WAIT, OMP_MUTEX_CRITICAL;
    /// `GOMP_ordered_start`: waits for this iteration's turn.
    GOMP_ordered_start = c"GOMP_ordered_start" => OMP_LOCK_WAIT, OMP_MUTEX_ORDERED;
}

/// The barriers of a region that may be cancelled (`GOMP_barrier_cancel`
/// and the ends of its worksharing constructs): true when it was.
macro_rules! cancellable_waits {
    ($($(#[$doc:meta])* $name:ident = $sym:literal => $tag:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As libgomp's.
        #[cfg_attr(not(test), no_mangle)]
        pub unsafe extern "C" fn $name() -> bool {
            let Some(f) = real!($sym: unsafe extern "C" fn() -> bool) else {
                return false;
            };
            // SAFETY: no arguments.
            wait(op::OMP_BARRIER, op::$tag, || unsafe { f() })
        }
    )*};
}

cancellable_waits! {
    /// `GOMP_barrier_cancel`: an explicit barrier in a cancellable region.
    GOMP_barrier_cancel = c"GOMP_barrier_cancel" => OMP_SYNC_EXPLICIT;
    /// `GOMP_loop_end_cancel`: a loop's end in a cancellable region.
    GOMP_loop_end_cancel = c"GOMP_loop_end_cancel" => OMP_SYNC_IMPLICIT;
    /// `GOMP_sections_end_cancel`: a `sections`' end in a cancellable region.
    GOMP_sections_end_cancel = c"GOMP_sections_end_cancel" => OMP_SYNC_IMPLICIT;
}

/// `GOMP_critical_name_start`: waits for a named critical section.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_critical_name_start(pptr: *mut *mut c_void) {
    let Some(f) = real!(c"GOMP_critical_name_start": unsafe extern "C" fn(*mut *mut c_void)) else {
        return;
    };
    // SAFETY: the caller's argument, passed on.
    wait(op::OMP_LOCK_WAIT, op::OMP_MUTEX_CRITICAL, || unsafe {
        f(pptr)
    })
}

/// `GOMP_single_start`: true on the one thread that runs the `single`.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_single_start() -> bool {
    let Some(f) = real!(c"GOMP_single_start": unsafe extern "C" fn() -> bool) else {
        return false;
    };
    // SAFETY: no arguments.
    let mine = unsafe { f() };
    if mine {
        mark(op::OMP_WORK, op::OMP_WORK_SINGLE);
    }
    mine
}

/// `GOMP_task`: creates an explicit task.
///
/// # Safety
/// As libgomp's (gcc 9 and later: ten arguments).
#[cfg_attr(not(test), no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn GOMP_task(
    func: Outlined,
    data: *mut c_void,
    cpyfn: *mut c_void,
    arg_size: c_long,
    arg_align: c_long,
    if_clause: bool,
    flags: c_uint,
    depend: *mut *mut c_void,
    priority: c_int,
    detach: *mut c_void,
) {
    type F = unsafe extern "C" fn(
        Outlined,
        *mut c_void,
        *mut c_void,
        c_long,
        c_long,
        bool,
        c_uint,
        *mut *mut c_void,
        c_int,
        *mut c_void,
    );
    let Some(f) = real!(c"GOMP_task": F) else {
        return;
    };
    mark(op::OMP_TASK_CREATE, 0);
    // SAFETY: the caller's arguments, passed on.
    unsafe {
        f(
            func, data, cpyfn, arg_size, arg_align, if_clause, flags, depend, priority, detach,
        )
    }
}

/// Loop starts, which all return true while this thread got iterations:
/// each group's entry points take the arguments in its parentheses.
macro_rules! loop_starts {
    ($($args:tt { $($name:ident = $sym:literal;)* })*) => {$($(
        loop_start!($name = $sym $args);
    )*)*};
}

/// One loop start of [`loop_starts`]: a mark, then the real function.
macro_rules! loop_start {
    ($name:ident = $sym:literal ($($a:ident: $t:ty),*)) => {
        /// Starts a loop; true while this thread got iterations.
        ///
        /// # Safety
        /// As libgomp's.
        #[cfg_attr(not(test), no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> bool {
            let Some(f) = real!($sym: unsafe extern "C" fn($($t),*) -> bool) else {
                return false;
            };
            mark(op::OMP_WORK, op::OMP_WORK_LOOP);
            // SAFETY: the caller's arguments, passed on.
            unsafe { f($($a),*) }
        }
    };
}

loop_starts! {
    // A chunk size.
    (start: c_long, end: c_long, incr: c_long, chunk: c_long, istart: *mut c_long, iend: *mut c_long) {
        GOMP_loop_static_start = c"GOMP_loop_static_start";
        GOMP_loop_dynamic_start = c"GOMP_loop_dynamic_start";
        GOMP_loop_guided_start = c"GOMP_loop_guided_start";
        GOMP_loop_nonmonotonic_dynamic_start = c"GOMP_loop_nonmonotonic_dynamic_start";
        GOMP_loop_nonmonotonic_guided_start = c"GOMP_loop_nonmonotonic_guided_start";
        GOMP_loop_ordered_static_start = c"GOMP_loop_ordered_static_start";
        GOMP_loop_ordered_dynamic_start = c"GOMP_loop_ordered_dynamic_start";
        GOMP_loop_ordered_guided_start = c"GOMP_loop_ordered_guided_start";
    }
    // The schedule `OMP_SCHEDULE` says.
    (start: c_long, end: c_long, incr: c_long, istart: *mut c_long, iend: *mut c_long) {
        GOMP_loop_runtime_start = c"GOMP_loop_runtime_start";
        GOMP_loop_ordered_runtime_start = c"GOMP_loop_ordered_runtime_start";
    }
    // gcc 9 and later: the schedule as an argument, and the loop's
    // reductions.
    (
        start: c_long,
        end: c_long,
        incr: c_long,
        sched: c_long,
        chunk: c_long,
        istart: *mut c_long,
        iend: *mut c_long,
        reductions: *mut usize,
        mem: *mut *mut c_void
    ) {
        GOMP_loop_start = c"GOMP_loop_start";
        GOMP_loop_ordered_start = c"GOMP_loop_ordered_start";
    }
}

/// `GOMP_sections_start`: a `sections` construct starts; returns this
/// thread's first section.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_sections_start(count: c_uint) -> c_uint {
    let Some(f) = real!(c"GOMP_sections_start": unsafe extern "C" fn(c_uint) -> c_uint) else {
        return 0;
    };
    mark(op::OMP_WORK, op::OMP_WORK_SECTIONS);
    // SAFETY: the caller's argument, passed on.
    unsafe { f(count) }
}

/// `GOMP_sections2_start` (gcc 9 and later, with reductions): as
/// `GOMP_sections_start`.
///
/// # Safety
/// As libgomp's.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn GOMP_sections2_start(
    count: c_uint,
    reductions: *mut usize,
    mem: *mut *mut c_void,
) -> c_uint {
    type F = unsafe extern "C" fn(c_uint, *mut usize, *mut *mut c_void) -> c_uint;
    let Some(f) = real!(c"GOMP_sections2_start": F) else {
        return 0;
    };
    mark(op::OMP_WORK, op::OMP_WORK_SECTIONS);
    // SAFETY: the caller's arguments, passed on.
    unsafe { f(count, reductions, mem) }
}
