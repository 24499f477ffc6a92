//! Performance counters and node sensors as OTF2 metrics: what
//! the writer's `Plan` defines and the points each location gets, from the
//! readings the trace store keeps (`op::COUNTER_SLICE`, `op::SENSOR_*`).

use super::{location, Plan};
use hark_engine::trace::Trace;

/// One metric: a metric member and a metric class holding only it, both
/// with the metric's index as their id.
#[cfg_attr(not(hark_otf2), allow(dead_code))]
pub(super) struct Metric {
    /// Its name's string.
    pub(super) name: u32,
    /// Its unit's string.
    pub(super) unit: u32,
    /// `OTF2_MetricMode`.
    pub(super) mode: u8,
    /// A double (`OTF2_TYPE_DOUBLE`), else an unsigned integer.
    pub(super) double: bool,
    /// A thread's performance counter (else a node's sensor).
    pub(super) counter: bool,
}

/// `OTF2_METRIC_ACCUMULATED_START`: the total since the first point.
const ACCUMULATED_START: u8 = 0;
/// `OTF2_METRIC_ABSOLUTE_POINT`: the value at that moment.
const ABSOLUTE_POINT: u8 = 1 | 1 << 4;
/// `OTF2_METRIC_ABSOLUTE_LAST`: the value over the time since the
/// previous point.
const ABSOLUTE_LAST: u8 = 1 | 2 << 4;

/// A metric value at a time: (aligned ns, metric, value's bits: the
/// integer, or the double's [`f64::to_bits`]).
pub(super) type Point = (u64, u32, u64);

/// A node's sensor reading: (end, start, op code, `bytes`, `extra`, `obj`,
/// `peer`, `tag` as numbers).
type Reading = (u64, u64, u16, [u64; 5]);

/// The metrics of a trace and their points per location, from the
/// samples the store keeps (`op::COUNTER_SLICE`, `op::SENSOR_*`).
#[derive(Default)]
#[cfg_attr(not(hark_otf2), allow(dead_code))]
pub(super) struct Metrics {
    pub(super) defs: Vec<Metric>,
    /// Per location, its points in time order.
    pub(super) points: std::collections::BTreeMap<u64, Vec<Point>>,
    /// Per host (sorted, as the system tree numbers them) that sent
    /// sensor readings: its location group's id.
    pub(super) nodes: Vec<(usize, u32)>,
    /// Metric ids by name.
    ids: std::collections::HashMap<&'static str, u32>,
    /// Running totals per (location, metric), while they are made.
    totals: std::collections::HashMap<(u64, u32), u64>,
}

impl Metrics {
    /// The id of metric `name`, defined if it is new.
    fn metric(
        &mut self,
        p: &mut Plan,
        name: &'static str,
        unit: &str,
        mode: u8,
        double: bool,
    ) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let counter = matches!(unit, "ns" | "events");
        let (n, unit) = (p.string(name), p.string(unit));
        self.defs.push(Metric {
            name: n,
            unit,
            mode,
            double,
            counter,
        });
        let id = self.defs.len() as u32 - 1;
        self.ids.insert(name, id);
        id
    }

    fn point(&mut self, loc: u64, point: Point) {
        self.points.entry(loc).or_default().push(point);
    }

    /// Adds `count`, over `[start, end]`, to the running total of metric
    /// `id` at `loc`: a 0 at `start` first if it is the first.
    fn add(&mut self, loc: u64, id: u32, start: u64, end: u64, count: u64) {
        let points = self.points.entry(loc).or_default();
        let total = self.totals.entry((loc, id)).or_insert_with(|| {
            points.push((start, id, 0));
            0
        });
        *total = total.saturating_add(count);
        points.push((end, id, *total));
    }
}

