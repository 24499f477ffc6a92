//! CPU availability: per rank, thread and time slice, how long the
//! process ran on a CPU and how long it was runnable but waited for one,
//! from the probe's readings (`op::CPU_TASK`, `crates/probe/src/core/cpu.rs`);
//! and how much of each rank's MPI wait-state time fell in slices in which
//! it waited for a CPU itself.
//!
//! A reading covers the time since the previous one; its times are spread
//! over the slices it spans in proportion to the wall time in each. Where
//! the kernel gave no waiting time (no `schedstat`), it is estimated from
//! the switches (`docs/analyses.md`, "CPU availability").

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::derived::Pattern;
use crate::slices::{absorb_series, at_width, publish, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{Cpu, CpuHost, CpuRank, CpuTimes, Program};
use hark_wire::{op, Event, EXTRA_NONE};
use serde::{Deserialize, Serialize};

/// See the module documentation.
pub struct CpuAvailability;

static SPEC: Spec = Spec {
    name: "cpu",
    description: "CPU availability per rank, thread and time slice: time on a CPU, time runnable but waiting for one, switches and migrations; and the wait states that overlapped waiting for a CPU.",
    sensitivities: &[
        Sensitivity::Events,
        Sensitivity::Waits,
        Sensitivity::ProgramEnd,
    ],
    fills: &["cpu", "timeslices"],
};

/// Series metrics: time on a CPU, time waiting for one, then the time
/// waited in each wait-state pattern (`WAITS + p`, `p` its index in
/// `Pattern::ALL`).
const ON: usize = 0;
const WAIT: usize = 1;
const WAITS: usize = 2;

/// A slice in which a rank waited for a CPU at least this share of its
/// runnable time counts as one "in which it waited for a CPU".
pub const STARVED: f64 = 0.1;

/// Threads kept per rank; the rest are summed into the last.
const MAX_THREADS: usize = 256;

/// One rank's readings.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    threads: Vec<CpuTimes>,
    series: Option<Series>,
    /// Readings whose waiting time was estimated.
    estimated: u64,
    readings: u64,
}

/// The time a reading says its thread waited for a CPU, and whether it
/// was estimated. Without `schedstat`: a thread that never ran was
/// asleep; one that never gave its CPU up was runnable all the time it
/// did not run; otherwise the time it did not run is split in the ratio
/// of involuntary to all switches.
fn waited(ev: &Event) -> (u64, bool) {
    let wait = ev.extra();
    if wait != EXTRA_NONE {
        return (wait, false);
    }
    let run = ev.bytes.get();
    let off = ev.duration().saturating_sub(run);
    let vol = ev.obj.get() as u64;
    let invol = ev.tag.get().max(0) as u64;
    let est = if run == 0 {
        0
    } else if vol == 0 {
        off
    } else {
        (off as u128 * invol as u128 / (vol + invol) as u128) as u64
    };
    (est, true)
}

/// Adds `v` to `metric` over `[a, b)` (ns since the origin), each slice
/// getting its share of the wall time.
pub(crate) fn spread(s: &mut Series, metric: usize, a: u64, b: u64, v: u64) {
    if v == 0 {
        return;
    }
    s.fit(b);
    let (i, j) = (s.index(a), s.index(b.saturating_sub(1).max(a)));
    if i == j || b <= a {
        s.add(metric, i, v);
        return;
    }
    let width = 1u64 << s.shift();
    let len = (b - a) as u128;
    let mut given = 0u64;
    for k in i..=j {
        let lo = (k as u64 * width).max(a);
        let hi = ((k as u64 + 1) * width).min(b);
        let part = if k == j {
            v - given
        } else {
            (v as u128 * hi.saturating_sub(lo) as u128 / len) as u64
        };
        given += part;
        s.add(metric, k, part);
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        for w in input.waits {
            let p = Pattern::ALL
                .iter()
                .position(|&q| q == w.pattern)
                .unwrap_or(0);
            let a = w.enter_ns.saturating_sub(cx.origin_ns());
            let s = self
                .series
                .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
            spread(s, WAITS + p, a, a.saturating_add(w.time_ns), w.time_ns);
        }
        let events = if input.may_hold(op::CPU_TASK) {
            input.events
        } else {
            &[]
        };
        for ev in events {
            if ev.op() != op::CPU_TASK {
                continue;
            }
            let (wait, estimated) = waited(ev);
            self.readings += 1;
            self.estimated += estimated as u64;
            let t = (ev.thread.get() as usize).min(MAX_THREADS - 1);
            if self.threads.len() <= t {
                self.threads.resize(t + 1, CpuTimes::default());
            }
            self.threads[t].add(&CpuTimes {
                on_cpu_ns: ev.bytes.get(),
                runnable_wait_ns: wait,
                voluntary_switches: ev.obj.get() as u64,
                involuntary_switches: ev.tag.get().max(0) as u64,
                migrations: ev.peer.get().max(0) as u64,
            });
            let a = cx.since_origin(ev.start.get());
            let b = cx.since_origin(ev.end.get()).max(a);
            let s = self
                .series
                .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
            spread(s, ON, a, b, ev.bytes.get());
            spread(s, WAIT, a, b, wait);
        }
    }

    // No global ids.
    fn remap(&mut self, _: &IdMap) {}

    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        if self.threads.len() < o.threads.len() {
            self.threads.resize(o.threads.len(), CpuTimes::default());
        }
        for (a, b) in self.threads.iter_mut().zip(&o.threads) {
            a.add(b);
        }
        self.estimated += o.estimated;
        self.readings += o.readings;
        absorb_series(&mut self.series, &o.series);
    }
}

