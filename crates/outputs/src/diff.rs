//! `hark diff RUN_A RUN_B`: what changed between two runs, the differences
//! that matter first.
//!
//! Programs are paired by name. For each pair, every timed quantity is
//! compared as a **mean per rank** (so runs with different rank counts
//! compare too): the program's wall time, each region's exclusive time,
//! each MPI function's time, each wait-state pattern's time, each
//! performance counter (a count per rank, its noise at least 1 % plus one;
//! the `*-clock` ones are time), and the POP efficiencies (as the time
//! their change costs: the change × the runtime).
//!
//! **Noise** is what the runs themselves show. Given repeated runs of a side
//! ([`compare_repeated`]), it is the run-to-run spread: the largest range
//! (max − min) of the quantity over the runs of either side, widened for
//! two or three runs a side to what a t-test would need; with one run per
//! side it is the spread (standard deviation) across the ranks of either run.
//! Either way a time's noise is never less than 1 % of its size plus 10 µs
//! plus 0.1 % of the program's wall time (timer and scheduling jitter: a
//! preemption lands on whatever the rank was doing, however small); for an
//! efficiency, two percentage points. A change
//! larger than twice its noise *matters*; changes that matter come first,
//! costliest first, then those within the noise. Per-rank changes (which
//! rank moved) are compared only when both sides have the same number of
//! ranks. Counts (calls, messages, bytes) are exact, so any change in them is
//! listed, largest relative change first; when the rank counts differ they
//! are compared per rank (doubling the ranks doubles the calls), totals shown
//! beside them. The header gives the speed-up (wall time before / after) and,
//! across rank counts, the parallel efficiency (speed-up × ranks before /
//! ranks after).

use crate::html::esc;
use crate::units;
use hark_model::{Program, Run};
use std::collections::BTreeSet;
use std::fmt::Write;

/// What a [`Change`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A region call path (its exclusive time).
    Region,
    /// An MPI function.
    Function,
    /// A wait-state pattern.
    Wait,
    /// A POP efficiency.
    Efficiency,
    /// One rank's time outside MPI, against the other ranks' change.
    Rank,
    /// A performance counter (`perf list` name), as a mean per rank.
    Counter,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Region => "region",
            Kind::Function => "function",
            Kind::Wait => "wait state",
            Kind::Efficiency => "efficiency",
            Kind::Rank => "rank",
            Kind::Counter => "counter",
        }
    }
}

/// One compared quantity.
#[derive(Clone, Debug)]
pub struct Change {
    /// Program it belongs to.
    pub program: String,
    /// What it is.
    pub kind: Kind,
    /// Its name: a call path, `MPI_Send`, `late_sender`, `parallel`, `rank 3`.
    pub name: String,
    /// Value in run A and run B: ns per rank, a fraction for efficiencies,
    /// a count per rank for counters (ns for the `*-clock` ones).
    /// `None` where the run does not have it.
    pub a: Option<f64>,
    /// See `a`.
    pub b: Option<f64>,
    /// The noise it is judged against (same unit).
    pub noise: f64,
    /// What the change costs (or saves), in ns per rank.
    pub cost_ns: f64,
    /// The change is larger than twice its noise.
    pub matters: bool,
}

/// A count that changed (calls, messages, bytes).
#[derive(Clone, Debug)]
pub struct CountChange {
    /// Program it belongs to.
    pub program: String,
    /// What is counted: `MPI_Send calls`, `point-to-point messages`.
    pub name: String,
    /// Total over ranks in run A (the first run of side A).
    pub a: u64,
    /// Total over ranks in run B (the first run of side B).
    pub b: u64,
    /// Ranks of A and B: when they differ, the count changed per rank.
    pub ranks: [usize; 2],
}

impl CountChange {
    /// Whether the counts are compared per rank (the rank counts differ).
    pub fn per_rank(&self) -> bool {
        self.ranks[0] != self.ranks[1]
    }

    /// The count per rank in A and B.
    pub fn per_rank_values(&self) -> (f64, f64) {
        let per = |v: u64, n: usize| v as f64 / n.max(1) as f64;
        (per(self.a, self.ranks[0]), per(self.b, self.ranks[1]))
    }
}

/// One program's header: its ranks and wall time on either side.
#[derive(Clone, Debug)]
pub struct ProgramPair {
    /// Program name.
    pub name: String,
    /// Ranks in A and B.
    pub ranks: [usize; 2],
    /// Wall time (ns) in A and B: the mean over the repeated runs.
    pub wall_ns: [f64; 2],
    /// Runs given on either side (1 when not repeated).
    pub runs: [usize; 2],
}

impl ProgramPair {
    /// Wall time before / after: above 1 the program got faster.
    pub fn speedup(&self) -> Option<f64> {
        (self.wall_ns[1] > 0.0).then(|| self.wall_ns[0] / self.wall_ns[1])
    }

    /// Parallel efficiency of going from A's ranks to B's: speed-up × ranks
    /// before / ranks after (1 is perfect scaling).
    pub fn scaling_efficiency(&self) -> Option<f64> {
        let s = self.speedup()?;
        (self.ranks[1] > 0).then(|| s * self.ranks[0] as f64 / self.ranks[1] as f64)
    }
}

