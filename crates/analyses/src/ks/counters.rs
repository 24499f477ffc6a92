//! Performance counters per rank, thread and time slice, from the probe's
//! readings (`op::COUNTER_SLICE`, `crates/probe/src/core/counters.rs`),
//! and the counters the probe could not open (`op::COUNTER_REFUSED`), with
//! why. The per-region counts are the regions' (`ks/regions.rs`), where
//! the call paths are.
//!
//! A reading covers the time since the previous one; its count is spread
//! over the slices it spans in proportion to the wall time in each, like
//! the CPU readings (`ks/cpu.rs`).

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::ks::cpu::spread;
use crate::slices::{absorb_series, publish, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{CounterInfo, Counts, Program};
use hark_wire::counters::{name, EVENTS};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct Counters;

static SPEC: Spec = Spec {
    name: "counters",
    description: "Performance counters (perf_event_open) per rank, thread and time slice, scaled for multiplexing; the counters the probe could not open, and why.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["counters", "counter_info", "timeslices"],
};

/// Threads kept per rank; the rest are summed into the last.
const MAX_THREADS: usize = 256;

/// One rank's readings: per thread, per counter number.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    threads: Vec<BTreeMap<u16, u64>>,
    /// Metric = counter number.
    series: Option<Series>,
    /// Counter number → `errno` of its refusal.
    refused: BTreeMap<u16, i32>,
    /// Counter number → the smallest running share of any reading, in
    /// thousandths, for counters multiplexed at least once.
    multiplexed: BTreeMap<u16, i32>,
    readings: u64,
    /// Counts inside MPI functions (`op::COUNTER_MPI`): function op code →
    /// counter number → count.
    #[serde(default)]
    mpi: BTreeMap<u16, BTreeMap<u16, u64>>,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        // Every counter record is a sample (one page).
        if !input.may_hold(op::SAMPLE_BASE) {
            return;
        }
        for ev in input.events {
            // Read in the arms: most events name no counter.
            let counter = || ev.tag.get().clamp(0, u16::MAX as i32) as u16;
            match ev.op() {
                op::COUNTER_REFUSED => {
                    self.refused.insert(counter(), ev.peer.get());
                }
                op::COUNTER_MPI => {
                    let counter = counter();
                    let function = ev.obj.get().min(u16::MAX as u32) as u16;
                    let c = self
                        .mpi
                        .entry(function)
                        .or_default()
                        .entry(counter)
                        .or_default();
                    *c = c.saturating_add(ev.bytes.get());
                }
                op::COUNTER_SLICE => {
                    let counter = counter();
                    self.readings += 1;
                    let t = (ev.thread.get() as usize).min(MAX_THREADS - 1);
                    if self.threads.len() <= t {
                        self.threads.resize(t + 1, BTreeMap::new());
                    }
                    let n = ev.bytes.get();
                    let c = self.threads[t].entry(counter).or_default();
                    *c = c.saturating_add(n);
                    let share = ev.peer.get();
                    if share < 1000 {
                        let m = self.multiplexed.entry(counter).or_insert(share);
                        *m = (*m).min(share);
                    }
                    let a = cx.since_origin(ev.start.get());
                    let b = cx.since_origin(ev.end.get()).max(a);
                    let s = self
                        .series
                        .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
                    spread(s, counter as usize, a, b, n);
                }
                _ => {}
            }
        }
    }

    // No global ids.
    fn remap(&mut self, _: &IdMap) {}

    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        if self.threads.len() < o.threads.len() {
            self.threads.resize(o.threads.len(), BTreeMap::new());
        }
        for (a, b) in self.threads.iter_mut().zip(&o.threads) {
            for (&k, &v) in b {
                let c = a.entry(k).or_default();
                *c = c.saturating_add(v);
            }
        }
        self.refused.extend(&o.refused);
        for (&k, &v) in &o.multiplexed {
            let m = self.multiplexed.entry(k).or_insert(v);
            *m = (*m).min(v);
        }
        self.readings += o.readings;
        for (&f, counts) in &o.mpi {
            let mine = self.mpi.entry(f).or_default();
            for (&k, &v) in counts {
                let c = mine.entry(k).or_default();
                *c = c.saturating_add(v);
            }
        }
        absorb_series(&mut self.series, &o.series);
    }
}

/// Counts by number as counts by name.
fn named(counts: &BTreeMap<u16, u64>) -> Counts {
    counts
        .iter()
        .map(|(&k, &v)| (name(k).to_string(), v))
        .collect()
}

