//! Call sites: where in the program each MPI and I/O call was made.
//!
//! Every exported MPI wrapper is entered through a few instructions of
//! assembly ([`shim!`]) that store the wrapper's return address — the
//! program's address right after its `call` — in a thread-local word and
//! jump to the wrapper. The wrapper turns that address into a small id,
//! interned once per process in a lock-free table ([`site`]), and the
//! guard puts the id into the top bits of each event's `extra`
//! ([`hark_wire::Event::callsite`]). A new id is sent as a
//! [`Def::Callsite`] before the event that carries it; the objects mapped
//! into the process (`dl_iterate_phdr`: path, build id, load bias) are sent
//! as [`Def::Object`]s before the first call site, and again when a call
//! site lies outside every object sent so far (a library `dlopen` added).
//! Names, files and lines are found in `hark`, never here.
//!
//! With `HARK_CALLSITE_DEPTH` above 1 the caller's stack is unwound with
//! glibc's `backtrace` (the unwinder, not a frame-pointer walk: programs
//! built with `-O2` keep no frame pointers, and a wrong frame would name a
//! wrong line), up to that many frames from the caller on.
//!
//! MPICH's Fortran bindings call the C `MPI_*` functions: a Fortran wrapper
//! that forwards keeps its own caller as the call site of the C wrapper
//! inside it ([`hold`]).
//!
//! The POSIX and STDIO wrappers that record are entered through the same
//! shim; the wrapper moves the address into a word of its own for the
//! length of the call ([`IoCall`]), where the recording helpers read it.
//! Every reader clears the shim's word, so a wrapper reached without a
//! shim (a call from inside the probe) finds 0, never an older caller.
//! An address inside the C library or the probe itself is no
//! place in the program (the C library reaching a wrapped function through
//! the dynamic linker, the probe calling its own wrappers): it is recorded
//! as unknown ([`foreign`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::real::object_base;
use hark_wire::Def;

/// Slots of the address → id table (a power of two); a process with more
/// distinct call-site addresses than half of it records the rest as id 0.
const SLOTS: usize = 1 << 14;
/// Ids are 16 bits wide on the wire; 0 means "unknown".
const MAX_ID: u32 = u16::MAX as u32;

static KEYS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static IDS: [AtomicU16; SLOTS] = [const { AtomicU16::new(0) }; SLOTS];
/// Frames per call site (`HARK_CALLSITE_DEPTH`).
static DEPTH: AtomicU32 = AtomicU32::new(1);

struct Table {
    next: u32,
    /// Address ranges `[start, end)` of the objects sent so far.
    objects: Vec<(u64, u64)>,
    /// Call sites of more than one frame, by their frames.
    stacks: BTreeMap<Vec<u64>, u16>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: 1,
    objects: Vec::new(),
    stacks: BTreeMap::new(),
});

thread_local! {
    static FORK_GUARD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, Table>>> =
        const { std::cell::RefCell::new(None) };
}

/// Held across `fork` (before the definitions' lock, which a new call site
/// takes inside this one), so that the child never inherits the table
/// locked by a thread that does not exist in it.
pub(crate) fn lock_for_fork() {
    let g = hark_sync::lock(&TABLE);
    let _ = FORK_GUARD.try_with(|f| *f.borrow_mut() = Some(g));
}

/// Releases the lock taken by [`lock_for_fork`], in parent and child.
pub(crate) fn unlock_after_fork() {
    let _ = FORK_GUARD.try_with(|f| f.borrow_mut().take());
}

/// Sets the number of frames a call site records (from the settings).
pub(crate) fn set_depth(depth: u32) {
    DEPTH.store(
        depth.clamp(1, hark_wire::MAX_CALLSITE_DEPTH),
        Ordering::Relaxed,
    );
}

/// The return address the last shim on this thread stored (or the one a
/// forwarding Fortran wrapper holds): a wrapper reads it first thing, before
/// anything it does can pass through another shim. 0 when unknown.
#[inline(always)]
pub(crate) fn ret() -> u64 {
    tls::ret()
}

