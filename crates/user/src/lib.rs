//! Hark's user API for Rust programs: regions, marks and counters.
//!
//! The events are recorded by Hark's probe (`libhark.so`, preloaded by
//! `hark run`). This crate finds the probe's entry points at run time, so a
//! program using it builds and runs normally without the probe: every call
//! is then a cheap no-op.
//!
//! ```
//! for step in 0..3 {
//!     hark_user::mark("step", step);
//!     let _solve = hark_user::region("solve"); // ends when dropped
//!     hark_user::counter("cells", 1000 * step);
//! }
//! assert!(!hark_user::is_active()); // no probe in doctests
//! ```
//!
//! Regions nest and end in reverse order on the thread that began them.
//! The same name is the same region (or counter, or mark) across the whole
//! program, and across C, Fortran and Rust code in it.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A probe entry point, looked up once.
struct Entry {
    name: &'static std::ffi::CStr,
    ptr: AtomicPtr<c_void>,
}

/// Marks an entry point the probe does not have (so we stop looking).
const ABSENT: *mut c_void = std::ptr::dangling_mut::<c_void>();

impl Entry {
    const fn new(name: &'static std::ffi::CStr) -> Entry {
        Entry {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn get(&self) -> Option<*mut c_void> {
        let mut p = self.ptr.load(Ordering::Relaxed);
        if p.is_null() {
            // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the
            // global scope, where a preloaded probe's symbols are.
            p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) };
            if p.is_null() {
                p = ABSENT;
            }
            self.ptr.store(p, Ordering::Relaxed);
        }
        (p != ABSENT).then_some(p)
    }
}

type NameFn = unsafe extern "C" fn(*const c_char, usize);
type ValueFn = unsafe extern "C" fn(*const c_char, usize, i64);
type VoidFn = unsafe extern "C" fn();
type ActiveFn = unsafe extern "C" fn() -> c_int;

static BEGIN: Entry = Entry::new(c"hark_region_begin_n");
static END: Entry = Entry::new(c"hark_region_end_n");
static MARK: Entry = Entry::new(c"hark_mark_n");
static COUNTER: Entry = Entry::new(c"hark_counter_n");
static PAUSE: Entry = Entry::new(c"hark_pause");
static RESUME: Entry = Entry::new(c"hark_resume");
static ACTIVE: Entry = Entry::new(c"hark_active");

fn call_name(e: &Entry, name: &str) {
    if let Some(p) = e.get() {
        // SAFETY: the probe defines this symbol with the type NameFn; the
        // name is passed with its length.
        unsafe { std::mem::transmute::<*mut c_void, NameFn>(p)(name.as_ptr().cast(), name.len()) }
    }
}

fn call_value(e: &Entry, name: &str, v: i64) {
    if let Some(p) = e.get() {
        // SAFETY: the probe defines this symbol with the type ValueFn.
        unsafe {
            std::mem::transmute::<*mut c_void, ValueFn>(p)(name.as_ptr().cast(), name.len(), v)
        }
    }
}

fn call_void(e: &Entry) {
    if let Some(p) = e.get() {
        // SAFETY: the probe defines this symbol with the type VoidFn.
        unsafe { std::mem::transmute::<*mut c_void, VoidFn>(p)() }
    }
}

/// Enters the region `name`; pair with [`region_end`], or use [`region`].
pub fn region_begin(name: &str) {
    call_name(&BEGIN, name)
}

/// Leaves the region `name`.
pub fn region_end(name: &str) {
    call_name(&END, name)
}

/// A region that ends when this value is dropped.
#[must_use = "the region ends when this guard is dropped"]
pub struct Region<'a> {
    name: &'a str,
}

/// Enters the region `name` until the returned guard is dropped.
pub fn region(name: &str) -> Region<'_> {
    region_begin(name);
    Region { name }
}

impl Drop for Region<'_> {
    fn drop(&mut self) {
        region_end(self.name)
    }
}

/// Marks iteration (or phase number) `iteration` of `name`.
pub fn mark(name: &str, iteration: i64) {
    call_value(&MARK, name, iteration)
}

/// Records `value` for the counter `name`.
pub fn counter(name: &str, value: i64) {
    call_value(&COUNTER, name, value)
}

/// Pauses recording of this process (as `MPI_Pcontrol(0)`).
pub fn pause() {
    call_void(&PAUSE)
}

/// Resumes recording (as `MPI_Pcontrol(1)`).
pub fn resume() {
    call_void(&RESUME)
}

/// Whether this process is being recorded right now.
pub fn is_active() -> bool {
    ACTIVE.get().is_some_and(|p| {
        // SAFETY: the probe defines this symbol with the type ActiveFn.
        unsafe { std::mem::transmute::<*mut c_void, ActiveFn>(p)() != 0 }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn without_the_probe_every_call_is_a_no_op() {
        assert!(!super::is_active());
        let _r = super::region("r");
        super::mark("m", 1);
        super::counter("c", -5);
        super::pause();
        super::resume();
    }
}
