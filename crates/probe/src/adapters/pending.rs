//! Output that reaches a file through stdio's buffer with no wrapped call
//! to count it: bytes a program hands stdio through the inline
//! `putc_unlocked` and `putchar_unlocked` (no call at all), or through
//! calls recorded only when they move bytes to the file (`fputc`, `putc`,
//! `putchar`, their `_unlocked` forms, `__overflow`). `ls` writes its
//! listing so, and glibc writes it to the file in one `write` from inside
//! `exit`, past every wrapper: `ls -la > file` showed `<stdout>` 0 B.
//!
//! What is exact, and how. Stdio output is counted when a wrapped call
//! accepts it (`fwrite`, `fputs`, `printf`, ...: the level the program
//! called). For each stream the probe keeps how many of the bytes pending
//! in its buffer such calls have counted (a small table keyed by the
//! `FILE`); every wrapped call that can write the buffer out (any output
//! call, `fflush`, `fclose`, `fseek`) reads the pending bytes before and
//! after (`__fpending`, under the stream's lock). When it delivered, glibc
//! wrote the buffer out whole, so the pending bytes no call had counted
//! went to the file in that call: they are added to its event (an
//! `fflush` event for `fclose`, `fseek` and the character calls). At exit,
//! before the stream ends, the probe flushes every stream itself, one
//! `fflush` event per stream that had bytes no call counted. So every byte
//! is counted once, whether a call accepted it or a flush carried it.
//!
//! Not covered: streams other than `stdout` and `stderr` left open at exit
//! or flushed by `fflush(NULL)` (glibc's list of streams cannot be walked
//! safely beside a thread that closes one), a stream beyond the table's 64
//! (its uncounted bytes stay uncounted, as without this), output a
//! library's destructor writes after the probe's has run, and a buffer
//! written out by an unwrapped call (`fputs_unlocked` from a library that
//! binds it directly).

use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hark_wire::op::io;
use hark_wire::Event;
use libc::FILE;

use super::on_fd;
use super::stdio::fd_of;
use crate::core;

/// Streams whose counted pending bytes are kept.
const STREAMS: usize = 64;

/// The `FILE` of each entry (0: free). Entries are never freed: a closed
/// stream's entry goes back to 0 counted, right for a stream later opened
/// at the same address.
static KEYS: [AtomicUsize; STREAMS] = [const { AtomicUsize::new(0) }; STREAMS];
/// Of the bytes pending in the stream's buffer, how many a wrapped call
/// counted.
static COUNTED: [AtomicU64; STREAMS] = [const { AtomicU64::new(0) }; STREAMS];

extern "C" {
    fn __fpending(f: *mut FILE) -> libc::size_t;
    fn flockfile(f: *mut FILE);
    fn ftrylockfile(f: *mut FILE) -> c_int;
    fn funlockfile(f: *mut FILE);
}

/// The entry of stream `f`, made if `make` and there is room.
fn entry(f: *mut FILE, make: bool) -> Option<usize> {
    let key = f as usize;
    let start = (key >> 4) % STREAMS;
    for i in (start..STREAMS).chain(0..start) {
        match KEYS[i].load(Ordering::Acquire) {
            k if k == key => return Some(i),
            0 if make => {
                match KEYS[i].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Some(i),
                    Err(k) if k == key => return Some(i),
                    Err(_) => {}
                }
            }
            0 => return None,
            _ => {}
        }
    }
    None
}

/// Whether a one-character call on `f` surely only stores into the buffer:
/// a fully buffered stream, in put mode, with room for it (glibc's
/// `bits/types/struct_FILE.h` head, and its `_IO_UNBUFFERED` and
/// `_IO_LINE_BUF` flags). Then the character calls cost three loads here,
/// not the accounting: they are made once per byte.
#[inline(always)]
pub(crate) fn only_stores(f: *mut FILE) -> bool {
    #[repr(C)]
    struct Head {
        flags: c_int,
        _read: [*mut u8; 3],
        _write_base: *mut u8,
        write_ptr: *mut u8,
        write_end: *mut u8,
    }
    const UNBUFFERED: c_int = 0x0002;
    const LINE_BUF: c_int = 0x0200;
    if f.is_null() {
        return false;
    }
    // SAFETY: `f` is a stream the program passes to a stdio call; its head
    // has this layout. Read without its lock, as the inline
    // `putc_unlocked` reads it.
    let h = unsafe { &*f.cast::<Head>() };
    h.flags & (UNBUFFERED | LINE_BUF) == 0 && h.write_ptr < h.write_end
}

fn pending(f: *mut FILE) -> u64 {
    // SAFETY: `f` is a stream the program passed to a stdio call, or one
    // of glibc's open streams.
    unsafe { __fpending(f) as u64 }
}

