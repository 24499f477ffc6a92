//! CPU availability: how long each process and thread ran on a CPU, and
//! how long it was runnable but waited for one (`docs/profile-json.md`,
//! "cpu"; `docs/analyses.md`, "CPU availability").

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A program's CPU availability; empty when no probe read any.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    /// Per rank (program-rank order, like every per-rank list).
    pub ranks: Vec<CpuRank>,
    /// Per host, in order of the host's first rank.
    pub hosts: Vec<CpuHost>,
    /// True when every waiting time was read from the kernel's
    /// `schedstat`; false when some were estimated from the context
    /// switches (a kernel without scheduler statistics).
    pub wait_measured: bool,
    /// Per wait-state pattern (`late_sender`, ...): the share of its
    /// waiting time that fell in time slices in which the waiting rank
    /// itself waited for a CPU (`docs/analyses.md`).
    pub wait_state_overlap: BTreeMap<String, f64>,
}

/// One thread's (or, summed, one process's) CPU use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Time on a CPU, in ns.
    pub on_cpu_ns: u64,
    /// Time runnable but waiting for a CPU, in ns.
    pub runnable_wait_ns: u64,
    /// Times it gave up its CPU itself (blocking, sleeping).
    pub voluntary_switches: u64,
    /// Times the kernel took its CPU away (preemption).
    pub involuntary_switches: u64,
    /// Moves from one CPU to another.
    pub migrations: u64,
}

/// One rank's CPU use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuRank {
    /// The sum over its threads.
    #[serde(flatten)]
    pub total: CpuTimes,
    /// Per thread, in the order the probe first read them (0 is the main
    /// thread).
    pub threads: Vec<CpuTimes>,
    /// The share of its MPI wait-state time that fell in time slices in
    /// which it waited for a CPU; 0 without wait states.
    pub wait_state_overlap: f64,
}

/// The ranks of one host together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuHost {
    /// Host name.
    pub host: String,
    /// Its processes (ranks) of this program.
    pub processes: usize,
    /// Their time on a CPU divided by the program's wall time: how many
    /// CPUs they had between them, on average.
    pub cpus_used: f64,
    /// Their summed times.
    #[serde(flatten)]
    pub total: CpuTimes,
    /// `runnable_wait_ns / (on_cpu_ns + runnable_wait_ns)`: the share of
    /// their runnable time they waited for a CPU.
    pub wait_share: f64,
}

impl CpuTimes {
    /// Adds `o` to these.
    pub fn add(&mut self, o: &CpuTimes) {
        self.on_cpu_ns = self.on_cpu_ns.saturating_add(o.on_cpu_ns);
        self.runnable_wait_ns = self.runnable_wait_ns.saturating_add(o.runnable_wait_ns);
        self.voluntary_switches = self.voluntary_switches.saturating_add(o.voluntary_switches);
        self.involuntary_switches = self
            .involuntary_switches
            .saturating_add(o.involuntary_switches);
        self.migrations = self.migrations.saturating_add(o.migrations);
    }

    /// `runnable_wait_ns / (on_cpu_ns + runnable_wait_ns)`, 0 when both are 0.
    pub fn wait_share(&self) -> f64 {
        let runnable = self.on_cpu_ns.saturating_add(self.runnable_wait_ns);
        if runnable == 0 {
            0.0
        } else {
            self.runnable_wait_ns as f64 / runnable as f64
        }
    }
}
