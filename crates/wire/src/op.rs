//! Event kinds: the `op` field of an [`Event`](crate::Event).
//!
//! The `op` space is split in ranges so that a reader can tell the kind of an
//! event from its number alone:
//!
//! | range            | what                                                    |
//! |------------------|---------------------------------------------------------|
//! | `0`              | never used                                              |
//! | `1..0x400`       | MPI function `op - 1` of [`crate::mpi::FUNCTIONS`]      |
//! | `0x400..0x500`   | details that follow a call (a completed request)        |
//! | `0x500..0x600`   | POSIX and STDIO I/O, listed in [`IO_NAMES`]             |
//! | `0x600..0x700`   | the user API and compiler-instrumented functions        |
//! | `0x700..0x800`   | samples the probe takes off the hot path (CPU use)      |
//! | `0x740..0x760`   | of which: node sensors, one sampler per node            |
//! | `0x800..0x900`   | OpenMP: regions, implicit tasks, barriers, locks        |
//!
//! Codes are never renumbered: new ones are appended, and the wire version
//! changes when a meaning does.

use crate::mpi;

/// First MPI op code: MPI function `i` of [`mpi::FUNCTIONS`] is `MPI_BASE + i`.
pub const MPI_BASE: u16 = 1;
/// Detail: a request completed (inside Wait*, Test*, or a blocking call with a
/// second direction such as `MPI_Sendrecv`). `extra` is the request id (0 for
/// the receive side of a blocking call), `peer`/`tag`/`bytes` are the actual
/// ones from the status for receives and the posted ones for sends, `obj` the
/// communicator. `tag` holds the tag, and the high bit of `thread` is unused.
pub const COMPLETE_RECV: u16 = 0x400;
/// Detail: a send request completed; fields as in [`COMPLETE_RECV`].
pub const COMPLETE_SEND: u16 = 0x401;
/// Detail: any other request (collective, I/O, RMA) completed. `extra` is the
/// request id and `bytes` the bytes the request moved, when known.
pub const COMPLETE_OTHER: u16 = 0x402;
/// Detail: a request was cancelled (`MPI_Cancel` followed by its completion).
pub const CANCELLED: u16 = 0x403;

/// First POSIX/STDIO op code.
pub const IO_BASE: u16 = 0x500;
/// POSIX and STDIO calls, in op order: op `IO_BASE + i` is `IO_NAMES[i]`.
pub const IO_NAMES: &[&str] = &[
    "open",
    "close",
    "read",
    "write",
    "pread",
    "pwrite",
    "readv",
    "writev",
    "lseek",
    "fsync",
    "fdatasync",
    "fopen",
    "fdopen",
    "fclose",
    "fread",
    "fwrite",
    "fflush",
    "fseek",
    "ftell",
    "fprintf",
    "fputs",
    "fgets",
    "fscanf",
];

/// Named I/O op codes.
pub mod io {
    #![allow(missing_docs)]
    use super::IO_BASE;
    pub const OPEN: u16 = IO_BASE;
    pub const CLOSE: u16 = IO_BASE + 1;
    pub const READ: u16 = IO_BASE + 2;
    pub const WRITE: u16 = IO_BASE + 3;
    pub const PREAD: u16 = IO_BASE + 4;
    pub const PWRITE: u16 = IO_BASE + 5;
    pub const READV: u16 = IO_BASE + 6;
    pub const WRITEV: u16 = IO_BASE + 7;
    pub const LSEEK: u16 = IO_BASE + 8;
    pub const FSYNC: u16 = IO_BASE + 9;
    pub const FDATASYNC: u16 = IO_BASE + 10;
    pub const FOPEN: u16 = IO_BASE + 11;
    pub const FDOPEN: u16 = IO_BASE + 12;
    pub const FCLOSE: u16 = IO_BASE + 13;
    pub const FREAD: u16 = IO_BASE + 14;
    pub const FWRITE: u16 = IO_BASE + 15;
    pub const FFLUSH: u16 = IO_BASE + 16;
    pub const FSEEK: u16 = IO_BASE + 17;
    pub const FTELL: u16 = IO_BASE + 18;
    pub const FPRINTF: u16 = IO_BASE + 19;
    pub const FPUTS: u16 = IO_BASE + 20;
    pub const FGETS: u16 = IO_BASE + 21;
    pub const FSCANF: u16 = IO_BASE + 22;
}

