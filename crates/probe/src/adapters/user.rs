//! The user API of `include/hark.h` (and of the Fortran module and the
//! `hark-user` crate, which call these same symbols): nested regions,
//! iteration or phase marks, named counters, pause and resume.
//!
//! Names are interned per process (one `Def::Name` per distinct name and
//! kind); each thread keeps a small cache of the names it used last, so a
//! region in a loop costs a string compare, not a lock.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};

use hark_wire::{op, Event, NameKind};

use crate::core;

const CACHE: usize = 16;

/// A cached name: its kind, its bytes, its id.
type Cached = (NameKind, Box<[u8]>, u32);

thread_local! {
    static NAMES: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

fn name_id(kind: NameKind, name: &[u8]) -> u32 {
    let cached = NAMES
        .try_with(|c| {
            c.borrow()
                .iter()
                .find(|(k, n, _)| *k == kind && &n[..] == name)
                .map(|e| e.2)
        })
        .ok()
        .flatten();
    if let Some(id) = cached {
        return id;
    }
    let id = core::name_id(kind, &String::from_utf8_lossy(name));
    let _ = NAMES.try_with(|c| {
        let mut c = c.borrow_mut();
        if c.len() == CACHE {
            c.remove(0);
        }
        c.push((kind, name.into(), id));
    });
    id
}

/// Records one user event of kind `op` about `name`, with `value` in `bytes`.
fn user(op: u16, kind: NameKind, name: &[u8], value: Option<i64>) {
    let Some(g) = core::enter() else {
        return;
    };
    let _ = std::panic::catch_unwind(|| {
        let t = core::stamp();
        let mut ev = Event::new(op, t, t);
        let id = name_id(kind, name);
        ev.obj.set(id);
        if let Some(v) = value {
            ev.bytes.set(v as u64);
        }
        g.record(ev);
        if matches!(op, op::REGION_BEGIN | op::REGION_END) {
            // After the event: its own recording is not in the counts.
            let mut counts = Vec::new();
            core::region_counters((op == op::REGION_BEGIN, id, t), &mut counts);
            for c in counts {
                g.record(c);
            }
        }
    });
}

/// The bytes of a NUL-terminated name (empty for null).
///
/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn cstr<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return b"";
    }
    // SAFETY: the caller promises a NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes()
}

/// The bytes of a name given with its length (Fortran strings).
///
/// # Safety
/// `p` is null or valid for `len` bytes.
unsafe fn counted<'a>(p: *const c_char, len: usize) -> &'a [u8] {
    if p.is_null() {
        return b"";
    }
    // SAFETY: the caller promises `len` readable bytes; trailing blanks of a
    // Fortran string are not part of the name.
    let s = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    let end = s.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
    &s[..end]
}

/// Enters region `name` (regions nest; end them in reverse order).
///
/// # Safety
/// `name` is null or NUL-terminated.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_region_begin(name: *const c_char) {
    // SAFETY: as promised by the caller.
    user(
        op::REGION_BEGIN,
        NameKind::Region,
        unsafe { cstr(name) },
        None,
    )
}

/// Leaves region `name`.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_region_end(name: *const c_char) {
    // SAFETY: as promised by the caller.
    user(
        op::REGION_END,
        NameKind::Region,
        unsafe { cstr(name) },
        None,
    )
}

/// Marks iteration `iteration` of the phase or loop `name`.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_mark(name: *const c_char, iteration: i64) {
    // SAFETY: as promised by the caller.
    user(
        op::MARK,
        NameKind::Mark,
        unsafe { cstr(name) },
        Some(iteration),
    )
}

/// Records `value` for the counter `name`.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_counter(name: *const c_char, value: i64) {
    // SAFETY: as promised by the caller.
    user(
        op::COUNTER,
        NameKind::Counter,
        unsafe { cstr(name) },
        Some(value),
    )
}

/// [`hark_region_begin`] with a counted name (trailing blanks dropped).
///
/// # Safety
/// `name` is null or valid for `len` bytes.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_region_begin_n(name: *const c_char, len: usize) {
    // SAFETY: as promised by the caller.
    user(
        op::REGION_BEGIN,
        NameKind::Region,
        unsafe { counted(name, len) },
        None,
    )
}

/// [`hark_region_end`] with a counted name.
///
/// # Safety
/// `name` is null or valid for `len` bytes.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_region_end_n(name: *const c_char, len: usize) {
    // SAFETY: as promised by the caller.
    user(
        op::REGION_END,
        NameKind::Region,
        unsafe { counted(name, len) },
        None,
    )
}

/// [`hark_mark`] with a counted name.
///
/// # Safety
/// `name` is null or valid for `len` bytes.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_mark_n(name: *const c_char, len: usize, iteration: i64) {
    // SAFETY: as promised by the caller.
    user(
        op::MARK,
        NameKind::Mark,
        unsafe { counted(name, len) },
        Some(iteration),
    )
}

/// [`hark_counter`] with a counted name.
///
/// # Safety
/// `name` is null or valid for `len` bytes.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn hark_counter_n(name: *const c_char, len: usize, value: i64) {
    // SAFETY: as promised by the caller.
    user(
        op::COUNTER,
        NameKind::Counter,
        unsafe { counted(name, len) },
        Some(value),
    )
}

/// Pauses recording in this process (as `MPI_Pcontrol(0)`).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn hark_pause() {
    core::set_recording(false)
}

/// Resumes recording (as `MPI_Pcontrol(1)`).
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn hark_resume() {
    core::set_recording(true)
}

/// 1 while this process is being recorded, 0 otherwise.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn hark_active() -> c_int {
    core::enter().is_some() as c_int
}
