//! The table: one constant per setting, and [`ALL`] in the order
//! `docs/probe.md` lists them. Adding a setting is a constant here and a
//! line in [`ALL`]; the documentation's table follows (its test says how).

use crate::{DefaultValue, Kind, SetBy, Setting};

/// The longest timeout any setting takes: an hour, in ms.
const HOUR_MS: u64 = 3_600_000;

/// Where the probe sends.
pub const ADDR: Setting = Setting {
    name: "HARK_ADDR",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::User,
    doc: "where to send: `unix:/path/to/socket`, `tcp:host:port`, or `tls:host:port` (TCP through TLS, checked against `HARK_TLS_CA`), or several of those separated by commas, optionally preceded by the run's secret and `@` (`3f9c…@unix:/tmp/hark-x/sock`; the secret holds no `:`, and only an `@` right before `unix:`, `tcp:` or `tls:` separates one). With a list (`3f9c…@unix:/tmp/hark-x/sock,tcp:10.0.0.1:4000,tcp:10.1.0.1:4000`; a comma separates two addresses only right before `unix:`, `tcp:` or `tls:`) the probe tries the Unix sockets first, then the TCP addresses, those on its own host's subnets first, each for at most 1 s but the last (which gets `HARK_CONNECT_TIMEOUT_MS`), and streams to the first that answers; `hark run` over `mpirun`, `mpiexec` or `srun` gives such a list (`docs/cluster.md`). The probe proves the secret in its Hello, whichever address it reaches; a server started with a secret (`hark run` always is) refuses streams without it. **Unset or empty: the probe is fully passive** — no thread, no connection, no recording; every wrapper costs one atomic load.",
};

/// The CA a `tls:` service's certificate must chain to.
pub const TLS_CA: Setting = Setting {
    name: "HARK_TLS_CA",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::User,
    doc: "a PEM file of the CA (or CAs) that signed the service's certificate, for a `tls:host:port` address (`HARK_ADDR`, `hark run --server`, `hark ctl --server`): the service must show a certificate for `host` that chains to it. Required with `tls:`; a probe without it, with a file it cannot read, or facing a certificate the CA did not sign says so in one line and its process runs unmeasured",
};

/// Bytes per buffer and per pack.
pub const PACK_SIZE: Setting = Setting {
    name: "HARK_PACK_SIZE",
    kind: Kind::Size {
        min: 4 << 10,
        max: 64 << 20,
    },
    default: DefaultValue::Number(1 << 20),
    set_by: SetBy::User,
    doc: "bytes per buffer and per pack (`hark run --pack-size`)",
};

/// The most buffers the probe's pool holds.
pub const BUFFERS: Setting = Setting {
    name: "HARK_BUFFERS",
    kind: Kind::Count { min: 2, max: 4096 },
    default: DefaultValue::Number(8),
    set_by: SetBy::User,
    doc: "most buffers the pool holds (`hark run --buffers`), but never fewer than the recording threads + 2 (each thread holds one while it fills it): the probe's memory is at most that × pack size; with many threads, a smaller `HARK_PACK_SIZE` keeps it down",
};

/// Block instead of dropping.
pub const LOSSLESS: Setting = Setting {
    name: "HARK_LOSSLESS",
    kind: Kind::Flag,
    default: DefaultValue::Flag(false),
    set_by: SetBy::User,
    doc: "`1`: when no buffer is free, wait for the shipper instead of dropping (`hark run --lossless`)",
};

/// Frames of the caller's stack each MPI and I/O call records.
pub const CALLSITE_DEPTH: Setting = Setting {
    name: "HARK_CALLSITE_DEPTH",
    kind: Kind::Count { min: 1, max: 64 },
    default: DefaultValue::Number(1),
    set_by: SetBy::User,
    doc: "return addresses each MPI and I/O call records as its call site (`hark run --callsite-depth`): 1 is the caller of the MPI or I/O function, read from the stack for free; more unwind the caller's stack (`backtrace`), for calls made through a program's own wrappers",
};