/// Two runs compared.
#[derive(Clone, Debug, Default)]
pub struct Diff {
    /// Per program pair: name, ranks, wall time, runs per side.
    pub programs: Vec<ProgramPair>,
    /// Noise judged from repeated runs (both sides have more than one run).
    pub repeated: bool,
    /// Timed changes, those that matter first, costliest first.
    pub changes: Vec<Change>,
    /// Counts that changed, largest relative change first.
    pub counts: Vec<CountChange>,
    /// What could not be compared, one sentence each.
    pub notes: Vec<String>,
}

fn mean(v: &[u64], n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    v.iter().map(|&x| x as f64).sum::<f64>() / n as f64
}

fn stddev(v: &[u64], n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let m = mean(v, n);
    let padded = v.iter().map(|&x| x as f64).chain(std::iter::repeat(0.0));
    let var = padded.take(n).map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
    var.sqrt()
}

/// Mean of the values that are there (`None` when none is).
fn mean_of(v: &[Option<f64>]) -> Option<f64> {
    let there: Vec<f64> = v.iter().flatten().copied().collect();
    (!there.is_empty()).then(|| there.iter().sum::<f64>() / there.len() as f64)
}

/// Run-to-run spread of one side: max − min over its runs (absent: 0).
fn range(v: &[Option<f64>]) -> f64 {
    let x = v.iter().map(|x| x.unwrap_or(0.0));
    let (lo, hi) = x.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if lo.is_finite() {
        hi - lo
    } else {
        0.0
    }
}

/// d₂: the expected range of n normal samples in standard deviations, for
/// n = 2..=10 (index n − 2); more runs use the last (which only widens).
const D2: [f64; 9] = [
    1.128, 1.693, 2.059, 2.326, 2.534, 2.704, 2.847, 2.970, 3.078,
];

/// Student's t at 0.995 (two-sided 99 %) for 1..=10 degrees of freedom
/// (index df − 1); more use the last (which only widens).
const T_995: [f64; 10] = [
    63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169,
];

/// The noise of a quantity from repeated runs `a` and `b`: the largest range
/// over either side's runs, widened when so few runs cannot pin the spread
/// down. The range of `n` runs gives their standard deviation (range / d₂);
/// the difference of the two means has that times √(1/nA + 1/nB), and a
/// two-sided t-test at 99 % needs t(nA + nB − 2) times that, which "twice
/// the noise" must reach. Two runs a side thus need 8.8 times the larger
/// range before a change matters (one range alone misses most of the spread
/// of two runs: a twin pair can agree by chance), three 2.2 times, four or
/// more twice the range, as before.
fn run_to_run(a: &[Option<f64>], b: &[Option<f64>]) -> f64 {
    let (ra, rb) = (range(a), range(b));
    let (r, runs) = if ra >= rb {
        (ra, a.len())
    } else {
        (rb, b.len())
    };
    let (na, nb) = (a.len(), b.len());
    if runs < 2 || na + nb < 3 {
        return r;
    }
    let sd = r / D2[(runs - 2).min(D2.len() - 1)];
    let t = T_995[(na + nb - 3).min(T_995.len() - 1)];
    let se = sd * (1.0 / na as f64 + 1.0 / nb as f64).sqrt();
    r.max(0.5 * t * se)
}

/// Floor of the noise of a time: 1 % of its size plus 10 µs, plus
/// `jitter` (0.1 % of the program's wall time, [`jitter`]).
fn floor(a: f64, b: f64, jitter: f64) -> f64 {
    0.01 * a.abs().max(b.abs()) + 10_000.0 + jitter
}

/// The share of a program's wall time (the larger side's) in every time's
/// noise: scheduling jitter lands on whatever a rank was doing.
fn jitter(a: &Side, b: &Side) -> f64 {
    let wall = |s: &Side| s.iter().map(|p| p.wall_ns as f64).fold(0.0, f64::max);
    0.001 * wall(a).max(wall(b))
}

/// How a time's noise is judged: from repeated runs (else the ranks'
/// spread), and with what share of the wall time in its floor ([`jitter`]).
type Noise = (bool, f64);

/// Efficiency changes below this (two percentage points) are noise.
const EFFICIENCY_NOISE: f64 = 0.02;

/// Per-rank values of one quantity in one run (`None`: absent there).
type PerRank<'a> = Option<(&'a [u64], usize)>;

/// A timed change from per-rank values in the runs of A and of B. With
/// repeated runs the noise is the run-to-run range, else the ranks' spread.
fn timed(
    program: &str,
    kind: Kind,
    name: &str,
    a: &[PerRank],
    b: &[PerRank],
    (repeated, jitter): Noise,
) -> Change {
    measured(program, kind, name, (a, b), repeated, &|x, y| {
        floor(x, y, jitter)
    })
}

