//! POP efficiencies, per program, per top-level region and per time slice.
//!
//! Definitions (`docs/analyses.md` says why):
//!
//! - a rank's measured window runs from the end of its `MPI_Init` to the
//!   start of its `MPI_Finalize` (its first and last events without them);
//!   the runtime `T` is the program's window: the earliest start to the
//!   latest end, on the common timeline; time recording was paused is not
//!   measured: out of a rank's window, and (what every rank paused) of `T`;
//! - useful time `U_i` is a rank's window minus its time in MPI (I/O outside
//!   MPI counts as useful: it is the program's own work);
//! - waiting time `W_i` is the time the rank spent in wait states
//!   (`wait-states`), transfer time `X_i = MPI_i − W_i`;
//! - load balance `LB = mean U / max U`, communication efficiency
//!   `CommE = max U / T`, parallel efficiency `PE = LB × CommE`;
//! - the ideal runtime, with data moved in no time but every dependency
//!   kept, is `T* = max_i (T − X_i)`; serialisation `SerE = max U / T*`,
//!   transfer `TE = T* / T`, so that `CommE = SerE × TE` exactly.
//!
//! It does not walk the events: the tracker gathers what it needs of each
//! pack in its own pass ([`Times`]), and the MPI time per slice is the
//! `timeslices` analysis's `mpi_time_ns` (folded before this one) less the
//! time in `MPI_Init` and `MPI_Finalize`, which this one keeps.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::derived::Times;
use crate::sat::Sat;
use crate::slices::{at_width, Series};
use crate::stream::StreamCx;
use crate::unify::{IdMap, UNDEFINED};
use hark_model::{Efficiency, Program};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct Efficiencies;

static SPEC: Spec = Spec {
    name: "efficiency",
    description: "POP efficiencies (parallel, load balance, communication, serialisation, transfer) per program, top-level region and time slice.",
    sensitivities: &[
        Sensitivity::Defs,
        Sensitivity::Events,
        Sensitivity::Waits,
        Sensitivity::ProgramEnd,
    ],
    fills: &[
        "efficiency",
        "efficiency_by_region",
        "efficiency_slices",
        "paused_ns",
    ],
};

/// Series metrics: time in `MPI_Init` and `MPI_Finalize` (subtracted from
/// the time slices' `mpi_time_ns` to give the MPI time that counts), and
/// waiting time.
const INIT_FIN: usize = 0;
const WAIT: usize = 1;

/// Top-level regions one rank keeps apart before the rest are ignored.
const MAX_REGIONS: usize = 256;

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Part {
    /// Time inside (regions: inclusive, over calls).
    inside: u64,
    mpi: u64,
    wait: u64,
}

/// One rank's times.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    /// Window: end of MPI_Init and start of MPI_Finalize (common ns).
    init_end: Option<u64>,
    fin_start: Option<u64>,
    first: Option<u64>,
    last: u64,
    whole: Part,
    /// Per top-level region (global name id).
    regions: BTreeMap<u32, Part>,
    /// Whether a top-level region was open after the last pack.
    open: bool,
    /// Whether the rank made an MPI call other than `MPI_Init` and
    /// `MPI_Finalize` (its MPI series then has slices).
    mpi_calls: bool,
    series: Option<Series>,
    /// Time recording was paused, in ns: not measured.
    paused: u64,
}

fn add_part(into: &mut Part, p: &Part) {
    into.inside.sat(p.inside);
    into.mpi.sat(p.mpi);
    into.wait.sat(p.wait);
}

impl Rank {
    fn region(&mut self, name: u32) -> Option<&mut Part> {
        if !self.regions.contains_key(&name) && self.regions.len() >= MAX_REGIONS {
            return None;
        }
        Some(self.regions.entry(name).or_default())
    }

    /// The window (start, end), if the rank recorded anything.
    fn window(&self) -> Option<(u64, u64)> {
        let start = self.init_end.or(self.first)?;
        let end = self.fin_start.unwrap_or(self.last).max(start);
        Some((start, end))
    }