/// First user-API op code.
pub const USER_BASE: u16 = 0x600;
/// Enter a user region; `obj` is its name id.
pub const REGION_BEGIN: u16 = USER_BASE;
/// Leave a user region; `obj` is its name id.
pub const REGION_END: u16 = USER_BASE + 1;
/// An iteration or phase mark; `obj` is its name id, `bytes` the iteration number.
pub const MARK: u16 = USER_BASE + 2;
/// A counter's value; `obj` is its name id, `bytes` the value as an `i64`.
pub const COUNTER: u16 = USER_BASE + 3;
/// Recording paused (`MPI_Pcontrol(0)`, `hark_pause`) at `start`.
pub const PAUSE: u16 = USER_BASE + 4;
/// Recording resumed at `start`.
pub const RESUME: u16 = USER_BASE + 5;
/// Enter a function the compiler instrumented (`-finstrument-functions`,
/// `__cyg_profile_func_enter`) at `start`: `obj` is its function id (a
/// [`crate::Def::Function`]). Nests with user regions on its thread.
pub const FUNCTION_ENTER: u16 = USER_BASE + 6;
/// Leave an instrumented function at `start`; `obj` as in [`FUNCTION_ENTER`].
pub const FUNCTION_EXIT: u16 = USER_BASE + 7;
/// The probe stopped recording an instrumented function (throttling,
/// `HARK_THROTTLE`) at `start`: `obj` its function id, `bytes` its calls
/// and `extra` its inclusive time in ns, on every thread, until then.
pub const FUNCTION_THROTTLED: u16 = USER_BASE + 8;

/// First sample op code: readings the probe's shipping thread takes, never
/// a program's call.
pub const SAMPLE_BASE: u16 = 0x700;
/// One thread's CPU availability over `[start, end]` (the previous reading
/// and this one): `bytes` the ns it ran on a CPU, `extra` the ns it was
/// runnable but waiting for one (`EXTRA_NONE` when the kernel has no
/// `schedstat`), `obj` its voluntary and `tag` its involuntary context
/// switches, `peer` its migrations between CPUs, `thread` the thread's
/// number in the order the probe first read it (0 is the main thread).
pub const CPU_TASK: u16 = SAMPLE_BASE;
/// One performance counter of a thread over `[start, end]` (the previous
/// reading and this one), read by the shipping thread: `tag` the counter's
/// number in [`crate::counters::EVENTS`], `bytes` its count scaled for
/// multiplexing (`count × enabled / running`), `extra` the count before
/// scaling, `peer` the share of the
/// time it was enabled that it was counting, in thousandths (1000 when
/// not multiplexed), `thread` the thread's number (0 is the main thread).
pub const COUNTER_SLICE: u16 = SAMPLE_BASE + 1;
/// One performance counter over one user region, recorded on the region's
/// thread right after its `REGION_END`: `start`/`end` the region's begin
/// and end, `obj`
/// the region's name id, the rest as [`COUNTER_SLICE`]. Counts are
/// inclusive (nested regions are in them).
pub const COUNTER_REGION: u16 = SAMPLE_BASE + 2;
/// A counter the probe could not open, once per process at start: `tag`
/// its number in [`crate::counters::EVENTS`], `peer` the `errno` that
/// `perf_event_open` gave.
pub const COUNTER_REFUSED: u16 = SAMPLE_BASE + 3;

