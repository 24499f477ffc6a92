//! OpenMP: where each thread's time goes, the parallel regions, and the
//! hybrid POP efficiencies (`docs/profile-json.md`, "threads" and
//! "openmp"; `docs/analyses.md`, "OpenMP").

use serde::{Deserialize, Serialize};

/// A program's OpenMP parallel regions; empty without OpenMP.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenMp {
    /// Per construct, most time first.
    pub regions: Vec<OmpRegion>,
    /// The hybrid model's OpenMP efficiencies, with or without MPI (with
    /// MPI also in `efficiency.openmp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<OmpEfficiency>,
}

/// One OpenMP construct over all ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OmpRegion {
    /// The construct: its outlined function's symbol (`main._omp_fn.0`),
    /// or its object file and offset.
    pub name: String,
    /// What construct (`parallel`).
    pub kind: String,
    /// Times it ran, over all ranks.
    pub calls: u64,
    /// The largest team it ran with.
    pub threads: u64,
    /// Fork to join on the forking thread, summed over calls, in ns.
    pub time_ns: u64,
    /// Per rank, per thread (indexed as `threads`): its barrier waits in
    /// this construct (up to the join), in ns; a thread that waits least
    /// is the one the others wait for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub barrier_ns: Vec<Vec<u64>>,
    /// Waits to enter critical sections in this construct, over all
    /// threads and ranks, in ns.
    #[serde(default)]
    pub critical_ns: u64,
    /// Waits for OpenMP locks (`omp_set_lock`) in this construct, in ns.
    #[serde(default)]
    pub lock_ns: u64,
    /// Waits to enter ordered sections in this construct, in ns.
    #[serde(default)]
    pub ordered_ns: u64,
}

/// Where one thread's time went over its rank's measured window, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTimes {
    /// Its number in its OpenMP team (the last it had); -1 for a thread
    /// never in a team.
    pub omp_thread: i32,
    /// Computing: neither in MPI, I/O nor any OpenMP wait.
    pub useful_ns: u64,
    /// Waiting at OpenMP barriers (implicit and explicit) and `taskwait`.
    pub omp_barrier_ns: u64,
    /// Out of any parallel region while its process ran (a worker while
    /// the master runs serial code).
    pub omp_idle_ns: u64,
    /// Waiting to enter critical and ordered sections and for locks.
    pub omp_lock_ns: u64,
    /// The runtime's fork and join: the forking thread's time in a region
    /// outside its own implicit task.
    pub omp_management_ns: u64,
    /// In MPI calls.
    pub mpi_ns: u64,
    /// In I/O calls outside MPI.
    pub io_ns: u64,
    /// On a CPU, by the kernel's count (`cpu.ranks[rank].threads`), over
    /// the thread's life as the probe read it, not only the window; 0 when
    /// the probe did not read its CPU.
    #[serde(default)]
    pub on_cpu_ns: u64,
    /// Runnable but waiting for a CPU, as `on_cpu_ns`.
    #[serde(default)]
    pub runnable_wait_ns: u64,
}

/// The OpenMP part of the hybrid POP model, after DLB's TALP
/// (`docs/analyses.md`, "OpenMP").
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OmpEfficiency {
    /// OpenMP parallel efficiency: the time of all threads not lost to
    /// OpenMP over all their time.
    pub parallel: f64,
    /// OpenMP load balance: what barrier waiting leaves.
    pub load_balance: f64,
    /// OpenMP scheduling efficiency: what lock waiting and the runtime's
    /// fork and join leave.
    pub scheduling: f64,
    /// OpenMP serialisation efficiency: what threads idle out of parallel
    /// regions leave.
    pub serialisation: f64,
}
