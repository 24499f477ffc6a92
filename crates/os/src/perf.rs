//! Performance events: opening one ([`perf_event_open`], the probe's
//! counters), and software kinds held open so that the probes' own opens
//! are cheap ([`hold_software_events`]).
//!
//! The kernel turns a software event kind's hooks on with a static key: the
//! first event of a kind opened on a node patches the kernel's text on every
//! CPU, with an inter-processor interrupt each, and closing the last one
//! patches it back. A probe that opens the default counters as it starts
//! was that first one whenever no other process held them: about 0.6 ms of
//! CPU time at every process start on a quiet 2-core VM, and 21 to 34 ms
//! when every CPU was busy (the patching waits for each CPU to answer;
//! `BENCHMARKS.md`, "Opening the counters"). One event of each kind held by
//! `hark` for the whole run keeps the keys on, so the probes' opens and
//! closes only count.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `PERF_TYPE_SOFTWARE`.
const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CPU_CLOCK` and `PERF_COUNT_SW_TASK_CLOCK`: clocks of their
/// own, without the software events' static keys.
const CLOCKS: [u64; 2] = [0, 1];

/// `perf_event_attr.read_format`: the time the event was enabled.
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
/// `perf_event_attr.read_format`: the time the event was running.
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
/// `perf_event_attr.read_format`: one `read()` gives the whole group.
pub const FORMAT_GROUP: u64 = 1 << 3;
/// `perf_event_attr` flag: opened disabled (counts nothing).
pub const FLAG_DISABLED: u64 = 1 << 0;
/// `perf_event_attr` flag: threads started later count too.
pub const FLAG_INHERIT: u64 = 1 << 1;
/// `perf_event_attr` flag: not in the kernel (what `perf_event_paranoid` 2
/// leaves a user).
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
/// `perf_event_attr` flag: not in the hypervisor.
pub const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr` as of its first version (64 bytes,
/// `PERF_ATTR_SIZE_VER0`), which every kernel with `perf_event_open` takes.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Opens a counter of `perf_event_attr` `kind` and `config` on the calling
/// thread, on any CPU, with `read_format` and `flags` (the constants
/// above), in the group of `leader` (-1 to lead one), close-on-exec: its
/// descriptor, or the `errno` of the kernel's refusal. A kernel that
/// refuses counting in the kernel (`perf_event_paranoid` 2 for a user
/// without `CAP_PERFMON`) gets a second try counting user space only.
pub fn perf_event_open(
    kind_config: (u32, u64),
    read_format: u64,
    flags: u64,
    leader: RawFd,
) -> Result<RawFd, i32> {
    match open_once(kind_config, read_format, flags, leader) {
        Err(libc::EACCES | libc::EPERM) => open_once(
            kind_config,
            read_format,
            flags | FLAG_EXCLUDE_KERNEL,
            leader,
        ),
        r => r,
    }
}

fn open_once(
    (kind, config): (u32, u64),
    read_format: u64,
    flags: u64,
    leader: RawFd,
) -> Result<RawFd, i32> {
    let attr = Attr {
        kind,
        size: std::mem::size_of::<Attr>() as u32,
        config,
        read_format,
        flags,
        ..Attr::default()
    };
    // SAFETY: `attr` is a valid `perf_event_attr` of the size it says; pid 0
    // and cpu -1 mean this thread on any CPU.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            leader as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL))
    } else {
        Ok(fd as RawFd)
    }
}

/// Software events held open on this process, disabled (they count
/// nothing), until dropped.
#[derive(Debug)]
pub struct HeldEvents(Vec<OwnedFd>);

impl HeldEvents {
    /// How many kinds are held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Holds one disabled event of each software kind in `configs`
/// (`perf_event_attr.config` values of `PERF_TYPE_SOFTWARE`; the two
/// clocks, which need no holding, are skipped). A kind the kernel refuses
/// (no `perf_event_open`, `perf_event_paranoid`, a seccomp filter) is left
/// out: holding is only a saving.
pub fn hold_software_events(configs: &[u64]) -> HeldEvents {
    let held = (configs.iter())
        .filter(|config| !CLOCKS.contains(config))
        .filter_map(|&config| {
            let flags = FLAG_DISABLED | FLAG_EXCLUDE_HV;
            let fd = perf_event_open((TYPE_SOFTWARE, config), 0, flags, -1).ok()?;
            // SAFETY: the kernel just gave this descriptor, and nothing else
            // owns it.
            Some(unsafe { OwnedFd::from_raw_fd(fd) })
        })
        .collect();
    HeldEvents(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_events_are_perf_events_of_this_process_and_skip_the_clocks() {
        let held = hold_software_events(&[0, 1, 2, 3]);
        // Page faults and context switches, where the kernel lets this
        // process open events at all; never the clocks.
        assert!(held.len() <= 2, "{held:?}");
        if held.is_empty() {
            eprintln!("skipped: this kernel refuses perf_event_open here");
            return;
        }
        use std::os::fd::AsRawFd;
        for fd in &held.0 {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
            assert_eq!(link.to_string_lossy(), "anon_inode:[perf_event]");
        }
    }
}
