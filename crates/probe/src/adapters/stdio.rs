//! STDIO: `fopen`/`fdopen`/`fclose`, `fread`/`fwrite`, `fflush`,
//! `fseek`/`ftell`, `fputs`/`puts`/`fgets`, and formatted output and input
//! through their `v*` forms (the variadic entry points are in `variadic`).
//!
//! glibc's stdio reaches `read`/`write` internally without going through
//! the symbol table, so these wrappers are the only record of stdio traffic
//! and nothing is counted twice. Bytes are those the call moved at the
//! `FILE` level (what the program asked, not when the buffer was flushed),
//! plus output that no call counted and that this call wrote out of the
//! buffer (`pending`: what the inline `putc_unlocked` and the character
//! calls put there). Events carry the stream's descriptor in `peer` and
//! its file id in `obj`.

use std::ffi::{c_char, c_int, c_long, c_void};

use hark_wire::op::io;
use hark_wire::Event;
use libc::{off64_t, off_t, size_t, FILE};

use super::pending::{self, Accepted, Record};
use super::{io, missing, on_fd, path_of, real};
use crate::core;

/// The descriptor behind `f`, or -1.
pub(crate) fn fd_of(f: *mut FILE) -> c_int {
    if f.is_null() {
        return -1;
    }
    // SAFETY: `f` is a stream the program passed to a stdio call.
    unsafe { libc::fileno(f) }
}

fn on_file(ev: &mut Event, f: *mut FILE, failed: bool, err: c_int) {
    let fd = fd_of(f);
    if fd >= 0 {
        on_fd(ev, fd, failed, err);
    } else if failed {
        ev.tag.set(err);
    }
}

fn opened(path: *const c_char, f: *mut FILE, err: c_int, ev: &mut Event) {
    // SAFETY: fopen's contract: `path` is a NUL-terminated string.
    let id = unsafe { path_of(path) }.map_or(0, |p| core::file_id(&p));
    ev.obj.set(id);
    let fd = fd_of(f);
    ev.peer.set(fd);
    if fd >= 0 {
        core::set_fd_file(fd, id);
    } else {
        ev.tag.set(err);
    }
}

macro_rules! fopen_like {
    ($($name:ident = $sym:literal;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name.
            ///
            /// # Safety
            /// As the C function.
            fn $name(path: *const c_char, mode: *const c_char) -> *mut FILE {
                let Some(f) = real!($sym: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE) else {
                    return std::ptr::null_mut();
                };
                // SAFETY: forwarding the caller's arguments.
                io(io::FOPEN, || unsafe { f(path, mode) }, |ev, r, err| opened(path, r, err, ev))
            }
        }
    )*};
}

fopen_like! {
    fopen = c"fopen";
    fopen64 = c"fopen64";
}

super::entry! {
    /// Wraps `fdopen`: the stream inherits the descriptor's file id.
    ///
    /// # Safety
    /// As the C function.
    fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
        let Some(f) = real!(c"fdopen": unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE) else {
            return std::ptr::null_mut();
        };
        // SAFETY: forwarding the caller's arguments.
        io(
            io::FDOPEN,
            || unsafe { f(fd, mode) },
            |ev, r, err| on_fd(ev, fd, r.is_null(), err),
        )
    }
}

super::entry! {
    /// Wraps `fclose`.
    ///
    /// # Safety
    /// As the C function.
    fn fclose(stream: *mut FILE) -> c_int {
        let Some(f) = real!(c"fclose": unsafe extern "C" fn(*mut FILE) -> c_int) else {
            return missing();
        };
        // The descriptor and the buffer are gone after the call: read first.
        let fd = if core::io_enabled() {
            fd_of(stream)
        } else {
            -1
        };
        let recording = core::enter().is_some() && core::io_enabled();
        let uncounted = if recording {
            pending::uncounted_now(stream)
        } else {
            0
        };
        // SAFETY: forwarding the caller's argument.
        let r = io(
            io::FCLOSE,
            || unsafe { f(stream) },
            |ev, r, err| {
                if fd >= 0 {
                    on_fd(ev, fd, r != 0, err);
                    core::set_fd_file(fd, 0);
                } else if r != 0 {
                    ev.tag.set(err);
                }
            },
        );
        // What the buffer held that no call counted went out with the close.
        if uncounted > 0 && r == 0 {
            if let Some(g) = core::enter() {
                pending::record_flushed(&g, fd, uncounted, core::stamp());
            }
        }
        r
    }
}

