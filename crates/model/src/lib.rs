//! The reduced results of a run: what every output reads.
//!
//! A [`Run`] holds one [`Program`] per measured program. Its size depends on
//! ranks, functions, files, regions and time slices — never on the number of
//! events. Serialised with serde it *is* `profile.json`; its schema is
//! documented in `docs/profile-json.md`, and fields are only ever added.
//!
//! Per-rank vectors are indexed by the rank *within the program* (0..ranks),
//! not the world rank, so an MPMD run gives each program its own 0-based ranks.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod counters;
mod cpu;
mod nodes;
mod openmp;
pub mod sat;
pub use counters::{CounterInfo, Counts};
pub use cpu::{Cpu, CpuHost, CpuRank, CpuTimes};
pub use nodes::{Node, NodeCpu, NodeLoad, NodeMemory, NodeSampler, NodeTraffic};
pub use openmp::{OmpEfficiency, OmpRegion, OpenMp, ThreadTimes};

/// A whole run: every program measured into one report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Run {
    /// Version of Hark that made this.
    pub hark_version: String,
    /// Events written, received, analysed and lost, over all programs.
    pub accounting: Accounting,
    /// The programs, in order of first connection.
    pub programs: Vec<Program>,
    /// Per job whose launcher gave its world size: the ranks that never
    /// reached hark (their probe could not connect, or they carried none).
    /// Only jobs with such ranks are listed.
    #[serde(default)]
    pub missing: Vec<MissingRanks>,
    /// How the measured command ended, when the one who ran it knows
    /// (`hark run`; absent for a served job, whose launcher the service
    /// does not wait for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<Exit>,
    /// The pid of the process `hark run` started (the command's first
    /// word): the program its last image ran is the one the user meant,
    /// whatever shims and `env` it went through first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_pid: Option<u32>,
}

/// How the measured command (the launcher, or the program itself) ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Its exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// How one process's stream ended, as its end-of-stream record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// `MPI_Finalize` was called.
    Finalize,
    /// The process exited (`exit`, a return from `main`).
    Exit,
    /// It called `MPI_Abort`.
    Abort,
    /// A signal whose default action ends a process arrived.
    Signal,
}

/// The ranks of one job that never reached hark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingRanks {
    /// The job (the launcher's job id, as the probes' handshakes name it).
    pub job: String,
    /// The job's world size, from the launcher's environment.
    pub world_size: u32,
    /// Ranks of the job that connected.
    pub measured: u32,
    /// The world ranks that never connected, ascending; the first
    /// [`MAX_MISSING_LISTED`] of them.
    pub ranks: Vec<u32>,
    /// Of those, the ranks whose probe said why it could not connect (on
    /// the launcher's stderr, which `hark run` reads as it passes it on):
    /// where each ran and what the connection met. A rank without a probe
    /// says nothing and is not here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreached: Vec<Unreached>,
}

/// A rank whose probe could not reach hark, as its warning said.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreached {
    /// The rank (the launcher's).
    pub rank: u32,
    /// The host it ran on.
    pub host: String,
    /// What the connection met (`Connection refused (os error 111)`).
    pub reason: String,
}

/// Most missing ranks [`MissingRanks::ranks`] lists (the count is
/// `world_size − measured`).
pub const MAX_MISSING_LISTED: usize = 4096;

/// Reconciliation of events along their path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    /// Events the probes recorded (from their end-of-stream totals; for a
    /// rank that died without one, what arrived).
    pub events_written: u64,
    /// Events that reached the server.
    pub events_received: u64,
    /// Events the analyses consumed.
    pub events_analysed: u64,
    /// Events the probes dropped (no free buffer, or no server).
    pub events_dropped: u64,
    /// Ranks whose stream ended without an end-of-stream record: how many
    /// events they lost is unknown.
    pub partial_ranks: u64,
    /// Child processes (see [`ChildProcess`]) whose stream ended without an
    /// end-of-stream record.
    #[serde(default)]
    pub partial_children: u64,
}

