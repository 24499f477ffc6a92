//! `summary.txt`: the few lines a person reads first, also printed by
//! `hark run` when the program ends.
//!
//! Per program: ranks, wall time, share of time in MPI; the POP
//! efficiencies and the job digest's findings (MPI programs); the functions
//! that took the most time with their spread across ranks, the call sites
//! that took the most time with their waits, the heaviest communication
//! pairs, I/O totals; then the run's accounting line. Plain
//! text, fixed-width columns, no colour (it goes to files and pipes too).

use crate::facts::{self, FunctionRow};
use crate::units::{bytes, count, duration, fraction, percent, wrap};
use crate::{Error, Output};
use hark_model::{Efficiency, Program, Run};
use std::fmt::Write as _;
use std::path::Path;

/// How many functions and pairs the summary lists per program.
const TOP_FUNCTIONS: usize = 10;
const TOP_PAIRS: usize = 5;
const TOP_FILES: usize = 5;
const TOP_DIAGNOSTICS: usize = 3;
const TOP_REGIONS: usize = 5;
const TOP_SITES: usize = 5;
/// Width a finding's sentence is wrapped to, indent included.
const DETAIL_WIDTH: usize = 100;

/// The summary of `run` as text, ending in a newline.
pub fn render(run: &Run) -> String {
    let mut s = String::new();
    let helpers = crate::roles::helper_programs(run);
    let _ = writeln!(s, "{}", first_line(run, &helpers));
    if run.programs.is_empty() {
        let _ = writeln!(
            s,
            "No program was measured: no process loaded the probe, or none lived long enough to connect."
        );
    }
    for (_, p) in run
        .programs
        .iter()
        .enumerate()
        .filter(|(i, _)| !helpers.contains(i))
    {
        s.push('\n');
        program(&mut s, p);
    }
    other_processes(&mut s, run, &helpers);
    // One program's own "Events:" line already says it all; the run's
    // totals are added for several programs, none, or events of no program.
    let total = facts::accounting_line(&run.accounting);
    let said = match run.programs.as_slice() {
        [only] => facts::accounting_line(&only.accounting()) == total,
        _ => false,
    };
    if !said {
        s.push('\n');
        let _ = writeln!(s, "{total}");
    }
    let partial = facts::partial_ranks(run);
    if !partial.is_empty() {
        let _ = writeln!(
            s,
            "Partial ranks (stream ended without its end record): {}",
            partial.join("; ")
        );
    }
    s
}

/// The summary's first line: what was measured; when a job's launcher gave
/// its world size and some of its ranks never connected, which ("1 of 2
/// ranks measured: rank 1 never reached hark"); and when the job failed,
/// how.
fn first_line(run: &Run, helpers: &[usize]) -> String {
    let mut line = format!(
        "Hark{}{}: {}",
        if run.hark_version.is_empty() { "" } else { " " },
        run.hark_version,
        facts::measured_phrase(run, helpers),
    );
    if let Some(missing) = facts::missing_line(run) {
        line.push_str("; ");
        line.push_str(&missing);
    }
    if let Some(f) = crate::ending::job_failure(run) {
        line.push_str(" — ");
        line.push_str(&f);
    }
    line
}

