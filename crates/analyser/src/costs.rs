//! What an analyser rank says about its own cost under `hark run -v`
//! (the inputs of the scaling model in BENCHMARKS.md, "Analysers over MPI:
//! map, scaling and merge"): events analysed and CPU time, and at analyser
//! rank 0 the merge's time.

use std::time::Duration;

/// This process's CPU time so far, every thread's, and that of its
/// children that ended: once the keeper was reaped (`Keeper::finish`), the
/// analysis server's readers and board workers are in it.
pub fn cpu() -> Duration {
    hark_os::cpu_time(true)
}

/// The events the ranks of `partials` delivered.
pub fn events(partials: &[hark_engine::Partial]) -> u64 {
    partials
        .iter()
        .flat_map(|p| p.ranks())
        .map(|r| r.accounting.received)
        .sum()
}
