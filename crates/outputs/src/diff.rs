//! `hark diff RUN_A RUN_B`: what changed between two runs, the differences
//! that matter first.
//!
//! Programs are paired by name. For each pair, every timed quantity is
//! compared as a **mean per rank** (so runs with different rank counts
//! compare too): the program's wall time, each region's exclusive time,
//! each MPI function's time, each wait-state pattern's time, and the POP
//! efficiencies (as the time their change costs: the change × the runtime).
//!
//! **Noise** is what the runs themselves show: the spread (standard
//! deviation) of the quantity across the ranks of either run, and never less
//! than 1 % of its size plus 10 µs (timer and scheduling jitter); for an
//! efficiency, two percentage points. A change larger than twice its noise
//! *matters*; changes that matter come first, costliest first, then those
//! within the noise. Per-rank changes (which rank moved) are compared only
//! when both runs have the same number of ranks. Counts (calls, messages,
//! bytes) are exact, so any change in them is listed, largest relative
//! change first.

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
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Region => "region",
            Kind::Function => "function",
            Kind::Wait => "wait state",
            Kind::Efficiency => "efficiency",
            Kind::Rank => "rank",
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
    /// Value in run A and run B: ns per rank, or a fraction for efficiencies.
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

/// A count that changed (calls, messages, bytes), totals over ranks.
#[derive(Clone, Debug)]
pub struct CountChange {
    /// Program it belongs to.
    pub program: String,
    /// What is counted: `MPI_Send calls`, `point-to-point messages`.
    pub name: String,
    /// Total in run A.
    pub a: u64,
    /// Total in run B.
    pub b: u64,
}

