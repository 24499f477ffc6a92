//! POSIX I/O: `open` and friends, `close`, `read`/`write` and their
//! positioned and vectored forms, `lseek`, `fsync`, `fdatasync`, and the
//! fortified variants (`__open_2`, `__read_chk`, ...) that programs built
//! with `_FORTIFY_SOURCE` call instead.
//!
//! Every event carries the descriptor in `peer`, the file id in `obj`
//! (from the path it was opened with; `<stdin>`, `<stdout>`, `<stderr>` for
//! 0–2), the bytes the call moved in `bytes`, the offset for positioned
//! calls in `extra`, and `errno` in `tag` when the call failed.
//!
//! `dup`, `dup2` and `dup3` record nothing but carry the file id over to
//! the new descriptor, so I/O on it is attributed to the right file.
//! `close`, `close_range`, `closefrom`, `dup2` and `dup3` never take the
//! probe's own socket away: they step around it, or move it first.
//!
//! `open(path, flags, ...)` is variadic in C; on the ABIs the probe builds
//! for (x86_64 and aarch64 Linux) the optional `mode` travels exactly like a
//! third fixed argument, so the wrappers take it as one and pass it on.

use std::ffi::{c_char, c_int, c_uint, c_void};

use hark_wire::op::io;
use libc::{iovec, off64_t, off_t, size_t, ssize_t};

use super::{io, missing, on_fd, path_of, real};
use crate::core;

/// Records an open of `path` that returned `fd`, and attributes `fd` to
/// the path's file id.
fn opened(path: *const c_char, fd: c_int, err: c_int, ev: &mut hark_wire::Event) {
    // SAFETY: open's contract: `path` is a NUL-terminated string.
    let id = unsafe { path_of(path) }.map_or(0, |p| core::file_id(&p));
    ev.obj.set(id);
    ev.peer.set(fd);
    if fd >= 0 {
        core::set_fd_file(fd, id);
    } else {
        ev.tag.set(err);
    }
}

macro_rules! open_like {
    ($($name:ident = $sym:literal;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io(io::OPEN, || unsafe { f(path, flags, mode) }, |ev, fd, err| opened(path, fd, err, ev))
            }
        }
    )*};
}

open_like! {
    open = c"open";
    open64 = c"open64";
    __open_2 = c"__open_2";
    __open64_2 = c"__open64_2";
}

macro_rules! openat_like {
    ($($name:ident = $sym:literal;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io(io::OPEN, || unsafe { f(dir, path, flags, mode) }, |ev, fd, err| opened(path, fd, err, ev))
            }
        }
    )*};
}

openat_like! {
    openat = c"openat";
    openat64 = c"openat64";
    __openat_2 = c"__openat_2";
    __openat64_2 = c"__openat64_2";
}

macro_rules! creat_like {
    ($($name:ident = $sym:literal;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(path: *const c_char, mode: c_uint) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(*const c_char, c_uint) -> c_int) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io(io::OPEN, || unsafe { f(path, mode) }, |ev, fd, err| opened(path, fd, err, ev))
            }
        }
    )*};
}

creat_like! {
    creat = c"creat";
    creat64 = c"creat64";
}

super::entry! {
    /// Wraps `close`. The probe's own socket is never closed by the program
    /// (programs that close every descriptor they did not open would otherwise
    /// cut the stream): that call reports success and does nothing.
    ///
    /// # Safety
    /// As the C function.
    fn close(fd: c_int) -> c_int {
        if core::is_probe_fd(fd) {
            return 0;
        }
        let Some(f) = real!(c"close": unsafe extern "C" fn(c_int) -> c_int) else {
            return missing();
        };
        // SAFETY: forwarding the caller's argument.
        io(
            io::CLOSE,
            || unsafe { f(fd) },
            |ev, r, err| {
                on_fd(ev, fd, r != 0, err);
                if r == 0 {
                    core::set_fd_file(fd, 0);
                }
            },
        )
    }
}

macro_rules! rw_like {
    ($($name:ident = $sym:literal, $op:expr, $ptr:ty $(, $chk:ident)?;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(fd: c_int, buf: $ptr, n: size_t $(, $chk: size_t)?) -> ssize_t {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, $ptr, size_t $(, rw_like!(@ty $chk))?) -> ssize_t) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io($op, || unsafe { f(fd, buf, n $(, $chk)?) }, |ev, r, err| {
                    on_fd(ev, fd, r < 0, err);
                    ev.bytes.set(r.max(0) as u64);
                })
            }
        }
    )*};
    (@ty $chk:ident) => { size_t };
}

rw_like! {
    read = c"read", io::READ, *mut c_void;
    write = c"write", io::WRITE, *const c_void;
    __read_chk = c"__read_chk", io::READ, *mut c_void, buflen;
}

macro_rules! prw_like {
    ($($name:ident = $sym:literal, $op:expr, $ptr:ty, $off:ty $(, $chk:ident)?;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(fd: c_int, buf: $ptr, n: size_t, off: $off $(, $chk: size_t)?) -> ssize_t {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, $ptr, size_t, $off $(, prw_like!(@ty $chk))?) -> ssize_t) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io($op, || unsafe { f(fd, buf, n, off $(, $chk)?) }, |ev, r, err| {
                    on_fd(ev, fd, r < 0, err);
                    ev.bytes.set(r.max(0) as u64);
                    ev.extra.set(off as u64);
                })
            }
        }
    )*};
    (@ty $chk:ident) => { size_t };
}

