//! Threads started by a library from inside a wrapped call.
//!
//! `MPI_Init` starts the MPI library's own threads (Open MPI's PMIx client
//! and progress threads talk to the launcher over sockets and pipes). What
//! they do is the library's work, not the program's, and recording it would
//! fill the I/O profile with `<fd 13>` traffic nobody asked about. A thread
//! created while its creator is inside the probe is therefore adopted: it
//! runs with the probe's guard held for its whole life. Threads the program
//! creates itself are untouched.

use std::ffi::{c_int, c_void};

use super::real;
use crate::core;

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartRoutine,
    *mut c_void,
) -> c_int;

struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
}

/// `pthread_create`: as the real one, adopting the new thread when the
/// caller is inside a wrapped call.
///
/// # Safety
/// As `pthread_create(3)`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    let Some(create) = real!(c"pthread_create": PthreadCreate) else {
        return libc::ENOSYS;
    };
    if !core::is_inside() {
        // SAFETY: the caller's arguments, passed on unchanged.
        return unsafe { create(thread, attr, routine, arg) };
    }
    let start = Box::into_raw(Box::new(Start { routine, arg }));
    // SAFETY: as above, with our trampoline and its boxed argument, which
    // the new thread takes ownership of.
    let rc = unsafe { create(thread, attr, adopted, start.cast()) };
    if rc != 0 {
        // SAFETY: no thread was started, so the box is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    rc
}

extern "C" fn adopted(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the box `pthread_create` made for this thread.
    let Start { routine, arg } = *unsafe { Box::from_raw(start.cast::<Start>()) };
    core::adopt_thread();
    routine(arg)
}