impl std::ops::AddAssign<&Accounting> for Accounting {
    /// Saturating: `written` and `dropped` come from each probe's End
    /// record, and a record can say anything.
    fn add_assign(&mut self, o: &Accounting) {
        self.events_written = self.events_written.saturating_add(o.events_written);
        self.events_received = self.events_received.saturating_add(o.events_received);
        self.events_analysed = self.events_analysed.saturating_add(o.events_analysed);
        self.events_dropped = self.events_dropped.saturating_add(o.events_dropped);
        self.partial_ranks = self.partial_ranks.saturating_add(o.partial_ranks);
        self.partial_children = self.partial_children.saturating_add(o.partial_children);
    }
}

impl Program {
    /// How many processes the program's rows stand for: one per row, and
    /// in the row of folded processes ([`RankInfo::folded`]) as many as it
    /// folded.
    pub fn processes(&self) -> u64 {
        self.rank_info.iter().map(|r| r.folded.max(1)).sum()
    }

    /// The program's accounting: its ranks' and its children's, summed,
    /// with partial streams counted from their `partial` flags (and, in
    /// the row of folded processes, from its own count).
    pub fn accounting(&self) -> Accounting {
        let mut a = Accounting::default();
        for r in &self.rank_info {
            let partial = if r.folded > 0 {
                r.accounting.partial_ranks
            } else {
                u64::from(r.partial)
            };
            a += &Accounting {
                partial_ranks: partial,
                partial_children: 0,
                ..r.accounting.clone()
            };
        }
        for c in &self.children {
            a += &Accounting {
                partial_ranks: 0,
                partial_children: u64::from(c.partial),
                ..c.accounting.clone()
            };
        }
        a
    }
}

/// Everything measured of one program.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Program {
    /// Executable name.
    pub name: String,
    /// Command line of rank 0.
    pub command: Vec<String>,
    /// Number of ranks (processes) of this program.
    pub ranks: usize,
    /// Per rank: its world rank, host, pid and accounting.
    pub rank_info: Vec<RankInfo>,
    /// Wall time of the program: first event to last event, in ns.
    pub wall_ns: u64,
    /// Per rank: time inside MPI calls, in ns.
    pub mpi_time_ns: Vec<u64>,
    /// Per rank: wall time from its first to its last event, in ns.
    pub rank_wall_ns: Vec<u64>,
    /// MPI profile: C function name → per-rank totals.
    pub mpi: BTreeMap<String, FunctionProfile>,
    /// Point-to-point traffic between ranks of this program.
    pub p2p: P2p,
    /// Collectives per communicator.
    pub collectives: Vec<CommCollectives>,
    /// POSIX, STDIO and MPI-IO.
    pub io: Io,
    /// User regions and counters.
    pub regions: Regions,
    /// Metrics over time.
    pub timeslices: TimeSlices,
    /// Density maps: every per-rank metric (`MPI_Send.calls`,
    /// `mpi_time_ns`, `write.bytes`, ...) laid out for spotting imbalance.
    #[serde(default)]
    pub density: BTreeMap<String, DensityMap>,
    /// Wait states (Scalasca's pattern catalogue), by pattern name:
    /// `late_sender`, `late_sender_wrong_order`, `late_receiver`,
    /// `wait_nxn`, `wait_barrier`, `late_broadcast`, `early_reduce`. Every
    /// pattern is present (zero when it never occurred) in MPI programs.
    #[serde(default)]
    pub waits: BTreeMap<String, WaitPattern>,
    /// Who made whom wait, over all patterns.
    #[serde(default)]
    pub wait_causes: WaitCauses,
    /// POP efficiencies of the whole program (absent without MPI).
    #[serde(default)]
    pub efficiency: Option<Efficiency>,
    /// The same, per top-level region (by region name).
    #[serde(default)]
    pub efficiency_by_region: BTreeMap<String, Efficiency>,
    /// The same, per time slice (indexed like [`TimeSlices`]; a slice no
    /// rank was inside the measured window is all zero).
    #[serde(default)]
    pub efficiency_slices: Vec<Efficiency>,
    /// The job digest: the findings that cost the most time, costliest
    /// first (at most five).
    #[serde(default)]
    pub digest: Vec<Finding>,
    /// MPI and I/O call sites: where in the program the calls were made,
    /// costliest first (time plus waits).
    #[serde(default)]
    pub callsites: Vec<Callsite>,
    /// What the analyses noticed but could not use (unknown op codes,
    /// unbalanced regions, ...), one sentence each.
    #[serde(default)]
    pub diagnostics: Vec<String>,
    /// How the ranks' clocks were put on one timeline, and how well.
    #[serde(default)]
    pub clock: Clock,
    /// The ranks' child processes (see [`ChildProcess`]), in order of
    /// connection: not ranks themselves, so absent from the per-rank data.
    #[serde(default)]
    pub children: Vec<ChildProcess>,
    /// CPU availability per rank, thread and host (see [`Cpu`]).
    #[serde(default)]
    pub cpu: Cpu,
    /// Per node, in order of the node's first rank: the node's own
    /// figures, read by one process per node (see [`Node`]); empty when
    /// none was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// Per rank, per thread (in the order the probe first saw them, 0 the
    /// main thread): where its time went; empty without OpenMP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<Vec<ThreadTimes>>,
    /// OpenMP parallel regions (see [`OpenMp`]).
    #[serde(default)]
    pub openmp: OpenMp,
    /// Per rank: performance counts by counter name (`perf list` names,
    /// scaled for multiplexing), over the whole run; empty when the probe
    /// read none (`docs/profile-json.md`, "counters").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<Counts>,
    /// Per thread counts, refusals and multiplexing (see [`CounterInfo`]).
    #[serde(default, skip_serializing_if = "CounterInfo::is_empty")]
    pub counter_info: CounterInfo,
    /// Per rank: time recording was paused (`MPI_Pcontrol(0)`,
    /// `hark_pause`, `hark ctl pause`), in ns; empty when no rank paused.
    /// Not measured, so out of the efficiencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused_ns: Vec<u64>,
}

