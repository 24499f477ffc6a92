//! Finding `PMPI_*` and the MPI library's own symbols, wherever the library
//! was loaded.
//!
//! `dlsym(RTLD_NEXT)` and the global scope find a library the program links
//! or one opened with `RTLD_GLOBAL`. Python's `mpi4py` opens its extension
//! with `RTLD_LOCAL`, and the MPI library comes in as that extension's
//! dependency, in a scope no global lookup sees — yet the extension's calls
//! to `MPI_Init` still reach our exported wrappers. So the last resort walks
//! the loaded objects (`dl_iterate_phdr`) and asks each by handle. Without
//! it, the wrapper could not forward the call and the program would fail.

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicPtr, Ordering};

/// A lazily resolved MPI symbol (cached once found).
pub struct Sym {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Sym {
    /// The symbol called `name`.
    pub const fn new(name: &'static CStr) -> Sym {
        Sym {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Its address, or null if no loaded object has it.
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    // Runs once per symbol (or again while it is still missing).
    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        let p = find(self.name);
        self.ptr.store(p, Ordering::Relaxed);
        p
    }
}

/// `name` in the next objects, the global scope, or any loaded object.
pub fn find(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; dlsym has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if !p.is_null() {
        return p;
    }
    // SAFETY: as above.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !p.is_null() {
        return p;
    }
    in_loaded_objects(name)
}

/// A data object of the MPI library (`ompi_mpi_comm_world`, a Fortran
/// sentinel): the global scope first, because a program that refers to it
/// has a copy relocation, and the copy in the executable is the live one
/// (`RTLD_NEXT` would find the library's unused original); then any loaded
/// object, for a library opened with `RTLD_LOCAL`.
pub fn find_data(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; dlsym has no other precondition.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if !p.is_null() {
        return p;
    }
    in_loaded_objects(name)
}

/// Asks every loaded object, by handle, for `name`.
#[cold]
fn in_loaded_objects(name: &CStr) -> *mut c_void {
    for path in loaded_objects() {
        // SAFETY: `path` is NUL-terminated; RTLD_NOLOAD only returns a handle
        // to an object already loaded, never loads or initialises one.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: `h` is a live handle; `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(h, name.as_ptr()) };
        // SAFETY: balances the dlopen above; the object stays loaded, since
        // it was loaded before it.
        unsafe { libc::dlclose(h) };
        if !p.is_null() {
            return p;
        }
    }
    std::ptr::null_mut()
}

/// Paths of the loaded objects. Collected first and opened afterwards:
/// `dlopen` must not run inside `dl_iterate_phdr`'s callback, which holds the
/// loader's lock.
fn loaded_objects() -> Vec<CString> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _: usize, out: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid `info`, and `out` is the Vec
        // handed to dl_iterate_phdr below.
        let (info, out) = unsafe { (&*info, &mut *(out as *mut Vec<CString>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated path.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !name.to_bytes().is_empty() {
                out.push(name.to_owned());
            }
        }
        0
    }
    let mut out: Vec<CString> = Vec::new();
    // SAFETY: `each` matches the callback type and only touches `out`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut Vec<CString> as *mut c_void) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_of_a_locally_opened_library_is_found() {
        // libm is not linked by the test binary's global scope lookups of
        // this name only if opened locally; open it so and look.
        let lib = c"libm.so.6";
        // SAFETY: a NUL-terminated name; RTLD_LOCAL keeps it out of the
        // global scope.
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        assert!(!h.is_null());
        assert!(!in_loaded_objects(c"cbrt").is_null());
        assert!(find(c"hark_no_such_symbol_anywhere").is_null());
        // SAFETY: balances the dlopen above.
        unsafe { libc::dlclose(h) };
    }
}