/// [`timed`] with the noise never below `least(a, b)`.
fn measured(
    program: &str,
    kind: Kind,
    name: &str,
    (a, b): (&[PerRank], &[PerRank]),
    repeated: bool,
    least: &dyn Fn(f64, f64) -> f64,
) -> Change {
    let means = |side: &[PerRank]| -> Vec<Option<f64>> {
        side.iter().map(|r| r.map(|(v, n)| mean(v, n))).collect()
    };
    let (ma, mb) = (means(a), means(b));
    let (va, vb) = (mean_of(&ma), mean_of(&mb));
    let spread = if repeated {
        run_to_run(&ma, &mb)
    } else {
        let sd = |side: &[PerRank]| {
            side.first()
                .copied()
                .flatten()
                .map_or(0.0, |(v, n)| stddev(v, n))
        };
        sd(a).max(sd(b))
    };
    let (x, y) = (va.unwrap_or(0.0), vb.unwrap_or(0.0));
    let noise = spread.max(least(x, y));
    let delta = y - x;
    Change {
        program: program.to_string(),
        kind,
        name: name.to_string(),
        a: va,
        b: vb,
        noise,
        cost_ns: delta,
        matters: delta.abs() > 2.0 * noise,
    }
}

/// The runs of one side, by program.
type Side<'a> = [&'a Program];

fn compare_programs(a: &Side, b: &Side, repeated: bool, out: &mut Diff) {
    let (a0, b0) = (a[0], b[0]);
    let prog = a0.name.as_str();
    let (na, nb) = (a0.ranks, b0.ranks);
    let wall = |s: &Side| s.iter().map(|p| p.wall_ns as f64).sum::<f64>() / s.len() as f64;
    out.programs.push(ProgramPair {
        name: prog.to_string(),
        ranks: [na, nb],
        wall_ns: [wall(a), wall(b)],
        runs: [a.len(), b.len()],
    });
    for (side, s, n) in [("A", a, na), ("B", b, nb)] {
        if s.iter().any(|p| p.ranks != n) {
            out.notes.push(format!(
                "{prog}: the repeated runs of side {side} have different rank counts; times are compared per rank, counts from its first run"
            ));
        }
    }
    let how = (repeated, jitter(a, b));
    compare_timed(prog, a, b, how, &mut out.changes);
    compare_counters(prog, a, b, how, &mut out.changes);
    compare_efficiency(prog, a, b, repeated, out);
    compare_counts(prog, a0, b0, &mut out.counts);
    let same_ranks = a.iter().chain(b).all(|p| p.ranks == na);
    if !same_ranks {
        out.notes.push(format!(
            "{prog}: {na} ranks against {nb}: compared per function, region and efficiency as means per rank, counts per rank; ranks are not compared one by one"
        ));
        return;
    }
    compare_ranks(prog, a, b, how, &mut out.changes);
}

fn compare_timed<'a>(
    prog: &str,
    a: &Side<'a>,
    b: &Side<'a>,
    how: Noise,
    changes: &mut Vec<Change>,
) {
    let paths: BTreeSet<&String> = a
        .iter()
        .chain(b)
        .flat_map(|p| p.regions.paths.keys())
        .collect();
    let region = |s: &Side<'a>, path: &str| -> Vec<PerRank<'a>> {
        s.iter()
            .map(|p| {
                p.regions
                    .paths
                    .get(path)
                    .map(|x| (&x.exclusive_ns[..], p.ranks))
            })
            .collect()
    };
    for path in paths {
        let (pa, pb) = (region(a, path), region(b, path));
        changes.push(timed(prog, Kind::Region, path, &pa, &pb, how));
    }
    let funcs: BTreeSet<&String> = a.iter().chain(b).flat_map(|p| p.mpi.keys()).collect();
    let func = |s: &Side<'a>, f: &str| -> Vec<PerRank<'a>> {
        s.iter()
            .map(|p| p.mpi.get(f).map(|x| (&x.time_ns[..], p.ranks)))
            .collect()
    };
    for f in funcs {
        let (fa, fb) = (func(a, f), func(b, f));
        changes.push(timed(prog, Kind::Function, f, &fa, &fb, how));
    }
    let waits: BTreeSet<&String> = a.iter().chain(b).flat_map(|p| p.waits.keys()).collect();
    let wait = |s: &Side<'a>, w: &str| -> Vec<PerRank<'a>> {
        s.iter()
            .map(|p| p.waits.get(w).map(|x| (&x.time_ns[..], p.ranks)))
            .collect()
    };
    for w in waits {
        let (wa, wb) = (wait(a, w), wait(b, w));
        let c = timed(prog, Kind::Wait, w, &wa, &wb, how);
        // A pattern absent or zero in both runs says nothing.
        if c.a.unwrap_or(0.0) > 0.0 || c.b.unwrap_or(0.0) > 0.0 {
            changes.push(c);
        }
    }
}

