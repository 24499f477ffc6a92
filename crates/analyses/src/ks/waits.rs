//! Wait states per rank: what message matching and the collective
//! instances found (`matching.rs`), folded for the rank that waited.
//!
//! Each rank's state is fed [`Wait`]s, in any order (they come from every
//! matching key), and keeps per pattern: time and instances, per MPI
//! function, per call path, per time slice, per late rank and per the late
//! rank's call path. Everything it adds commutes, so the order in which keys
//! deliver never shows.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::derived::{Pattern, Wait};
use crate::sat::Sat;
use crate::slices::{publish_series, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{Program, WaitCauses, WaitCell, WaitPattern};
use hark_wire::mpi::FUNCTIONS;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Call paths per pattern one rank keeps before the rest share `<other>`.
const MAX_PATHS: usize = 1024;

/// See the module documentation.
pub struct WaitStates;

static SPEC: Spec = Spec {
    name: "wait-states",
    description: "Wait states (Late Sender, Wrong Order, Late Receiver, Wait at N×N and Barrier, Late Broadcast, Early Reduce) per rank, function, call path, time slice and cause.",
    sensitivities: &[Sensitivity::Waits, Sensitivity::ProgramEnd],
    fills: &["waits", "wait_causes"],
};

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Cell {
    time: u64,
    instances: u64,
}

impl Cell {
    /// Adds `n` instances that waited `time` together.
    fn add(&mut self, time: u64, n: u64) {
        self.time.sat(time);
        self.instances += n;
    }
    fn merge(&mut self, o: &Cell) {
        self.time.sat(o.time);
        self.instances += o.instances;
    }
    fn model(&self) -> WaitCell {
        WaitCell {
            time_ns: self.time,
            instances: self.instances,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Acc {
    total: Cell,
    by_function: BTreeMap<u16, Cell>,
    /// By call path id (the program's tables).
    by_callpath: BTreeMap<u32, Cell>,
    causes: BTreeMap<u32, Cell>,
    /// World rank that was late → what it caused here.
    late: BTreeMap<i32, Cell>,
}

/// Call paths past [`MAX_PATHS`] share this key (`<other>` in the model).
const OTHER: u32 = u32::MAX - 1;

fn add_path(map: &mut BTreeMap<u32, Cell>, path: u32, time: u64, n: u64) {
    let key = if map.len() >= MAX_PATHS && !map.contains_key(&path) {
        OTHER
    } else {
        path
    };
    map.entry(key).or_default().add(time, n);
}

/// What the per-pattern maps of a wait are keyed by: waits of one batch
/// alike in all of it are added to the maps once.
fn map_key(w: &Wait) -> Key {
    (w.pattern, w.func, w.path, w.late_path, w.late)
}

/// Pattern, function, call path, the late rank's call path, late rank.
type Key = (Pattern, u16, u32, u32, i32);

/// Kinds of waits summed at once before they are added to the maps.
const ALIKE: usize = 16;

/// Adds waits summed by kind (time, instances) to the maps, in order.
fn add_alike(patterns: &mut BTreeMap<Pattern, Acc>, alike: impl Iterator<Item = (Key, u64, u64)>) {
    for ((pattern, func, path, late_path, late), time, n) in alike {
        let acc = patterns.entry(pattern).or_default();
        acc.total.add(time, n);
        acc.by_function.entry(func).or_default().add(time, n);
        add_path(&mut acc.by_callpath, path, time, n);
        add_path(&mut acc.causes, late_path, time, n);
        acc.late.entry(late).or_default().add(time, n);
    }
}

fn remap_paths(map: &mut BTreeMap<u32, Cell>, ids: &IdMap) {
    let old = std::mem::take(map);
    for (k, c) in old {
        let k = if k == OTHER { OTHER } else { ids.path(k) };
        map.entry(k).or_default().merge(&c);
    }
}

/// One rank's wait states.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    patterns: BTreeMap<Pattern, Acc>,
    /// Per pattern `p` (its index in `Pattern::ALL`): metric `2p` the time
    /// waited, spread over the slices the wait spans, and `2p + 1` the
    /// instances, at the slice the wait began.
    series: Option<Series>,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        if input.waits.is_empty() {
            return;
        }
        let s = self
            .series
            .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
        // Waits alike in every key of the maps are summed first and added
        // to the maps once (a loop's waits alternate between a few kinds,
        // so runs of one kind are short). Sums do not depend on the order,
        // and the kinds are added in the order they first came, so call
        // paths reach `MAX_PATHS` in the same order as one by one.
        let mut alike: Vec<(Key, u64, u64)> = Vec::new();
        for w in input.waits {
            let k = map_key(w);
            match alike.iter_mut().find(|a| a.0 == k) {
                Some(a) => {
                    a.1 = a.1.saturating_add(w.time_ns);
                    a.2 += 1;
                }
                None => {
                    if alike.len() >= ALIKE {
                        add_alike(&mut self.patterns, alike.drain(..));
                    }
                    alike.push((k, w.time_ns, 1));
                }
            }
            let p = Pattern::ALL
                .iter()
                .position(|&q| q == w.pattern)
                .unwrap_or(0);
            let a = w.enter_ns.saturating_sub(cx.origin_ns());
            let b = a.saturating_add(w.time_ns);
            s.fit(b);
            let span = (s.index(a), s.index(b));
            s.add_span(2 * p, span, a, b);
            s.add(2 * p + 1, span.0, 1);
        }
        add_alike(&mut self.patterns, alike.drain(..));
    }
    fn remap(&mut self, ids: &IdMap) {
        for acc in self.patterns.values_mut() {
            remap_paths(&mut acc.by_callpath, ids);
            remap_paths(&mut acc.causes, ids);
        }
    }
    /// Only processes without wait states fold together (processes
    /// without a world rank never wait on another rank).
    fn absorbs(&self, o: &Rank) -> bool {
        o.patterns.is_empty() && o.series.is_none()
    }
}

impl Analysis for WaitStates {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let n = ranks.len();
        if !cx.ranks.iter().any(|r| r.world_rank >= 0) {
            return;
        }
        let mut causes = WaitCauses {
            time_ns: vec![vec![0; n]; n],
            late_instances: vec![0; n],
        };
        let mut outside = 0u64;
        // The slices as the model has them, one row per pattern metric.
        let slices = TimeSlicesRows(publish_series(
            cx,
            &out.timeslices,
            ranks.iter().map(|r| r.series.as_ref()),
        ));
        for (p, pattern) in Pattern::ALL.iter().enumerate() {
            let mut m = WaitPattern {
                time_ns: vec![0; n],
                instances: vec![0; n],
                late: vec![WaitCell::default(); n],
                ..WaitPattern::default()
            };
            let mut by_function: BTreeMap<u16, Cell> = BTreeMap::new();
            let mut by_callpath: BTreeMap<String, Cell> = BTreeMap::new();
            let mut by_cause: BTreeMap<String, Cell> = BTreeMap::new();
            let name = |id: u32| match id {
                OTHER => "<other>".to_string(),
                id => cx.unifier.path(id).unwrap_or("?").to_string(),
            };
            for (r, rank) in ranks.iter().enumerate() {
                let Some(acc) = rank.patterns.get(pattern) else {
                    continue;
                };
                m.time_ns[r] = acc.total.time;
                m.instances[r] = acc.total.instances;
                for (f, c) in &acc.by_function {
                    by_function.entry(*f).or_default().merge(c);
                }
                for (&path, c) in &acc.by_callpath {
                    by_callpath.entry(name(path)).or_default().merge(c);
                }
                for (&path, c) in &acc.causes {
                    by_cause.entry(name(path)).or_default().merge(c);
                }
                for (&late, c) in &acc.late {
                    let Some(l) = cx.program_rank(late) else {
                        outside += c.instances;
                        continue;
                    };
                    m.late[l].time_ns.sat(c.time);
                    m.late[l].instances += c.instances;
                    causes.time_ns[l][r].sat(c.time);
                    causes.late_instances[l] += c.instances;
                }
            }
            m.by_function = by_function
                .into_iter()
                .map(|(f, c)| {
                    let name = FUNCTIONS.get(f as usize).map_or("?", |d| d.name);
                    (name.to_string(), c.model())
                })
                .collect();
            m.by_callpath = by_callpath
                .into_iter()
                .map(|(k, c)| (k, c.model()))
                .collect();
            m.cause_callpaths = by_cause.into_iter().map(|(k, c)| (k, c.model())).collect();
            m.slices = slices.pattern(p);
            out.waits.insert(pattern.key().to_string(), m);
        }
        out.wait_causes = causes;
        if outside > 0 {
            out.diagnostics.push(format!(
                "wait-states: {outside} waits were caused by processes outside this program; they count for the rank that waited but not in the who-made-whom-wait matrix"
            ));
        }
    }
}

/// The wait series folded over ranks.
#[derive(Default)]
struct TimeSlicesRows(Vec<Vec<u64>>);

impl TimeSlicesRows {
    fn pattern(&self, p: usize) -> Vec<WaitCell> {
        let (time, inst) = (self.0.get(2 * p), self.0.get(2 * p + 1));
        let len = time.map_or(0, Vec::len).max(inst.map_or(0, Vec::len));
        (0..len)
            .map(|i| WaitCell {
                time_ns: time.and_then(|t| t.get(i)).copied().unwrap_or(0),
                instances: inst.and_then(|t| t.get(i)).copied().unwrap_or(0),
            })
            .collect()
    }
}