/// How well the ranks' clocks agree on the common timeline
/// (`docs/analyses.md`, "Time").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// Per rank: how its clock was aligned.
    pub ranks: Vec<RankClock>,
    /// The largest residual alignment error of any rank, in ns: a bound
    /// on how far any aligned rank's timestamps are from the reference
    /// clock (see [`RankClock::residual_ns`]).
    pub residual_ns: u64,
    /// Clock-condition violations: receives that completed before their
    /// send began on the common timeline. Counted by message matching; 0
    /// until that analysis exists.
    pub violations: u64,
}

/// One rank's clock alignment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankClock {
    /// `"ping-pong"` (aligned by ping-pong, see `reference`),
    /// `"handshake"` (the connection's estimate alone), or `"handshake
    /// (ping-pong rejected)"` (the two disagreed by more than a second).
    pub method: String,
    /// Whose clock the ping-pong measured against: `"hark"` (the server's
    /// clock, the common timeline, over a connection of the probe's own) or
    /// `"world rank 0"` (over MPI, streams over MPI); empty without a
    /// measurement.
    #[serde(default)]
    pub reference: String,
    /// The measurement at `MPI_Init`.
    pub init: Option<ClockMeasurement>,
    /// The measurement at `MPI_Finalize`.
    pub finalize: Option<ClockMeasurement>,
    /// A bound on how far this rank's mapped timestamps are from the
    /// reference clock, in ns: each measurement's bound (`bound_ns`), and
    /// on top of the finalize one the drift between the two offsets
    /// applied, which the online mapping (init offset) leaves uncorrected;
    /// 0 for a rank not aligned by ping-pong. Drift after the last
    /// measurement is not in it.
    pub residual_ns: u64,
}