/// Which instrumented functions to leave out.
pub const FILTER: Setting = Setting {
    name: "HARK_FILTER",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::User,
    doc: "a filter file of the functions a compiler instrumented (`-finstrument-functions`) to leave out (`hark run --filter`), in Score-P's syntax: region names (`SCOREP_REGION_NAMES_BEGIN`, `EXCLUDE`/`INCLUDE` [`MANGLED`] globs, `SCOREP_REGION_NAMES_END`) and source files (`SCOREP_FILE_NAMES_BEGIN`, `EXCLUDE`/`INCLUDE` path globs, `SCOREP_FILE_NAMES_END`); in each the last matching rule decides, and a function is left out when its name or its file is. Names are the symbols of the object holding the function, files its debug information's (each object read once, when a function of it is first seen); `hark run` refuses a bad file with its line before the program starts",
};

/// When to stop recording a short, often-called instrumented function.
pub const THROTTLE: Setting = Setting {
    name: "HARK_THROTTLE",
    kind: Kind::Text,
    default: DefaultValue::Words("100000,10"),
    set_by: SetBy::User,
    doc: "`CALLS,MICROSECONDS`: an instrumented function called more than CALLS times at under MICROSECONDS per call on average is no longer recorded (TAU's rule; its entry and exit then cost one table look-up, and the summary lists it); `off` records every call",
};

/// Record POSIX and STDIO calls.
pub const IO: Setting = Setting {
    name: "HARK_IO",
    kind: Kind::Flag,
    default: DefaultValue::Flag(true),
    set_by: SetBy::User,
    doc: "`0`: do not record POSIX and STDIO calls (`hark run --no-io`)",
};

/// The job's name.
pub const JOB: Setting = Setting {
    name: "HARK_JOB",
    kind: Kind::Text,
    default: DefaultValue::Words(""),
    set_by: SetBy::User,
    doc: "job name sent in the handshake, which groups ranks into one job; else taken from the launcher, the same for every rank on every node: `PMIX_NAMESPACE` (Open MPI, `srun --mpi=pmix`), `PMI_KVSNAME`, Hydra's control port (`hydra:HOST:PORT`, from the command line of the rank's `hydra_pmi_proxy`), Slurm's job and step (`SLURM_JOB_ID.SLURM_STEP_ID`); else `ppid:PID` of the rank's launching process (one node only)",
};

/// The pid of the process that holds a rank.
pub const RANK_HOLDER: Setting = Setting {
    name: "HARK_RANK_HOLDER",
    kind: Kind::Text,
    default: DefaultValue::Words(""),
    set_by: SetBy::Hark,
    doc: "the process that holds a rank exports its pid, so that a descendant no parent links to it any more (reparented before it started: a daemon's double fork, a `multiprocessing` helper whose spawner had already returned) is still reported as that rank's child, not as a rank of a job of its own. Used only when the way up `/proc` finds no process of the rank, and only if the named process still carries the same rank variable",
};

/// More programs to leave unmeasured.
pub const SKIP: Setting = Setting {
    name: "HARK_SKIP",
    kind: Kind::Text,
    default: DefaultValue::Words(""),
    set_by: SetBy::User,
    doc: "comma-separated program names to leave unmeasured (besides the launchers)",
};

/// The clock the probe reads.
pub const CLOCK: Setting = Setting {
    name: "HARK_CLOCK",
    kind: Kind::Word(&["tsc", "monotonic"]),
    default: DefaultValue::Words("best"),
    set_by: SetBy::User,
    doc: "`monotonic` forces `CLOCK_MONOTONIC` over the TSC",
};

/// Align clocks by a ping-pong at `MPI_Init` and `MPI_Finalize`.
pub const CLOCK_SYNC: Setting = Setting {
    name: "HARK_CLOCK_SYNC",
    kind: Kind::Flag,
    default: DefaultValue::Flag(true),
    set_by: SetBy::User,
    doc: "`0`: do not align the clock by a ping-pong at `MPI_Init` and `MPI_Finalize` (the server keeps the handshake's estimate). Over a socket each process pings the server on a connection of its own and may decide for itself; over MPI (`hark run --analysers`) it aligns with world rank 0, collectively, and every rank must agree",
};

/// Give each program of an MPMD job its own `MPI_COMM_WORLD`.
pub const VIRTUALISE: Setting = Setting {
    name: "HARK_VIRTUALISE",
    kind: Kind::Flag,
    default: DefaultValue::Flag(false),
    set_by: SetBy::User,
    doc: "`1`: each program of an MPMD job gets its own `MPI_COMM_WORLD` (split by `MPI_APPNUM` at `MPI_Init`; `docs/mpi.md`, \"Virtualised worlds\"); reports keep the job's world ranks. Set it alike for every process of a job, and only where every process carries the probe (`hark run --analysers` sets it so): the split is collective, and a rank without the probe never reaches it, leaving the others waiting in `MPI_Init`. Read even by a probe that records nothing",
};