/// Performance counters, as means per rank (doubling the ranks does not
/// read as doubled work) judged against their noise like times: measured,
/// not exact (page faults, switches and clocks move from run to run). Only
/// the `*-clock` counters are time, and only they cost time; a change in
/// any other counter that matters sorts after the time changes that do.
fn compare_counters(prog: &str, a: &Side, b: &Side, how: Noise, changes: &mut Vec<Change>) {
    let names: BTreeSet<&String> = a
        .iter()
        .chain(b)
        .flat_map(|p| p.counters.iter().flat_map(|c| c.keys()))
        .collect();
    for name in names {
        let values = |s: &Side| -> Vec<Option<Vec<u64>>> {
            s.iter()
                .map(|p| {
                    let has = p.counters.iter().any(|c| c.contains_key(name));
                    has.then(|| {
                        let at = |r: usize| p.counters.get(r).and_then(|c| c.get(name));
                        (0..p.ranks).map(|r| at(r).copied().unwrap_or(0)).collect()
                    })
                })
                .collect()
        };
        let (va, vb) = (values(a), values(b));
        fn per_rank(v: &[Option<Vec<u64>>]) -> Vec<PerRank<'_>> {
            v.iter()
                .map(|x| x.as_deref().map(|v| (v, v.len())))
                .collect()
        }
        let (pa, pb) = (per_rank(&va), per_rank(&vb));
        let c = if name.ends_with("-clock") {
            timed(prog, Kind::Counter, name, &pa, &pb, how)
        } else {
            // A count's noise is at least 1 % of it plus one; it costs no
            // time of its own.
            let least = |x: f64, y: f64| 0.01 * x.abs().max(y.abs()) + 1.0;
            let c = measured(prog, Kind::Counter, name, (&pa, &pb), how.0, &least);
            Change { cost_ns: 0.0, ..c }
        };
        changes.push(c);
    }
}

fn compare_efficiency(prog: &str, a: &Side, b: &Side, repeated: bool, out: &mut Diff) {
    let all = |s: &Side| -> Option<Vec<hark_model::Efficiency>> {
        s.iter().map(|p| p.efficiency).collect()
    };
    let (ea, eb) = match (all(a), all(b)) {
        (Some(ea), Some(eb)) => (ea, eb),
        (None, None) => return,
        _ => {
            out.notes.push(format!(
                "{prog}: only one side has efficiencies in every run (the other did not use MPI)"
            ));
            return;
        }
    };
    let runtime = |e: &[hark_model::Efficiency]| {
        e.iter().map(|x| x.runtime_ns as f64).sum::<f64>() / e.len() as f64
    };
    let runtime = (runtime(&ea) + runtime(&eb)) / 2.0;
    type Get = fn(&hark_model::Efficiency) -> f64;
    let names: [(&str, Get); 5] = [
        ("parallel", |e| e.parallel),
        ("load_balance", |e| e.load_balance),
        ("communication", |e| e.communication),
        ("serialisation", |e| e.serialisation),
        ("transfer", |e| e.transfer),
    ];
    for (name, get) in names {
        let va: Vec<Option<f64>> = ea.iter().map(|e| Some(get(e))).collect();
        let vb: Vec<Option<f64>> = eb.iter().map(|e| Some(get(e))).collect();
        let (x, y) = (mean_of(&va).unwrap_or(0.0), mean_of(&vb).unwrap_or(0.0));
        let noise = if repeated {
            run_to_run(&va, &vb).max(EFFICIENCY_NOISE)
        } else {
            EFFICIENCY_NOISE
        };
        let delta = y - x;
        let matters = if repeated {
            delta.abs() > 2.0 * noise
        } else {
            delta.abs() > EFFICIENCY_NOISE
        };
        out.changes.push(Change {
            program: prog.to_string(),
            kind: Kind::Efficiency,
            name: name.to_string(),
            a: Some(x),
            b: Some(y),
            noise,
            // A lower efficiency costs its share of the runtime.
            cost_ns: -delta * runtime,
            matters: delta.is_finite() && matters,
        });
    }
}

/// Calls, bytes, messages: exact, from the first run of either side.
fn compare_counts(prog: &str, a: &Program, b: &Program, counts: &mut Vec<CountChange>) {
    let ranks = [a.ranks, b.ranks];
    let mut push = |name: String, x: u64, y: u64| {
        let c = CountChange {
            program: prog.to_string(),
            name,
            a: x,
            b: y,
            ranks,
        };
        let (px, py) = c.per_rank_values();
        // Per rank a count may be fractional: equal within rounding is equal.
        if (px - py).abs() > 1e-9 * px.abs().max(py.abs()) {
            counts.push(c);
        }
    };
    let funcs: BTreeSet<&String> = a.mpi.keys().chain(b.mpi.keys()).collect();
    for f in funcs {
        let calls = |p: &Program| {
            p.mpi
                .get(f)
                .map_or(0, |x| crate::facts::total(x.calls.iter().copied()))
        };
        let bytes = |p: &Program| {
            p.mpi
                .get(f)
                .map_or(0, |x| crate::facts::total(x.bytes.iter().copied()))
        };
        push(format!("{f} calls"), calls(a), calls(b));
        push(format!("{f} bytes"), bytes(a), bytes(b));
    }
    // Messages and one-sided operations, totals over every pair of ranks.
    type Matrix = fn(&hark_model::P2p) -> &Vec<Vec<u64>>;
    let traffic: [(&str, Matrix); 4] = [
        ("point-to-point messages", |p| &p.messages),
        ("point-to-point bytes", |p| &p.bytes),
        ("one-sided operations", |p| &p.one_sided.messages),
        ("one-sided bytes", |p| &p.one_sided.bytes),
    ];
    for (name, matrix) in traffic {
        let total = |p: &Program| crate::facts::total(matrix(&p.p2p).iter().flatten().copied());
        push(name.to_string(), total(a), total(b));
    }
}