macro_rules! frw_like {
    ($($name:ident = $sym:literal, $op:expr, $ptr:ty;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `bytes` is items × size.
            ///
            /// # Safety
            /// As the C function.
            fn $name(p: $ptr, size: size_t, n: size_t, stream: *mut FILE) -> size_t {
                let Some(f) = real!($sym: unsafe extern "C" fn($ptr, size_t, size_t, *mut FILE) -> size_t) else {
                    return 0;
                };
                // SAFETY: forwarding the caller's arguments.
                io($op, || unsafe { f(p, size, n, stream) }, |ev, r, err| {
                    on_file(ev, stream, r < n, err);
                    ev.bytes.set((r as u64).wrapping_mul(size as u64));
                })
            }
        }
    )*};
}

frw_like! {
    fread = c"fread", io::FREAD, *mut c_void;
}

macro_rules! fwrite_like {
    ($($name:ident = $sym:literal, $lock:expr;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `bytes` is items × size,
            /// and what it wrote out that no call counted (`pending`).
            ///
            /// # Safety
            /// As the C function.
            fn $name(p: *const c_void, size: size_t, n: size_t, stream: *mut FILE) -> size_t {
                let Some(f) = real!($sym: unsafe extern "C" fn(*const c_void, size_t, size_t, *mut FILE) -> size_t) else {
                    return 0;
                };
                pending::output(
                    io::FWRITE,
                    stream,
                    $lock,
                    Record::Always,
                    // SAFETY: forwarding the caller's arguments.
                    || unsafe { f(p, size, n, stream) },
                    |r, _| counted((r as u64).wrapping_mul(size as u64)),
                    |ev, r, err| on_file(ev, stream, r < n, err),
                )
            }
        }
    )*};
}

fwrite_like! {
    fwrite = c"fwrite", true;
    fwrite_unlocked = c"fwrite_unlocked", false;
}

/// What a call that counts its bytes accepted.
fn counted(bytes: u64) -> Accepted {
    Accepted {
        counted: bytes,
        all: bytes,
    }
}

/// What a flush, a seek or a close accepted: nothing.
const NOTHING: Accepted = Accepted { counted: 0, all: 0 };

macro_rules! putc_like {
    ($($name:ident = $sym:literal, $lock:expr;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name: recorded (as `fwrite`)
            /// only when it writes out bytes no call counted (`pending`).
            ///
            /// # Safety
            /// As the C function.
            fn $name(c: c_int, stream: *mut FILE) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(c_int, *mut FILE) -> c_int) else {
                    return libc::EOF;
                };
                // SAFETY: forwarding the caller's arguments.
                put_char(stream, $lock, || unsafe { f(c, stream) })
            }
        }
    )*};
}

putc_like! {
    fputc = c"fputc", true;
    putc = c"putc", true;
    fputc_unlocked = c"fputc_unlocked", false;
    putc_unlocked = c"putc_unlocked", false;
}

super::entry! {
    /// Wraps `putchar`, as `putc` on stdout.
    ///
    /// # Safety
    /// As the C function.
    fn putchar(c: c_int) -> c_int {
        let Some(f) = real!(c"putchar": unsafe extern "C" fn(c_int) -> c_int) else {
            return libc::EOF;
        };
        // SAFETY: forwarding the caller's argument.
        put_char(stdout(), true, || unsafe { f(c) })
    }
}

super::entry! {
    /// Wraps `putchar_unlocked`, as `putc_unlocked` on stdout.
    ///
    /// # Safety
    /// As the C function.
    fn putchar_unlocked(c: c_int) -> c_int {
        let Some(f) = real!(c"putchar_unlocked": unsafe extern "C" fn(c_int) -> c_int) else {
            return libc::EOF;
        };
        // SAFETY: forwarding the caller's argument.
        put_char(stdout(), false, || unsafe { f(c) })
    }
}