/// Bytes a call accepted into a stream: `counted` by its own event, and
/// `all` of them (an uncounted call accepts bytes it does not count).
#[derive(Clone, Copy)]
pub(crate) struct Accepted {
    pub counted: u64,
    pub all: u64,
}

/// After a call on `f` that found `before` bytes pending, accepted
/// `took`, and left `after`: updates the counted pending bytes, and
/// returns those the call wrote to the file that no call had counted.
fn account(f: *mut FILE, before: u64, took: Accepted, after: u64) -> u64 {
    let delivered = (before + took.all).saturating_sub(after);
    if delivered == 0 && took.counted == 0 {
        // Nothing written, nothing counted: nothing to keep.
        return 0;
    }
    let Some(i) = entry(f, true) else {
        return 0;
    };
    let counted = COUNTED[i].load(Ordering::Relaxed).min(before);
    if delivered == 0 {
        COUNTED[i].store(counted + took.counted, Ordering::Relaxed);
        return 0;
    }
    // glibc writes its buffer out whole: what was pending went first, then
    // what the call added, whose tail may stay pending. A call counts all
    // it takes or nothing of it.
    let own = if took.counted == 0 {
        took.all.saturating_sub(after)
    } else {
        0
    };
    let uncounted = (before - counted) + own;
    COUNTED[i].store(after.min(took.counted), Ordering::Relaxed);
    uncounted.min(delivered)
}

/// Takes stream `f`'s lock for the length of a call and its accounting,
/// unless the caller holds it (an `_unlocked` call): another thread's
/// output must not come between the two readings.
struct Locked(*mut FILE, bool);

impl Locked {
    fn new(f: *mut FILE, lock: bool) -> Locked {
        if lock {
            // SAFETY: `f` is a valid stream; the lock is recursive, so the
            // real call takes it again.
            unsafe { flockfile(f) };
        }
        Locked(f, lock)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        if self.1 {
            // SAFETY: taken in `new` on this thread.
            unsafe { funlockfile(self.0) };
        }
    }
}

/// How a stdio output call is recorded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// Always, with the bytes it accepted and those it wrote out uncounted.
    Always,
    /// Only when it wrote out bytes no call counted (the character calls).
    Delivering,
}

/// A stdio output call on `f`: times `call` and records an event of kind
/// `op`, which `fill` completes, with the bytes `took` says it accepted
/// plus the uncounted bytes it wrote to the file (module doc). `lock`:
/// take the stream's lock around it (not for `_unlocked` calls). The
/// program sees the result and `errno` unchanged.
#[inline(always)]
pub(crate) fn output<R: Copy>(
    op: u16,
    f: *mut FILE,
    lock: bool,
    how: Record,
    call: impl FnOnce() -> R,
    took: impl FnOnce(R, c_int) -> Accepted,
    fill: impl FnOnce(&mut Event, R, c_int),
) -> R {
    let Some(g) = core::enter() else {
        return call();
    };
    if !core::io_enabled() || f.is_null() {
        return call();
    }
    g.at_callsite(core::callsite::io_ret());
    // SAFETY: __errno_location returns this thread's errno slot, valid
    // for its life.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    // SAFETY: as above.
    unsafe { *errno = 0 };
    let locked = Locked::new(f, lock);
    let before = pending(f);
    let t0 = core::stamp();
    let r = call();
    let t1 = core::stamp();
    // SAFETY: as above.
    let err = unsafe { *errno };
    let accepted = took(r, err);
    let after = pending(f);
    let delivered_without_count = if how == Record::Delivering && after >= before + accepted.all {
        // The character calls' common case: nothing written out.
        0
    } else {
        account(f, before, accepted, after)
    };
    drop(locked);
    if how == Record::Always || delivered_without_count > 0 {
        // A call that writes no data of its own (`fseek`) carries what it
        // wrote out in an `fflush` event beside its own.
        let writes = matches!(op, io::FWRITE | io::FPUTS | io::FPRINTF | io::FFLUSH);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut ev = Event::new(op, t0, t1);
            fill(&mut ev, r, err);
            let carried = if writes { delivered_without_count } else { 0 };
            ev.bytes.set(accepted.counted.saturating_add(carried));
            g.record(ev);
            if !writes {
                record_flushed(&g, fd_of(f), delivered_without_count, t1);
            }
        }));
    }
    // SAFETY: as above.
    unsafe { *errno = if err == 0 { saved } else { err } };
    r
}

/// Before `fclose(f)` or another call that writes the buffer out and
/// after which the stream cannot be read again: the pending bytes no call
/// counted, and the stream's entry forgotten (`close`) or its count
/// cleared.
pub(crate) fn uncounted_now(f: *mut FILE) -> u64 {
    if f.is_null() {
        return 0;
    }
    let before = pending(f);
    match entry(f, false) {
        Some(i) => before - COUNTED[i].swap(0, Ordering::Relaxed).min(before),
        None => before,
    }
}

