//! The wrappers: every function the probe exports in place of the
//! program's own, grouped by what they wrap. Each one follows the contract
//! in [`crate::core`] and never lets a panic escape into the program.
//!
//! Exports are off in unit tests (`cfg_attr(not(test), no_mangle)`), so a
//! test binary never hijacks its own `write` (and the wrappers are then
//! unused, hence the `dead_code` allowance in tests).
#![cfg_attr(test, allow(dead_code))]

mod exec;
mod functions;
mod gomp;
#[cfg(target_arch = "x86_64")]
mod kmpc;
mod ns;
mod ompt;
mod pending;
mod posix;
mod signal;
mod stdio;
mod threads;
mod user;
#[cfg(target_arch = "x86_64")]
mod variadic;

use std::ffi::c_int;

use hark_wire::Event;

use crate::core;

/// At exit from inside a wrapped call: nothing may call MPI any more
/// (`mpi::stream::leaving_inside_a_call`).
pub(crate) fn leaving_inside_a_call() {
    mpi::stream::leaving_inside_a_call();
}

/// At exit, before the stream ends: what stdio's standard streams hold
/// that no call counted is written out, recorded (`pending`).
pub(crate) fn flush_at_exit() {
    let _ = std::panic::catch_unwind(pending::flush_at_exit);
    if let Some(g) = core::enter() {
        let _ = std::panic::catch_unwind(|| functions::close_open(&g));
    }
}

/// Before `MPI_Finalize` ends the stream: the instrumented functions still
/// open on this thread end (`functions`).
pub(crate) fn close_open_functions(g: &core::Guard) {
    let _ = std::panic::catch_unwind(|| functions::close_open(g));
}

/// The real function `$name` of type `$ty`, as an `Option` (None if the
/// process has no such symbol).
macro_rules! real {
    ($name:literal: $ty:ty) => {{
        static R: $crate::real::Real = $crate::real::Real::next($name);
        let p = R.get();
        // SAFETY: `p` is null or the address of the C function `$name`,
        // whose type is `$ty`; Option<fn> has the layout of a nullable
        // pointer.
        unsafe { std::mem::transmute::<*mut std::ffi::c_void, Option<$ty>>(p) }
    }};
}
pub(crate) use real;

/// Defines the exported I/O function `$name` as a call-site shim
/// ([`crate::callsite_shim!`]) in front of the wrapper `$name::entered`,
/// whose events carry the caller's call site ([`core::callsite::IoCall`]).
/// The body sees the items of the module it is written in.
macro_rules! entry {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? $body:block) => {
        $crate::callsite_shim!($name => $name::entered; ($($a: $t),*) $(-> $r)?);

        #[allow(non_snake_case)]
        pub(crate) mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// The wrapper behind the entry point of the same name.
            $(#[$m])*
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            pub(crate) unsafe extern "C" fn entered($($a: $t),*) $(-> $r)? {
                let _site = $crate::core::callsite::IoCall::begin();
                $body
            }
        }
    };
}
pub(crate) use entry;

#[inline(always)]
pub(crate) fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

#[inline(always)]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// What a missing real function returns: -1 with `ENOSYS`.
#[cold]
pub(crate) fn missing<R: From<i8>>() -> R {
    set_errno(libc::ENOSYS);
    R::from(-1)
}

/// Times `call` and records one I/O event of kind `op`, which `fill`
/// completes from the result and the `errno` the call left (0 if it did
/// not fail). The program sees the result and `errno` unchanged.
#[inline(always)]
pub(crate) fn io<R: Copy>(
    op: u16,
    call: impl FnOnce() -> R,
    fill: impl FnOnce(&mut Event, R, c_int),
) -> R {
    let Some(g) = core::enter() else {
        return call();
    };
    if !core::io_enabled() {
        return call();
    }
    g.at_callsite(core::callsite::io_ret());
    // errno is cleared so that the call's own errno can be told apart, and
    // put back as it was if the call did not set it. Its address is this
    // thread's for the whole call: looked up once.
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above, valid for this thread's life.
    let saved = unsafe { *errno };
    // SAFETY: as above.
    unsafe { *errno = 0 };
    let t0 = core::stamp();
    let r = call();
    let t1 = core::stamp();
    // SAFETY: as above.
    let err = unsafe { *errno };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ev = Event::new(op, t0, t1);
        fill(&mut ev, r, err);
        g.record(ev);
    }));
    // SAFETY: as above.
    unsafe { *errno = if err == 0 { saved } else { err } };
    r
}

/// Sets the fields every I/O event on a descriptor has: the descriptor,
/// its file id, and `tag` = `errno` when the call failed.
#[inline(always)]
pub(crate) fn on_fd(ev: &mut Event, fd: c_int, failed: bool, err: c_int) {
    ev.peer.set(fd);
    ev.obj.set(core::fd_file(fd));
    if failed {
        ev.tag.set(err);
    }
}

/// The path a C string names (lossy UTF-8), or None for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub(crate) unsafe fn path_of(p: *const std::ffi::c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller promises a NUL-terminated string.
    Some(
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned(),
    )
}
pub mod mpi;