/// Counts inside one MPI function on one thread since the last reading
/// (`HARK_COUNTERS_IN_MPI`): `[start, end]` the span since the last
/// reading, `obj` the MPI function's op code, `tag` the counter number,
/// `bytes` the count scaled for multiplexing, `extra` the calls counted,
/// `thread` the thread, `peer` the running share as [`COUNTER_SLICE`].
pub const COUNTER_MPI: u16 = SAMPLE_BASE + 4;
/// First node-sensor op code (`SAMPLE_BASE + 0x40 ..= SAMPLE_BASE + 0x5f`;
/// `SAMPLE_BASE + 4 .. SAMPLE_BASE + 0x40` is kept for counters). One
/// process per node and job reads the node's figures
/// (`crates/probe/src/core/sensors.rs`); each reading is one event per
/// figure group, all with the same `[start, end]`: the previous reading of
/// this process and this one. Counts are what changed over it; gauges
/// (memory, load) are the values at `end`.
pub const SENSOR_BASE: u16 = SAMPLE_BASE + 0x40;
/// The node's CPU time from `/proc/stat`'s `cpu` line, in clock ticks
/// over `[start, end]`: `bytes` user (with nice), `extra` system (with irq
/// and softirq), `obj` idle, `peer` iowait, `tag` steal.
pub const SENSOR_CPU: u16 = SENSOR_BASE;
/// The node's memory at `end` from `/proc/meminfo`: `bytes` `MemTotal`,
/// `extra` `MemAvailable`, both in bytes.
pub const SENSOR_MEM: u16 = SENSOR_BASE + 1;
/// The node's network over `[start, end]`, summed over every interface of
/// `/proc/net/dev` but `lo`: `bytes` bytes received, `extra` bytes sent,
/// `obj` packets received, `tag` packets sent (at most `i32::MAX`).
pub const SENSOR_NET: u16 = SENSOR_BASE + 2;
/// The node's InfiniBand ports over `[start, end]`, summed over
/// `/sys/class/infiniband/*/ports/*/counters`: fields as [`SENSOR_NET`]
/// (`port_rcv_data` and `port_xmit_data` are in 4-byte words; these are
/// bytes).
pub const SENSOR_IB: u16 = SENSOR_BASE + 3;
/// The node's block I/O over `[start, end]`, summed over whole disks of
/// `/proc/diskstats` (those of `/sys/block` with a `device`): `bytes`
/// bytes read, `extra` bytes written, `obj` reads and `tag` writes
/// completed.
pub const SENSOR_DISK: u16 = SENSOR_BASE + 4;
/// The node's load at `end` from `/proc/loadavg`: `bytes`, `extra`, `obj`
/// the 1, 5 and 15 minute load averages in thousandths, `peer` the
/// runnable and `tag` all scheduling entities.
pub const SENSOR_LOAD: u16 = SENSOR_BASE + 5;
/// Last node-sensor op code this version knows.
pub const SENSOR_LAST: u16 = SENSOR_LOAD;

/// First OpenMP op code. Every OpenMP event carries the thread's number in
/// its team (`omp_get_thread_num`) in `peer` and the region instance (a
/// per-process sequence number of parallel regions, `EXTRA_NONE` outside
/// one) in `extra`; both runtimes' adapters (libgomp's `GOMP_*` entry
/// points, LLVM libomp's OMPT callbacks) give the same shapes.
pub const OMP_BASE: u16 = 0x800;
/// A parallel region, on the thread that forked it, from fork to join:
/// `obj` the construct's name id (`NameKind::Construct`), `tag` the team
/// size, `bytes` the nesting level (1 for the outermost).
pub const OMP_PARALLEL: u16 = OMP_BASE;
/// One thread's implicit task of a parallel region, from its start to the
/// start of its wait at the region's end: `obj` the construct, `tag` the team size. Barrier and lock waits inside it
/// come as their own events; the wait from its end to the region's join
/// (`OMP_PARALLEL`'s `end`, same `extra`) is the analysis's to add.
pub const OMP_IMPLICIT_TASK: u16 = OMP_BASE + 1;
/// Waiting at a barrier: `tag` what kind ([`OMP_SYNC_IMPLICIT`], ...).
pub const OMP_BARRIER: u16 = OMP_BASE + 2;
/// Waiting to acquire a lock, a critical section or an ordered section:
/// `tag` what kind ([`OMP_MUTEX_CRITICAL`], ...), `obj` a name id for a
/// named critical section (0 otherwise).
pub const OMP_LOCK_WAIT: u16 = OMP_BASE + 3;
/// A worksharing construct's begin (`start == end`): `tag` what kind
/// ([`OMP_WORK_LOOP`], ...).
pub const OMP_WORK: u16 = OMP_BASE + 4;
/// An explicit task was created (`start == end`).
pub const OMP_TASK_CREATE: u16 = OMP_BASE + 5;
/// Last OpenMP op code this version knows.
pub const OMP_LAST: u16 = OMP_TASK_CREATE;