super::entry! {
    /// Wraps `__overflow`, which the inline `putc_unlocked` calls when the
    /// buffer is full: it writes the buffer out, then takes the character
    /// (none for `EOF`).
    ///
    /// # Safety
    /// As the C function.
    fn __overflow(stream: *mut FILE, c: c_int) -> c_int {
        let Some(f) = real!(c"__overflow": unsafe extern "C" fn(*mut FILE, c_int) -> c_int) else {
            return libc::EOF;
        };
        let takes = c != libc::EOF;
        // Called from inside an unlocked character call: the caller holds the
        // stream or needs no lock.
        pending::output(
            io::FWRITE,
            stream,
            false,
            Record::Delivering,
            // SAFETY: forwarding the caller's arguments.
            || unsafe { f(stream, c) },
            |r, _| Accepted {
                counted: 0,
                all: u64::from(takes && r != libc::EOF),
            },
            |ev, r, err| on_file(ev, stream, r == libc::EOF, err),
        )
    }
}

/// A one-character output call: not counted, recorded only when it
/// writes out bytes no call counted.
fn put_char(stream: *mut FILE, lock: bool, call: impl FnOnce() -> c_int) -> c_int {
    if pending::only_stores(stream) {
        return call();
    }
    pending::output(
        io::FWRITE,
        stream,
        lock,
        Record::Delivering,
        call,
        |r, _| Accepted {
            counted: 0,
            all: u64::from(r != libc::EOF),
        },
        |ev, r, err| on_file(ev, stream, r == libc::EOF, err),
    )
}

super::entry! {
    /// Wraps `fflush`; `fflush(NULL)` has no descriptor (`peer` -1, `obj` 0).
    ///
    /// # Safety
    /// As the C function.
    fn fflush(stream: *mut FILE) -> c_int {
        let Some(f) = real!(c"fflush": unsafe extern "C" fn(*mut FILE) -> c_int) else {
            return missing();
        };
        flush(
            stream,
            true,
            // SAFETY: forwarding the caller's argument.
            || unsafe { f(stream) },
            // SAFETY: `s` is one of glibc's standard streams.
            |s| unsafe { entered(s) },
        )
    }
}

super::entry! {
    /// Wraps `fflush_unlocked`.
    ///
    /// # Safety
    /// As the C function.
    fn fflush_unlocked(stream: *mut FILE) -> c_int {
        let Some(f) = real!(c"fflush_unlocked": unsafe extern "C" fn(*mut FILE) -> c_int) else {
            return missing();
        };
        flush(
            stream,
            false,
            // SAFETY: forwarding the caller's argument.
            || unsafe { f(stream) },
            // SAFETY: `s` is one of glibc's standard streams.
            |s| unsafe { entered(s) },
        )
    }
}

/// A flush of `stream`, carrying what it writes out that no call counted;
/// of every stream for null, the standard ones first through `one`.
fn flush(
    stream: *mut FILE,
    lock: bool,
    call: impl FnOnce() -> c_int,
    one: impl Fn(*mut FILE) -> c_int,
) -> c_int {
    if stream.is_null() {
        if core::enter().is_some() && core::io_enabled() {
            pending::flush_standard(|s| {
                one(s);
            });
        }
        return io(io::FFLUSH, call, |ev, r, err| {
            on_file(ev, stream, r != 0, err)
        });
    }
    pending::output(
        io::FFLUSH,
        stream,
        lock,
        Record::Always,
        call,
        |_, _| NOTHING,
        |ev, r, err| on_file(ev, stream, r != 0, err),
    )
}

macro_rules! fseek_like {
    ($($name:ident = $sym:literal, $off:ty;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `extra` is the offset asked for.
            ///
            /// # Safety
            /// As the C function.
            fn $name(stream: *mut FILE, off: $off, whence: c_int) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(*mut FILE, $off, c_int) -> c_int) else {
                    return missing();
                };
                // A seek writes the buffer out.
                pending::output(
                    io::FSEEK,
                    stream,
                    true,
                    Record::Always,
                    // SAFETY: forwarding the caller's arguments.
                    || unsafe { f(stream, off, whence) },
                    |_, _| NOTHING,
                    |ev, r, err| {
                        on_file(ev, stream, r != 0, err);
                        ev.extra.set(off as u64);
                    },
                )
            }
        }
    )*};
}

