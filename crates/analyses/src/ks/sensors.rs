//! Node sensors: per node, its CPU time by kind, memory, network,
//! InfiniBand, disk and load over the run, from the readings of the one
//! process per node that samples them (`op::SENSOR_CPU ..=
//! op::SENSOR_LOAD`, `crates/probe/src/core/sensors.rs`).
//!
//! A reading arrives in the stream of whichever process sampled it, so
//! each rank's state holds its own readings and `finish` puts the ranks
//! of a host together. Counts (CPU ticks, bytes, packets) are spread over
//! the time slices a reading spans; gauges (memory, load) land in the
//! slice of its end, beside a count of readings there to divide by.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::ks::cpu::spread;
use crate::sat::total;
use crate::slices::{absorb_series, publish, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{Node, NodeCpu, NodeLoad, NodeMemory, NodeSampler, NodeTraffic, Program};
use hark_wire::{op, Event};
use serde::{Deserialize, Serialize};

/// See the module documentation.
pub struct NodeSensors;

static SPEC: Spec = Spec {
    name: "sensors",
    description: "Per node, its own CPU time by kind, memory, network, InfiniBand, disk and load over time, read by one process per node.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["nodes", "timeslices"],
};

/// The series' metrics, in this order; their names in `timeslices`.
const METRICS: &[&str] = &[
    "node.readings",
    "node.cpu.user_ticks",
    "node.cpu.system_ticks",
    "node.cpu.idle_ticks",
    "node.cpu.iowait_ticks",
    "node.cpu.steal_ticks",
    "node.memory.used_bytes",
    "node.network.in_bytes",
    "node.network.out_bytes",
    "node.infiniband.in_bytes",
    "node.infiniband.out_bytes",
    "node.disk.read_bytes",
    "node.disk.written_bytes",
    "node.load1_milli",
];
const READINGS: usize = 0;
const CPU: usize = 1;
const MEM: usize = 6;
const NET: usize = 7;
const IB: usize = 9;
const DISK: usize = 11;
const LOAD: usize = 13;

/// Traffic summed over readings.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Traffic {
    readings: u64,
    sums: [u64; 4],
    ns: u64,
    /// Highest bytes per second of one reading, in and out.
    max_rate: [f64; 2],
}

impl Traffic {
    fn add(&mut self, ev: &Event) {
        let f = fields(ev);
        self.readings += 1;
        for (s, v) in self.sums.iter_mut().zip([f[0], f[1], f[2], f[4]]) {
            *s = s.saturating_add(v);
        }
        let ns = ev.duration();
        self.ns = self.ns.saturating_add(ns);
        if ns > 0 {
            for (m, v) in self.max_rate.iter_mut().zip([f[0], f[1]]) {
                *m = m.max(v as f64 * 1e9 / ns as f64);
            }
        }
    }

    fn absorb(&mut self, o: &Traffic) {
        self.readings += o.readings;
        for (a, b) in self.sums.iter_mut().zip(o.sums) {
            *a = a.saturating_add(b);
        }
        self.ns = self.ns.saturating_add(o.ns);
        for (a, b) in self.max_rate.iter_mut().zip(o.max_rate) {
            *a = a.max(b);
        }
    }

    fn summary(&self) -> Option<NodeTraffic> {
        if self.readings == 0 {
            return None;
        }
        let rate = |v: u64| {
            if self.ns == 0 {
                0.0
            } else {
                v as f64 * 1e9 / self.ns as f64
            }
        };
        Some(NodeTraffic {
            in_bytes: self.sums[0],
            out_bytes: self.sums[1],
            in_packets: self.sums[2],
            out_packets: self.sums[3],
            in_bytes_per_s_mean: rate(self.sums[0]),
            in_bytes_per_s_max: self.max_rate[0],
            out_bytes_per_s_mean: rate(self.sums[1]),
            out_bytes_per_s_max: self.max_rate[1],
        })
    }
}

/// One process's readings of its node.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    readings: u64,
    /// The last reading's `end` (probe clock), to count readings: the
    /// events of one reading share it.
    last_end: u64,
    /// First start and last end since the origin.
    span: Option<(u64, u64)>,
    cpu_readings: u64,
    cpu: [u64; 5],
    busy_max: f64,
    mem_readings: u64,
    mem_total: u64,
    used_sum: u128,
    used_max: u64,
    net: Traffic,
    ib: Traffic,
    disk: Traffic,
    load_readings: u64,
    load1_sum: u64,
    load1_max: u64,
    runnable_max: u64,
    series: Option<Series>,
}

