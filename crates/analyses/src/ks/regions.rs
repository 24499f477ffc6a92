//! User regions and counters.
//!
//! Regions nest per thread: each `REGION_BEGIN` opens a frame on its thread's
//! stack and the matching `REGION_END` closes it, giving the call path
//! (`outer/inner`) its inclusive time and, minus the time of the regions
//! nested inside, its exclusive time. An end that does not match the
//! innermost open region closes the regions above it (they are counted as
//! unbalanced); an end of a region that is not open is ignored and counted.
//! Call paths deeper than [`MAX_DEPTH`] are folded into their ancestor at
//! that depth, so a recursive region cannot grow the state without bound.
//!
//! Over time, each call path has `region:<path>.calls` (at the slice where
//! the region was entered) and `region:<path>.inclusive_ns` (spread over the
//! slices it spans) in the program's time slices.
//!
//! Every MPI call is also attributed to the call path open on its thread
//! (`""` outside any region): calls and time per path, function and rank
//! (`regions.mpi`), the call tree with MPI leaves that the Hatchet export
//! draws. It lives here because the region stacks do.
//!
//! Functions the compiler instrumented (`op::FUNCTION_ENTER`/`EXIT`) are
//! regions too, named by their function (resolved from its address when
//! it was defined): they nest with user regions on one stack per thread.
//! A function the probe throttled (`op::FUNCTION_THROTTLED`) is named in
//! the diagnostics with its calls and time per call until then.
//!
//! Counters keep count, min, max and mean of their values over all ranks.
//!
//! Performance counts of a region (`op::COUNTER_REGION`, which the probe
//! records right after the region's `REGION_END` on the same thread) go to
//! the call path that end closed: inclusive counts per path and rank
//! (`regions.paths[path].counters`).

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::fx::FxHashMap;
use crate::sat::Sat;
use crate::slices::{publish, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::unify::UNDEFINED;
use crate::values::Values;
use hark_model::{PathCalls, Program, RegionProfile};
use hark_wire::mpi::FUNCTIONS;
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Call paths deeper than this are attributed to their ancestor at this depth.
pub const MAX_DEPTH: usize = crate::derived::MAX_REGION_DEPTH;

/// See the module documentation.
pub struct Regions;

static SPEC: Spec = Spec {
    name: "regions",
    description: "Calls, inclusive and exclusive time of user regions per call path and rank; counter statistics.",
    sensitivities: &[Sensitivity::Defs, Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["regions", "timeslices"],
};

const ROOT: u32 = u32::MAX;

#[derive(Serialize, Deserialize)]
struct Path {
    parent: u32,
    name: u32,
    calls: u64,
    inclusive: u64,
    exclusive: u64,
}

#[derive(Serialize, Deserialize)]
struct Frame {
    path: u32,
    name: u32,
    begin: u64,
    children: u64,
    /// True when this frame is past `MAX_DEPTH` and shares its parent's path.
    folded: bool,
}

/// Per rank: call paths, open regions and counters.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    paths: Vec<Path>,
    path_ids: FxHashMap<(u32, u32), u32>,
    stacks: Vec<Vec<Frame>>,
    counters: FxHashMap<u32, Values>,
    /// MPI calls and time per (path, MPI function index); path [`ROOT`]
    /// outside any region. Bounded by paths × functions.
    mpi: FxHashMap<(u32, u16), (u64, u64)>,
    /// Per path: calls (metric `2 * path`) and inclusive time (`2 * path + 1`).
    series: Option<Series>,
    /// Per thread: the path its last `REGION_END` closed ([`ROOT`] for
    /// none), which the performance counts after it belong to.
    closed: Vec<u32>,
    /// Performance counts per (path, counter number), inclusive.
    perf: FxHashMap<(u32, u16), u64>,
    /// Throttled functions: calls and inclusive ns until then, and the
    /// processes that throttled them.
    throttled: FxHashMap<u32, (u64, u64, u32)>,
    unbalanced: u64,
    unmatched: u64,
    undefined: u64,
}

impl Rank {
    fn path(&mut self, parent: u32, name: u32) -> u32 {
        let paths = &mut self.paths;
        *self.path_ids.entry((parent, name)).or_insert_with(|| {
            paths.push(Path {
                parent,
                name,
                calls: 0,
                inclusive: 0,
                exclusive: 0,
            });
            (paths.len() - 1) as u32
        })
    }

    fn begin(&mut self, thread: usize, name: u32, t: u64) {
        if self.stacks.len() <= thread {
            self.stacks.resize_with(thread + 1, Vec::new);
        }
        let (parent, depth) = {
            let s = &self.stacks[thread];
            (s.last().map_or(ROOT, |f| f.path), s.len())
        };
        let folded = depth >= MAX_DEPTH;
        let path = if folded {
            parent
        } else {
            self.path(parent, name)
        };
        if !folded {
            self.paths[path as usize].calls += 1;
        }
        self.stacks[thread].push(Frame {
            path,
            name,
            begin: t,
            children: 0,
            folded,
        });
    }

    fn end(&mut self, cx: &StreamCx<'_>, thread: usize, name: u32, t: u64) {
        let Some(stack) = self.stacks.get_mut(thread) else {
            self.unmatched += 1;
            return;
        };
        let Some(at) = stack.iter().rposition(|f| f.name == name) else {
            self.unmatched += 1;
            return;
        };
        let f = &stack[at];
        let closed = if f.folded { ROOT } else { f.path };
        if self.closed.len() <= thread {
            self.closed.resize(thread + 1, ROOT);
        }
        self.closed[thread] = closed;
        let stack = &mut self.stacks[thread];
        // Close the frames above the matching one too: their ends are lost.
        while stack.len() > at {
            let f = stack.pop().expect("stack holds at least `at + 1` frames");
            if stack.len() > at {
                self.unbalanced += 1;
            }
            if f.folded {
                // Its time stays in the ancestor's exclusive time.
                continue;
            }
            let inclusive = t.saturating_sub(f.begin);
            if let Some(parent) = stack.last_mut() {
                parent.children.sat(inclusive);
            }
            let p = &mut self.paths[f.path as usize];
            p.inclusive.sat(inclusive);
            p.exclusive.sat(inclusive.saturating_sub(f.children));
            if let Some(s) = &mut self.series {
                let (a, b) = (cx.since_origin(f.begin), cx.since_origin(t.max(f.begin)));
                s.fit(b);
                let span = (s.index(a), s.index(b));
                let m = 2 * f.path as usize;
                s.add(m, span.0, 1);
                s.add_span(m + 1, span, a, b);
            }
        }
    }
}

impl Rank {
    /// An instrumented function's entry, exit or throttling.
    fn function(&mut self, cx: &StreamCx<'_>, ev: &hark_wire::Event) {
        let name = cx.function(ev.obj.get());
        if name == UNDEFINED {
            self.undefined += 1;
            return;
        }
        let thread = ev.thread.get() as usize;
        match ev.op() {
            op::FUNCTION_ENTER => self.begin(thread, name, ev.start.get()),
            op::FUNCTION_EXIT => self.end(cx, thread, name, ev.start.get()),
            _ => {
                let t = self.throttled.entry(name).or_default();
                t.0 += ev.bytes.get();
                t.1.sat(ev.extra.get() & hark_wire::EXTRA_MASK);
                t.2 += 1;
            }
        }
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        let events = input.events;
        if self.series.is_none() {
            self.series = Some(Series::new(cx.slice_shift(), cx.slices()));
        }
        for ev in events {
            let code = ev.op();
            if code < op::IO_BASE {
                if let op::OpKind::Mpi(f) = op::kind(code) {
                    let thread = ev.thread.get() as usize;
                    let path = self
                        .stacks
                        .get(thread)
                        .and_then(|s| s.last())
                        .map_or(ROOT, |f| f.path);
                    let c = self.mpi.entry((path, f as u16)).or_default();
                    c.0 += 1;
                    c.1.sat(ev.duration());
                    continue;
                }
            }
            if code == op::COUNTER_REGION {
                let thread = ev.thread.get() as usize;
                let path = self.closed.get(thread).copied().unwrap_or(ROOT);
                if path != ROOT {
                    let key = (path, ev.tag.get().clamp(0, u16::MAX as i32) as u16);
                    self.perf.entry(key).or_default().sat(ev.bytes.get());
                }
                continue;
            }
            if (op::FUNCTION_ENTER..=op::FUNCTION_THROTTLED).contains(&code) {
                self.function(cx, ev);
                continue;
            }
            if !(op::REGION_BEGIN..=op::COUNTER).contains(&code) || code == op::MARK {
                continue;
            }
            let name = cx.name(ev.obj.get());
            if name == UNDEFINED {
                self.undefined += 1;
                continue;
            }
            let thread = ev.thread.get() as usize;
            match code {
                op::REGION_BEGIN => self.begin(thread, name, ev.start.get()),
                op::REGION_END => self.end(cx, thread, name, ev.start.get()),
                _ => {
                    let v = ev.bytes.get() as i64;
                    self.counters.entry(name).or_default().add(v);
                }
            }
        }
    }
    fn remap(&mut self, ids: &IdMap) {
        for p in &mut self.paths {
            p.name = ids.name(p.name);
        }
        self.path_ids = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.parent, p.name), i as u32))
            .collect();
        for f in self.stacks.iter_mut().flatten() {
            f.name = ids.name(f.name);
        }
        self.counters = std::mem::take(&mut self.counters)
            .into_iter()
            .map(|(name, v)| (ids.name(name), v))
            .collect();
        self.throttled = std::mem::take(&mut self.throttled)
            .into_iter()
            .map(|(name, v)| (ids.name(name), v))
            .collect();
    }
    /// A process with a region still open (cut by a crash) keeps its row.
    fn absorbs(&self, o: &Rank) -> bool {
        o.stacks.iter().all(Vec::is_empty)
    }
    fn absorb(&mut self, o: &Rank) {
        // A path's parent comes before it: map them in order.
        let mut to: Vec<u32> = Vec::with_capacity(o.paths.len());
        for p in &o.paths {
            let parent = if p.parent == ROOT {
                ROOT
            } else {
                to[p.parent as usize]
            };
            let id = self.path(parent, p.name);
            let into = &mut self.paths[id as usize];
            into.calls += p.calls;
            into.inclusive.sat(p.inclusive);
            into.exclusive.sat(p.exclusive);
            to.push(id);
        }
        for (name, v) in &o.counters {
            self.counters.entry(*name).or_default().merge(v);
        }
        for (&(path, counter), &v) in &o.perf {
            if let Some(&p) = to.get(path as usize) {
                self.perf.entry((p, counter)).or_default().sat(v);
            }
        }
        if let Some(os) = &o.series {
            let s = self.series.get_or_insert_with(|| os.empty_like());
            s.absorb(os, |m| 2 * to.get(m / 2).map_or(0, |&p| p as usize) + m % 2);
        }
        for (name, &(calls, ns, n)) in &o.throttled {
            let t = self.throttled.entry(*name).or_default();
            t.0 += calls;
            t.1.sat(ns);
            t.2 += n;
        }
        self.unbalanced += o.unbalanced;
        self.unmatched += o.unmatched;
        self.undefined += o.undefined;
    }
}