/// One ping-pong measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockMeasurement {
    /// The reference clock minus this rank's, in ns, as measured
    /// (Cristian's estimate).
    pub offset_ns: i64,
    /// Round trip of the best round, in ns (the estimate's error bound is
    /// half of it).
    pub round_trip_ns: u64,
    /// The offset applied, in ns: the estimate, or the expected offset
    /// (the handshake's against hark, 0 against world rank 0) when the
    /// estimate lies within half the round trip of it.
    #[serde(default)]
    pub applied_ns: i64,
    /// How far `applied_ns` can be from the true offset, in ns: half the
    /// round trip plus |applied − estimate|.
    #[serde(default)]
    pub bound_ns: u64,
}

/// One wait-state pattern of a program.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitPattern {
    /// Per rank: time that rank spent waiting in this pattern, in ns.
    pub time_ns: Vec<u64>,
    /// Per rank: instances (calls that waited) of this pattern.
    pub instances: Vec<u64>,
    /// Per MPI function the waiting happened in.
    pub by_function: BTreeMap<String, WaitCell>,
    /// Per region call path of the waiting rank (`outer/inner`; `""`
    /// outside any region).
    pub by_callpath: BTreeMap<String, WaitCell>,
    /// Per time slice (of the waiting rank's entry into the call), summed
    /// over ranks; indexed like [`TimeSlices`].
    pub slices: Vec<WaitCell>,
    /// Per region the late rank was in before it arrived (the cause), its
    /// call path; `""` outside any region.
    pub cause_callpaths: BTreeMap<String, WaitCell>,
    /// Per rank: the waiting it caused by being late, and in how many
    /// instances it was the late one.
    pub late: Vec<WaitCell>,
}

/// One call site: an MPI or I/O function called from one place of the
/// program, over all ranks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Callsite {
    /// The MPI or I/O function called (`MPI_Send`, `write`).
    pub function: String,
    /// Source file of the call, as the debug information names it; `None`
    /// without line information (never a guess).
    pub file: Option<String>,
    /// Line of the call in `file`; `None` likewise.
    pub line: Option<u32>,
    /// The program's function the call was made in (demangled), with the
    /// offset of the return address in it when no line is known
    /// (`compute+0x4f`); `None` when the object has no symbol there.
    pub symbol: Option<String>,
    /// Path of the object (executable or library) the call was made from,
    /// empty when no mapped object held the address.
    pub object: String,
    /// The callers further out, innermost first, each `file:line
    /// (symbol)` or `symbol` or `object+0xoffset` (only with
    /// `--callsite-depth` above 1).
    #[serde(default)]
    pub callers: Vec<String>,
    /// Calls, over all ranks.
    pub calls: u64,
    /// Bytes the calls moved, over all ranks.
    pub bytes: u64,
    /// Time inside the calls, in ns, over all ranks.
    pub time_ns: u64,
    /// Wait states found in these calls, by pattern (`late_sender`, ...),
    /// on the waiting side.
    #[serde(default)]
    pub waits: BTreeMap<String, WaitCell>,
    /// Wait states that other ranks spent waiting for calls made here (the
    /// late side), by pattern.
    #[serde(default)]
    pub caused: BTreeMap<String, WaitCell>,
}

impl Callsite {
    /// Where the call was made, in a few words: `file:line`, else the
    /// symbol, else the object's file name.
    pub fn place(&self) -> String {
        match (&self.file, self.line, &self.symbol) {
            (Some(f), Some(l), _) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(f)),
            (_, _, Some(s)) => s.clone(),
            _ => self
                .object
                .rsplit('/')
                .next()
                .filter(|o| !o.is_empty())
                .unwrap_or("?")
                .to_string(),
        }
    }
}

/// Waiting time and instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitCell {
    /// Time spent waiting, in ns.
    pub time_ns: u64,
    /// Instances.
    pub instances: u64,
}

/// Who made whom wait.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitCauses {
    /// `time_ns[late][waiting]`: time rank `waiting` waited for rank `late`,
    /// over all patterns, in ns (program ranks; empty without waits).
    pub time_ns: Vec<Vec<u64>>,
    /// Per rank: in how many wait-state instances it was the late one.
    pub late_instances: Vec<u64>,
}