    /// Folds what the tracker gathered of one pack ([`Times`]): the events
    /// themselves are not walked again.
    fn times(&mut self, cx: &StreamCx<'_>, t: &Times, series: &mut Series) {
        if t.first != u64::MAX {
            self.first = Some(self.first.map_or(t.first, |f| f.min(t.first)));
        }
        self.last = self.last.max(t.last);
        self.init_end = t.init_end.or(self.init_end);
        self.fin_start = t.fin_start.or(self.fin_start);
        self.whole.mpi.sat(t.mpi_ns);
        self.mpi_calls |= t.mpi_calls;
        self.open = t.open;
        self.paused.sat(t.paused_ns);
        for &(top, inside, mpi) in &t.regions {
            if let Some(p) = self.region(top) {
                p.inside.sat(inside);
                p.mpi.sat(mpi);
            }
        }
        for &(start, end) in &t.init_fin {
            let a = start.saturating_sub(cx.origin_ns());
            let b = end.saturating_sub(cx.origin_ns()).max(a);
            series.fit(b);
            series.add_span(INIT_FIN, (series.index(a), series.index(b)), a, b);
        }
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        let mut series = self
            .series
            .take()
            .unwrap_or_else(|| Series::new(cx.slice_shift(), cx.slices()));
        if let Some(t) = input.times {
            self.times(cx, t, &mut series);
        }
        // Consecutive waits in one region (a loop's usually are) are added
        // to it once.
        for run in input.waits.chunk_by(|a, b| a.region == b.region) {
            let time = run.iter().fold(0u64, |t, w| t.saturating_add(w.time_ns));
            self.whole.wait.sat(time);
            if run[0].region != UNDEFINED {
                if let Some(p) = self.region(run[0].region) {
                    p.wait.sat(time);
                }
            }
            for w in run {
                let a = w.enter_ns.saturating_sub(cx.origin_ns());
                let b = a.saturating_add(w.time_ns);
                series.fit(b);
                series.add_span(WAIT, (series.index(a), series.index(b)), a, b);
            }
        }
        self.series = Some(series);
    }
    fn remap(&mut self, ids: &IdMap) {
        self.regions = std::mem::take(&mut self.regions)
            .into_iter()
            .map(|(k, v)| (ids.name(k), v))
            .filter(|(k, _)| *k != UNDEFINED)
            .collect();
    }
    /// Processes without MPI (no measured window) and with no top-level
    /// region left open fold together.
    fn absorbs(&self, o: &Rank) -> bool {
        let mpi_less = |r: &Rank| r.init_end.is_none() && r.fin_start.is_none();
        mpi_less(self) && mpi_less(o) && !o.open
    }
    fn absorb(&mut self, o: &Rank) {
        self.first = match (self.first, o.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last = self.last.max(o.last);
        self.mpi_calls |= o.mpi_calls;
        self.paused.sat(o.paused);
        add_part(&mut self.whole, &o.whole);
        for (name, p) in &o.regions {
            if let Some(into) = self.region(*name) {
                add_part(into, p);
            }
        }
        if let Some(os) = &o.series {
            let s = self.series.get_or_insert_with(|| os.empty_like());
            s.absorb(os, |m| m);
        }
    }
}

/// The efficiencies of ranks whose windows are `inside[i]` long, with MPI
/// and waiting times `mpi[i]` and `wait[i]`, over a runtime `t`.
fn pop(t: u64, parts: &[Part]) -> Efficiency {
    let n = parts.len();
    if n == 0 || t == 0 {
        return Efficiency::default();
    }
    let useful: Vec<u64> = parts
        .iter()
        .map(|p| p.inside.saturating_sub(p.mpi))
        .collect();
    let max_useful = useful.iter().copied().max().unwrap_or(0).min(t);
    let mean_useful = useful.iter().map(|&u| u as f64).sum::<f64>() / n as f64;
    let ideal = parts
        .iter()
        .map(|p| t.saturating_sub(p.mpi.saturating_sub(p.wait)))
        .max()
        .unwrap_or(t)
        .clamp(max_useful, t);
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            (a / b).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let load_balance = ratio(mean_useful, max_useful as f64);
    let serialisation = ratio(max_useful as f64, ideal as f64);
    let transfer = ratio(ideal as f64, t as f64);
    let communication = serialisation * transfer;
    Efficiency {
        parallel: load_balance * communication,
        load_balance,
        communication,
        serialisation,
        transfer,
        runtime_ns: t,
        mean_useful_ns: mean_useful.round() as u64,
        max_useful_ns: max_useful,
        ideal_runtime_ns: ideal,
        ..Efficiency::default()
    }
}

impl Analysis for Efficiencies {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        if ranks.is_empty() || !ranks.iter().any(|r| r.init_end.is_some()) {
            return;
        }
        let windows: Vec<Option<(u64, u64)>> = ranks.iter().map(|r| r.window()).collect();
        let start = windows.iter().flatten().map(|w| w.0).min().unwrap_or(0);
        let end = windows.iter().flatten().map(|w| w.1).max().unwrap_or(0);
        // Over the measured time only: a rank's paused time is out of its
        // window, and the time every rank was paused out of the runtime.
        let parts: Vec<Part> = ranks
            .iter()
            .zip(&windows)
            .map(|(r, w)| Part {
                inside: w.map_or(0, |(a, b)| b - a).saturating_sub(r.paused),
                ..r.whole
            })
            .collect();
        let paused_by_all = ranks.iter().map(|r| r.paused).min().unwrap_or(0);
        let runtime = end.saturating_sub(start).saturating_sub(paused_by_all);
        out.efficiency = Some(pop(runtime, &parts));
        if ranks.iter().any(|r| r.paused > 0) {
            out.paused_ns = ranks.iter().map(|r| r.paused).collect();
        }