fseek_like! {
    fseek = c"fseek", c_long;
    fseeko = c"fseeko", off_t;
    fseeko64 = c"fseeko64", off64_t;
}

macro_rules! ftell_like {
    ($($name:ident = $sym:literal, $off:ty;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `extra` is the position.
            ///
            /// # Safety
            /// As the C function.
            fn $name(stream: *mut FILE) -> $off {
                let Some(f) = real!($sym: unsafe extern "C" fn(*mut FILE) -> $off) else {
                    return missing();
                };
                // SAFETY: forwarding the caller's argument.
                io(io::FTELL, || unsafe { f(stream) }, |ev, r, err| {
                    on_file(ev, stream, r < 0, err);
                    if r >= 0 {
                        ev.extra.set(r as u64);
                    }
                })
            }
        }
    )*};
}

ftell_like! {
    ftell = c"ftell", c_long;
    ftello = c"ftello", off_t;
    ftello64 = c"ftello64", off64_t;
}

fn c_len(s: *const c_char) -> u64 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: the string was valid for the call that just used it.
    unsafe { libc::strlen(s) as u64 }
}

macro_rules! fputs_like {
    ($($name:ident = $sym:literal, $lock:expr;)*) => {$(
        super::entry! {
            /// Wraps the function of the same name; `bytes` is the string's
            /// length, and what it wrote out that no call counted.
            ///
            /// # Safety
            /// As the C function.
            fn $name(s: *const c_char, stream: *mut FILE) -> c_int {
                let Some(f) = real!($sym: unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int) else {
                    return missing();
                };
                pending::output(
                    io::FPUTS,
                    stream,
                    $lock,
                    Record::Always,
                    // SAFETY: forwarding the caller's arguments.
                    || unsafe { f(s, stream) },
                    |r, _| counted(if r >= 0 { c_len(s) } else { 0 }),
                    |ev, r, err| on_file(ev, stream, r < 0, err),
                )
            }
        }
    )*};
}

fputs_like! {
    fputs = c"fputs", true;
    fputs_unlocked = c"fputs_unlocked", false;
}

super::entry! {
    /// Wraps `puts` (recorded as `fputs` on stdout); `bytes` counts the newline.
    ///
    /// # Safety
    /// As the C function.
    fn puts(s: *const c_char) -> c_int {
        let Some(f) = real!(c"puts": unsafe extern "C" fn(*const c_char) -> c_int) else {
            return missing();
        };
        pending::output(
            io::FPUTS,
            stdout(),
            true,
            Record::Always,
            // SAFETY: forwarding the caller's argument.
            || unsafe { f(s) },
            |r, _| counted(if r >= 0 { c_len(s) + 1 } else { 0 }),
            |ev, r, err| on_fd(ev, 1, r < 0, err),
        )
    }
}

super::entry! {
    /// Wraps `fgets`; `bytes` is the length of what it read.
    ///
    /// # Safety
    /// As the C function.
    fn fgets(s: *mut c_char, n: c_int, stream: *mut FILE) -> *mut c_char {
        let Some(f) =
            real!(c"fgets": unsafe extern "C" fn(*mut c_char, c_int, *mut FILE) -> *mut c_char)
        else {
            return std::ptr::null_mut();
        };
        // SAFETY: forwarding the caller's arguments.
        io(
            io::FGETS,
            || unsafe { f(s, n, stream) },
            |ev, r, err| {
                on_file(ev, stream, false, err);
                ev.bytes.set(c_len(r));
            },
        )
    }
}

/// The `va_list` argument of the `v*` functions, passed on untouched.
pub(crate) type VaList = *mut c_void;

/// Formatted output to `stream` through the real `vfprintf`; shared by
/// `vfprintf` and the variadic `fprintf`.
pub(crate) fn vfprintf_impl(op: u16, stream: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    let Some(f) =
        real!(c"vfprintf": unsafe extern "C" fn(*mut FILE, *const c_char, VaList) -> c_int)
    else {
        return missing();
    };
    pending::output(
        op,
        stream,
        true,
        Record::Always,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { f(stream, fmt, ap) },
        |r, _| counted(r.max(0) as u64),
        |ev, r, err| on_file(ev, stream, r < 0, err),
    )
}

