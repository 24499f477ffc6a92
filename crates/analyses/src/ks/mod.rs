//! The knowledge sources, one file each. `template.rs` is the one to copy.

pub(crate) mod callsites;
pub(crate) mod collectives;
pub(crate) mod counters;
pub(crate) mod cpu;
pub(crate) mod density;
pub(crate) mod digest;
pub(crate) mod efficiency;
pub(crate) mod io;
pub(crate) mod mpi_profile;
pub(crate) mod openmp;
pub(crate) mod p2p;
pub(crate) mod regions;
pub(crate) mod sensors;
pub(crate) mod summary;
pub(crate) mod template;
pub(crate) mod timeslices;
pub(crate) mod waits;