impl Analysis for CpuAvailability {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        if ranks.iter().all(|r| r.readings == 0) {
            return;
        }
        let mut cpu = Cpu {
            wait_measured: ranks.iter().all(|r| r.estimated == 0),
            ..Cpu::default()
        };
        for r in ranks {
            let mut total = CpuTimes::default();
            for t in &r.threads {
                total.add(t);
            }
            cpu.ranks.push(CpuRank {
                total,
                threads: r.threads.clone(),
                wait_state_overlap: 0.0,
            });
        }
        overlap(cx, ranks, out, &mut cpu);
        cpu.hosts = hosts(cx, &cpu.ranks, out.wall_ns);
        publish(
            cx,
            &mut out.timeslices,
            ranks.iter().map(|r| r.series.as_ref()),
            |_, m| match m {
                ON => Some("cpu.on_cpu_ns".into()),
                WAIT => Some("cpu.runnable_wait_ns".into()),
                _ => None,
            },
        );
        out.cpu = cpu;
    }
}

/// Each rank's, and each pattern's, share of wait-state time in slices in
/// which the waiting rank waited for a CPU ([`STARVED`]).
fn overlap(cx: &Finish<'_>, ranks: &[&Rank], out: &Program, cpu: &mut Cpu) {
    let (_, rows) = at_width(cx, &out.timeslices, ranks.iter().map(|r| r.series.as_ref()));
    let mut by_pattern = vec![(0u64, 0u64); Pattern::ALL.len()];
    for (r, metrics) in rows.iter().enumerate() {
        let row = |m: usize| metrics.get(m).map(Vec::as_slice).unwrap_or(&[]);
        let (on, wait) = (row(ON), row(WAIT));
        let starved = |i: usize| {
            let (o, w) = (
                on.get(i).copied().unwrap_or(0),
                wait.get(i).copied().unwrap_or(0),
            );
            o + w > 0 && w as f64 >= STARVED * (o + w) as f64
        };
        let (mut all, mut hit) = (0u64, 0u64);
        for (p, acc) in by_pattern.iter_mut().enumerate() {
            for (i, &v) in row(WAITS + p).iter().enumerate() {
                all += v;
                acc.0 += v;
                if starved(i) {
                    hit += v;
                    acc.1 += v;
                }
            }
        }
        if let Some(c) = cpu.ranks.get_mut(r) {
            c.wait_state_overlap = if all == 0 {
                0.0
            } else {
                hit as f64 / all as f64
            };
        }
    }
    for (p, (all, hit)) in Pattern::ALL.iter().zip(by_pattern) {
        if all > 0 {
            cpu.wait_state_overlap
                .insert(p.key().to_string(), hit as f64 / all as f64);
        }
    }
}

/// The ranks of each host together.
fn hosts(cx: &Finish<'_>, ranks: &[CpuRank], wall_ns: u64) -> Vec<CpuHost> {
    let mut hosts: Vec<CpuHost> = Vec::new();
    for (meta, r) in cx.ranks.iter().zip(ranks) {
        let i = match hosts.iter().position(|h| h.host == meta.host) {
            Some(i) => i,
            None => {
                hosts.push(CpuHost {
                    host: meta.host.clone(),
                    ..CpuHost::default()
                });
                hosts.len() - 1
            }
        };
        hosts[i].processes += 1;
        hosts[i].total.add(&r.total);
    }
    for h in &mut hosts {
        h.wait_share = h.total.wait_share();
        if wall_ns > 0 {
            h.cpus_used = h.total.on_cpu_ns as f64 / wall_ns as f64;
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(start: u64, end: u64, run: u64, wait: u64, vol: u32, invol: i32) -> Event {
        let mut e = Event::new(op::CPU_TASK, start, end);
        e.bytes.set(run);
        e.extra.set(wait);
        e.obj.set(vol);
        e.tag.set(invol);
        e
    }

    #[test]
    fn waiting_is_read_when_measured_and_estimated_from_switches_when_not() {
        assert_eq!(waited(&reading(0, 100, 40, 60, 0, 5)), (60, false));
        // Never blocked: all the time off a CPU was spent waiting for one.
        assert_eq!(waited(&reading(0, 100, 40, EXTRA_NONE, 0, 5)), (60, true));
        // Asleep all along.
        assert_eq!(waited(&reading(0, 100, 0, EXTRA_NONE, 0, 0)), (0, true));
        // Blocked once for every three preemptions.
        assert_eq!(waited(&reading(0, 100, 20, EXTRA_NONE, 1, 3)), (60, true));
    }

    #[test]
    fn a_reading_is_spread_over_its_slices_by_wall_time() {
        let mut s = Series::new(4, 8); // 16 ns slices
        spread(&mut s, ON, 8, 40, 64);
        assert_eq!(s.total(ON), 64);
        assert_eq!(
            (0..4).map(|i| s.get(ON, i)).collect::<Vec<_>>(),
            [16, 32, 16, 0]
        );
    }
}