/// Fortified formatted output (`__vfprintf_chk`).
pub(crate) fn vfprintf_chk_impl(
    stream: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: VaList,
) -> c_int {
    let Some(f) = real!(c"__vfprintf_chk": unsafe extern "C" fn(*mut FILE, c_int, *const c_char, VaList) -> c_int)
    else {
        return missing();
    };
    pending::output(
        io::FPRINTF,
        stream,
        true,
        Record::Always,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { f(stream, flag, fmt, ap) },
        |r, _| counted(r.max(0) as u64),
        |ev, r, err| on_file(ev, stream, r < 0, err),
    )
}

/// Formatted output to a descriptor (`vdprintf`).
pub(crate) fn vdprintf_impl(fd: c_int, fmt: *const c_char, ap: VaList) -> c_int {
    let Some(f) = real!(c"vdprintf": unsafe extern "C" fn(c_int, *const c_char, VaList) -> c_int)
    else {
        return missing();
    };
    // SAFETY: forwarding the caller's arguments.
    io(
        io::FPRINTF,
        || unsafe { f(fd, fmt, ap) },
        |ev, r, err| {
            on_fd(ev, fd, r < 0, err);
            ev.bytes.set(r.max(0) as u64);
        },
    )
}

/// Formatted input through the real `__isoc99_vfscanf` (or `vfscanf`):
/// counted, with the number of items converted in `extra`; the bytes it
/// consumed are not known and `bytes` is 0.
pub(crate) fn vfscanf_impl(stream: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
    let f =
        real!(c"__isoc99_vfscanf": unsafe extern "C" fn(*mut FILE, *const c_char, VaList) -> c_int)
            .or(real!(c"vfscanf": unsafe extern "C" fn(*mut FILE, *const c_char, VaList) -> c_int));
    let Some(f) = f else {
        return missing();
    };
    // SAFETY: forwarding the caller's arguments.
    io(
        io::FSCANF,
        || unsafe { f(stream, fmt, ap) },
        |ev, r, err| {
            on_file(ev, stream, r < 0, err);
            if r >= 0 {
                ev.extra.set(r as u64);
            }
        },
    )
}

super::entry! {
    /// Wraps `vfprintf`.
    ///
    /// # Safety
    /// As the C function.
    fn vfprintf(stream: *mut FILE, fmt: *const c_char, ap: VaList) -> c_int {
        vfprintf_impl(io::FPRINTF, stream, fmt, ap)
    }
}

super::entry! {
    /// Wraps `vprintf`.
    ///
    /// # Safety
    /// As the C function.
    fn vprintf(fmt: *const c_char, ap: VaList) -> c_int {
        vfprintf_impl(io::FPRINTF, stdout(), fmt, ap)
    }
}

super::entry! {
    /// Wraps `__vfprintf_chk`.
    ///
    /// # Safety
    /// As the C function.
    fn __vfprintf_chk(
    stream: *mut FILE,
    flag: c_int,
    fmt: *const c_char,
    ap: VaList,
) -> c_int     {
        vfprintf_chk_impl(stream, flag, fmt, ap)
    }
}

super::entry! {
    /// Wraps `__vprintf_chk`.
    ///
    /// # Safety
    /// As the C function.
    fn __vprintf_chk(flag: c_int, fmt: *const c_char, ap: VaList) -> c_int {
        vfprintf_chk_impl(stdout(), flag, fmt, ap)
    }
}

super::entry! {
    /// Wraps `vdprintf`.
    ///
    /// # Safety
    /// As the C function.
    fn vdprintf(fd: c_int, fmt: *const c_char, ap: VaList) -> c_int {
        vdprintf_impl(fd, fmt, ap)
    }
}

super::entry! {
    /// Wraps `__isoc99_vfscanf`.
    ///
    /// # Safety
    /// As the C function.
    fn __isoc99_vfscanf(
    stream: *mut FILE,
    fmt: *const c_char,
    ap: VaList,
) -> c_int     {
        vfscanf_impl(stream, fmt, ap)
    }
}

/// glibc's `stdout` stream.
pub(crate) fn stdout() -> *mut FILE {
    extern "C" {
        static mut stdout: *mut FILE;
    }
    // SAFETY: glibc's `stdout` is a valid, initialised global.
    unsafe { stdout }
}
