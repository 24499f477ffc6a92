//! `sigaction` and `signal`: for the signals the probe flushes on (see
//! `core::signals`), the program's handler is kept and chained to instead
//! of replacing the probe's; every other call goes straight through.

use std::ffi::c_int;

use super::{missing, real};
use crate::core;

/// Wraps `sigaction`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the caller's pointers, valid or null as for `sigaction`.
    if let Some(r) = unsafe { core::program_sigaction(sig, act, old) } {
        return r;
    }
    let Some(f) = real!(c"sigaction": unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int)
    else {
        return missing();
    };
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(sig, act, old) }
}

/// Wraps `signal`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if let Some(old) = core::program_signal(sig, handler) {
        return old;
    }
    match real!(c"signal": unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t) {
        // SAFETY: forwarding the caller's arguments.
        Some(f) => unsafe { f(sig, handler) },
        None => libc::SIG_ERR,
    }
}
