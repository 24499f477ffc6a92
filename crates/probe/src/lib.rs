//! Hark's probe: `libhark.so`, preloaded into every measured process.
//!
//! The probe wraps MPI (C and Fortran entry points, both Open MPI and MPICH,
//! detected at run time), POSIX and STDIO I/O, and offers the user API of
//! `include/hark.h`. Each wrapper times the real call and appends one
//! fixed-size [`hark_wire::Event`] to a per-thread buffer; full buffers travel
//! as packs to the Hark server named by `HARK_ADDR`, sent by a background
//! thread. See `docs/architecture.md` and `docs/wire.md`.
//!
//! Modules:
//! - [`core`]: clock, buffers, definitions, reentrancy guard;
//! - `ship`: the buffer pool and the background shipper behind a transport;
//! - `adapters`: the wrappers (MPI, POSIX, STDIO, user API);
//! - [`real`]: finding the real functions with `dlsym`.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod core;
pub mod real;
