//! The MPI calls of an analyser rank, through the probe's own ABI table and
//! call helpers (`crates/probe/src/adapters/mpi/{abi,resolve,mpi_call}.rs`,
//! compiled here as well): one source for both, so the two sides of a
//! stream agree on handles, statuses and constants, and the probe's call
//! path is untouched. `hark` links no MPI: [`load`] opens the library the
//! launcher's flavour uses, `RTLD_GLOBAL`, and the helpers find `PMPI_*`
//! in it.

#![allow(dead_code, unused_imports)]

#[path = "../../../probe/src/adapters/mpi/abi.rs"]
pub(crate) mod abi;
#[path = "../../../probe/src/adapters/mpi/mpi_call.rs"]
pub(crate) mod mpi_call;
#[path = "../../../probe/src/adapters/mpi/resolve.rs"]
pub(crate) mod resolve;

use anyhow::{bail, Result};

/// Opens the MPI library `lib` (a file name the loader finds, such as
/// `libmpi.so.40`, or a path) for the whole process and returns its ABI.
pub(crate) fn load(lib: &str) -> Result<&'static abi::Abi> {
    let c = std::ffi::CString::new(lib)?;
    // SAFETY: a NUL-terminated name; the library stays loaded for good.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message or null.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        bail!("cannot open the MPI library {lib} ({why}); is the launcher's MPI installed?");
    }
    match abi::get() {
        Some(a) => Ok(a),
        None => bail!("{lib} is not an MPI library Hark knows (Open MPI or MPICH)"),
    }
}
