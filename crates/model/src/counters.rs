//! Performance counters: what `perf_event_open` counted per rank, thread,
//! region and time slice (`docs/profile-json.md`, "counters";
//! `docs/probe.md`, "Counters").

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Counts by counter name, as `perf list` names them (`page-faults`,
/// `instructions`, ...).
pub type Counts = BTreeMap<String, u64>;

/// What a program's counters say besides the per-rank counts
/// (`Program::counters`); empty when no probe read any.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterInfo {
    /// Per rank, per thread (numbered as the threads' events are): each
    /// thread's own counts; the main thread's row is the whole process's
    /// less the other rows, so the rows add up to the rank's counts.
    pub threads: Vec<Vec<Counts>>,
    /// Counters the probe could not open: name → why, with the ranks'
    /// hosts that refused it (`"ENOENT on node1, node2: ..."`).
    pub refused: BTreeMap<String, String>,
    /// Counters that were multiplexed (counting only part of the time
    /// they were enabled; their counts are scaled up by enabled/running):
    /// name → the smallest share of time any reading counted, 0 to 1.
    pub multiplexed: BTreeMap<String, f64>,
}

impl CounterInfo {
    /// True when nothing was read or refused.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.refused.is_empty()
    }

    /// The one line that says which counters could not be had and why,
    /// counters refused for the same reason named together; none when
    /// every counter opened.
    pub fn refused_line(&self) -> Option<String> {
        if self.refused.is_empty() {
            return None;
        }
        let mut by_why: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, why) in &self.refused {
            by_why.entry(why.as_str()).or_default().push(name.as_str());
        }
        let parts: Vec<String> = by_why
            .iter()
            .map(|(why, names)| format!("{}: {why}", names.join(", ")))
            .collect();
        Some(format!(
            "counters unavailable (the rest of the run is whole): {}",
            parts.join("; ")
        ))
    }
}