/// A made-up clock error, for tests.
pub const TEST_CLOCK_SKEW_NS: Setting = Setting {
    name: "HARK_TEST_CLOCK_SKEW_NS",
    kind: Kind::Signed,
    default: DefaultValue::Number(0),
    set_by: SetBy::Tests,
    doc: "read only by a probe built with its `test-hooks` feature (`scripts/test.sh`), ignored otherwise: this process's probe clock (every event timestamp, the alignment's readings) and its handshake's realtime reading read this many ns late, as if its host's clocks were off; the handshake's own probe-clock reference is not skewed, so only the clock alignment (a ping-pong with the server) can see it. Costs nothing on the hot path: it is folded into the clock's calibration (`crates/probe/src/core/clock.rs`)",
};

/// A refusal every counter gets, for the tests.
pub const TEST_COUNTERS_ERRNO: Setting = Setting {
    name: "HARK_TEST_COUNTERS_ERRNO",
    kind: Kind::Signed,
    default: DefaultValue::Number(0),
    set_by: SetBy::Tests,
    doc: "read only by a probe built with its `test-hooks` feature, ignored otherwise: every performance counter's `perf_event_open` fails with this `errno` (13 is `EACCES`, as under a high `perf_event_paranoid`), to test the refusal path",
};

/// The analyser ranks of an MPMD job.
pub const MPI_ANALYSERS: Setting = Setting {
    name: "HARK_MPI_ANALYSERS",
    kind: Kind::Count {
        min: 1,
        max: i32::MAX as u64,
    },
    default: DefaultValue::Words("unset"),
    set_by: SetBy::Hark,
    doc: "how many of the job's last world ranks are analysers (`hark run --analysers`); set, the probe streams over MPI to them (`docs/analysers.md`)",
};

/// How writer ranks are mapped to analyser ranks.
pub const MPI_MAP: Setting = Setting {
    name: "HARK_MPI_MAP",
    kind: Kind::Word(&["same-node", "round-robin", "blocks"]),
    default: DefaultValue::Words("same-node"),
    set_by: SetBy::Hark,
    doc: "how writer ranks are mapped to analyser ranks (`hark run --analysers --map`; `docs/analysers.md`, \"The map\"); the analysers are told the same by `--map`",
};

/// Node numbers a test makes up.
pub const TEST_NODES: Setting = Setting {
    name: "HARK_TEST_NODES",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::Tests,
    doc: "read only by a probe and a `hark` built with their `test-hooks` features (`scripts/test.sh`), ignored otherwise: a comma-separated list of node numbers, with `--analysers`; world rank `r` claims the `r`-th (the last past the end) as its node instead of its host name's, so a one-node machine can exercise same-node-first mapping; with `HARK_FORWARD`, each such node has a forwarder of its own. Read by the probes and the analysers alike",
};