/// Which rank changed differently from the others: its change in time
/// outside MPI against the mean change. The noise is the run-to-run range of
/// that rank with repeated runs, else the ranks' spread.
fn compare_ranks(prog: &str, a: &Side, b: &Side, how: Noise, changes: &mut Vec<Change>) {
    let (repeated, jitter) = how;
    let outside = |p: &Program| -> Vec<u64> {
        (0..p.ranks)
            .map(|r| {
                let wall = p.rank_wall_ns.get(r).copied().unwrap_or(0);
                wall.saturating_sub(p.mpi_time_ns.get(r).copied().unwrap_or(0))
            })
            .collect()
    };
    let n = a[0].ranks;
    let (oa, ob): (Vec<Vec<u64>>, Vec<Vec<u64>>) = (
        a.iter().map(|p| outside(p)).collect(),
        b.iter().map(|p| outside(p)).collect(),
    );
    let at = |side: &[Vec<u64>], r: usize| -> Vec<Option<f64>> {
        side.iter().map(|v| Some(v[r] as f64)).collect()
    };
    let side_mean = |side: &[Vec<u64>]| -> f64 {
        side.iter().map(|v| mean(v, n)).sum::<f64>() / side.len() as f64
    };
    let mean_delta = side_mean(&ob) - side_mean(&oa);
    let ranks_spread = stddev(&oa[0], n).max(stddev(&ob[0], n));
    for r in 0..n {
        let (ra, rb) = (at(&oa, r), at(&ob, r));
        let (x, y) = (mean_of(&ra).unwrap_or(0.0), mean_of(&rb).unwrap_or(0.0));
        let own = y - x - mean_delta;
        let spread = if repeated {
            run_to_run(&ra, &rb)
        } else {
            ranks_spread
        };
        let noise = spread.max(floor(x, y, jitter));
        changes.push(Change {
            program: prog.to_string(),
            kind: Kind::Rank,
            name: format!("rank {r} outside MPI"),
            a: Some(x),
            b: Some(y),
            noise,
            cost_ns: own,
            matters: own.abs() > 2.0 * noise,
        });
    }
}

/// Compares run `a` (before) with run `b` (after); the noise is the spread
/// across ranks.
pub fn compare(a: &Run, b: &Run) -> Diff {
    compare_repeated(std::slice::from_ref(a), std::slice::from_ref(b))
}

/// Compares repeated runs of the same job before (`a`) and after (`b`):
/// values are means over each side's runs and, when either side has more
/// than one run, a change matters only beyond the run-to-run spread. Each
/// side needs at least one run (an empty side compares nothing).
pub fn compare_repeated(a: &[Run], b: &[Run]) -> Diff {
    let mut out = Diff {
        repeated: a.len() > 1 || b.len() > 1,
        ..Diff::default()
    };
    let (Some(a0), Some(b0)) = (a.first(), b.first()) else {
        out.notes
            .push("nothing to compare: a side has no run".into());
        return out;
    };
    fn side<'r>(runs: &'r [Run], name: &str) -> Option<Vec<&'r Program>> {
        runs.iter()
            .map(|r| r.programs.iter().find(|p| p.name == name))
            .collect()
    }
    for pa in &a0.programs {
        if !b0.programs.iter().any(|pb| pb.name == pa.name) {
            out.notes.push(format!("{}: only in run A", pa.name));
            continue;
        }
        match (side(a, &pa.name), side(b, &pa.name)) {
            (Some(sa), Some(sb)) => compare_programs(&sa, &sb, out.repeated, &mut out),
            _ => out.notes.push(format!(
                "{}: missing from some of the repeated runs; not compared",
                pa.name
            )),
        }
    }
    for pb in &b0.programs {
        if !a0.programs.iter().any(|pa| pa.name == pb.name) {
            out.notes.push(format!("{}: only in run B", pb.name));
        }
    }
    out.changes.sort_by(|x, y| {
        y.matters
            .cmp(&x.matters)
            .then(y.cost_ns.abs().total_cmp(&x.cost_ns.abs()))
    });
    let rel = |c: &CountChange| {
        let (x, y) = c.per_rank_values();
        (y - x).abs() / x.max(y).max(1.0)
    };
    out.counts.sort_by(|x, y| rel(y).total_cmp(&rel(x)));
    out
}

/// Whether `c` is a count, not a time or a fraction.
fn counted(c: &Change) -> bool {
    c.kind == Kind::Counter && !c.name.ends_with("-clock")
}

fn value(c: &Change, v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if c.kind == Kind::Efficiency => units::fraction(v),
        Some(v) if counted(c) => units::count(v.round() as u64),
        Some(v) => units::duration(v),
    }
}

fn delta(c: &Change) -> String {
    let d = c.b.unwrap_or(0.0) - c.a.unwrap_or(0.0);
    let sign = if d >= 0.0 { "+" } else { "-" };
    if c.kind == Kind::Efficiency {
        format!("{sign}{:.1} pt", 100.0 * d.abs())
    } else if counted(c) {
        format!("{sign}{}", units::count(d.abs().round() as u64))
    } else {
        format!("{sign}{}", units::duration(d.abs()))
    }
}

fn noise(c: &Change) -> String {
    if c.kind == Kind::Efficiency {
        format!("{:.1} pt", 100.0 * c.noise)
    } else if counted(c) {
        units::count(c.noise.round() as u64)
    } else {
        units::duration(c.noise)
    }
}