/// POP efficiencies, fractions of 1. `parallel = load_balance ×
/// communication` and `communication = serialisation × transfer` hold
/// exactly (`docs/analyses.md` gives the definitions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Parallel efficiency: mean useful time / runtime.
    pub parallel: f64,
    /// Load balance: mean useful time / max useful time.
    pub load_balance: f64,
    /// Communication efficiency: max useful time / runtime.
    pub communication: f64,
    /// Serialisation efficiency: max useful time / ideal runtime.
    pub serialisation: f64,
    /// Transfer efficiency: ideal runtime / runtime.
    pub transfer: f64,
    /// The runtime these are fractions of, in ns.
    pub runtime_ns: u64,
    /// Useful time (outside MPI) of the mean rank, in ns.
    pub mean_useful_ns: u64,
    /// Useful time of the busiest rank, in ns.
    pub max_useful_ns: u64,
    /// The runtime with no time spent moving data (only waiting and
    /// computing), in ns.
    pub ideal_runtime_ns: u64,
    /// The hybrid model's OpenMP efficiencies (with OpenMP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<OmpEfficiency>,
    /// MPI load balance within nodes (hybrid model, with OpenMP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_load_balance_in: Option<f64>,
    /// MPI load balance across nodes (hybrid model, with OpenMP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_load_balance_out: Option<f64>,
}

/// One finding of the job digest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// `high` (≥ 10 % of rank time), `medium` (≥ 3 %) or `low`.
    pub severity: String,
    /// A short title (`Wait at N×N in MPI_Allreduce`).
    pub title: String,
    /// One sentence with its numbers, where the time goes and where to
    /// look next.
    pub detail: String,
    /// Rank time it costs, summed over ranks, in ns.
    pub time_ns: u64,
}

/// A rank's child process: forked by it (a C `fork()` child, a forked
/// `multiprocessing` worker), or started with `exec` below it under its
/// program name (a wrapper script's nested shell, a `multiprocessing`
/// worker started by `spawn`). Counted under its rank, not as a rank of
/// its own.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildProcess {
    /// World rank of the process it belongs to (-1 outside MPI).
    pub world_rank: i32,
    /// The pid it was forked from, or, started with `exec`, the pid of
    /// the rank's process it runs below.
    pub parent_pid: u32,
    /// Its own pid.
    pub pid: u32,
    /// Host it ran on.
    pub host: String,
    /// Its events.
    pub accounting: Accounting,
    /// True when its stream ended without an end-of-stream record.
    pub partial: bool,
    /// Its I/O over all files, by operation name.
    pub io: BTreeMap<String, Totals>,
    /// Bytes it read, over all files.
    pub read_bytes: u64,
    /// Bytes it wrote, over all files.
    pub write_bytes: u64,
}

/// One per-rank metric, laid out as a grid of ranks for spotting imbalance
/// (rank `r` sits at row `r / columns`, column `r % columns`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DensityMap {
    /// Columns of the grid (the rounded-up square root of the ranks).
    pub columns: usize,
    /// The metric per rank.
    pub values: Vec<u64>,
    /// Mean, spread and the ranks holding the extremes.
    pub spread: Spread,
    /// `max / mean` (1 when perfectly balanced, 0 when all zero).
    pub imbalance: f64,
}

/// A rank of a program.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RankInfo {
    /// Rank in `MPI_COMM_WORLD` (equal to the program rank outside MPMD).
    pub world_rank: i32,
    /// Host it ran on.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// This rank's share of the accounting.
    pub accounting: Accounting,
    /// True when its stream ended without an end-of-stream record.
    pub partial: bool,
    /// 0 for the row of one process. In the row of processes folded
    /// together ("N other processes": processes without an MPI rank beyond
    /// a program's first per-process rows), how many it stands for; its
    /// `world_rank` is -1, its `pid` 0, its values are their sums (minima
    /// and maxima over all of them) and `accounting.partial_ranks` counts
    /// those that ended without an end-of-stream record.
    #[serde(default)]
    pub folded: u64,
    /// How its stream ended (absent when it ended without its
    /// end-of-stream record, or in the row of folded processes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ending>,
    /// The error code it passed to `MPI_Abort`, when it called it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_code: Option<i32>,
}