prw_like! {
    pread = c"pread", io::PREAD, *mut c_void, off_t;
    pread64 = c"pread64", io::PREAD, *mut c_void, off64_t;
    pwrite = c"pwrite", io::PWRITE, *const c_void, off_t;
    pwrite64 = c"pwrite64", io::PWRITE, *const c_void, off64_t;
    __pread_chk = c"__pread_chk", io::PREAD, *mut c_void, off_t, buflen;
    __pread64_chk = c"__pread64_chk", io::PREAD, *mut c_void, off64_t, buflen;
}

macro_rules! rwv_like {
    ($($name:ident = $sym:literal, $op:expr;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io($op, || unsafe { f(fd, iov, cnt) }, |ev, r, err| {
                    on_fd(ev, fd, r < 0, err);
                    ev.bytes.set(r.max(0) as u64);
                })
            }
        }
    )*};
}

rwv_like! {
    readv = c"readv", io::READV;
    writev = c"writev", io::WRITEV;
}

macro_rules! seek_like {
    ($($name:ident = $sym:literal, $off:ty;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `extra` is the offset it
            /// returned.
            ///
            /// # Safety
            /// As the C function.
            fn $name(fd: c_int, off: $off, whence: c_int) -> $off {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, $off, c_int) -> $off) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's arguments.
                io(io::LSEEK, || unsafe { f(fd, off, whence) }, |ev, r, err| {
                    on_fd(ev, fd, r < 0, err);
                    if r >= 0 {
                        ev.extra.set(r as u64);
                    }
                })
            }
        }
    )*};
}

seek_like! {
    lseek = c"lseek", off_t;
    lseek64 = c"lseek64", off64_t;
}

macro_rules! sync_like {
    ($($name:ident = $sym:literal, $op:expr;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(fd: c_int) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int) -> c_int) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's argument.
                io($op, || unsafe { f(fd) }, |ev, r, err| on_fd(ev, fd, r != 0, err))
            }
        }
    )*};
}

sync_like! {
    fsync = c"fsync", io::FSYNC;
    fdatasync = c"fdatasync", io::FDATASYNC;
}

/// After a successful duplication, `new` is the same file as `old`. No
/// event is recorded (there is no op for it); the table just follows.
fn duplicated(old: c_int, new: c_int) {
    if new >= 0 && core::io_enabled() {
        core::set_fd_file(new, core::fd_file(old));
    }
}

/// Wraps `dup`: the new descriptor keeps the file id.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    let Some(f) = real!(c"dup": unsafe extern "C" fn(c_int) -> c_int) else {
        return missing();
    };
    // SAFETY: forwarding the caller's argument.
    let r = unsafe { f(old) };
    keep_errno(|| duplicated(old, r));
    r
}

/// Wraps `dup2`: `new` now names `old`'s file.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    let Some(f) = real!(c"dup2": unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing();
    };
    core::free_fd_for_program(new);
    // SAFETY: forwarding the caller's arguments.
    let r = unsafe { f(old, new) };
    keep_errno(|| duplicated(old, r));
    r
}

/// Wraps `dup3`: `new` now names `old`'s file.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    let Some(f) = real!(c"dup3": unsafe extern "C" fn(c_int, c_int, c_int) -> c_int) else {
        return missing();
    };
    core::free_fd_for_program(new);
    // SAFETY: forwarding the caller's arguments.
    let r = unsafe { f(old, new, flags) };
    keep_errno(|| duplicated(old, r));
    r
}

/// Runs `f` (probe bookkeeping) with `errno` saved and restored, inside the
/// probe so that nothing it does is recorded, and never lets it panic out.
fn keep_errno(f: impl FnOnce()) {
    let Some(_g) = core::enter_always() else {
        return;
    };
    let e = super::errno();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    super::set_errno(e);
}

/// Wraps `close_range`: the probe's socket, if in the range, is stepped
/// around (the range is closed in two parts). Nothing is recorded.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let Some(f) = real!(c"close_range": unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int)
    else {
        return missing();
    };
    let probe = probe_fd().filter(|&p| first <= p && p <= last);
    match probe {
        None => {
            // SAFETY: forwarding the caller's arguments.
            unsafe { f(first, last, flags) }
        }
        Some(p) => {
            // The same call, on the two parts of the range that do not hold
            // the probe's socket.
            let below = if p > first {
                // SAFETY: forwarding the caller's arguments, range cut short.
                unsafe { f(first, p - 1, flags) }
            } else {
                0
            };
            let above = if p < last {
                // SAFETY: forwarding the caller's arguments, range cut short.
                unsafe { f(p + 1, last, flags) }
            } else {
                0
            };
            if below != 0 {
                below
            } else {
                above
            }
        }
    }
}

/// Wraps `closefrom`: closes every descriptor from `low` up except the
/// probe's socket.
///
/// # Safety
/// As the C function.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let Some(f) = real!(c"closefrom": unsafe extern "C" fn(c_int)) else {
        return;
    };
    match probe_fd().filter(|&p| low >= 0 && p >= low as c_uint) {
        None => {
            // SAFETY: forwarding the caller's argument.
            unsafe { f(low) }
        }
        Some(p) => {
            if p > low as c_uint {
                // SAFETY: closing the caller's descriptors below the socket.
                unsafe { close_range(low as c_uint, p - 1, 0) };
            }
            // SAFETY: and the ones above it.
            unsafe { f(p as c_int + 1) }
        }
    }
}

/// The probe's socket descriptor, if there is one.
fn probe_fd() -> Option<c_uint> {
    let fd = core::probe_fd();
    (fd >= 0).then_some(fd as c_uint)
}
