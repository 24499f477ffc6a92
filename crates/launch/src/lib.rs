//! How `hark` drives the launcher of the command it measures.
//!
//! [`detect`] tells which launcher a command starts with ([`Launcher`]:
//! Open MPI's `mpirun`, MPICH's Hydra, Slurm's `srun`, or anything else);
//! [`with_env_options`] and [`with_given_preloads`] make the probe's
//! environment reach every process the launcher starts, on every node;
//! [`with_probe_env`] preloads the probe into the application processes
//! only, and [`advertised`] lists the addresses by which ranks on any node
//! reach `hark` ([`reaches_other_nodes`] says when TCP is needed); [`with_analyser_partition`]
//! adds the analyser ranks of `hark run --analysers` as one more part of an
//! MPMD launch; [`slots`] counts this host's slots as Open MPI does, so that
//! those ranks do not make the programs' ranks yield; [`srun`] makes an
//! `srun` step an MPMD one with the analyser ranks (`--multi-prog`).
//!
//! The crate only reads command lines and the host's topology: it starts
//! nothing. It has no `unsafe`.
//!
//! ```
//! use hark_launch::{detect, with_env_options, Launcher};
//! let command: Vec<String> = ["mpirun", "-np", "2", "./ring"].map(String::from).to_vec();
//! if detect("mpirun") == Launcher::OpenMpi {
//!     let argv = with_env_options(Launcher::OpenMpi, &command, &["HARK_ADDR"]);
//!     assert_eq!(argv[..3], ["mpirun", "-x", "HARK_ADDR"]);
//! }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod launcher;
mod reach;
pub mod slots;
pub mod srun;

pub use launcher::{
    detect, options, preload_value, which, with_analyser_partition, with_env_options,
    with_given_preloads, writers, Launcher,
};
pub use reach::{advertised, reaches_other_nodes, with_probe_env, BATCH_JOB_VARS};