/// Records that `bytes` no call counted reached the file behind `fd` in
/// a call that ended at `t` (an `fflush` event of no duration: the time
/// is the call's own event's).
pub(crate) fn record_flushed(g: &core::Guard, fd: c_int, bytes: u64, t: u64) {
    if bytes == 0 || fd < 0 {
        return;
    }
    let mut ev = Event::new(io::FFLUSH, t, t);
    on_fd(&mut ev, fd, false, 0);
    ev.bytes.set(bytes);
    g.record(ev);
}

/// `stdout` and `stderr`: the streams flushed at exit and by
/// `fflush(NULL)` through the probe. Other streams are left to glibc
/// there: its list of open streams cannot be walked safely while another
/// thread may close one (its lock is not exported), and a stream the
/// program opened is written out by its `fclose`, which is wrapped.
fn standard_streams() -> [*mut FILE; 2] {
    extern "C" {
        static mut stdout: *mut FILE;
        static mut stderr: *mut FILE;
    }
    // SAFETY: glibc's standard streams, valid, initialised globals.
    unsafe { [stdout, stderr] }
}

/// Whether stream `f` has pending output that no call counted.
fn has_uncounted(f: *mut FILE) -> bool {
    let before = pending(f);
    before > entry(f, false).map_or(0, |i| COUNTED[i].load(Ordering::Relaxed))
}

/// At exit, before the stream ends: flushes `stdout` and `stderr` through
/// the `fflush` wrapper when they hold output no call counted, so that it
/// is recorded (`core::finish` runs after this; glibc's own flush at exit
/// runs after the probe's destructor, past every wrapper). A stream
/// another thread holds locked is left to glibc.
pub(crate) fn flush_at_exit() {
    let Some(g) = core::enter() else {
        return;
    };
    if !core::io_enabled() {
        return;
    }
    drop(g);
    for f in standard_streams() {
        // SAFETY: `f` is a valid stream.
        if f.is_null() || !has_uncounted(f) || unsafe { ftrylockfile(f) } != 0 {
            continue;
        }
        // SAFETY: as above; `fflush` is the wrapper, which records.
        unsafe {
            super::stdio::fflush::entered(f);
            funlockfile(f);
        }
    }
}

/// Before `fflush(NULL)`: flushes `stdout` and `stderr` through
/// `flush_one` (the wrapper) where they hold output no call counted, so
/// that it is recorded against their files.
pub(crate) fn flush_standard(flush_one: impl Fn(*mut FILE)) {
    for f in standard_streams() {
        if !f.is_null() && has_uncounted(f) {
            flush_one(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNTED_CALL: fn(u64) -> Accepted = |n| Accepted { counted: n, all: n };
    const CHARACTER: Accepted = Accepted { counted: 0, all: 1 };
    const FLUSH: Accepted = Accepted { counted: 0, all: 0 };

    /// Plays calls on one stream as (pending before, accepted, pending
    /// after) and returns what each recorded beyond its own count.
    fn check(stream: usize, calls: &[(u64, Accepted, u64)]) -> Vec<u64> {
        let f = stream as *mut FILE;
        calls
            .iter()
            .map(|&(before, took, after)| account(f, before, took, after))
            .collect()
    }

    #[test]
    fn counted_output_is_never_counted_again_when_it_is_written_out() {
        // printf of 3000 bytes, then 100 more, then the flush at exit.
        let out = check(
            0x1000,
            &[
                (0, COUNTED_CALL(3000), 3000),
                (3000, COUNTED_CALL(100), 3100),
                (3100, FLUSH, 0),
            ],
        );
        assert_eq!(out, [0, 0, 0]);
    }

    #[test]
    fn uncounted_output_is_counted_once_by_the_call_that_writes_it_out() {
        // 3000 counted, 1000 put by the inline putc (seen as pending only),
        // then a flush: the 1000 go out uncounted.
        let out = check(0x2000, &[(0, COUNTED_CALL(3000), 3000), (4000, FLUSH, 0)]);
        assert_eq!(out, [0, 1000]);
        // A full buffer of 4096 uncounted bytes, and `__overflow` with one
        // more character: the 4096 go out, the character stays pending.
        let out = check(0x3000, &[(4096, CHARACTER, 1), (1, FLUSH, 0)]);
        assert_eq!(out, [4096, 1]);
        // 96 uncounted bytes pending, then a counted write of 8000 that
        // writes the buffer out and keeps 0 of its own: the 96 once.
        let out = check(0x4000, &[(96, COUNTED_CALL(8000), 0), (0, FLUSH, 0)]);
        assert_eq!(out, [96, 0]);
    }

    #[test]
    fn an_unbuffered_stream_counts_each_character_as_it_goes() {
        let out = check(0x5000, &[(0, CHARACTER, 0), (0, COUNTED_CALL(5), 0)]);
        assert_eq!(out, [1, 0]);
    }
}