/// The helper programs (`crate::roles`) on one line: their names, how many
/// processes each, how long the longest lived, their I/O.
fn other_processes(s: &mut String, run: &Run, helpers: &[usize]) {
    if helpers.is_empty() {
        return;
    }
    let programs: Vec<&Program> = helpers.iter().map(|&i| &run.programs[i]).collect();
    let n: u64 = programs.iter().map(|p| p.processes()).sum();
    let names: Vec<String> = programs
        .iter()
        .map(|p| format!("{} ({})", p.name, p.processes()))
        .collect();
    let longest = programs
        .iter()
        .flat_map(|p| p.rank_wall_ns.iter().copied())
        .max()
        .unwrap_or(0);
    let (mut read, mut written) = (0u64, 0u64);
    for p in &programs {
        let io = facts::io_totals(p);
        read = read.saturating_add(io.read_bytes);
        written = written.saturating_add(io.write_bytes);
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "== Other processes — {n} short-lived {} without MPI that started or helped the program (shims, shells, `env`, ...), the longest {}",
        plural(n as usize, "process", "processes"),
        duration(longest as f64)
    );
    s.push_str(&wrap(&names.join(", "), DETAIL_WIDTH - 3, "   "));
    let _ = writeln!(
        s,
        "   I/O: read {}, written {}; each program has its chapter in report.html",
        bytes(read),
        bytes(written)
    );
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn program(s: &mut String, p: &Program) {
    let (mpi, wall) = facts::mpi_and_wall(p);
    let mpi_share = if p.mpi.is_empty() {
        "no MPI".to_string()
    } else {
        format!("MPI {} of rank time", percent(mpi as f64, wall as f64))
    };
    let _ = writeln!(
        s,
        "== {} — {}, wall time {}, {mpi_share}",
        p.name,
        facts::ranks_phrase(p),
        duration(p.wall_ns as f64),
    );
    if !p.command.is_empty() {
        let _ = writeln!(s, "   command: {}", p.command.join(" "));
    }
    let per_rank = facts::mpi_percent_per_rank(p);
    if per_rank.len() > 1 && !p.mpi.is_empty() {
        let spread = hark_model::Spread::of(&per_rank);
        let _ = writeln!(
            s,
            "   MPI share per rank: min {:.1} % ({}), mean {:.1} %, max {:.1} % ({})",
            spread.min,
            facts::rank_label(p, spread.min_rank),
            spread.mean,
            spread.max,
            facts::rank_label(p, spread.max_rank)
        );
    }

    cpu_line(s, p);
    node_lines(s, p);
    openmp_line(s, p);
    counters(s, p);
    paused(s, p);
    verdict(s, p, wall);

    let rows = facts::functions_by_time(p);
    if !rows.is_empty() {
        s.push('\n');
        functions(s, p, &rows, mpi);
    }
    callsites(s, p);

    pairs(
        s,
        p,
        facts::heaviest_pairs(p, TOP_PAIRS),
        "Heaviest pairs",
        "messages",
    );
    pairs(
        s,
        p,
        facts::heaviest_one_sided(p, TOP_PAIRS),
        "Heaviest one-sided pairs",
        "operations",
    );

    let io = facts::io_totals(p);
    s.push('\n');
    if io.files == 0 {
        let _ = writeln!(s, "   I/O: none recorded");
    } else {
        let _ = writeln!(
            s,
            "   I/O: {} {}, {} calls, read {}, written {}, {} in I/O calls",
            io.files,
            plural(io.files, "file", "files"),
            count(io.calls),
            bytes(io.read_bytes),
            bytes(io.write_bytes),
            duration(io.time_ns as f64),
        );
        let mut files: Vec<_> =
            p.io.files
                .iter()
                .map(|f| {
                    let r = facts::total(f.read_bytes.iter().copied());
                    let w = facts::total(f.write_bytes.iter().copied());
                    (r.saturating_add(w), r, w, f.path.as_str())
                })
                .collect();
        files.sort_by(|a, b| b.0.cmp(&a.0).then(a.3.cmp(b.3)));
        let mut t = Table::new(&["File", "read", "written"]);
        for (_, r, w, path) in files.iter().take(TOP_FILES) {
            t.row(vec![path.to_string(), bytes(*r), bytes(*w)]);
        }
        t.write(s);
        if files.len() > TOP_FILES {
            let _ = writeln!(s, "   ... and {} more files", files.len() - TOP_FILES);
        }
    }
    if !p.children.is_empty() {
        let mut parents: Vec<i32> = p.children.iter().map(|c| c.world_rank).collect();
        parents.sort_unstable();
        parents.dedup();
        let n = p.children.len();
        // Outside MPI (no world rank) there is no rank to name.
        let by = if parents.iter().all(|&r| r < 0) {
            "the program's processes".to_string()
        } else {
            format!(
                "{} {}",
                plural(parents.len(), "rank", "ranks"),
                parents
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let _ = writeln!(
            s,
            "   Child processes: {n} of {by} (not ranks), {} I/O calls, read {}, written {}",
            count(facts::total(
                p.children
                    .iter()
                    .flat_map(|c| c.io.values())
                    .map(|t| t.calls)
            )),
            bytes(facts::total(p.children.iter().map(|c| c.read_bytes))),
            bytes(facts::total(p.children.iter().map(|c| c.write_bytes))),
        );
    }
    for d in p.diagnostics.iter().take(TOP_DIAGNOSTICS) {
        let _ = writeln!(s, "   Note: {d}");
    }
    if p.diagnostics.len() > TOP_DIAGNOSTICS {
        let _ = writeln!(
            s,
            "   ... and {} more notes in report.html",
            p.diagnostics.len() - TOP_DIAGNOSTICS
        );
    }
    let _ = writeln!(s, "   Events: {}", facts::accounting_line(&p.accounting()));
    if let Some(clock) = facts::clock_line(p) {
        let _ = writeln!(s, "   Clocks: {clock}");
    }
}

/// The line saying that recording was paused, if any rank was: how long,
/// and that the numbers cover the measured time only.
fn paused(s: &mut String, p: &Program) {
    let n = p.paused_ns.iter().filter(|&&ns| ns > 0).count();
    if n == 0 {
        return;
    }
    let spread =
        hark_model::Spread::of(&p.paused_ns.iter().map(|&ns| ns as f64).collect::<Vec<_>>());
    let _ = writeln!(
        s,
        "   Paused: recording was paused on {n} of {} {}, {} on average, at most {} ({}); \
         times and efficiencies cover the measured time only",
        p.paused_ns.len(),
        crate::roles::unit(p, p.paused_ns.len() as u64),
        duration(spread.mean),
        duration(spread.max),
        facts::rank_label(p, spread.max_rank),
    );
}

/// A table of the heaviest pairs (`what` counts messages or operations),
/// if there are any.
fn pairs(s: &mut String, p: &Program, pairs: Vec<facts::Pair>, title: &str, what: &str) {
    if pairs.is_empty() {
        return;
    }
    s.push('\n');
    let mut t = Table::new(&[title, what, "bytes"]);
    for pair in &pairs {
        t.row(vec![
            format!(
                "{} -> {}",
                facts::rank_at(p, pair.from),
                facts::rank_at(p, pair.to)
            ),
            count(pair.messages),
            bytes(pair.bytes),
        ]);
    }
    t.write(s);
}

/// One line per host on whether the ranks had their CPUs (nothing when no
/// probe read them).
/// The performance counters: total over the ranks, and the least and
/// most of one rank; then the counters that could not be had, and why.
fn counters(s: &mut String, p: &Program) {
    let rows = facts::counter_rows(p);
    if !rows.is_empty() {
        s.push('\n');
        // Processes without MPI are not ranks.
        let (min, max) = if p.mpi.is_empty() {
            ("process min", "process max")
        } else {
            ("rank min", "rank max")
        };
        let mut t = Table::new(&["Counter", "total", min, max, "multiplexed"]);
        for c in &rows {
            let mux = c.multiplexed.map_or(String::new(), |m| {
                format!("counted {:.0} % of the time, scaled", 100.0 * m)
            });
            t.row(vec![
                c.name.to_string(),
                c.shown(c.total),
                c.shown(c.min),
                c.shown(c.max),
                mux,
            ]);
        }
        t.write(s);
    }
    if let Some(line) = p.counter_info.refused_line() {
        let _ = writeln!(s, "   {line}");
    }
}

fn cpu_line(s: &mut String, p: &Program) {
    for h in &p.cpu.hosts {
        let _ =
            writeln!(
            s,
            "   CPU on {}: {} {} had {:.1} CPUs{} and waited {:.1} % of {} runnable time for one{}",
            h.host,
            h.processes,
            plural(h.processes, "process", "processes"),
            h.cpus_used,
            if h.processes == 1 { "" } else { " between them" },
            100.0 * h.wait_share,
            if h.processes == 1 { "its" } else { "their" },
            if p.cpu.wait_measured { "" } else { " (estimated)" }
        );
    }
}

/// One line per node whose sensors were read: its CPU by kind, memory,
/// traffic and load over the run (means, with the highest reading).
fn node_lines(s: &mut String, p: &Program) {
    for n in &p.nodes {
        let _ = writeln!(
            s,
            "   Node {} ({} {}): {}",
            n.host,
            n.readings,
            plural(n.readings as usize, "reading", "readings"),
            facts::node_figures(n).join(", ")
        );
    }
}

/// One line on OpenMP (nothing without it): threads and where their time
/// was lost (the efficiencies are in the tree below, [`efficiency_tree`]).
fn openmp_line(s: &mut String, p: &Program) {
    if p.openmp.efficiency.is_none() {
        return;
    }
    let threads: usize = p.threads.iter().map(Vec::len).sum();
    let sum = |f: fn(&hark_model::ThreadTimes) -> u64| -> f64 {
        facts::total(p.threads.iter().flatten().map(f)) as f64
    };
    let _ = writeln!(
        s,
        "   OpenMP: {threads} {}; threads waited {} at barriers, {} for locks, {} in fork and join, and idled {} out of parallel regions",
        plural(threads, "thread", "threads"),
        duration(sum(|t| t.omp_barrier_ns)),
        duration(sum(|t| t.omp_lock_ns)),
        duration(sum(|t| t.omp_management_ns)),
        duration(sum(|t| t.omp_idle_ns)),
    );
}

/// With OpenMP, the whole program's efficiency tree of the hybrid model
/// (`facts::efficiency_tree`), one factor a line, indented under what it
/// is a factor of.
fn efficiency_tree(s: &mut String, p: &Program) {
    if p.openmp.efficiency.is_none() {
        return;
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "   Efficiencies, hybrid model (parallel = load balance × communication; OpenMP parallel = load balance × scheduling × serialisation):"
    );
    for (name, depth, v) in facts::efficiency_tree(p) {
        let label = format!("{}{name}", "  ".repeat(depth));
        let _ = writeln!(s, "     {label:<32} {:>7}", fraction(v));
    }
}

/// The efficiencies (of the whole program, then of its longest top-level
/// regions) and the digest's findings, costliest first. Nothing for a
/// program without either (one that made no MPI calls).
fn verdict(s: &mut String, p: &Program, rank_time: u64) {
    if let Some(e) = &p.efficiency {
        s.push('\n');
        let mut header = vec!["Efficiency"];
        header.extend(facts::efficiencies(e).map(|(name, _, _)| name));
        let mut t = Table::new(&header);
        t.row(efficiency_row("whole program".into(), e));
        let regions = facts::regions_by_runtime(p);
        for (name, e) in regions.iter().take(TOP_REGIONS) {
            t.row(efficiency_row(format!("region {name}"), e));
        }
        t.write(s);
        if regions.len() > TOP_REGIONS {
            let _ = writeln!(
                s,
                "   ... and {} more regions in report.html",
                regions.len() - TOP_REGIONS
            );
        }
    }
    efficiency_tree(s, p);
    if p.digest.is_empty() {
        if p.efficiency.is_some() {
            let _ = writeln!(s, "   Findings: none");
        }
        return;
    }
    s.push('\n');
    let _ = writeln!(s, "   Findings, costliest first:");
    let whose = crate::roles::unit(p, 1);
    for f in facts::findings(p) {
        let _ = writeln!(
            s,
            "   {:<6}  {} — {}, {} of {whose} time",
            f.severity,
            f.title,
            duration(f.time_ns as f64),
            percent(f.time_ns as f64, rank_time as f64)
        );
        s.push_str(&wrap(&f.detail, DETAIL_WIDTH - 11, "           "));
    }
}

fn efficiency_row(label: String, e: &Efficiency) -> Vec<String> {
    let mut row = vec![label];
    row.extend(facts::efficiencies(e).map(|(_, _, v)| fraction(v)));
    row
}

fn functions(s: &mut String, p: &Program, rows: &[FunctionRow<'_>], mpi_total: u64) {
    let mut t = Table::new(&[
        "MPI function",
        "calls",
        "bytes",
        "time",
        "% MPI",
        "min/rank",
        "mean/rank",
        "max/rank",
    ]);
    for r in rows.iter().take(TOP_FUNCTIONS) {
        t.row(vec![
            r.name.to_string(),
            count(r.calls),
            bytes(r.bytes),
            duration(r.time_ns as f64),
            percent(r.time_ns as f64, mpi_total as f64),
            format!(
                "{} ({})",
                duration(r.spread.min),
                facts::rank_short(p, r.spread.min_rank)
            ),
            duration(r.spread.mean),
            format!(
                "{} ({})",
                duration(r.spread.max),
                facts::rank_short(p, r.spread.max_rank)
            ),
        ]);
    }
    t.write(s);
    if rows.len() > TOP_FUNCTIONS {
        let _ = writeln!(
            s,
            "   ... and {} more functions (see report.html)",
            rows.len() - TOP_FUNCTIONS
        );
    }
}

/// The call sites that took the most time: place, function, calls, bytes,
/// time, and the wait states found in their calls (report.html has all).
fn callsites(s: &mut String, p: &Program) {
    if p.callsites.is_empty() {
        return;
    }
    let mut sites: Vec<_> = p.callsites.iter().collect();
    sites.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.place().cmp(&b.place())));
    s.push('\n');
    let mut t = Table::new(&["Call site", "function", "calls", "bytes", "time", "waiting"]);
    for c in sites.iter().take(TOP_SITES) {
        let waited = facts::total(c.waits.values().map(|w| w.time_ns));
        t.row(vec![
            c.place(),
            c.function.clone(),
            count(c.calls),
            bytes(c.bytes),
            duration(c.time_ns as f64),
            duration(waited as f64),
        ]);
    }
    t.write(s);
    if sites.len() > TOP_SITES {
        let _ = writeln!(
            s,
            "   ... and {} more call sites (see report.html)",
            sites.len() - TOP_SITES
        );
    }
}

/// A text table: first column left-aligned, the others right-aligned,
/// indented by three spaces.
struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&str]) -> Table {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn write(&self, s: &mut String) {
        let cols = self.rows[0].len();
        let width = |c: usize| {
            self.rows
                .iter()
                .map(|r| r.get(c).map_or(0, |x| x.chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        for row in &self.rows {
            let mut line = String::from("   ");
            for (c, cell) in row.iter().enumerate() {
                let w = widths[c];
                if c == 0 {
                    let _ = write!(line, "{cell:<w$}");
                } else {
                    let _ = write!(line, "  {cell:>w$}");
                }
            }
            let _ = writeln!(s, "{}", line.trim_end());
        }
    }
}

/// Writes `summary.txt`.
pub(crate) struct Summary;

impl Output for Summary {
    fn name(&self) -> &'static str {
        "summary"
    }

    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error> {
        crate::write_file(&dir.join("summary.txt"), render(run).as_bytes())
    }
}
