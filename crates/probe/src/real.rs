//! Finding the real functions behind the ones the probe exports.
//!
//! Every wrapped symbol is looked up with `dlsym(RTLD_NEXT)` on first use and
//! cached, never linked directly: a direct reference to a PMPI or Fortran
//! symbol would stop programs that lack it from starting.
//!
//! `RTLD_NEXT` sees only the global scope. A library opened with
//! `dlopen(RTLD_LOCAL)` (a Python extension, and the OpenMP runtime or BLAS
//! it needs) still calls the probe's wrappers, which come first, but its
//! own definitions are not in that scope: they are then looked up in each
//! loaded object's own scope (`in_local_scopes`). Without that, a wrapper
//! would find nothing and the program's call would silently do nothing.

use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A lazily resolved symbol.
pub struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
    // Whether to search the global scope when RTLD_NEXT finds nothing. Only
    // for symbols the probe never defines itself (PMPI_*): for any other, the
    // global scope would hand back our own wrapper and recurse.
    global_fallback: bool,
    // Whether the loaded objects' own scopes were searched: once, at the
    // first miss (the program calls a function its libraries define, so
    // they are loaded by then), since the search opens every object.
    scanned: AtomicBool,
}

impl Real {
    /// A symbol the probe wraps (it defines one of the same name): only the
    /// next definition after this library will do.
    pub const fn next(name: &'static CStr) -> Real {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            global_fallback: false,
            scanned: AtomicBool::new(false),
        }
    }

    /// A symbol the probe never defines (`PMPI_*`): the next definition, or
    /// failing that any in the global scope (an MPI library opened later by
    /// `dlopen` with `RTLD_GLOBAL`, as Python's mpi4py does).
    pub const fn any(name: &'static CStr) -> Real {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            global_fallback: true,
            scanned: AtomicBool::new(false),
        }
    }

    /// The address of the real function; null if the process has none.
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    // Runs once per symbol (or again while the symbol is still missing).
    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        // SAFETY: `name` is a valid NUL-terminated string; dlsym has no other
        // preconditions.
        let mut p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        if p.is_null() && self.global_fallback {
            // SAFETY: as above.
            p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) };
        }
        if p.is_null() {
            // One search at a time, its result stored before the lock is
            // given up: the team's threads of a library's first region all
            // miss at once, and each must get what the search finds, not a
            // null while it runs.
            static SEARCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
            let _one = hark_sync::lock(&SEARCH);
            p = self.ptr.load(Ordering::Relaxed);
            if p.is_null() && !self.scanned.swap(true, Ordering::Relaxed) {
                p = in_local_scopes(self.name);
                self.ptr.store(p, Ordering::Relaxed);
            }
            return p;
        }
        self.ptr.store(p, Ordering::Relaxed);
        p
    }
}

/// The first definition of `name` in a loaded object's own scope that is
/// not the probe's: for objects opened with `RTLD_LOCAL`.
fn in_local_scopes(name: &CStr) -> *mut c_void {
    let own = object_base(in_local_scopes as *const () as u64);
    let mut paths: Vec<CString> = Vec::new();
    // SAFETY: the callback only copies the names dl_iterate_phdr hands it,
    // during the call, into `paths`.
    unsafe { libc::dl_iterate_phdr(Some(loaded), &mut paths as *mut Vec<CString> as *mut c_void) };
    for path in paths {
        // SAFETY: a NUL-terminated path of a loaded object; RTLD_NOLOAD
        // only finds it (and takes a reference, given back below).
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            continue;
        }
        // SAFETY: a handle dlopen gave and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        // SAFETY: the handle dlopen gave, once.
        unsafe { libc::dlclose(handle) };
        if !p.is_null() && object_base(p as u64) != own {
            return p;
        }
    }
    std::ptr::null_mut()
}

/// The load address of the object holding `addr` (`dladdr`), if any.
pub(crate) fn object_base(addr: u64) -> Option<u64> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `info` is writable; dladdr only reads `addr` as a number.
    let ok = unsafe { libc::dladdr(addr as *const libc::c_void, info.as_mut_ptr()) };
    // SAFETY: filled by a successful dladdr.
    (ok != 0).then(|| unsafe { info.assume_init() }.dli_fbase as u64)
}

/// `dl_iterate_phdr`'s callback: the path of every named object (not the
/// executable, whose scope is the global one, nor the vDSO).
unsafe extern "C" fn loaded(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> libc::c_int {
    // SAFETY: per dl_iterate_phdr: `info` is valid during the call; `data`
    // is the vector `in_local_scopes` passed.
    let (info, paths) = unsafe { (&*info, &mut *(data as *mut Vec<CString>)) };
    if !info.dlpi_name.is_null() {
        // SAFETY: a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(info.dlpi_name) };
        if !name.is_empty() && !name.to_bytes().starts_with(b"linux-vdso") {
            paths.push(name.to_owned());
        }
    }
    0
}