/// One function's totals, each vector indexed by rank.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FunctionProfile {
    /// Calls per rank.
    pub calls: Vec<u64>,
    /// Bytes per rank (sent for sends and collectives, received for receives).
    pub bytes: Vec<u64>,
    /// Total time per rank, in ns.
    pub time_ns: Vec<u64>,
    /// Shortest call per rank, in ns (0 where the rank made no call).
    pub min_ns: Vec<u64>,
    /// Longest call per rank, in ns.
    pub max_ns: Vec<u64>,
    /// Time per rank summarised across ranks.
    pub time_across_ranks: Spread,
    /// Histogram over ranks of each rank's total time (TAUmon-style).
    pub time_histogram: Histogram,
    /// Histogram of message sizes over all calls (mpiP-style), log2 bins.
    pub size_histogram: Histogram,
    /// Performance counts inside the function's calls by counter name,
    /// per rank (`HARK_COUNTERS_IN_MPI`); empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, Vec<u64>>,
}

/// Mean, spread and extremes of a per-rank quantity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Mean over ranks.
    pub mean: f64,
    /// Population standard deviation over ranks.
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Rank holding the smallest value.
    pub min_rank: usize,
    /// Largest value.
    pub max: f64,
    /// Rank holding the largest value.
    pub max_rank: usize,
}

/// A histogram: `counts[i]` values fell in `[edges[i], edges[i + 1])`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Bin edges, one more than the counts.
    pub edges: Vec<f64>,
    /// Values per bin.
    pub counts: Vec<u64>,
}

/// Rank × rank matrices, `m[i][j]` from rank i to rank j (program ranks).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct P2p {
    /// Messages sent from i to j, all point-to-point kinds together.
    pub messages: Vec<Vec<u64>>,
    /// Bytes sent from i to j.
    pub bytes: Vec<Vec<u64>>,
    /// Time i spent in sends to j, in ns.
    pub time_ns: Vec<Vec<u64>>,
    /// The same three matrices per point-to-point function (`MPI_Isend`, ...)
    /// and per one-sided data movement function (`MPI_Put`, ...).
    pub by_function: BTreeMap<String, Matrices>,
    /// One-sided data movement (`MPI_Put`, `MPI_Get`, the accumulates), from
    /// origin i to target j whichever way the data goes: `messages` counts
    /// operations, `bytes` as `docs/mpi.md` defines them, `time_ns` the time
    /// in the calls. Empty when the program made none.
    #[serde(default)]
    pub one_sided: Matrices,
}

/// Messages, bytes and time between ranks.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Matrices {
    /// Messages from i to j.
    pub messages: Vec<Vec<u64>>,
    /// Bytes from i to j.
    pub bytes: Vec<Vec<u64>>,
    /// Time in ns from i to j.
    pub time_ns: Vec<Vec<u64>>,
}

/// Collectives on one communicator.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CommCollectives {
    /// Program ranks of its members (world ranks outside this program are
    /// listed as they are, for communicators spanning programs).
    pub members: Vec<i32>,
    /// Function name → totals over the communicator's members.
    pub functions: BTreeMap<String, Totals>,
}

/// Calls, bytes and time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Number of calls.
    pub calls: u64,
    /// Bytes.
    pub bytes: u64,
    /// Time in ns.
    pub time_ns: u64,
}

/// I/O of a program.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Io {
    /// Per file (by path), per operation.
    pub files: Vec<FileIo>,
    /// Per rank: totals over all files, by operation name.
    pub per_rank: Vec<BTreeMap<String, Totals>>,
}

