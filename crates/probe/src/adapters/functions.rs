//! Functions the compiler instrumented (`-finstrument-functions` of gcc,
//! g++, clang and gfortran): their entries and exits become
//! `FUNCTION_ENTER`/`FUNCTION_EXIT` events on their thread, which nest with
//! user regions.
//!
//! A function is its entry address, interned per process as a small id in
//! a lock-free table, as call sites are ([`crate::core::callsite`]); a new
//! one is sent as a [`hark_wire::Def::Function`] and named in `hark`. The
//! table also holds, per function, whether it is off (left out by the
//! filter, or throttled) and its calls and inclusive time, which
//! throttling reads. The common path is one relaxed load, the thread's
//! guard, a hash probe, a clock read and one record, as for a region.
//!
//! The filter (`HARK_FILTER`) is decided once per function, when it is
//! first seen: its name comes from the symbol table of the object that
//! holds it, read once per object, and only when there is a filter.
//! Throttling (`HARK_THROTTLE`) turns a function off at the exit that
//! finds it past the rule, and records `FUNCTION_THROTTLED` there; from
//! then on its entries and exits cost the look-up alone.
//!
//! A thread keeps the entries it recorded on a small stack, so that an
//! exit is recorded only when its entry was: calls past [`DEPTH`] levels,
//! and the exits of functions turned off meanwhile, are not. The functions
//! still open on the thread that ends the stream (`MPI_Finalize`, exit)
//! end there ([`close_open`]); other threads' open ones stay open.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use hark_settings::{Filter, Throttle};
use hark_wire::{op, Event};

use crate::core;

/// Slots of the address → function table (a power of two); functions
/// beyond half of it are not recorded.
const SLOTS: usize = 1 << 14;
/// Nesting levels of instrumented functions recorded per thread.
const DEPTH: usize = 256;

static KEYS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// The function's id; 0 while it is being defined.
static IDS: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
/// Left out by the filter, or throttled.
static OFF: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static CALLS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Inclusive time of its recorded calls, in stamp units.
static TIME: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The throttling rule: calls (`u64::MAX`: off) and ns per call.
static THROTTLE_CALLS: AtomicU64 = AtomicU64::new(u64::MAX);
static THROTTLE_NS: AtomicU64 = AtomicU64::new(0);

/// What the first sight of a function needs: the filter, and the symbols
/// of the objects read for it.
struct Naming {
    filter: Filter,
    next: u32,
    /// Per object path: its text symbols (file address, size, mangled name).
    symbols: HashMap<String, Vec<(u64, u64, String)>>,
    /// Per object path: its debug information's line tables, for the
    /// filter's file rules (`None`: the object has none that can be read).
    lines: HashMap<String, Option<addr2line::Loader>>,
}

static NAMING: OnceLock<Mutex<Naming>> = OnceLock::new();

/// One thread's recorded entries: (slot, stamp), innermost last, and the
/// entries past [`DEPTH`] not recorded.
struct Stack {
    frames: Vec<(u32, u64)>,
    deeper: u32,
}

thread_local! {
    static STACK: RefCell<Stack> = const { RefCell::new(Stack { frames: Vec::new(), deeper: 0 }) };
}

/// The thread's guard and `func`'s slot, when the probe records and `func`
/// is neither filtered out nor throttled (the common start of both hooks).
#[inline(always)]
fn recorded(func: *mut c_void) -> Option<(core::Guard, usize)> {
    let g = core::enter()?;
    let slot = slot(func as u64)?;
    (!OFF[slot].load(Ordering::Relaxed)).then_some((g, slot))
}

/// Called by instrumented code at every function's entry (`func` its
/// address, compared and stored, never dereferenced).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn __cyg_profile_func_enter(func: *mut c_void, _site: *mut c_void) {
    let Some((g, slot)) = recorded(func) else {
        return;
    };
    let t = core::stamp();
    let pushed = STACK.try_with(|s| {
        // Never borrowed twice (the guard keeps this thread out), but a
        // panic here would abort the program: give up instead.
        let Ok(mut s) = s.try_borrow_mut() else {
            return false;
        };
        if s.frames.len() >= DEPTH {
            s.deeper += 1;
            return false;
        }
        s.frames.push((slot as u32, t));
        true
    });
    if pushed == Ok(true) {
        let mut ev = Event::new(op::FUNCTION_ENTER, t, t);
        ev.obj.set(IDS[slot].load(Ordering::Relaxed));
        g.record(ev);
    }
}

/// Called by instrumented code at every function's exit.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn __cyg_profile_func_exit(func: *mut c_void, _site: *mut c_void) {
    let Some((g, slot)) = recorded(func) else {
        return;
    };
    let begun = STACK.try_with(|s| {
        let Ok(mut s) = s.try_borrow_mut() else {
            return None;
        };
        if s.deeper > 0 {
            s.deeper -= 1;
            return None;
        }
        match s.frames.last() {
            Some(&(at, begin)) if at as usize == slot => {
                s.frames.pop();
                Some(begin)
            }
            _ => None,
        }
    });
    let Ok(Some(begin)) = begun else {
        return;
    };
    let t = core::stamp();
    let id = IDS[slot].load(Ordering::Relaxed);
    let mut ev = Event::new(op::FUNCTION_EXIT, t, t);
    ev.obj.set(id);
    g.record(ev);
    let calls = CALLS[slot].fetch_add(1, Ordering::Relaxed) + 1;
    let time = TIME[slot].fetch_add(t.saturating_sub(begin), Ordering::Relaxed);
    if calls > THROTTLE_CALLS.load(Ordering::Relaxed) {
        throttle(&g, slot, id, calls, time, t);
    }
}

