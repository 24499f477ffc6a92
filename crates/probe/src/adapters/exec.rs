//! `execve` and friends: the stream is closed (buffers shipped, `End`
//! sent) before the process image is replaced, since the new image starts a
//! probe of its own and nothing of the old one survives.
//!
//! `_exit` and `_Exit` close the stream too, so that a process that leaves
//! without `exit` (a forked worker, Python's `os._exit`) still sends its
//! last events and its totals. They skip that when called from inside the
//! probe (a signal handler interrupting it) or from a `vfork` child.
//!
//! If the exec then fails, the process runs on unmeasured. `execl`,
//! `execle` and `execlp` are variadic: their entry points (x86-64 only)
//! are in `variadic.rs` and end up in the wrappers here.

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

macro_rules! exit_like {
    ($($name:ident = $sym:literal;)*) => {$(
        /// Wraps the function of the same name: the stream is closed first.
        ///
        /// # Safety
        /// As the C function.
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name(status: c_int) -> ! {
            // Not from inside the probe: a signal handler that interrupted
            // it would wait on locks its own thread holds.
            if let Some(g) = core::enter_always() {
                drop(g);
                core::finish_before_exec();
            }
            match real!($sym: unsafe extern "C" fn(c_int) -> !) {
                // SAFETY: forwarding the caller's argument.
                Some(f) => unsafe { f(status) },
                // SAFETY: exit_group ends the process; it has no other effect.
                None => unsafe {
                    libc::syscall(libc::SYS_exit_group, status);
                    std::hint::unreachable_unchecked()
                },
            }
        }
    )*};
}

exit_like! {
    _exit = c"_exit";
    _Exit = c"_Exit";
}
