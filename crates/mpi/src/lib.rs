//! Hark's MPI layer: what the probe and the analyser ranks need to speak to
//! whichever MPI library a process has, without linking one.
//!
//! One `libhark.so` serves programs built with Open MPI, with MPICH and
//! without MPI, so nothing here refers to an MPI symbol at link time: every
//! function and predefined object is found by `dlsym` when first used
//! ([`Sym`], [`resolve`]), and the flavour of the library, with its handle
//! sizes, status layout and constants, is told apart then ([`abi`],
//! [`Abi`]). [`call`] holds the few MPI calls Hark makes itself, always
//! through `PMPI_*`, so they are never recorded and never reach another
//! tool's wrappers. [`load`] opens an MPI library for a process that has
//! none yet (an analyser rank started by `hark`).
//!
//! The modules are public because their callers name them as namespaces
//! (`call::rank_size`, `abi::get`); the types used everywhere are also
//! re-exported here.
//!
//! ```no_run
//! // In a process that has MPI (or after `load`):
//! if let Some(abi) = hark_mpi::abi::get() {
//!     let (rank, size) = hark_mpi::call::rank_size(abi.comm_world);
//!     println!("rank {rank} of {size}, {:?}", abi.flavour);
//! }
//! ```

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod call;
mod error;
pub mod resolve;

pub use abi::{Abi, Flavour};
pub use error::{Error, ErrorKind};
pub use resolve::Sym;

/// Opens the MPI library `lib` (a file name the loader finds, such as
/// `libmpi.so.40`, or a path) for the whole process, `RTLD_GLOBAL`, so that
/// [`call`] finds `PMPI_*` in it, and returns its ABI. The library stays
/// loaded for the life of the process.
pub fn load(lib: &str) -> Result<&'static Abi, Error> {
    let Ok(c) = std::ffi::CString::new(lib) else {
        return Err(Error::new(ErrorKind::Open {
            lib: lib.to_string(),
            why: "the name holds a NUL byte".to_string(),
        }));
    };
    // SAFETY: a NUL-terminated name; the library stays loaded for good.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        // SAFETY: dlerror returns a NUL-terminated message or null, valid
        // until the next dl* call on this thread; it is copied at once.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(Error::new(ErrorKind::Open {
            lib: lib.to_string(),
            why,
        }));
    }
    abi::get().ok_or_else(|| {
        Error::new(ErrorKind::NotMpi {
            lib: lib.to_string(),
        })
    })
}