/// The call site of return address `ret` ([`ret`]) as an id, 0 when
/// unknown. Call it once the probe is entered.
#[inline(always)]
pub(crate) fn here(ret: u64) -> u16 {
    if ret == 0 {
        return 0;
    }
    if DEPTH.load(Ordering::Relaxed) > 1 {
        return stack(ret);
    }
    site(ret)
}

/// The id of return address `ret`, interned on first sight.
#[inline(always)]
pub(crate) fn site(ret: u64) -> u16 {
    let mut i = hash(ret);
    loop {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == ret {
            return IDS[i].load(Ordering::Relaxed);
        }
        if k == 0 {
            return new_site(ret);
        }
        i = (i + 1) & (SLOTS - 1);
    }
}

#[inline(always)]
fn hash(a: u64) -> usize {
    (a.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize & (SLOTS - 1)
}

/// First sight of `ret`: give it an id, define it, publish it in the table.
#[cold]
#[inline(never)]
fn new_site(ret: u64) -> u16 {
    let mut t = hark_sync::lock(&TABLE);
    let mut i = hash(ret);
    let mut probes = 0;
    loop {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == ret {
            return IDS[i].load(Ordering::Relaxed);
        }
        if k == 0 {
            break;
        }
        probes += 1;
        if probes > SLOTS / 2 {
            return 0;
        }
        i = (i + 1) & (SLOTS - 1);
    }
    let id = if foreign(ret) {
        0
    } else {
        match define(&mut t, vec![ret]) {
            Some(id) => id,
            None => return 0,
        }
    };
    IDS[i].store(id, Ordering::Relaxed);
    KEYS[i].store(ret, Ordering::Release);
    id
}

/// A call site of several frames, from `ret` (the caller) outwards.
#[cold]
#[inline(never)]
fn stack(ret: u64) -> u16 {
    if foreign(ret) {
        return 0;
    }
    let depth = DEPTH.load(Ordering::Relaxed) as usize;
    let frames = unwind(ret, depth);
    let mut t = hark_sync::lock(&TABLE);
    if let Some(&id) = t.stacks.get(&frames) {
        return id;
    }
    let id = define(&mut t, frames.clone()).unwrap_or(0);
    if id != 0 {
        t.stacks.insert(frames, id);
    }
    id
}

/// Up to `depth` return addresses, `ret` first, then its callers'.
fn unwind(ret: u64, depth: usize) -> Vec<u64> {
    extern "C" {
        fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
    }
    // The probe's own frames (wrapper, this module) come first, a few:
    // unwinding costs per frame, so no more than `depth` past them.
    const OWN: usize = 16;
    let mut buf = [std::ptr::null_mut::<libc::c_void>(); OWN + 64];
    let want = (depth + OWN).min(buf.len());
    // SAFETY: `buf` has room for the `want` entries asked for.
    let n = unsafe { backtrace(buf.as_mut_ptr(), want as libc::c_int) }.max(0) as usize;
    let addrs: Vec<u64> = buf[..n].iter().map(|&p| p as u64).collect();
    match addrs.iter().position(|&a| a == ret) {
        Some(at) => addrs[at..].iter().take(depth).copied().collect(),
        // Not found (an unwinder that cannot step through the wrapper):
        // the caller alone is still right.
        None => vec![ret],
    }
}

/// Whether return address `ret` lies in the C library or this library:
/// the caller is then no place in the program.
#[cold]
fn foreign(ret: u64) -> bool {
    // The load addresses of this library and of the C library, found once
    // (`dladdr` walks every object) from a function of each: this one, and
    // one of the C library's the probe never wraps.
    static BASES: std::sync::OnceLock<[Option<u64>; 2]> = std::sync::OnceLock::new();
    let bases = BASES.get_or_init(|| {
        [
            object_base(foreign as *const () as u64),
            object_base(libc::__errno_location as *const () as u64),
        ]
    });
    object_base(ret).is_some_and(|b| bases.contains(&Some(b)))
}

/// Gives `frames` the next id and sends it, after the objects holding its
/// frames if any lies outside those sent so far. `None` past the last id.
fn define(t: &mut Table, frames: Vec<u64>) -> Option<u16> {
    if t.next > MAX_ID {
        return None;
    }
    let id = t.next;
    t.next += 1;
    let outside = |t: &Table, a: u64| !t.objects.iter().any(|&(s, e)| (s..e).contains(&a));
    let mut defs = Vec::new();
    if frames.iter().any(|&a| outside(t, a)) {
        new_objects(t, &mut defs);
    }
    defs.push(Def::Callsite { id, frames });
    super::define_if_running(defs);
    Some(id as u16)
}

/// Sends instrumented function `id` at entry address `addr`, after the
/// objects mapped since the last sent if `addr` lies outside them all.
pub(crate) fn define_function(id: u32, addr: u64) {
    let mut t = hark_sync::lock(&TABLE);
    let mut defs = Vec::new();
    if !t.objects.iter().any(|&(s, e)| (s..e).contains(&addr)) {
        new_objects(&mut t, &mut defs);
    }
    defs.push(Def::Function { id, addr });
    super::define_if_running(defs);
}

/// Sends the objects mapped since the last sent if `addr` lies outside
/// them all, so that a name given by object and offset (an OpenMP
/// construct's) can be resolved by `hark`; the object holding `addr`, as
/// (file name, load bias), if there is one.
pub(crate) fn object_of(addr: u64) -> Option<(String, u64)> {
    let mut t = hark_sync::lock(&TABLE);
    let mut defs = Vec::new();
    if !t.objects.iter().any(|&(s, e)| (s..e).contains(&addr)) {
        new_objects(&mut t, &mut defs);
        super::define_if_running(defs);
    }
    drop(t);
    object_holding(addr)
}

/// The mapped object holding `addr`, as (path, load bias), if any.
pub(crate) fn object_holding(addr: u64) -> Option<(String, u64)> {
    match holding(addr)? {
        Def::Object { path, bias, .. } => Some((path, bias)),
        _ => None,
    }
}

/// Where the mapped object holding `addr` lies, `[start, end)`, if any.
pub(crate) fn object_span(addr: u64) -> Option<(u64, u64)> {
    match holding(addr)? {
        Def::Object { start, size, .. } => Some((start, start.saturating_add(size))),
        _ => None,
    }
}

/// The mapped object holding `addr` (a `Def::Object`), if any.
fn holding(addr: u64) -> Option<Def> {
    objects().into_iter().find(|o| {
        matches!(o, Def::Object { start, size, .. }
            if (*start..start.saturating_add(*size)).contains(&addr))
    })
}

/// Adds to `defs` every mapped object not sent before.
fn new_objects(t: &mut Table, defs: &mut Vec<Def>) {
    for obj in objects() {
        let Def::Object { start, size, .. } = obj else {
            continue;
        };
        if t.objects.contains(&(start, start + size)) {
            continue;
        }
        t.objects.push((start, start + size));
        defs.push(obj);
    }
}

/// The objects mapped into this process now, as `dl_iterate_phdr` lists
/// them (the executable, whose name it leaves empty, as `/proc/self/exe`).
pub(crate) fn objects() -> Vec<Def> {
    let mut out: Vec<Def> = Vec::new();
    // SAFETY: the callback only reads what dl_iterate_phdr hands it, for the
    // duration of the call, and `data` is `out`.
    unsafe {
        libc::dl_iterate_phdr(
            Some(one_object),
            &mut out as *mut Vec<Def> as *mut libc::c_void,
        )
    };
    out
}

/// `dl_iterate_phdr`'s callback: one object's loaded range and build id.
unsafe extern "C" fn one_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: per dl_iterate_phdr: `info` is valid during the call; `data`
    // is the vector `objects` passed.
    let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<Def>)) };
    let bias = info.dlpi_addr;
    let phdrs = if info.dlpi_phdr.is_null() {
        &[][..]
    } else {
        // SAFETY: `dlpi_phnum` headers at `dlpi_phdr`.
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let loads = phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let (Some(lo), Some(hi)) = (
        loads.clone().map(|p| p.p_vaddr).min(),
        loads.map(|p| p.p_vaddr + p.p_memsz).max(),
    ) else {
        return 0;
    };
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let path = if name.is_empty() {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        name
    };
    if path.is_empty() || path.starts_with("linux-vdso") {
        return 0;
    }
    let build_id = phdrs
        .iter()
        .filter(|p| p.p_type == libc::PT_NOTE)
        // SAFETY: a loaded note segment, at its address plus the bias.
        .find_map(|p| unsafe { gnu_build_id(bias + p.p_vaddr, p.p_memsz) })
        .unwrap_or_default();
    out.push(Def::Object {
        path,
        build_id,
        bias,
        start: bias + lo,
        size: hi - lo,
    });
    0
}