/// One change as a line of the text.
fn line(c: &Change) -> String {
    format!(
        "  {:<10} {:<32} {:>11} -> {:<11} {:>12}  (noise {})",
        c.kind.label(),
        c.name,
        value(c, c.a),
        value(c, c.b),
        delta(c),
        noise(c)
    )
}

/// At most this many changes within the noise are listed.
const QUIET_SHOWN: usize = 10;

/// Where the noise comes from, one sentence.
fn noise_basis(d: &Diff) -> &'static str {
    if d.repeated {
        "noise: the run-to-run spread, max - min over the repeated runs of either side (wider for 2 or 3 runs a side)"
    } else {
        "noise judged from the spread across ranks (give repeated runs for run-to-run noise)"
    }
}

/// A program's header line, then its speed-up and scaling lines.
fn header(s: &mut String, p: &ProgramPair) {
    let runs = if p.runs == [1, 1] {
        String::new()
    } else {
        format!(" (means over {} and {} runs)", p.runs[0], p.runs[1])
    };
    let _ = writeln!(
        s,
        "== {}: ranks {} -> {}, wall time {} -> {}{runs}",
        p.name,
        p.ranks[0],
        p.ranks[1],
        units::duration(p.wall_ns[0]),
        units::duration(p.wall_ns[1])
    );
    if let Some(x) = p.speedup() {
        let _ = writeln!(s, "   speed-up {x:.2}x (wall time before / after)");
    }
    if p.ranks[0] != p.ranks[1] {
        if let Some(e) = p.scaling_efficiency() {
            let _ = writeln!(
                s,
                "   parallel efficiency {} from {} to {} ranks (speed-up x {} / {}); counts compared per rank",
                units::fraction(e),
                p.ranks[0],
                p.ranks[1],
                p.ranks[0],
                p.ranks[1]
            );
        }
    }
}

/// A count's values: per rank (totals in brackets) when the ranks differ.
fn count_values(c: &CountChange) -> String {
    let (a, b) = (units::count(c.a), units::count(c.b));
    if !c.per_rank() {
        return format!("{a:>15} -> {b:<15}");
    }
    let (x, y) = c.per_rank_values();
    format!("{x:>15.1} -> {y:<15.1} per rank ({a} -> {b})")
}

/// The comparison as text for a terminal; `a` and `b` name the runs.
pub fn text(d: &Diff, a: &str, b: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {a}\nB: {b}\n");
    for p in &d.programs {
        header(&mut s, p);
    }
    let matters: Vec<&Change> = d.changes.iter().filter(|c| c.matters).collect();
    let _ = writeln!(
        s,
        "\nChanges that matter, costliest first (per rank; {}):",
        noise_basis(d)
    );
    if matters.is_empty() {
        let _ = writeln!(s, "  none: every difference is within the runs' own noise");
    }
    for c in &matters {
        let _ = writeln!(s, "{}  [{}]", line(c), c.program);
    }
    let quiet: Vec<&Change> = d.changes.iter().filter(|c| !c.matters).collect();
    if !quiet.is_empty() {
        let _ = writeln!(s, "\nWithin the noise ({}; the largest):", quiet.len());
        for c in quiet.iter().take(QUIET_SHOWN) {
            let _ = writeln!(s, "{}", line(c));
        }
    }
    if !d.counts.is_empty() {
        let per_rank = d.counts.iter().any(CountChange::per_rank);
        let _ = writeln!(
            s,
            "\nCounts that changed ({}):",
            if per_rank {
                "per rank where the rank counts differ, totals over ranks in brackets"
            } else {
                "totals over ranks"
            }
        );
        for c in &d.counts {
            let _ = writeln!(s, "  {:<43} {}  [{}]", c.name, count_values(c), c.program);
        }
    }
    for n in &d.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    s
}

