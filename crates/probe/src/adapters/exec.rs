//! `execve` and friends: the stream is closed (buffers shipped, `End`
//! sent) before the process image is replaced, since the new image starts a
//! probe of its own and nothing of the old one survives.
//!
//! If the exec then fails, the process runs on unmeasured. `execl`,
//! `execle` and `execlp` are not wrapped (glibc turns them into `execve`
//! internally, out of reach): a process that uses them ends its stream
//! without `End` (the reader reports it as closed without totals).

use std::ffi::{c_char, c_int};

use super::{missing, real};
use crate::core;

type Argv = *const *const c_char;

/// Wraps `execve`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let Some(f) = real!(c"execve": unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int) else {
        return missing();
    };
    core::finish_before_exec();
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(path, argv, envp) }
}

/// Wraps `execv`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    let Some(f) = real!(c"execv": unsafe extern "C" fn(*const c_char, Argv) -> c_int) else {
        return missing();
    };
    core::finish_before_exec();
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(path, argv) }
}

/// Wraps `execvp`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    let Some(f) = real!(c"execvp": unsafe extern "C" fn(*const c_char, Argv) -> c_int) else {
        return missing();
    };
    core::finish_before_exec();
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(file, argv) }
}

/// Wraps `execvpe`.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let Some(f) = real!(c"execvpe": unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int)
    else {
        return missing();
    };
    core::finish_before_exec();
    // SAFETY: forwarding the caller's arguments.
    unsafe { f(file, argv, envp) }
}