/// `bytes`, `extra`, `obj`, `peer`, `tag` as numbers.
fn fields(ev: &Event) -> [u64; 5] {
    [
        ev.bytes.get(),
        ev.extra.get(),
        ev.obj.get() as u64,
        ev.peer.get().max(0) as u64,
        ev.tag.get().max(0) as u64,
    ]
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        if !input.may_hold(op::SENSOR_BASE) {
            return;
        }
        let mut series = self.series.take();
        for ev in input.events {
            let code = ev.op();
            if !(op::SENSOR_BASE..=op::SENSOR_LAST).contains(&code) {
                continue;
            }
            let a = cx.since_origin(ev.start.get());
            let b = cx.since_origin(ev.end.get()).max(a);
            let s = series.get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
            s.fit(b);
            let at = s.index(b.saturating_sub(1).max(a));
            if self.readings == 0 || ev.end.get() != self.last_end {
                self.readings += 1;
                self.last_end = ev.end.get();
                s.add(READINGS, at, 1);
            }
            self.span = Some(match self.span {
                None => (a, b),
                Some((x, y)) => (x.min(a), y.max(b)),
            });
            let f = fields(ev);
            match code {
                op::SENSOR_CPU => {
                    self.cpu_readings += 1;
                    for (i, (sum, v)) in self.cpu.iter_mut().zip(f).enumerate() {
                        *sum = sum.saturating_add(v);
                        spread(s, CPU + i, a, b, v);
                    }
                    let all = total(f.iter().copied());
                    if all > 0 {
                        let busy = 1.0 - (f[2] + f[3]) as f64 / all as f64;
                        self.busy_max = self.busy_max.max(busy);
                    }
                }
                op::SENSOR_MEM => {
                    let used = f[0].saturating_sub(f[1]);
                    self.mem_readings += 1;
                    self.mem_total = self.mem_total.max(f[0]);
                    self.used_sum += used as u128;
                    self.used_max = self.used_max.max(used);
                    s.add(MEM, at, used);
                }
                op::SENSOR_NET | op::SENSOR_IB | op::SENSOR_DISK => {
                    let (t, m) = match code {
                        op::SENSOR_NET => (&mut self.net, NET),
                        op::SENSOR_IB => (&mut self.ib, IB),
                        _ => (&mut self.disk, DISK),
                    };
                    t.add(ev);
                    spread(s, m, a, b, f[0]);
                    spread(s, m + 1, a, b, f[1]);
                }
                op::SENSOR_LOAD => {
                    self.load_readings += 1;
                    self.load1_sum = self.load1_sum.saturating_add(f[0]);
                    self.load1_max = self.load1_max.max(f[0]);
                    self.runnable_max = self.runnable_max.max(f[3]);
                    s.add(LOAD, at, f[0]);
                }
                _ => {}
            }
        }
        self.series = series;
    }

    // No global ids.
    fn remap(&mut self, _: &IdMap) {}

    fn absorbs(&self, _: &Rank) -> bool {
        true
    }

    fn absorb(&mut self, o: &Rank) {
        self.readings += o.readings;
        self.span = match (self.span, o.span) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (x, y) => x.or(y),
        };
        self.cpu_readings += o.cpu_readings;
        for (a, b) in self.cpu.iter_mut().zip(o.cpu) {
            *a = a.saturating_add(b);
        }
        self.busy_max = self.busy_max.max(o.busy_max);
        self.mem_readings += o.mem_readings;
        self.mem_total = self.mem_total.max(o.mem_total);
        self.used_sum += o.used_sum;
        self.used_max = self.used_max.max(o.used_max);
        self.net.absorb(&o.net);
        self.ib.absorb(&o.ib);
        self.disk.absorb(&o.disk);
        self.load_readings += o.load_readings;
        self.load1_sum = self.load1_sum.saturating_add(o.load1_sum);
        self.load1_max = self.load1_max.max(o.load1_max);
        self.runnable_max = self.runnable_max.max(o.runnable_max);
        absorb_series(&mut self.series, &o.series);
    }
}