/// Before the stream ends (`MPI_Finalize`, exit): the functions still
/// open on this thread (`main` at least, in an MPI program) end now, so
/// that their time is counted up to the end of the measurement.
pub(crate) fn close_open(g: &core::Guard) {
    let open = STACK
        .try_with(|s| {
            s.try_borrow_mut()
                .map(|mut s| std::mem::take(&mut s.frames))
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let t = core::stamp();
    for &(slot, _) in open.iter().rev() {
        let mut ev = Event::new(op::FUNCTION_EXIT, t, t);
        ev.obj.set(IDS[slot as usize].load(Ordering::Relaxed));
        g.record(ev);
    }
}

/// Past the rule's calls: turns the function off if its calls were short.
#[cold]
#[inline(never)]
fn throttle(g: &core::Guard, slot: usize, id: u32, calls: u64, time: u64, t: u64) {
    let ns = core::stamp_ns(time);
    if ns / calls >= THROTTLE_NS.load(Ordering::Relaxed) || OFF[slot].swap(true, Ordering::Relaxed)
    {
        return;
    }
    let mut ev = Event::new(op::FUNCTION_THROTTLED, t, t);
    ev.obj.set(id);
    ev.bytes.set(calls);
    ev.extra.set(ns.min(hark_wire::EXTRA_MASK));
    g.record(ev);
}

/// The slot of function `addr`, entered on first sight; `None` when the
/// table is full.
#[inline(always)]
fn slot(addr: u64) -> Option<usize> {
    let mut i = (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize & (SLOTS - 1);
    loop {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == addr {
            return Some(i);
        }
        if k == 0 {
            return new_function(addr);
        }
        i = (i + 1) & (SLOTS - 1);
    }
}

/// First sight of `addr`: decides whether the filter leaves it out, gives
/// it an id, defines it and publishes it in the table.
#[cold]
#[inline(never)]
fn new_function(addr: u64) -> Option<usize> {
    let naming = NAMING.get_or_init(|| {
        let (filter, throttle) = core::function_settings().unwrap_or_default();
        if let Some(Throttle { calls, ns_per_call }) = throttle {
            THROTTLE_NS.store(ns_per_call, Ordering::Relaxed);
            THROTTLE_CALLS.store(calls, Ordering::Relaxed);
        }
        Mutex::new(Naming {
            filter,
            next: 1,
            symbols: HashMap::new(),
            lines: HashMap::new(),
        })
    });
    let mut n = hark_sync::lock(naming);
    let mut i = (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize & (SLOTS - 1);
    for _ in 0..SLOTS / 2 {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == addr {
            return Some(i);
        }
        if k == 0 {
            let off = !n.filter.is_empty() && excluded(&mut n, addr);
            let id = n.next;
            n.next += 1;
            if !off {
                core::callsite::define_function(id, addr);
            }
            IDS[i].store(id, Ordering::Relaxed);
            OFF[i].store(off, Ordering::Relaxed);
            KEYS[i].store(addr, Ordering::Release);
            return Some(i);
        }
        i = (i + 1) & (SLOTS - 1);
    }
    None
}

/// Whether the filter leaves out the function at `addr`, by its symbol in
/// the object holding it (a function without a symbol is kept).
fn excluded(n: &mut Naming, addr: u64) -> bool {
    let Some((path, bias)) = core::callsite::object_holding(addr) else {
        return false;
    };
    let pc = addr.wrapping_sub(bias);
    if n.filter.has_file_rules() {
        let lines = n
            .lines
            .entry(path.clone())
            .or_insert_with(|| addr2line::Loader::new(&path).ok());
        let file = lines
            .as_ref()
            .and_then(|l| l.find_location(pc).ok().flatten())
            .and_then(|l| l.file.map(str::to_string));
        if file.is_some_and(|f| n.filter.excludes_file(&f)) {
            return true;
        }
    }
    let symbols = n
        .symbols
        .entry(path.clone())
        .or_insert_with(|| read_symbols(&path));
    let at = symbols.partition_point(|s| s.0 <= pc);
    let Some((start, size, mangled)) = at.checked_sub(1).map(|i| &symbols[i]) else {
        return false;
    };
    if pc >= start + (*size).max(1) {
        return false;
    }
    let mangled = mangled.clone();
    let name = demangle(&mangled);
    n.filter.excludes(&name, &mangled)
}

/// The text symbols of the object at `path`, by file address.
fn read_symbols(path: &str) -> Vec<(u64, u64, String)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect();
    out.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    out.dedup_by_key(|s| s.0);
    out
}

/// The demangled C++ name of `mangled` (itself when it is not mangled).
fn demangle(mangled: &str) -> String {
    cpp_demangle::Symbol::new(mangled)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| mangled.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_finds_a_function_by_its_demangled_name() {
        let filter = Filter::parse(
            "SCOREP_REGION_NAMES_BEGIN\n EXCLUDE *the_filter_finds_a_function_by_its_demangled_name*\nSCOREP_REGION_NAMES_END\n",
        )
        .unwrap();
        let mut n = Naming {
            filter,
            next: 1,
            symbols: HashMap::new(),
            lines: HashMap::new(),
        };
        let here = the_filter_finds_a_function_by_its_demangled_name as *const () as u64;
        assert!(excluded(&mut n, here));
        let other = demangle as *const () as u64;
        assert!(!excluded(&mut n, other));
    }
}