        let mut names: Vec<u32> = ranks
            .iter()
            .flat_map(|r| r.regions.keys().copied())
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let parts: Vec<Part> = ranks
                .iter()
                .map(|r| r.regions.get(&name).copied().unwrap_or_default())
                .collect();
            let t = parts.iter().map(|p| p.inside).max().unwrap_or(0);
            if t == 0 {
                continue;
            }
            let region = cx.unifier.name(name).unwrap_or("?").to_string();
            out.efficiency_by_region.insert(region, pop(t, &parts));
        }

        // Per slice: each rank's window cut to the slice. Its MPI time is
        // the time slices' (`timeslices`, folded before this one) less its
        // time in MPI_Init and MPI_Finalize: durations are split between
        // slices by overlap, so the difference is exact at any width.
        let Some(mpi_rows) = out.timeslices.metrics.get("mpi_time_ns") else {
            return;
        };
        let (width, rows) = at_width(cx, &out.timeslices, ranks.iter().map(|r| r.series.as_ref()));
        let wider = width
            .trailing_zeros()
            .saturating_sub(out.timeslices.slice_ns.trailing_zeros());
        let full = Series::new(cx.slice_shift, cx.slices).len();
        let slices = rows
            .iter()
            .zip(ranks)
            .map(|(r, rank)| {
                let waits = r.get(WAIT).map_or(0, Vec::len);
                waits.max(if rank.mpi_calls { full } else { 0 })
            })
            .max()
            .unwrap_or(0)
            .max(
                out.timeslices
                    .metrics
                    .values()
                    .flatten()
                    .map(Vec::len)
                    .max()
                    .unwrap_or(0),
            );
        // Each rank's MPI time per slice, at `width`.
        let mpi: Vec<Vec<u64>> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut wide = vec![0u64; slices];
                for (k, &v) in mpi_rows.get(i).into_iter().flatten().enumerate() {
                    if let Some(into) = wide.get_mut(k >> wider) {
                        into.sat(v);
                    }
                }
                for (into, &v) in wide.iter_mut().zip(r.get(INIT_FIN).into_iter().flatten()) {
                    *into = into.saturating_sub(v);
                }
                wide
            })
            .collect();
        let origin = cx.origin_ns;
        let overlap = |(a, b): (u64, u64), s: usize| {
            let (lo, hi) = (origin + s as u64 * width, origin + (s as u64 + 1) * width);
            b.min(hi).saturating_sub(a.max(lo))
        };
        out.efficiency_slices = (0..slices)
            .map(|s| {
                let parts: Vec<Part> = rows
                    .iter()
                    .zip(&mpi)
                    .zip(&windows)
                    .map(|((r, mpi), w)| Part {
                        inside: w.map_or(0, |w| overlap(w, s)),
                        mpi: mpi.get(s).copied().unwrap_or(0),
                        wait: r.get(WAIT).and_then(|row| row.get(s)).copied().unwrap_or(0),
                    })
                    .collect();
                pop(overlap((start, end), s), &parts)
            })
            .collect();
    }
}
