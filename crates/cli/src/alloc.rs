//! The allocator settings the server's memory depends on (`hark run`,
//! `hark serve`).

/// Allocations at least this large are mapped on their own and unmapped
/// when freed. glibc's default threshold moves up to the largest block
/// freed so far (up to 32 MiB): once a matcher's queue or a backlog's
/// vectors of a few MiB have been freed, later ones come from the heap,
/// whose free pages stay resident, so a longer run (which meets larger
/// ones) ended with more memory for the same bounds (BENCHMARKS.md,
/// "Server", the flood with every analysis: 71 → 90 MiB for 10× the
/// events with the moving threshold, 65 → 76 MiB with it fixed). Above a
/// pack (1 MiB), so pooled packs and what the tracker derives from them
/// stay on the heap and cost no page faults (fixed at 128 KiB, the flood's
/// CPU time rose by 13 %).
const MMAP_THRESHOLD: i32 = 2 << 20;

/// Fixes the threshold, unless `MALLOC_MMAP_THRESHOLD_` (glibc's own
/// variable) is set. Call before the server's threads start.
pub(crate) fn fix_mmap_threshold() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        hark_os::set_mmap_threshold(MMAP_THRESHOLD);
    }
}

/// The malloc arenas `hark serve` keeps, unless `MALLOC_ARENA_MAX` is set.
/// A service starts a reader thread per connection; glibc gives threads up
/// to eight arenas per core, each keeping the free space its threads left,
/// so after bursts of jobs the service's memory depended on which threads
/// allocated where (BENCHMARKS.md: 12.4–13.4 MB after rounds of 8 jobs with
/// the default, 10.4–10.8 MB with four arenas). Set before threads start.
const ARENAS: i32 = 4;

pub(crate) fn cap_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        hark_os::set_arena_max(ARENAS);
    }
}