/// [`OMP_BARRIER`] `tag`: the implicit barrier at the end of a parallel
/// region (or of a worksharing construct without `nowait`).
pub const OMP_SYNC_IMPLICIT: i32 = 0;
/// [`OMP_BARRIER`] `tag`: an explicit `barrier`.
pub const OMP_SYNC_EXPLICIT: i32 = 1;
/// [`OMP_BARRIER`] `tag`: `taskwait`.
pub const OMP_SYNC_TASKWAIT: i32 = 2;
/// [`OMP_BARRIER`] `tag`: the end of a `taskgroup`.
pub const OMP_SYNC_TASKGROUP: i32 = 3;
/// [`OMP_LOCK_WAIT`] `tag`: a `critical` section.
pub const OMP_MUTEX_CRITICAL: i32 = 0;
/// [`OMP_LOCK_WAIT`] `tag`: an `omp_lock_t`.
pub const OMP_MUTEX_LOCK: i32 = 1;
/// [`OMP_LOCK_WAIT`] `tag`: an `ordered` section.
pub const OMP_MUTEX_ORDERED: i32 = 2;
/// [`OMP_WORK`] `tag`: a loop.
pub const OMP_WORK_LOOP: i32 = 0;
/// [`OMP_WORK`] `tag`: `single` (this thread executes it).
pub const OMP_WORK_SINGLE: i32 = 1;
/// [`OMP_WORK`] `tag`: `master`/`masked`.
pub const OMP_WORK_MASKED: i32 = 2;
/// [`OMP_WORK`] `tag`: `sections`.
pub const OMP_WORK_SECTIONS: i32 = 3;

/// The page of op code `code`, as one bit of a set of pages: its high
/// byte, which names its family (MPI `0`–`3`, details `4`, POSIX and STDIO
/// `5`, user `6`, samples `7`, OpenMP `8`; see [`kind`]). Codes from
/// `0x1f00` up share bit 31. A pack's set of pages, gathered in one pass,
/// tells a knowledge source that looks at one family alone whether the
/// pack holds any of it.
#[inline(always)]
pub const fn page(code: u16) -> u32 {
    let high = code >> 8;
    1 << if high > 31 { 31 } else { high }
}

/// What family an op belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// An MPI function, with its index in [`mpi::FUNCTIONS`].
    Mpi(usize),
    /// A detail record following a call.
    Detail,
    /// A POSIX or STDIO call, with its index in [`IO_NAMES`].
    Io(usize),
    /// A user-API event.
    User,
    /// A sample the probe took off the hot path (`SAMPLE_BASE..`).
    Sample,
    /// An OpenMP event (`OMP_BASE..`).
    OpenMp,
    /// A code this version does not know.
    Unknown,
}

/// The family of `op`.
// Always inlined: the analyses ask it of every event, and a call costs
// more than the comparisons (LLVM kept it out of line with `#[inline]`).
//
// MPI first, the common case; the other families by the code's high byte,
// one branch: as one chain of ranges, an OpenMP event or a sample walked
// every range before its own, in every analysis that asked (about 200
// instructions per OpenMP event over the analyses).
#[inline(always)]
pub fn kind(op: u16) -> OpKind {
    if op < 0x400 {
        return match op.checked_sub(MPI_BASE) {
            Some(i) if (i as usize) < mpi::FUNCTIONS.len() => OpKind::Mpi(i as usize),
            _ => OpKind::Unknown,
        };
    }
    match op >> 8 {
        4 if op <= CANCELLED => OpKind::Detail,
        5 if ((op - IO_BASE) as usize) < IO_NAMES.len() => OpKind::Io((op - IO_BASE) as usize),
        6 if op <= FUNCTION_THROTTLED => OpKind::User,
        7 if op <= COUNTER_MPI || (SENSOR_BASE..=SENSOR_LAST).contains(&op) => OpKind::Sample,
        8 if op <= OMP_LAST => OpKind::OpenMp,
        _ => OpKind::Unknown,
    }
}

// What `kind` takes from the code's high byte.
const _: () = {
    assert!(COMPLETE_RECV == 0x400 && CANCELLED < 0x500);
    assert!(IO_BASE == 0x500 && IO_NAMES.len() <= 0x100);
    assert!(REGION_BEGIN == 0x600 && FUNCTION_THROTTLED < 0x700);
    assert!(CPU_TASK == 0x700 && COUNTER_MPI < SENSOR_BASE && SENSOR_LAST < 0x800);
    assert!(OMP_BASE == 0x800 && OMP_LAST < 0x900);
};