/// How long connecting may take.
pub const CONNECT_TIMEOUT_MS: Setting = Setting {
    name: "HARK_CONNECT_TIMEOUT_MS",
    kind: Kind::Millis {
        min: 1,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(3000),
    set_by: SetBy::User,
    doc: "how long connecting may take (TCP, or a Unix socket whose server is not accepting) before the process runs unmeasured; 0 is not valid: to the kernel it would mean \"wait forever\"",
};

/// How long a server may take nothing before it counts as dead.
pub const SEND_TIMEOUT_MS: Setting = Setting {
    name: "HARK_SEND_TIMEOUT_MS",
    kind: Kind::Millis {
        min: 1,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(60_000),
    set_by: SetBy::User,
    doc: "a server that takes no bytes for this long is treated as dead; 0 is not valid: to the kernel it would mean \"wait forever\", and a lossless program would hang on a stuck server",
};

/// How long exit waits for the last packs.
pub const DRAIN_TIMEOUT_MS: Setting = Setting {
    name: "HARK_DRAIN_TIMEOUT_MS",
    kind: Kind::Millis {
        min: 0,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(10_000),
    set_by: SetBy::User,
    doc: "how long exit waits for the last packs to go (over MPI: for the analyser to take the next chunk, counting only time the rank was run, at most 3× this in wall time); `0`: not at all",
};

/// How long a writer at `MPI_Finalize` waits for its analyser's release.
pub const RELEASE_TIMEOUT_MS: Setting = Setting {
    name: "HARK_RELEASE_TIMEOUT_MS",
    kind: Kind::Millis {
        min: 0,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(120_000),
    set_by: SetBy::User,
    doc: "under `--analysers`: how long a writer at `MPI_Finalize`, its stream sent, waits for its analyser to release it (after the merge), so that every rank of the job calls the real `MPI_Finalize` together; `0`: not at all",
};

/// The kernel send buffer the probe asks for.
pub const SOCKET_BUFFER: Setting = Setting {
    name: "HARK_SOCKET_BUFFER",
    kind: Kind::Size {
        min: 4 << 10,
        max: 1 << 30,
    },
    default: DefaultValue::Words("pack size"),
    set_by: SetBy::User,
    doc: "kernel send buffer asked for (at least 256 KiB; capped by `net.core.wmem_max`): a bigger one hides more packs in the kernel, out of the probe's accounting",
};

/// Whether processes stream through their node's forwarder.
pub const FORWARD: Setting = Setting {
    name: "HARK_FORWARD",
    kind: Kind::Word(&["auto", "always", "never"]),
    default: DefaultValue::Words("auto"),
    set_by: SetBy::User,
    doc: "whether a process streams through its node's forwarder, one connection per node (`docs/cluster.md`, \"The forwarder\"): `auto` when `HARK_ADDR` names no Unix socket of hark's that this node has (hark runs on another node); `always` also on hark's own node (one host standing for several, in tests and benchmarks); `never`: every process connects to hark itself",
};

/// The `hark` binary that starts a node's forwarder.
pub const BIN: Setting = Setting {
    name: "HARK_BIN",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::Hark,
    doc: "the `hark` executable the first process of a node starts its forwarder with (`hark run` sets its own path; a cluster shares the install path); unset: no forwarder, each process connects to hark itself",
};

/// Where a node's forwarder writes what it did.
pub const FORWARD_STATS: Setting = Setting {
    name: "HARK_FORWARD_STATS",
    kind: Kind::Text,
    default: DefaultValue::Words("unset"),
    set_by: SetBy::User,
    doc: "a file a node's forwarder appends one line to when it ends: `streams=… events=… bytes=… clock_alignments=… cpu_ms=…` (`clock_alignments`: the connections it made into hark to align the clock it answers its node's pings with; `scripts/bench-forward.sh` reads the line); `hark run` passes it to every node; unset: none",
};

/// Whether packs go through a shared-memory ring.
pub const SHM: Setting = Setting {
    name: "HARK_SHM",
    kind: Kind::FlagOrAuto,
    default: DefaultValue::Words("auto"),
    set_by: SetBy::User,
    doc: "on a Unix socket, packs go through a shared-memory ring (below); `0`: always the socket; `1`: as the default, but warn when no ring can be made (the stream then falls back to the socket). TCP never uses it.",
};

/// How often threads are asked for partly filled buffers.
pub const FLUSH_MS: Setting = Setting {
    name: "HARK_FLUSH_MS",
    kind: Kind::Millis {
        min: 0,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(1000),
    set_by: SetBy::User,
    doc: "how often threads are asked to ship partly filled buffers (at their next event); `0`: only full buffers, thread exit and `finish`",
};

/// How often the probe reads its threads' CPU availability.
pub const CPU_MS: Setting = Setting {
    name: "HARK_CPU_MS",
    kind: Kind::Millis {
        min: 0,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(100),
    set_by: SetBy::User,
    doc: "how often the shipping thread reads each thread's time on a CPU, time waiting for one, context switches and migrations from `/proc/self/task` (and once more at the end); `0`: never",
};

/// How often one process per node reads the node's sensors.
pub const SENSORS_MS: Setting = Setting {
    name: "HARK_SENSORS_MS",
    kind: Kind::Millis {
        min: 0,
        max: HOUR_MS,
    },
    default: DefaultValue::Number(1000),
    set_by: SetBy::User,
    doc: "how often one process per node and job reads the node's CPU time by kind, memory, network, InfiniBand, disk and load from `/proc` and `/sys` (`docs/probe.md`, \"Node sensors\"); `0`: never",
};

/// Which performance counters the probe reads.
pub const COUNTERS: Setting = Setting {
    name: "HARK_COUNTERS",
    kind: Kind::Text,
    default: DefaultValue::Words("default"),
    set_by: SetBy::User,
    doc: "comma-separated performance counters, as `perf list` names them (`page-faults`, `instructions`, ...), read per thread with `perf_event_open` at region ends and every `HARK_CPU_MS`; `default`: the six software counters and cycles, instructions, cache-references, cache-misses, branch-misses; `none`: no counters (`docs/probe.md`, \"Counters\")",
};

/// Whether the probe reads the counters at every MPI call.
pub const COUNTERS_IN_MPI: Setting = Setting {
    name: "HARK_COUNTERS_IN_MPI",
    kind: Kind::Flag,
    default: DefaultValue::Flag(false),
    set_by: SetBy::User,
    doc: "`1` reads the calling thread's performance counters at the entry and exit of every MPI call, for the counts inside each MPI function (`mpi.<function>.counters` in `profile.json`); off by default: a read per kernel group at entry and at exit add 4 to 10 µs to every call here (`BENCHMARKS.md`, \"Counts inside MPI functions\")",
};

/// Whether LLVM libomp is measured through OMPT.
pub const OMPT: Setting = Setting {
    name: "HARK_OMPT",
    kind: Kind::Flag,
    default: DefaultValue::Flag(false),
    set_by: SetBy::User,
    doc: "`1` measures programs on LLVM's OpenMP runtime (libomp, and the vendor runtimes built on it) as an OMPT tool instead of wrapping the runtime's `__kmpc_*` entry points: the same events at a higher cost, since a runtime with a tool does more work at every barrier and fork whatever the tool does (`BENCHMARKS.md`, \"What a program pays per OpenMP event\"); the entry points are wrapped on x86-64 only, elsewhere OMPT is always used",
};

/// Whether analyser ranks exchange cross-rank entries as they go.
pub const EXCHANGE: Setting = Setting {
    name: "HARK_EXCHANGE",
    kind: Kind::Flag,
    default: DefaultValue::Flag(true),
    set_by: SetBy::User,
    doc: "read by the analyser ranks (`hark run --analysers` of 2 or more): `0` leaves every cross-rank match to the end-of-run merge instead of exchanging entries as they arrive, to measure what the exchange costs (`docs/analysers.md`)",
};

/// Whether analyser ranks report their exchange's counts.
pub const EXCHANGE_STATS: Setting = Setting {
    name: "HARK_EXCHANGE_STATS",
    kind: Kind::Flag,
    default: DefaultValue::Flag(false),
    set_by: SetBy::User,
    doc: "read by the analyser ranks: `1` makes each report its exchange's counts on stderr (`docs/analysers.md`)",
};

/// How analyser ranks merge their results.
pub const ANALYSER_MERGE: Setting = Setting {
    name: "HARK_ANALYSER_MERGE",
    kind: Kind::Word(&["tree", "gather"]),
    default: DefaultValue::Words("tree"),
    set_by: SetBy::User,
    doc: "read by the analyser ranks: how they merge their results, a binomial tree or a gather to analyser 0 (`docs/analysers.md`)",
};

/// Every setting, in the order the documentation lists them.
pub const ALL: &[&Setting] = &[
    &ADDR,
    &TLS_CA,
    &PACK_SIZE,
    &BUFFERS,
    &LOSSLESS,
    &IO,
    &CALLSITE_DEPTH,
    &FILTER,
    &THROTTLE,
    &JOB,
    &RANK_HOLDER,
    &SKIP,
    &COUNTERS,
    &COUNTERS_IN_MPI,
    &OMPT,
    &CLOCK,
    &CLOCK_SYNC,
    &VIRTUALISE,
    &TEST_CLOCK_SKEW_NS,
    &TEST_COUNTERS_ERRNO,
    &MPI_ANALYSERS,
    &MPI_MAP,
    &TEST_NODES,
    &CONNECT_TIMEOUT_MS,
    &SEND_TIMEOUT_MS,
    &DRAIN_TIMEOUT_MS,
    &RELEASE_TIMEOUT_MS,
    &SOCKET_BUFFER,
    &SHM,
    &FORWARD,
    &BIN,
    &FORWARD_STATS,
    &FLUSH_MS,
    &CPU_MS,
    &SENSORS_MS,
    &EXCHANGE,
    &EXCHANGE_STATS,
    &ANALYSER_MERGE,
];