/// The counts inside MPI functions, into each function's entry of
/// `out.mpi` (made by `mpi_profile`, which runs first; a function it
/// did not see gets none).
fn in_mpi(ranks: &[&Rank], out: &mut Program) {
    for (r, rank) in ranks.iter().enumerate() {
        for (&function, counts) in &rank.mpi {
            let Some(f) = out.mpi.get_mut(op::name(function)) else {
                continue;
            };
            for (&k, &v) in counts {
                let per_rank = f.counters.entry(name(k).to_string()).or_default();
                if per_rank.len() < ranks.len() {
                    per_rank.resize(ranks.len(), 0);
                }
                per_rank[r] = per_rank[r].saturating_add(v);
            }
        }
    }
}

/// Why `perf_event_open` refuses with `errno`, in words.
pub fn refusal(errno: i32) -> &'static str {
    match errno {
        libc_errno::ENOENT => {
            "ENOENT: the kernel has no such event here (no hardware PMU exposed, as in a VM: \"PMU not available due to virtualization\")"
        }
        libc_errno::EACCES | libc_errno::EPERM => {
            "EACCES: not permitted (kernel.perf_event_paranoid is too high for this user; lower it or grant CAP_PERFMON)"
        }
        libc_errno::ENODEV => "ENODEV: the processor does not have this event",
        libc_errno::EOPNOTSUPP => "EOPNOTSUPP: the PMU cannot count this way",
        libc_errno::ENOSYS => "ENOSYS: this kernel has no perf_event_open (a seccomp filter or container may hide it)",
        libc_errno::EMFILE => "EMFILE: the process ran out of file descriptors",
        libc_errno::EINVAL => "EINVAL: the kernel refused the event's settings",
        _ => "refused by perf_event_open",
    }
}

/// The Linux `errno` values [`refusal`] names (the same on every Linux
/// architecture Hark runs on).
mod libc_errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EACCES: i32 = 13;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const EMFILE: i32 = 24;
    pub const ENOSYS: i32 = 38;
    pub const EOPNOTSUPP: i32 = 95;
}

impl Analysis for Counters {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        in_mpi(ranks, out);
        if ranks
            .iter()
            .all(|r| r.readings == 0 && r.refused.is_empty())
        {
            return;
        }
        let mut info = CounterInfo::default();
        // Why → the hosts that said so, per counter.
        let mut refused: BTreeMap<u16, BTreeMap<i32, Vec<String>>> = BTreeMap::new();
        for (i, r) in ranks.iter().enumerate() {
            let mut total: BTreeMap<u16, u64> = BTreeMap::new();
            for t in &r.threads {
                for (&k, &v) in t {
                    let c = total.entry(k).or_default();
                    *c = c.saturating_add(v);
                }
            }
            out.counters.push(named(&total));
            info.threads.push(r.threads.iter().map(named).collect());
            let host = cx.ranks.get(i).map_or("?", |m| m.host.as_str());
            for (&k, &e) in &r.refused {
                let hosts = refused.entry(k).or_default().entry(e).or_default();
                if !hosts.iter().any(|h| h == host) {
                    hosts.push(host.to_string());
                }
            }
            for (&k, &m) in &r.multiplexed {
                let share = m as f64 / 1000.0;
                let e = info.multiplexed.entry(name(k).to_string()).or_insert(share);
                *e = e.min(share);
            }
        }
        for (k, by_errno) in refused {
            let why: Vec<String> = by_errno
                .iter()
                .map(|(&e, hosts)| format!("{} (on {})", refusal(e), hosts.join(", ")))
                .collect();
            info.refused.insert(name(k).to_string(), why.join("; "));
        }
        if info.threads.iter().all(Vec::is_empty) {
            info.threads.clear();
            out.counters.clear();
        }
        publish(
            cx,
            &mut out.timeslices,
            ranks.iter().map(|r| r.series.as_ref()),
            |_, m| (m < EVENTS.len()).then(|| format!("counters.{}", name(m as u16))),
        );
        out.counter_info = info;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_said_in_one_line_grouped_by_reason() {
        let mut p = Program::default();
        for n in ["cycles", "instructions"] {
            p.counter_info
                .refused
                .insert(n.into(), format!("{} (on n1)", refusal(2)));
        }
        let line = p.counter_info.refused_line().expect("a line");
        assert!(line.starts_with("counters unavailable"), "{line}");
        assert!(line.contains("cycles, instructions: ENOENT"), "{line}");
        assert!(line.contains("PMU not available"), "{line}");
        assert!(Program::default().counter_info.refused_line().is_none());
        assert!(refusal(13).contains("perf_event_paranoid"));
    }
}