/// The op code of the MPI function called `name` (C spelling, `MPI_Send`).
pub fn mpi_op(name: &str) -> Option<u16> {
    mpi::FUNCTIONS
        .iter()
        .position(|f| f.name == name)
        .map(|i| MPI_BASE + i as u16)
}

/// A printable name for any op code.
pub fn name(op: u16) -> &'static str {
    match kind(op) {
        OpKind::Mpi(i) => mpi::FUNCTIONS[i].name,
        OpKind::Io(i) => IO_NAMES[i],
        OpKind::Detail => match op {
            COMPLETE_RECV => "complete(recv)",
            COMPLETE_SEND => "complete(send)",
            COMPLETE_OTHER => "complete",
            _ => "cancelled",
        },
        OpKind::User => match op {
            REGION_BEGIN => "region_begin",
            REGION_END => "region_end",
            MARK => "mark",
            COUNTER => "counter",
            PAUSE => "pause",
            RESUME => "resume",
            FUNCTION_ENTER => "function_enter",
            FUNCTION_EXIT => "function_exit",
            _ => "function_throttled",
        },
        OpKind::Sample => match op {
            CPU_TASK => "cpu",
            COUNTER_SLICE => "counters",
            COUNTER_REGION => "counters(region)",
            COUNTER_REFUSED => "counter refused",
            COUNTER_MPI => "counters(mpi)",
            SENSOR_CPU => "node cpu",
            SENSOR_MEM => "node memory",
            SENSOR_NET => "node network",
            SENSOR_IB => "node infiniband",
            SENSOR_DISK => "node disk",
            _ => "node load",
        },
        OpKind::OpenMp => match op {
            OMP_PARALLEL => "omp_parallel",
            OMP_IMPLICIT_TASK => "omp_implicit_task",
            OMP_BARRIER => "omp_barrier",
            OMP_LOCK_WAIT => "omp_lock_wait",
            OMP_WORK => "omp_work",
            _ => "omp_task_create",
        },
        OpKind::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kind` as one chain of ranges, as it was written first.
    fn kind_by_ranges(op: u16) -> OpKind {
        match op {
            MPI_BASE..0x400 if ((op - MPI_BASE) as usize) < mpi::FUNCTIONS.len() => {
                OpKind::Mpi((op - MPI_BASE) as usize)
            }
            COMPLETE_RECV..=CANCELLED => OpKind::Detail,
            IO_BASE..0x600 if ((op - IO_BASE) as usize) < IO_NAMES.len() => {
                OpKind::Io((op - IO_BASE) as usize)
            }
            REGION_BEGIN..=FUNCTION_THROTTLED => OpKind::User,
            CPU_TASK..=COUNTER_MPI | SENSOR_BASE..=SENSOR_LAST => OpKind::Sample,
            OMP_BASE..=OMP_LAST => OpKind::OpenMp,
            _ => OpKind::Unknown,
        }
    }

    #[test]
    fn no_two_families_share_a_page() {
        // The pages each family's codes fall in.
        let mut of_family: Vec<(std::mem::Discriminant<OpKind>, u32)> = Vec::new();
        for op in 0..=u16::MAX {
            let k = kind(op);
            if k == OpKind::Unknown {
                continue;
            }
            let d = std::mem::discriminant(&k);
            match of_family.iter_mut().find(|f| f.0 == d) {
                Some(f) => f.1 |= page(op),
                None => of_family.push((d, page(op))),
            }
        }
        assert_eq!(of_family.len(), 6, "every known family");
        for (i, a) in of_family.iter().enumerate() {
            for b in &of_family[i + 1..] {
                assert_eq!(a.1 & b.1, 0, "pages {:#x} and {:#x} overlap", a.1, b.1);
            }
        }
        // MPI spans pages 0 to 3; codes past 0x1eff share the last bit.
        assert_eq!(page(MPI_BASE) | page(0x3ff), 0b1001);
        assert_eq!(page(u16::MAX), 1 << 31);
    }

    #[test]
    fn every_code_has_the_family_its_range_gives() {
        for op in 0..=u16::MAX {
            assert_eq!(kind(op), kind_by_ranges(op), "op {op:#x}");
        }
    }
}