/// Two runs compared.
#[derive(Clone, Debug, Default)]
pub struct Diff {
    /// Per program pair: name, ranks and wall time (ns) in A and B.
    pub programs: Vec<(String, [usize; 2], [u64; 2])>,
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

/// Floor of the noise of a time: 1 % of its size plus 10 µs.
fn floor(a: f64, b: f64) -> f64 {
    0.01 * a.abs().max(b.abs()) + 10_000.0
}

/// Efficiency changes below this (two percentage points) are noise.
const EFFICIENCY_NOISE: f64 = 0.02;

/// A timed change from per-rank values in A and B (`None`: absent).
fn timed(
    program: &str,
    kind: Kind,
    name: &str,
    a: Option<(&[u64], usize)>,
    b: Option<(&[u64], usize)>,
) -> Change {
    let va = a.map(|(v, n)| mean(v, n));
    let vb = b.map(|(v, n)| mean(v, n));
    let sa = a.map_or(0.0, |(v, n)| stddev(v, n));
    let sb = b.map_or(0.0, |(v, n)| stddev(v, n));
    let (x, y) = (va.unwrap_or(0.0), vb.unwrap_or(0.0));
    let noise = sa.max(sb).max(floor(x, y));
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

fn compare_programs(a: &Program, b: &Program, out: &mut Diff) {
    let prog = a.name.as_str();
    let (na, nb) = (a.ranks, b.ranks);
    out.programs
        .push((prog.to_string(), [na, nb], [a.wall_ns, b.wall_ns]));
    let changes = &mut out.changes;

    let paths: BTreeSet<&String> = a
        .regions
        .paths
        .keys()
        .chain(b.regions.paths.keys())
        .collect();
    for path in paths {
        let pa = a.regions.paths.get(path).map(|p| (&p.exclusive_ns[..], na));
        let pb = b.regions.paths.get(path).map(|p| (&p.exclusive_ns[..], nb));
        changes.push(timed(prog, Kind::Region, path, pa, pb));
    }
    let funcs: BTreeSet<&String> = a.mpi.keys().chain(b.mpi.keys()).collect();
    for f in funcs {
        let fa = a.mpi.get(f).map(|p| (&p.time_ns[..], na));
        let fb = b.mpi.get(f).map(|p| (&p.time_ns[..], nb));
        changes.push(timed(prog, Kind::Function, f, fa, fb));
        let calls = |p: &Program| p.mpi.get(f).map_or(0, |x| x.calls.iter().sum::<u64>());
        let bytes = |p: &Program| p.mpi.get(f).map_or(0, |x| x.bytes.iter().sum::<u64>());
        push_count(
            &mut out.counts,
            prog,
            &format!("{f} calls"),
            calls(a),
            calls(b),
        );
        push_count(
            &mut out.counts,
            prog,
            &format!("{f} bytes"),
            bytes(a),
            bytes(b),
        );
    }
    let waits: BTreeSet<&String> = a.waits.keys().chain(b.waits.keys()).collect();
    for w in waits {
        let wa = a.waits.get(w).map(|p| (&p.time_ns[..], na));
        let wb = b.waits.get(w).map(|p| (&p.time_ns[..], nb));
        let c = timed(prog, Kind::Wait, w, wa, wb);
        // A pattern absent or zero in both runs says nothing.
        if c.a.unwrap_or(0.0) > 0.0 || c.b.unwrap_or(0.0) > 0.0 {
            changes.push(c);
        }
    }
    match (&a.efficiency, &b.efficiency) {
        (Some(ea), Some(eb)) => {
            let runtime = (ea.runtime_ns as f64 + eb.runtime_ns as f64) / 2.0;
            for (name, x, y) in [
                ("parallel", ea.parallel, eb.parallel),
                ("load_balance", ea.load_balance, eb.load_balance),
                ("communication", ea.communication, eb.communication),
                ("serialisation", ea.serialisation, eb.serialisation),
                ("transfer", ea.transfer, eb.transfer),
            ] {
                let delta = y - x;
                changes.push(Change {
                    program: prog.to_string(),
                    kind: Kind::Efficiency,
                    name: name.to_string(),
                    a: Some(x),
                    b: Some(y),
                    noise: EFFICIENCY_NOISE,
                    // A lower efficiency costs its share of the runtime.
                    cost_ns: -delta * runtime,
                    matters: delta.is_finite() && delta.abs() > EFFICIENCY_NOISE,
                });
            }
        }
        (None, None) => {}
        _ => out.notes.push(format!(
            "{prog}: only one run has efficiencies (the other did not use MPI)"
        )),
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
        let total = |p: &Program| -> u64 { matrix(&p.p2p).iter().flatten().sum() };
        push_count(&mut out.counts, prog, name, total(a), total(b));
    }

    if na != nb {
        out.notes.push(format!(
            "{prog}: {na} ranks against {nb}: compared per function, region and efficiency as means per rank; ranks are not compared one by one"
        ));
        return;
    }
    // Which rank changed differently from the others: its change in time
    // outside MPI against the mean change, the noise being the ranks' spread.
    let outside = |p: &Program| -> Vec<u64> {
        (0..p.ranks)
            .map(|r| {
                let wall = p.rank_wall_ns.get(r).copied().unwrap_or(0);
                wall.saturating_sub(p.mpi_time_ns.get(r).copied().unwrap_or(0))
            })
            .collect()
    };
    let (oa, ob) = (outside(a), outside(b));
    let mean_delta = mean(&ob, nb) - mean(&oa, na);
    let noise = stddev(&oa, na).max(stddev(&ob, nb));
    for r in 0..na {
        let (x, y) = (oa[r] as f64, ob[r] as f64);
        let own = y - x - mean_delta;
        let noise = noise.max(floor(x, y));
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

fn push_count(out: &mut Vec<CountChange>, program: &str, name: &str, a: u64, b: u64) {
    if a != b {
        out.push(CountChange {
            program: program.to_string(),
            name: name.to_string(),
            a,
            b,
        });
    }
}

/// Compares run `a` (before) with run `b` (after).
pub fn compare(a: &Run, b: &Run) -> Diff {
    let mut out = Diff::default();
    for pa in &a.programs {
        match b.programs.iter().find(|pb| pb.name == pa.name) {
            Some(pb) => compare_programs(pa, pb, &mut out),
            None => out.notes.push(format!("{}: only in run A", pa.name)),
        }
    }
    for pb in &b.programs {
        if !a.programs.iter().any(|pa| pa.name == pb.name) {
            out.notes.push(format!("{}: only in run B", pb.name));
        }
    }
    out.changes.sort_by(|x, y| {
        y.matters
            .cmp(&x.matters)
            .then(y.cost_ns.abs().total_cmp(&x.cost_ns.abs()))
    });
    let rel = |c: &CountChange| (c.b as f64 - c.a as f64).abs() / (c.a.max(c.b).max(1) as f64);
    out.counts.sort_by(|x, y| rel(y).total_cmp(&rel(x)));
    out
}

fn value(kind: Kind, v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if kind == Kind::Efficiency => units::fraction(v),
        Some(v) => units::duration(v),
    }
}

fn delta(c: &Change) -> String {
    let d = c.b.unwrap_or(0.0) - c.a.unwrap_or(0.0);
    let sign = if d >= 0.0 { "+" } else { "-" };
    if c.kind == Kind::Efficiency {
        format!("{sign}{:.1} pt", 100.0 * d.abs())
    } else {
        format!("{sign}{}", units::duration(d.abs()))
    }
}

fn noise(c: &Change) -> String {
    if c.kind == Kind::Efficiency {
        format!("{:.1} pt", 100.0 * c.noise)
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
        value(c.kind, c.a),
        value(c.kind, c.b),
        delta(c),
        noise(c)
    )
}

/// At most this many changes within the noise are listed.
const QUIET_SHOWN: usize = 10;

/// The comparison as text for a terminal; `a` and `b` name the runs.
pub fn text(d: &Diff, a: &str, b: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {a}\nB: {b}\n");
    for (name, ranks, wall) in &d.programs {
        let _ = writeln!(
            s,
            "== {name}: ranks {} -> {}, wall time {} -> {}",
            ranks[0],
            ranks[1],
            units::duration(wall[0] as f64),
            units::duration(wall[1] as f64)
        );
    }
    let matters: Vec<&Change> = d.changes.iter().filter(|c| c.matters).collect();
    let _ = writeln!(
        s,
        "\nChanges that matter, costliest first (per rank; noise: spread across ranks):"
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
        let _ = writeln!(s, "\nCounts that changed (totals over ranks):");
        for c in &d.counts {
            let _ = writeln!(
                s,
                "  {:<43} {:>15} -> {:<15} [{}]",
                c.name,
                units::count(c.a),
                units::count(c.b),
                c.program
            );
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
    s.push_str("<table><tr><th class=l>program</th><th>ranks A</th><th>ranks B</th><th>wall A</th><th>wall B</th></tr>\n");
    for (name, ranks, wall) in &d.programs {
        let _ = writeln!(
            s,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            ranks[0],
            ranks[1],
            units::duration(wall[0] as f64),
            units::duration(wall[1] as f64)
        );
    }
    s.push_str("</table>\n<h2>Changes, those that matter first</h2>\n<p>Per rank; a change matters when it is more than twice the noise (the spread across ranks, at least 1 % + 10 µs; 2 points for efficiencies).</p>\n");
    s.push_str("<table><tr><th class=l>what</th><th class=l>name</th><th>A</th><th>B</th><th>change</th><th>noise</th><th class=l>program</th></tr>\n");
    for c in &d.changes {
        let class = if !c.matters {
            "quiet"
        } else if c.cost_ns > 0.0 {
            "worse"
        } else {
            "better"
        };
        let _ = writeln!(
            s,
            "<tr class={class}><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
            c.kind.label(),
            esc(&c.name),
            value(c.kind, c.a),
            value(c.kind, c.b),
            delta(c),
            noise(c),
            esc(&c.program)
        );
    }
    s.push_str("</table>\n");
    if !d.counts.is_empty() {
        s.push_str("<h2>Counts that changed</h2><table><tr><th class=l>count</th><th>A</th><th>B</th><th class=l>program</th></tr>\n");
        for c in &d.counts {
            let _ = writeln!(
                s,
                "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
                esc(&c.name),
                units::count(c.a),
                units::count(c.b),
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
}
