//! Hark's probe: `libhark.so`, preloaded into every measured process.
//!
//! The probe wraps MPI (C and Fortran entry points, both Open MPI and MPICH,
//! detected at run time), POSIX and STDIO I/O, and offers the user API of
//! `include/hark.h`. Each wrapper times the real call and appends one
//! fixed-size [`hark_wire::Event`] to a per-thread buffer; full buffers travel
//! as packs to the Hark server named by `HARK_ADDR`, sent by a background
//! thread. See `docs/probe.md` and `docs/wire.md`.
//!
//! Modules:
//! - [`core`]: clock, buffers, definitions, reentrancy guard;
//! - `ship`: the buffer pool and the background shipper behind a transport;
//! - `adapters`: the wrappers (MPI, POSIX, STDIO, user API);
//! - [`real`]: finding the real functions with `dlsym`.
//!
//! The library starts from its ELF constructor (`.init_array`) and closes its
//! stream from its destructor (`.fini_array`), which runs at `exit` after the
//! program's own `atexit` handlers.
#![deny(unsafe_op_in_unsafe_fn)]

mod adapters;
pub mod core;
pub mod real;
mod ship;

/// Marks a probe built with the `test-hooks` feature (settings only Hark's
/// own tests use): the tests find this name in the library and skip, saying
/// so, the cases that need the hooks when it is absent.
#[cfg(feature = "test-hooks")]
#[cfg_attr(not(test), no_mangle)]
pub static HARK_PROBE_TEST_HOOKS: u8 = 1;

extern "C" fn hark_load() {
    core::init();
}

extern "C" fn hark_unload() {
    // Leaving from inside a wrapped call (an MPI library's error path
    // calling `exit` in the middle of its own progress): MPI must not be
    // called again on this thread, so the stream over MPI is not sent.
    if core::is_inside() {
        adapters::leaving_inside_a_call();
    }
    // What stdio still holds goes out through the probe, recorded: glibc
    // writes it after this destructor, past every wrapper.
    adapters::flush_at_exit();
    core::finish(hark_wire::EndReason::Exit);
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = hark_load;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = hark_unload;
