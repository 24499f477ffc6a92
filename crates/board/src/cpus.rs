//! CPU numbers and thread binding, for placing threads
//! ([`crate::Board::place_workers`], and callers that place their own
//! threads beside the board's). Linux only; every function fails soft.

/// The id of the calling thread (`gettid`), as [`bind_thread`] and
/// [`of_thread`] take it.
pub fn this_thread() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The CPUs thread `tid` of this process may run on (0: the calling
/// thread), ascending; `None` if the kernel will not say.
pub fn of_thread(tid: i32) -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable for its size.
    if unsafe { libc::sched_getaffinity(tid, std::mem::size_of_val(&set), &mut set) } != 0 {
        return None;
    }
    Some(
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// Binds thread `tid` (0: the calling thread) to `cpus`. `false`, with the
/// thread left where it was, if the kernel refuses (no such thread, CPUs
/// a cpuset forbids) or no listed number is a possible CPU.
pub fn bind_thread(tid: i32, cpus: &[usize]) -> bool {
    // SAFETY: as in `of_thread`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut any = false;
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: `c` is below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
        any = true;
    }
    // SAFETY: `set` is a valid set.
    any && unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) } == 0
}

/// The CPUs online on this machine; empty if unreadable.
pub fn online() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| hark_settings::cpu_list(&s))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_binds_and_unbinds() {
        let mine = of_thread(0).unwrap();
        assert!(!mine.is_empty() && mine.iter().all(|c| online().contains(c)));
        std::thread::spawn(move || {
            let last = *mine.last().unwrap();
            assert!(bind_thread(this_thread(), &[last]));
            assert_eq!(of_thread(0).unwrap(), vec![last]);
            assert!(!bind_thread(0, &[]));
            assert!(bind_thread(0, &mine));
            assert_eq!(of_thread(0).unwrap(), mine);
        })
        .join()
        .unwrap();
    }
}
