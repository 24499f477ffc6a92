//! What an analyser rank says about its own cost under `hark run -v`
//! (the inputs of the scaling model in BENCHMARKS.md, "Analysers over MPI:
//! map, scaling and merge"): events analysed and CPU time, and at analyser
//! rank 0 the merge's time.

use std::time::Duration;

/// This process's CPU time so far, every thread's, and that of its
/// children that ended: once the keeper was reaped (`Keeper::finish`), the
/// analysis server's readers and board workers are in it.
pub fn cpu() -> Duration {
    let of = |who| {
        // SAFETY: an all-zero rusage is valid; getrusage writes into it.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is writable.
        unsafe { libc::getrusage(who, &mut u) };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

/// The events the ranks of `partials` delivered.
pub fn events(partials: &[hark_engine::Partial]) -> u64 {
    partials
        .iter()
        .flat_map(|p| p.ranks())
        .map(|r| r.accounting.received)
        .sum()
}