/// I/O on one file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FileIo {
    /// The path as opened.
    pub path: String,
    /// Operation name (`write`, `fwrite`, `MPI_File_write_at`) → totals over ranks.
    pub ops: BTreeMap<String, Totals>,
    /// Bytes read per rank.
    pub read_bytes: Vec<u64>,
    /// Bytes written per rank.
    pub write_bytes: Vec<u64>,
    /// Calls per rank on the file, opens and closes included: a rank that
    /// opened the file and moved no byte still counts as using it. Empty
    /// in profiles written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<u64>,
}

/// User regions and counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Regions {
    /// Call paths (`outer/inner`) → per-rank times.
    pub paths: BTreeMap<String, RegionProfile>,
    /// Counter name → statistics over all values.
    pub counters: BTreeMap<String, CounterStats>,
    /// MPI calls per call path: path (`""` outside any region) → MPI
    /// function → calls and time per rank. The call tree with MPI leaves
    /// (the Hatchet export) is drawn from it.
    #[serde(default)]
    pub mpi: BTreeMap<String, BTreeMap<String, PathCalls>>,
}

/// Calls and time of one MPI function within one region call path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathCalls {
    /// Calls per rank.
    pub calls: Vec<u64>,
    /// Time per rank, in ns.
    pub time_ns: Vec<u64>,
}

/// One region call path.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RegionProfile {
    /// Entries per rank.
    pub calls: Vec<u64>,
    /// Inclusive time per rank, in ns.
    pub inclusive_ns: Vec<u64>,
    /// Exclusive time (minus nested regions) per rank, in ns.
    pub exclusive_ns: Vec<u64>,
    /// Performance counts inside the region (inclusive of nested
    /// regions), by counter name, per rank; empty without counters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, Vec<u64>>,
}

/// Statistics of a counter's values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterStats {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min: i64,
    /// Largest value.
    pub max: i64,
    /// Mean value.
    pub mean: f64,
}

/// Metrics per time slice. Slices have equal width; when a run outgrows
/// them, neighbours are merged and the width doubles, so their number stays
/// fixed whatever the run's length.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimeSlices {
    /// Width of one slice, in ns.
    pub slice_ns: u64,
    /// Start of slice 0, in ns on the run's common timeline.
    pub origin_ns: u64,
    /// Metric name (`mpi_time_ns`, `mpi_calls`, `p2p_bytes`, `io_bytes`,
    /// `MPI_Send.time_ns`, `file:<path>.write_bytes`, `comm:<i>.calls`,
    /// `counter:<name>.max`, `p2p_to:<rank>.bytes`, ...; the full list is in
    /// `docs/profile-json.md`) → per rank → per slice.
    pub metrics: BTreeMap<String, Vec<Vec<u64>>>,
}

impl Spread {
    /// The spread of `values` (one per rank); all zero when empty.
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len();
        if n == 0 {
            return Spread::default();
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let (mut min_rank, mut max_rank) = (0, 0);
        for (i, &v) in values.iter().enumerate() {
            if v < values[min_rank] {
                min_rank = i;
            }
            if v > values[max_rank] {
                max_rank = i;
            }
        }
        Spread {
            mean,
            stddev: var.sqrt(),
            min: values[min_rank],
            min_rank,
            max: values[max_rank],
            max_rank,
        }
    }
}

/// An integer with thousands separators, `1,234,567`: how the summary's
/// tables and the digest's sentences print counts.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    // Digits left before the next separator.
    let mut left = s.len() % 3;
    if left == 0 {
        left = 3;
    }
    for c in s.chars() {
        if left == 0 {
            out.push(',');
            left = 3;
        }
        out.push(c);
        left -= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_names_the_ranks_holding_the_extremes() {
        let s = Spread::of(&[3.0, 1.0, 5.0, 3.0]);
        assert_eq!((s.min, s.min_rank, s.max, s.max_rank), (1.0, 1, 5.0, 2));
        assert_eq!(s.mean, 3.0);
        assert!((s.stddev - 2f64.sqrt()).abs() < 1e-12);
    }
}
