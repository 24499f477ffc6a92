//! `setns` and `unshare`: the calls that need the process to have one
//! thread. Entering a mount, user or time namespace with `setns`, and
//! `unshare` of a user namespace (or of the thread group, signal handlers
//! or memory), fail with `EINVAL` beside another thread; the probe's own
//! threads are stopped around them (`core/park.rs`) so that `nsenter -m`,
//! `unshare -U` and programs of their kind run as they do without Hark.
//! No event is recorded for them.

use std::ffi::c_int;

use super::{missing, real};
use crate::core;

/// The `unshare` flags that join or make a namespace, or that the kernel
/// refuses beside other threads: the probe's threads are stopped for
/// these. A new mount namespace does not need it, but the probe's threads
/// then start again inside it, with the program.
const ONE_THREAD: c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_THREAD
    | libc::CLONE_SIGHAND
    | libc::CLONE_VM
    | libc::CLONE_FS;

/// Wraps `setns`: every namespace type, as the type of `fd`'s namespace is
/// not known from `nstype` 0.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn setns(fd: c_int, nstype: c_int) -> c_int {
    let Some(f) = real!(c"setns": unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing();
    };
    // SAFETY: forwarding the caller's arguments.
    core::with_one_thread(|| unsafe { f(fd, nstype) })
}

/// Wraps `unshare`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn unshare(flags: c_int) -> c_int {
    let Some(f) = real!(c"unshare": unsafe extern "C" fn(c_int) -> c_int) else {
        return missing();
    };
    if flags & ONE_THREAD == 0 {
        // SAFETY: forwarding the caller's argument.
        return unsafe { f(flags) };
    }
    // SAFETY: forwarding the caller's argument.
    core::with_one_thread(|| unsafe { f(flags) })
}