/// The comparison as a self-contained HTML page.
pub fn html(d: &Diff, a: &str, b: &str) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>hark diff</title>\n<style>\
         body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}\
         table{border-collapse:collapse;margin:1em 0}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}\
         td.l,th.l{text-align:left}tr.worse td{background:#fde2e1}tr.better td{background:#e0f4e4}\
         tr.quiet td{color:#777}</style></head><body>\n",
    );
    let _ = writeln!(
        s,
        "<h1>hark diff</h1><p>A: <code>{}</code><br>B: <code>{}</code></p>",
        esc(a),
        esc(b)
    );
    s.push_str("<table><tr><th class=l>program</th><th>ranks A</th><th>ranks B</th><th>wall A</th><th>wall B</th><th>speed-up</th><th>parallel efficiency</th><th>runs</th></tr>\n");
    for p in &d.programs {
        let speedup = p.speedup().map_or("-".into(), |x| format!("{x:.2}x"));
        let scaling = match p.scaling_efficiency() {
            Some(e) if p.ranks[0] != p.ranks[1] => units::fraction(e),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{speedup}</td><td>{scaling}</td><td>{} / {}</td></tr>",
            esc(&p.name),
            p.ranks[0],
            p.ranks[1],
            units::duration(p.wall_ns[0]),
            units::duration(p.wall_ns[1]),
            p.runs[0],
            p.runs[1]
        );
    }
    let _ = writeln!(
        s,
        "</table>\n<p>Speed-up: wall time before / after; parallel efficiency: speed-up × ranks before / ranks after.</p>\n<h2>Changes, those that matter first</h2>\n<p>Per rank; a change matters when it is more than twice the noise (for a time at least 1 % + 10 µs + 0.1 % of the wall time; 2 points for efficiencies); {}.</p>",
        esc(noise_basis(d))
    );
    s.push_str("<table><tr><th class=l>what</th><th class=l>name</th><th>A</th><th>B</th><th>change</th><th>noise</th><th class=l>program</th></tr>\n");
    for c in &d.changes {
        let class = if !c.matters {
            "quiet"
        } else if c.cost_ns > 0.0 || (counted(c) && c.b > c.a) {
            // More of a counted event per rank (faults, switches,
            // instructions) is more work for the same job.
            "worse"
        } else {
            "better"
        };
        let _ = writeln!(
            s,
            "<tr class={class}><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
            c.kind.label(),
            esc(&c.name),
            value(c, c.a),
            value(c, c.b),
            delta(c),
            noise(c),
            esc(&c.program)
        );
    }
    s.push_str("</table>\n");
    if !d.counts.is_empty() {
        s.push_str("<h2>Counts that changed</h2><p>Per rank where the rank counts differ, else totals over ranks.</p><table><tr><th class=l>count</th><th>A</th><th>B</th><th>totals</th><th class=l>program</th></tr>\n");
        for c in &d.counts {
            let (x, y, totals) = if c.per_rank() {
                let (x, y) = c.per_rank_values();
                let t = format!("{} -> {}", units::count(c.a), units::count(c.b));
                (format!("{x:.1} per rank"), format!("{y:.1} per rank"), t)
            } else {
                (units::count(c.a), units::count(c.b), "-".into())
            };
            let _ = writeln!(
                s,
                "<tr><td class=l>{}</td><td>{x}</td><td>{y}</td><td>{totals}</td><td class=l>{}</td></tr>",
                esc(&c.name),
                esc(&c.program)
            );
        }
        s.push_str("</table>\n");
    }
    for n in &d.notes {
        let _ = writeln!(s, "<p>Note: {}</p>", esc(n));
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::Program;

    fn run(put_bytes: u64) -> Run {
        let mut p = Program {
            name: "nwchem".into(),
            ranks: 2,
            ..Program::default()
        };
        p.p2p.one_sided.messages = vec![vec![0, 3], vec![0, 0]];
        p.p2p.one_sided.bytes = vec![vec![0, put_bytes], vec![0, 0]];
        Run {
            programs: vec![p],
            ..Run::default()
        }
    }

    #[test]
    fn one_sided_traffic_that_changed_is_listed() {
        let d = compare(&run(3 * 1024), &run(3 * 4096));
        let names: Vec<&str> = d.counts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["one-sided bytes"], "{:?}", d.counts);
        assert_eq!((d.counts[0].a, d.counts[0].b), (3072, 12288));
        assert!(text(&d, "a", "b").contains("one-sided bytes"));
        // The same traffic lists nothing.
        assert!(compare(&run(100), &run(100)).counts.is_empty());
    }

    /// One program on `ranks` ranks, each making `calls` MPI_Send calls of
    /// 8 bytes and spending `work` ns per rank in region `solve`.
    fn job(ranks: usize, calls: u64, work: u64, wall: u64) -> Run {
        let mut p = Program {
            name: "app".into(),
            ranks,
            wall_ns: wall,
            rank_wall_ns: vec![wall; ranks],
            mpi_time_ns: vec![0; ranks],
            ..Program::default()
        };
        let f = p.mpi.entry("MPI_Send".into()).or_default();
        f.calls = vec![calls; ranks];
        f.bytes = vec![8 * calls; ranks];
        f.time_ns = vec![1000 * calls; ranks];
        let r = p.regions.paths.entry("solve".into()).or_default();
        r.exclusive_ns = vec![work; ranks];
        Run {
            programs: vec![p],
            ..Run::default()
        }
    }

    #[test]
    fn across_rank_counts_counts_are_per_rank_and_the_speedup_is_given() {
        let d = compare(
            &job(2, 100, 4_000_000, 8_000_000),
            &job(4, 100, 2_000_000, 5_000_000),
        );
        assert!(d.counts.is_empty(), "{:?}", d.counts);
        let t = text(&d, "a", "b");
        assert!(t.contains("speed-up 1.60x"), "{t}");
        // 1.6 × 2 / 4.
        assert!(t.contains("parallel efficiency 80.0 %"), "{t}");
        assert!(t.contains("spread across ranks (give repeated runs"), "{t}");
        // Twice the calls per rank is a change, shown per rank with totals.
        let d = compare(&job(2, 100, 1, 1), &job(4, 200, 1, 1));
        let t = text(&d, "a", "b");
        let line = t.lines().find(|l| l.contains("MPI_Send calls")).unwrap();
        assert!(line.contains("100.0") && line.contains("200.0"), "{line}");
        assert!(line.contains("(200 -> 800)"), "{line}");
    }

    /// [`job`] on `ranks` ranks whose every rank counted `faults` page
    /// faults and `clock` ns of task clock.
    fn counted_job(ranks: usize, faults: u64, clock: u64) -> Run {
        let mut r = job(ranks, 1, 1, 1);
        let counts: hark_model::Counts = [
            ("page-faults".to_string(), faults),
            ("task-clock".to_string(), clock),
        ]
        .into();
        r.programs[0].counters = vec![counts; ranks];
        r
    }

    #[test]
    fn counters_compare_per_rank_and_against_their_noise() {
        // Twice the ranks, the same faults per rank: no change, though the
        // total doubled.
        let d = compare(
            &counted_job(2, 1000, 5_000_000),
            &counted_job(4, 1000, 5_000_000),
        );
        let counters: Vec<&Change> = d
            .changes
            .iter()
            .filter(|c| c.kind == Kind::Counter)
            .collect();
        assert_eq!(counters.len(), 2, "{counters:?}");
        assert!(counters.iter().all(|c| !c.matters), "{counters:?}");
        // Faults per rank up by half: it matters and reads as a count; the
        // task clock up 1 ms per rank is time, and costs it.
        let d = compare(
            &counted_job(2, 1000, 5_000_000),
            &counted_job(2, 1500, 6_000_000),
        );
        let faults = d.changes.iter().find(|c| c.name == "page-faults").unwrap();
        assert!(faults.matters && faults.cost_ns == 0.0, "{faults:?}");
        let clock = d.changes.iter().find(|c| c.name == "task-clock").unwrap();
        assert!(clock.matters && clock.cost_ns == 1_000_000.0, "{clock:?}");
        let t = text(&d, "a", "b");
        let line = t.lines().find(|l| l.contains("page-faults")).unwrap();
        assert!(
            line.contains("1,000") && line.contains("1,500") && line.contains("+500"),
            "{line}"
        );
        let line = t.lines().find(|l| l.contains("task-clock")).unwrap();
        assert!(line.contains("ms"), "{line}");
        // Repeated runs: a change within the run-to-run spread of the
        // faults does not matter.
        let a = [counted_job(2, 1000, 1), counted_job(2, 1400, 1)];
        let b = [counted_job(2, 1100, 1), counted_job(2, 1500, 1)];
        let d = compare_repeated(&a, &b);
        let faults = d.changes.iter().find(|c| c.name == "page-faults").unwrap();
        assert!(!faults.matters, "{faults:?}");
    }

    #[test]
    fn two_runs_a_side_cannot_tell_what_three_can() {
        let ms = |v: &[f64]| -> Vec<Run> {
            (v.iter())
                .map(|&x| job(2, 1, (x * 1e6) as u64, 100_000_000))
                .collect()
        };
        let solve = |d: &Diff| {
            d.changes
                .iter()
                .find(|c| c.name == "solve")
                .cloned()
                .unwrap()
        };
        // 0.9 ms more against a 0.2 ms range: two runs a side may agree by
        // chance (noise 8.8 / 2 times the range) ...
        let d = compare_repeated(&ms(&[4.0, 4.2]), &ms(&[4.9, 5.1]));
        let c = solve(&d);
        assert!(
            !c.matters && (c.noise - 0.2e6 * 4.4).abs() < 0.01e6,
            "{c:?}"
        );
        // ... three runs a side tell it (noise 1.11 times the range) ...
        let d = compare_repeated(&ms(&[4.0, 4.1, 4.2]), &ms(&[4.9, 5.0, 5.1]));
        let c = solve(&d);
        assert!(
            c.matters && (c.noise - 0.2e6 * 1.11).abs() < 0.01e6,
            "{c:?}"
        );
        // ... and four or more keep the range itself.
        let four = [4.0, 4.1, 4.1, 4.2];
        let d = compare_repeated(&ms(&four), &ms(&four.map(|x| x + 0.9)));
        assert!((solve(&d).noise - 0.2e6).abs() < 1e3, "{:?}", solve(&d));
        // One run against two: the lone run has no range of its own.
        let d = compare_repeated(&ms(&[4.0]), &ms(&[4.9, 5.1]));
        assert!(!solve(&d).matters, "{:?}", solve(&d));
    }

    #[test]
    fn with_repeated_runs_only_changes_beyond_their_spread_matter() {
        // Region time 4 ms and 6 ms before, 5 ms and 7 ms after: a 1 ms
        // change against a 2 ms run-to-run spread.
        let a = [job(2, 1, 4_000_000, 1), job(2, 1, 6_000_000, 1)];
        let b = [job(2, 1, 5_000_000, 1), job(2, 1, 7_000_000, 1)];
        let d = compare_repeated(&a, &b);
        assert!(d.repeated);
        assert!(!d.changes.iter().any(|c| c.matters), "{:?}", d.changes);
        // Against one run a side, the ranks agree: the same 1 ms matters.
        let d = compare(&a[0], &b[0]);
        assert!(d.changes.iter().any(|c| c.matters && c.name == "solve"));
        // 20 ms more is beyond the spread.
        let b = [job(2, 1, 25_000_000, 1), job(2, 1, 27_000_000, 1)];
        let d = compare_repeated(&a, &b);
        assert_eq!(d.changes[0].name, "solve");
        assert!(d.changes[0].matters);
        assert!(text(&d, "a", "b").contains("run-to-run spread"));
    }
}