/// The GNU build id in the note segment at `addr` (`size` bytes), in hex.
///
/// # Safety
/// `addr..addr + size` is mapped and readable.
unsafe fn gnu_build_id(addr: u64, size: u64) -> Option<String> {
    // SAFETY: per the caller.
    let notes = unsafe { std::slice::from_raw_parts(addr as *const u8, size as usize) };
    let word = |at: usize| -> Option<usize> {
        let b = notes.get(at..at + 4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let align4 = |n: usize| (n + 3) & !3;
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (namesz, descsz, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name = at + 12;
        let desc = name + align4(namesz);
        let next = desc + align4(descsz);
        if kind == 3 && notes.get(name..name + namesz) == Some(b"GNU\0") {
            let id = notes.get(desc..desc + descsz)?;
            return Some(id.iter().map(|b| format!("{b:02x}")).collect());
        }
        at = next;
    }
    None
}

/// While a Fortran wrapper forwards to the MPI library's Fortran binding
/// (MPICH's, which calls the C `MPI_*`), the C wrapper inside takes the
/// Fortran wrapper's caller as its call site: run `f` so.
#[inline(always)]
pub(crate) fn hold<R>(ret: u64, f: impl FnOnce() -> R) -> R {
    tls::set_outer(ret);
    let r = f();
    tls::set_outer(0);
    r
}

/// Defines the exported function `$name` as a shim that stores its return
/// address for `callsite::here` and jumps to `$inner`, which has the C prototype
/// `$name` is called with. x86-64 Linux only; elsewhere `$name` calls
/// `$inner` and call sites are unknown (0).
#[macro_export]
macro_rules! callsite_shim {
    ($name:ident => $inner:path; ($($a:ident: $t:ty),*) $(-> $r:ty)?) => {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        #[doc = "Entry point: records the caller's address, then runs the wrapper."]
        ///
        /// # Safety
        /// As the C function.
        #[unsafe(naked)]
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name() {
            ::core::arch::naked_asm!(
                // r10 and r11 carry no argument (and keep `al` of variadics).
                "mov r11, qword ptr [rsp]",
                "mov r10, qword ptr [rip + hark_probe_ret@GOTTPOFF]",
                "mov qword ptr fs:[r10], r11",
                "jmp {inner}",
                inner = sym $inner,
            )
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        #[doc = "Entry point: runs the wrapper (no call sites on this target)."]
        ///
        /// # Safety
        /// As the C function.
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case, clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name($($a: $t),*) $(-> $r)? {
            // SAFETY: the same prototype.
            unsafe { $inner($($a),*) }
        }
    };
}

/// The call site of the POSIX or STDIO call a wrapper is serving on this
/// thread, for as long as this lives: made first thing in the wrapper
/// entered through a shim, from the address the shim stored.
pub(crate) struct IoCall {
    outer: u64,
}

impl IoCall {
    /// Takes the shim's address for this call (0 if no shim stored one:
    /// the wrapper was called from inside the probe).
    #[inline(always)]
    pub(crate) fn begin() -> IoCall {
        IoCall {
            outer: tls::begin_io(),
        }
    }
}

impl Drop for IoCall {
    #[inline(always)]
    fn drop(&mut self) {
        tls::end_io(self.outer);
    }
}

/// The return address of the POSIX or STDIO call being served
/// ([`IoCall`]), 0 when unknown.
#[inline(always)]
pub(crate) fn io_ret() -> u64 {
    tls::io_ret()
}

/// The thread-local words: the last shim's return address, the one a
/// forwarding Fortran wrapper holds ([`hold`]), and the I/O call's
/// ([`IoCall`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tls {
    // 24 bytes of initial-exec thread-local storage, as in `local.rs`.
    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl hark_probe_ret",
        ".hidden hark_probe_ret",
        ".type hark_probe_ret,@tls_object",
        ".size hark_probe_ret,24",
        "hark_probe_ret:",
        ".zero 24",
        ".popsection",
    );

    #[inline(always)]
    fn words() -> *mut [u64; 3] {
        let p: *mut [u64; 3];
        // SAFETY: the thread pointer plus the symbol's TLS offset from the
        // GOT, valid for as long as the thread runs.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + hark_probe_ret@GOTTPOFF]",
                p = out(reg) p,
                options(pure, readonly, nostack),
            );
        }
        p
    }

    /// The held Fortran caller if any, else the last shim's return address
    /// (cleared: read once).
    #[inline(always)]
    pub(super) fn ret() -> u64 {
        // SAFETY: this thread's words, written only by this thread.
        let w = unsafe { &mut *words() };
        let last = std::mem::take(&mut w[0]);
        if w[1] != 0 {
            w[1]
        } else {
            last
        }
    }

    /// Moves the shim's address into the I/O call's word; returns what
    /// that word held (a call the probe makes inside another).
    #[inline(always)]
    pub(super) fn begin_io() -> u64 {
        // SAFETY: as above.
        let w = unsafe { &mut *words() };
        let outer = w[2];
        w[2] = std::mem::take(&mut w[0]);
        outer
    }

    #[inline(always)]
    pub(super) fn end_io(outer: u64) {
        // SAFETY: as above.
        unsafe { (*words())[2] = outer }
    }

    #[inline(always)]
    pub(super) fn io_ret() -> u64 {
        // SAFETY: as above.
        unsafe { (*words())[2] }
    }

    #[inline(always)]
    pub(super) fn set_outer(v: u64) {
        // SAFETY: as above.
        unsafe { (*words())[1] = v }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tls {
    #[inline(always)]
    pub(super) fn ret() -> u64 {
        0
    }
    #[inline(always)]
    pub(super) fn set_outer(_: u64) {}
    #[inline(always)]
    pub(super) fn begin_io() -> u64 {
        0
    }
    #[inline(always)]
    pub(super) fn end_io(_: u64) {}
    #[inline(always)]
    pub(super) fn io_ret() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_keeps_its_id_and_another_gets_a_new_one() {
        let a = site(0x1234_5678);
        let b = site(0x1234_5679);
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(site(0x1234_5678), a);
        assert_eq!(site(0x1234_5679), b);
    }

    #[test]
    fn an_address_in_the_c_library_is_no_call_site() {
        let in_libc = libc::strlen as *const () as u64 + 1;
        assert!(foreign(in_libc));
        assert_eq!(site(in_libc), 0);
        // The test binary is the probe here: its own addresses are foreign.
        let in_probe = an_address_keeps_its_id_and_another_gets_a_new_one as *const () as u64;
        assert!(foreign(in_probe));
    }

    #[test]
    fn the_executable_is_among_the_objects_with_its_build_id() {
        let objs = objects();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let here = an_address_keeps_its_id_and_another_gets_a_new_one as *const () as u64;
        let found = objs.iter().find_map(|o| match o {
            Def::Object {
                path, start, size, ..
            } if (*start..start + size).contains(&here) => Some(path.clone()),
            _ => None,
        });
        assert_eq!(found.as_deref(), Some(exe.to_str().unwrap()));
    }
}