fn path_name(rank: &Rank, mut id: u32, cx: &Finish<'_>) -> String {
    if id == ROOT {
        return String::new();
    }
    let mut parts = Vec::new();
    while id != ROOT {
        let p = &rank.paths[id as usize];
        parts.push(cx.unifier.name(p.name).unwrap_or("?"));
        id = p.parent;
    }
    parts.reverse();
    parts.join("/")
}

impl Analysis for Regions {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let n = cx.len();
        let mut counters: BTreeMap<u32, Values> = BTreeMap::new();
        let mut throttled: BTreeMap<u32, (u64, u64, u32)> = BTreeMap::new();
        let (mut unbalanced, mut unmatched, mut undefined, mut open) = (0, 0, 0, 0);
        for (r, rank) in ranks.iter().copied().enumerate() {
            for (id, p) in rank.paths.iter().enumerate() {
                let name = path_name(rank, id as u32, cx);
                let into = out
                    .regions
                    .paths
                    .entry(name)
                    .or_insert_with(|| RegionProfile {
                        calls: vec![0; n],
                        inclusive_ns: vec![0; n],
                        exclusive_ns: vec![0; n],
                        counters: BTreeMap::new(),
                    });
                into.calls[r] += p.calls;
                into.inclusive_ns[r].sat(p.inclusive);
                into.exclusive_ns[r].sat(p.exclusive);
            }
            for (&(path, counter), &v) in &rank.perf {
                let Some(into) = out.regions.paths.get_mut(&path_name(rank, path, cx)) else {
                    continue;
                };
                let row = into
                    .counters
                    .entry(hark_wire::counters::name(counter).to_string())
                    .or_insert_with(|| vec![0; n]);
                row[r].sat(v);
            }
            for (&(path, func), &(calls, time)) in &rank.mpi {
                let Some(f) = FUNCTIONS.get(func as usize) else {
                    continue;
                };
                let into = out
                    .regions
                    .mpi
                    .entry(path_name(rank, path, cx))
                    .or_default()
                    .entry(f.name.to_string())
                    .or_insert_with(|| PathCalls {
                        calls: vec![0; n],
                        time_ns: vec![0; n],
                    });
                into.calls[r] += calls;
                into.time_ns[r].sat(time);
            }
            for (&name, c) in &rank.counters {
                counters.entry(name).or_default().merge(c);
            }
            for (&name, &(calls, ns, k)) in &rank.throttled {
                let t = throttled.entry(name).or_default();
                t.0 += calls;
                t.1.sat(ns);
                t.2 += k;
            }
            unbalanced += rank.unbalanced;
            unmatched += rank.unmatched;
            undefined += rank.undefined;
            open += rank.stacks.iter().map(Vec::len).sum::<usize>();
        }
        let ranks: Vec<&Rank> = ranks.to_vec();
        let names: Vec<Vec<String>> = ranks
            .iter()
            .map(|rank| {
                (0..rank.paths.len())
                    .map(|id| path_name(rank, id as u32, cx))
                    .collect()
            })
            .collect();
        let series = ranks.iter().map(|r| r.series.as_ref());
        publish(cx, &mut out.timeslices, series, |r, m| {
            let what = if m % 2 == 0 { "calls" } else { "inclusive_ns" };
            Some(format!("region:{}.{what}", names[r].get(m / 2)?))
        });
        for (name, c) in counters {
            let name = cx.unifier.name(name).unwrap_or("?").to_string();
            out.regions.counters.insert(name, c.stats());
        }
        for (name, (calls, ns, processes)) in throttled {
            let name = cx.unifier.name(name).unwrap_or("?");
            let per_call = ns as f64 / calls.max(1) as f64 / 1000.0;
            out.diagnostics.push(format!(
                "functions: {name} was throttled in {processes} process(es) after {calls} calls of {per_call:.2} µs on average; its later calls are not recorded (HARK_THROTTLE, or exclude it with a filter file)"
            ));
        }
        for (count, what) in [
            (
                unbalanced,
                "regions were closed by the end of an enclosing region",
            ),
            (
                unmatched,
                "region ends had no open region of that name and were ignored",
            ),
            (
                undefined,
                "region or counter events named undefined ids and were ignored",
            ),
            (
                open as u64,
                "regions were still open when their rank ended; their time is not counted",
            ),
        ] {
            if count > 0 {
                out.diagnostics.push(format!("regions: {count} {what}"));
            }
        }
    }
}