impl Plan {
    /// The counters of every thread and the sensors of every node as
    /// metrics: counts as running totals (`ACCUMULATED_START`, a 0 at the
    /// start of the first reading, then the total at each reading's end, so
    /// a reader gets the count between any two points by subtracting and
    /// the whole count as the last), gauges at the reading's end
    /// (`ABSOLUTE_POINT`), the CPU's busy share over each reading
    /// (`ABSOLUTE_LAST`).
    pub(super) fn metrics_of(&mut self, trace: &Trace) -> Metrics {
        use hark_wire::op;
        let mut m = Metrics::default();
        let mut hosts: Vec<&str> = trace.streams.iter().map(|s| s.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        // Per node: its readings, from any stream.
        let mut readings: Vec<Vec<Reading>> = vec![Vec::new(); hosts.len()];
        for (si, s) in trace.streams.iter().enumerate() {
            for e in &s.events {
                let start = s.mapping.common(e.start.get());
                let end = s.mapping.common(e.end.get()).max(start);
                let code = e.op();
                if code == op::COUNTER_SLICE {
                    let name = hark_wire::counters::name(e.tag.get() as u16);
                    let unit = if name.ends_with("-clock") {
                        "ns"
                    } else {
                        "events"
                    };
                    let id = m.metric(self, name, unit, ACCUMULATED_START, false);
                    let loc = location(self, trace, si, e.thread.get());
                    m.add(loc, id, start, end, e.bytes.get());
                } else if (op::SENSOR_BASE..=op::SENSOR_LAST).contains(&code) {
                    let h = hosts.binary_search(&s.host.as_str()).unwrap_or(0);
                    let f = [
                        e.bytes.get(),
                        e.extra.get(),
                        e.obj.get() as u64,
                        e.peer.get().max(0) as u64,
                        e.tag.get().max(0) as u64,
                    ];
                    readings[h].push((end, start, code, f));
                }
            }
        }
        // Nodes' groups follow the processes' in id order (readers want
        // definitions in it).
        let mut group = trace
            .streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.world_rank < 0)
            .map(|(i, _)| self.world + i + 1)
            .max()
            .unwrap_or(self.world) as u32;
        for (h, mut rs) in readings.into_iter().enumerate() {
            if rs.is_empty() {
                continue;
            }
            group += 1;
            let group = group - 1;
            let loc = (group as u64) << 16;
            m.nodes.push((h, group));
            // Several samplers hand over one to the next: time order.
            rs.sort_by_key(|r| (r.0, r.2));
            for (end, start, code, f) in rs {
                let (received, sent) = match code {
                    op::SENSOR_CPU => {
                        let all = crate::facts::total(f.iter().copied());
                        if all > 0 {
                            // As profile.json's `busy_max`: all but idle and iowait.
                            let busy = 1.0 - (f[2] + f[3]) as f64 / all as f64;
                            let id = m.metric(self, "cpu busy", "share", ABSOLUTE_LAST, true);
                            m.point(loc, (end, id, busy.to_bits()));
                        }
                        continue;
                    }
                    op::SENSOR_MEM => {
                        let id = m.metric(self, "memory available", "bytes", ABSOLUTE_POINT, false);
                        m.point(loc, (end, id, f[1]));
                        let id = m.metric(self, "memory used", "bytes", ABSOLUTE_POINT, false);
                        m.point(loc, (end, id, f[0].saturating_sub(f[1])));
                        continue;
                    }
                    op::SENSOR_LOAD => {
                        let id = m.metric(self, "load1", "load", ABSOLUTE_POINT, true);
                        m.point(loc, (end, id, (f[0] as f64 / 1000.0).to_bits()));
                        continue;
                    }
                    op::SENSOR_NET => ("network received", "network sent"),
                    op::SENSOR_IB => ("infiniband received", "infiniband sent"),
                    op::SENSOR_DISK => ("disk read", "disk written"),
                    _ => continue,
                };
                for (name, v) in [(received, f[0]), (sent, f[1])] {
                    let id = m.metric(self, name, "bytes", ACCUMULATED_START, false);
                    m.add(loc, id, start, end, v);
                }
            }
        }
        for points in m.points.values_mut() {
            // Stable: a reading's 0 stays before its total.
            points.sort_by_key(|p| p.0);
        }
        m.totals.clear();
        m
    }
}