impl Analysis for NodeSensors {
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
        // The ranks of each host together, in order of the host's first rank.
        let mut hosts: Vec<(String, Rank, Vec<NodeSampler>)> = Vec::new();
        for (i, (meta, r)) in cx.ranks.iter().zip(ranks).enumerate() {
            let h = match hosts.iter().position(|h| h.0 == meta.host) {
                Some(h) => h,
                None => {
                    hosts.push((meta.host.clone(), Rank::default(), Vec::new()));
                    hosts.len() - 1
                }
            };
            if let (true, Some((first, last))) = (r.readings > 0, r.span) {
                hosts[h].1.absorb(r);
                hosts[h].2.push(NodeSampler {
                    rank: i,
                    readings: r.readings,
                    first_ns: first,
                    last_ns: last,
                });
            }
        }
        for (host, r, mut samplers) in hosts {
            if r.readings == 0 {
                continue;
            }
            samplers.sort_by_key(|s| s.first_ns);
            out.nodes.push(node(host, &r, samplers));
        }
        publish(
            cx,
            &mut out.timeslices,
            ranks.iter().map(|r| r.series.as_ref()),
            |_, m| METRICS.get(m).map(|n| n.to_string()),
        );
    }
}

/// One node's summary from its readings.
fn node(host: String, r: &Rank, samplers: Vec<NodeSampler>) -> Node {
    let all = total(r.cpu.iter().copied());
    let share = |v: u64| if all == 0 { 0.0 } else { v as f64 / all as f64 };
    Node {
        host,
        readings: r.readings,
        samplers,
        cpu: (r.cpu_readings > 0).then(|| NodeCpu {
            user: share(r.cpu[0]),
            system: share(r.cpu[1]),
            idle: share(r.cpu[2]),
            iowait: share(r.cpu[3]),
            steal: share(r.cpu[4]),
            busy_max: r.busy_max,
        }),
        memory: (r.mem_readings > 0).then(|| NodeMemory {
            total_bytes: r.mem_total,
            used_bytes_mean: r.used_sum as f64 / r.mem_readings as f64,
            used_bytes_max: r.used_max,
        }),
        network: r.net.summary(),
        infiniband: r.ib.summary(),
        disk: r.disk.summary(),
        load: (r.load_readings > 0).then(|| NodeLoad {
            load1_mean: r.load1_sum as f64 / r.load_readings as f64 / 1000.0,
            load1_max: r.load1_max as f64 / 1000.0,
            runnable_max: r.runnable_max,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(code: u16, start: u64, end: u64, f: [u64; 5]) -> Event {
        let mut e = Event::new(code, start, end);
        e.bytes.set(f[0]);
        e.extra.set(f[1]);
        e.obj.set(f[2] as u32);
        e.peer.set(f[3] as i32);
        e.tag.set(f[4] as i32);
        e
    }

    #[test]
    fn a_node_s_figures_are_summed_and_shared_out() {
        let mut r = Rank::default();
        for (i, (busy, used, rx)) in [(90u64, 100u64, 1000u64), (10, 300, 3000)]
            .into_iter()
            .enumerate()
        {
            let (a, b) = (i as u64 * 1_000_000_000, (i as u64 + 1) * 1_000_000_000);
            r.readings += 1;
            r.cpu_readings += 1;
            for (s, v) in r.cpu.iter_mut().zip([busy, 0, 100 - busy, 0, 0]) {
                *s += v;
            }
            r.busy_max = r.busy_max.max(busy as f64 / 100.0);
            r.mem_readings += 1;
            r.mem_total = 1000;
            r.used_sum += used as u128;
            r.used_max = r.used_max.max(used);
            r.net.add(&reading(op::SENSOR_NET, a, b, [rx, 0, 1, 0, 0]));
        }
        let n = node("h".into(), &r, Vec::new());
        let cpu = n.cpu.expect("cpu");
        assert_eq!((cpu.user, cpu.idle, cpu.busy_max), (0.5, 0.5, 0.9));
        let m = n.memory.expect("memory");
        assert_eq!((m.used_bytes_mean, m.used_bytes_max), (200.0, 300));
        let net = n.network.expect("network");
        assert_eq!(
            (
                net.in_bytes,
                net.in_bytes_per_s_mean,
                net.in_bytes_per_s_max
            ),
            (4000, 2000.0, 3000.0)
        );
        assert!(n.disk.is_none() && n.load.is_none());
    }
}
