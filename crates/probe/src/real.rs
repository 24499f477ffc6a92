//! Finding the real functions behind the ones the probe exports.
//!
//! Every wrapped symbol is looked up with `dlsym(RTLD_NEXT)` on first use and
//! cached, never linked directly: a direct reference to a PMPI or Fortran
//! symbol would stop programs that lack it from starting.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A lazily resolved symbol.
pub struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
    // Whether to search the global scope when RTLD_NEXT finds nothing. Only
    // for symbols the probe never defines itself (PMPI_*): for any other, the
    // global scope would hand back our own wrapper and recurse.
    global_fallback: bool,
}

impl Real {
    /// A symbol the probe wraps (it defines one of the same name): only the
    /// next definition after this library will do.
    pub const fn next(name: &'static CStr) -> Real {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            global_fallback: false,
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
        self.ptr.store(p, Ordering::Relaxed);
        p
    }
}
