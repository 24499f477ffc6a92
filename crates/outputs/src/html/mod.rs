//! `report.html`: one self-contained page, a chapter per program.
//!
//! Each chapter opens with the program's POP efficiencies and the job
//! digest, then holds an overview (ranks, wall time, MPI share, events), why
//! it is slow (efficiency bars, the wait-state tree, who made whom wait,
//! efficiencies over time: `why.rs`), OpenMP (per-thread time bars and the
//! parallel regions: `openmp.rs`), the MPI profile as a table sortable by any column, the point-to-point
//! and one-sided matrices as heatmaps, the topology as a graph (laid out by Graphviz's
//! `dot` when it is installed, drawn on a circle by Hark otherwise), a
//! density map of per-rank metrics, collectives, metrics over time, I/O,
//! regions and counters, and the per-rank accounting.
//!
//! The page works offline: styles, the small sorting script and every
//! picture are inline; nothing is fetched. Every piece of text that comes
//! from the measured program (names, paths, command lines, hosts) passes
//! through [`esc`]. When its script has run to the end the page marks
//! `<body data-ready="1">`, which the browser test checks.

mod openmp;
mod svg;
mod why;

use crate::facts::{self, cell};
use crate::units::{bytes, count, duration, percent};
use crate::{dot, Error, Output};
use hark_model::{DensityMap, Program, Run, Spread, Totals};
use std::fmt::Write as _;
use std::path::Path;

/// The file name inside a run directory.
pub const FILE_NAME: &str = "report.html";

/// How the report is drawn.
#[derive(Clone, Debug)]
pub struct Options {
    /// Lay out topology graphs with Graphviz's `dot` when it is on `PATH`
    /// (else Hark draws them itself).
    pub graphviz: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { graphviz: true }
    }
}

/// Escapes text for HTML element content and attribute values alike.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than whitespace are not allowed in
            // HTML text; show where they were.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// The report for `run`, as one HTML document.
pub fn render(run: &Run, options: &Options) -> String {
    let mut h = String::with_capacity(64 << 10);
    let names: Vec<&str> = run.programs.iter().map(|p| p.name.as_str()).collect();
    let _ = writeln!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"Hark {}\">\n<title>Hark report: {}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>",
        esc(&run.hark_version),
        esc(&names.join(", "))
    );
    header(&mut h, run);
    h.push_str("<main>\n");
    for (k, p) in run.programs.iter().enumerate() {
        chapter(&mut h, k, p, options);
    }
    h.push_str("</main>\n");
    let _ = writeln!(
        h,
        "<footer>Made by Hark {} · {}</footer>\n<script>{SCRIPT}</script>\n</body>\n</html>",
        esc(&run.hark_version),
        esc(&facts::accounting_line(&run.accounting))
    );
    h
}

/// `text` with its first letter in upper case.
fn capitalised(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

fn header(h: &mut String, run: &Run) {
    let lost = facts::lost(&run.accounting);
    let helpers = crate::roles::helper_programs(run);
    let _ = writeln!(
        h,
        "<header>\n<h1>Hark report</h1>\n<p class=\"meta\">{} · {}</p>",
        esc(&facts::measured_phrase(run, &helpers)),
        esc(&facts::accounting_line(&run.accounting)),
    );
    if let Some(failure) = crate::ending::job_failure(run) {
        let _ = writeln!(
            h,
            "<p class=\"warn failed\"><strong>{}</strong>: the numbers below cover what ran until then.</p>",
            esc(&capitalised(&failure))
        );
    }
    if lost > 0 {
        let _ = writeln!(
            h,
            "<p class=\"warn\">Some events were lost: the numbers below miss them. {}</p>",
            esc(&facts::lost_detail(&run.accounting).join("; "))
        );
    }
    if let Some(missing) = facts::missing_line(run) {
        let _ = writeln!(h, "<p class=\"warn\">{}.</p>", esc(&missing));
    }
    let partial = facts::partial_ranks(run);
    if !partial.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"warn\">Ranks whose stream ended without its end record (killed or crashed): {}</p>",
            esc(&partial.join("; "))
        );
    }
    h.push_str("<table class=\"programs\"><thead><tr><th>Program</th><th>Ranks</th><th>Wall time</th><th>MPI share</th><th>Events</th></tr></thead><tbody>\n");
    for (k, p) in run.programs.iter().enumerate() {
        let (mpi, wall) = facts::mpi_and_wall(p);
        let acc = p.accounting();
        let _ = writeln!(
            h,
            "<tr><td><a href=\"#p{k}\">{}. {}</a></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            k + 1,
            esc(&p.name),
            p.ranks,
            duration(p.wall_ns as f64),
            percent(mpi as f64, wall as f64),
            count(acc.events_written),
        );
    }
    h.push_str("</tbody></table>\n</header>\n");
}

/// The sections of a chapter, in order: anchor suffix and heading.
const SECTIONS: [(&str, &str); 13] = [
    ("overview", "Overview"),
    ("why", "Why"),
    ("openmp", "OpenMP"),
    ("mpi", "MPI profile"),
    ("p2p", "Point-to-point and one-sided"),
    ("topology", "Topology"),
    ("density", "Density maps"),
    ("collectives", "Collectives"),
    ("time", "Over time"),
    ("io", "I/O"),
    ("regions", "Regions and counters"),
    ("ranks", "Ranks and accounting"),
    ("diagnostics", "Diagnostics"),
];

fn chapter(h: &mut String, k: usize, p: &Program, options: &Options) {
    let _ = write!(
        h,
        "<section class=\"chapter\" id=\"p{k}\">\n<h2>{}. {}</h2>\n",
        k + 1,
        esc(&p.name)
    );
    why::verdict(h, k, p);
    h.push_str("<nav class=\"toc\">");
    for (id, title) in SECTIONS {
        let _ = write!(h, "<a href=\"#p{k}-{id}\">{title}</a>");
    }
    h.push_str("</nav>\n");
    for (id, title) in SECTIONS {
        let _ = writeln!(h, "<h3 id=\"p{k}-{id}\">{title}</h3>");
        match id {
            "overview" => overview(h, p),
            "why" => why::why(h, p),
            "openmp" => openmp::openmp(h, p),
            "mpi" => mpi_profile(h, k, p),
            "p2p" => p2p(h, p),
            "topology" => topology(h, p, options),
            "density" => density(h, p),
            "collectives" => collectives(h, p),
            "time" => over_time(h, p),
            "io" => io(h, p),
            "regions" => regions(h, p),
            "ranks" => ranks(h, p),
            _ => diagnostics(h, p),
        }
    }
    h.push_str("</section>\n");
}

fn card(h: &mut String, label: &str, value: &str) {
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"label\">{}</div><div class=\"value\">{}</div></div>",
        esc(label),
        esc(value)
    );
}

fn overview(h: &mut String, p: &Program) {
    let (mpi, wall) = facts::mpi_and_wall(p);
    let acc = p.accounting();
    let mut hosts: Vec<&str> = p.rank_info.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let io = facts::io_totals(p);
    h.push_str("<div class=\"cards\">");
    if p.rank_info.iter().any(|r| r.folded > 0) {
        card(h, "Processes", &count(p.processes()));
    } else {
        card(h, "Ranks", &p.ranks.to_string());
    }
    card(h, "Wall time", &duration(p.wall_ns as f64));
    card(h, "Time in MPI", &percent(mpi as f64, wall as f64));
    card(h, "Hosts", &hosts.len().to_string());
    card(
        h,
        "I/O",
        &bytes(io.read_bytes.saturating_add(io.write_bytes)),
    );
    card(h, "Events", &count(acc.events_written));
    card(
        h,
        "Lost",
        &match facts::unknown_loss(&acc) {
            Some(_) => "unknown".to_string(),
            None => count(facts::lost(&acc)),
        },
    );
    h.push_str("</div>\n");
    if !p.command.is_empty() {
        let _ = writeln!(
            h,
            "<p>Command: <code>{}</code></p>",
            esc(&p.command.join(" "))
        );
    }
    if !hosts.is_empty() {
        let _ = writeln!(h, "<p>Hosts: {}</p>", esc(&hosts.join(", ")));
    }
    for c in &p.cpu.hosts {
        let _ = writeln!(
            h,
            "<p>CPU on {}: {} {} had {:.1} CPUs between them and waited {:.1} % of their runnable time for one{}.</p>",
            esc(&c.host),
            c.processes,
            if c.processes == 1 { "process" } else { "processes" },
            c.cpus_used,
            100.0 * c.wait_share,
            if p.cpu.wait_measured { "" } else { " (estimated from context switches)" }
        );
    }
    nodes(h, p);
    counters(h, p);
    if p.ranks > 0 && p.ranks <= 64 && p.rank_wall_ns.len() == p.ranks {
        h.push_str("<figure>");
        h.push_str(&svg::rank_bars(&p.rank_wall_ns, &p.mpi_time_ns, &duration));
        h.push_str("<figcaption>Each rank's wall time, the part inside MPI coloured.</figcaption></figure>\n");
    }
}

/// Per node whose sensors were read: a line of its figures over the run
/// and its CPU busy and memory used share per time slice, from the
/// `node.*` series of its ranks summed.
fn nodes(h: &mut String, p: &Program) {
    let ts = &p.timeslices;
    for n in &p.nodes {
        let _ = writeln!(
            h,
            "<p>Node {} ({} readings): {}.</p>",
            esc(&n.host),
            n.readings,
            esc(&facts::node_figures(n).join(", "))
        );
        // The node's series: its ranks' rows summed.
        let of_node = |name: &str| -> Vec<u64> {
            let mut sum: Vec<u64> = Vec::new();
            let Some(rows) = ts.metrics.get(name) else {
                return sum;
            };
            for (r, row) in rows.iter().enumerate() {
                if p.rank_info.get(r).is_some_and(|i| i.host == n.host) {
                    if sum.len() < row.len() {
                        sum.resize(row.len(), 0);
                    }
                    for (a, b) in sum.iter_mut().zip(row) {
                        *a = a.saturating_add(*b);
                    }
                }
            }
            sum
        };
        let kinds: Vec<Vec<u64>> = ["user", "system", "idle", "iowait", "steal"]
            .iter()
            .map(|k| of_node(&format!("node.cpu.{k}_ticks")))
            .collect();
        let (readings, used) = (of_node("node.readings"), of_node("node.memory.used_bytes"));
        let slices = kinds
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(readings.len());
        if slices == 0 || ts.slice_ns == 0 {
            continue;
        }
        let at = |v: &Vec<u64>, k: usize| v.get(k).copied().unwrap_or(0) as f64;
        let busy = (0..slices)
            .map(|k| {
                let all: f64 = kinds.iter().map(|v| at(v, k)).sum();
                (all > 0.0).then(|| 1.0 - (at(&kinds[2], k) + at(&kinds[3], k)) / all)
            })
            .collect();
        let total = n.memory.as_ref().map_or(0, |m| m.total_bytes) as f64;
        let memory = (0..slices)
            .map(|k| {
                (at(&readings, k) > 0.0 && total > 0.0)
                    .then(|| at(&used, k) / at(&readings, k) / total)
            })
            .collect();
        let lines = [
            svg::Line {
                name: "CPU busy",
                class: "e-par",
                values: busy,
            },
            svg::Line {
                name: "memory used",
                class: "e-lb",
                values: memory,
            },
        ];
        let axis = svg::TimeAxis {
            slice_ns: ts.slice_ns,
            end_ns: facts::slices_end(slices, slices, ts.slice_ns, p.wall_ns),
        };
        let _ = writeln!(
            h,
            "<figure>{}<figcaption>Node {}: the share of its CPUs' time that was busy and of its memory that was used, per slice of {}.</figcaption></figure>",
            svg::line_panels(
                &format!("node {}", n.host),
                &lines,
                &axis,
                &duration(axis.end_ns as f64)
            ),
            esc(&n.host),
            duration(ts.slice_ns as f64)
        );
    }
}

/// The performance counters: total, least and most of one rank; then
/// the counters that could not be had, and why.
fn counters(h: &mut String, p: &Program) {
    let rows = facts::counter_rows(p);
    if !rows.is_empty() {
        h.push_str("<table class=\"sortable\"><thead><tr><th>Counter</th><th>Total</th><th>Rank min</th><th>Rank max</th><th>Multiplexed</th></tr></thead><tbody>\n");
        for c in &rows {
            let _ = write!(h, "<tr><td>{}</td>", esc(c.name));
            num(h, c.total as f64, &c.shown(c.total));
            num(h, c.min as f64, &c.shown(c.min));
            num(h, c.max as f64, &c.shown(c.max));
            let mux = c.multiplexed.map_or(String::new(), |m| {
                format!("counted {:.0} % of the time, scaled", 100.0 * m)
            });
            let _ = writeln!(h, "<td>{}</td></tr>", esc(&mux));
        }
        h.push_str("</tbody></table>\n");
    }
    if let Some(line) = p.counter_info.refused_line() {
        let _ = writeln!(h, "<p>{}</p>", esc(&line));
    }
}

/// A numeric table cell sorted by `v`.
fn num(h: &mut String, v: f64, text: &str) {
    let _ = write!(h, "<td class=\"n\" data-v=\"{v}\">{}</td>", esc(text));
}

fn mpi_profile(h: &mut String, k: usize, p: &Program) {
    let rows = facts::functions_by_time(p);
    if rows.is_empty() {
        h.push_str("<p class=\"none\">No MPI calls were recorded.</p>\n");
        return;
    }
    let (mpi_total, _) = facts::mpi_and_wall(p);
    // Counts inside the functions (`--counters-in-mpi`): a column per
    // counter any function has, summed over ranks.
    let mut counters: Vec<&str> = p
        .mpi
        .values()
        .flat_map(|f| f.counters.keys().map(String::as_str))
        .collect();
    counters.sort_unstable();
    counters.dedup();
    h.push_str(
        "<p class=\"hint\">Click a column heading to sort. Times per rank are each rank's total in the function; imbalance is (max − mean) / max.",
    );
    if !counters.is_empty() {
        h.push_str(" The counter columns are the performance counts inside the function's calls, summed over ranks (<code>--counters-in-mpi</code>).");
    }
    h.push_str(
        "</p>\n<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>Function</th><th>Calls</th><th>Bytes</th><th>Time</th><th>% of MPI</th><th>Mean per call</th><th>Min per rank</th><th>Mean per rank</th><th>Max per rank</th><th>Imbalance</th>",
    );
    for c in &counters {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr></thead><tbody>\n");
    for r in &rows {
        let _ = write!(h, "<tr><td>{}</td>", esc(r.name));
        num(h, r.calls as f64, &count(r.calls));
        num(h, r.bytes as f64, &bytes(r.bytes));
        num(h, r.time_ns as f64, &duration(r.time_ns as f64));
        let share = if mpi_total > 0 {
            r.time_ns as f64 / mpi_total as f64
        } else {
            0.0
        };
        num(h, share, &percent(r.time_ns as f64, mpi_total as f64));
        num(h, r.mean_call_ns, &duration(r.mean_call_ns));
        spread_cells(h, p, &r.spread, &duration, true);
        let imbalance = imbalance(&r.spread);
        num(h, imbalance, &format!("{:.1} %", 100.0 * imbalance));
        for c in &counters {
            let v: u64 = p
                .mpi
                .get(r.name)
                .and_then(|f| f.counters.get(*c))
                .map_or(0, |per_rank| facts::total(per_rank.iter().copied()));
            num(h, v as f64, &facts::counter_shown(c, v));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    callsites(h, k, p);
}

/// Call sites: where in the program the MPI calls were made, costliest
/// first, with the waiting in them and the waiting they caused.
/// The anchor of call site `i` of chapter `k`, which the digest's
/// findings link to.
pub(super) fn site_anchor(k: usize, i: usize) -> String {
    format!("p{k}-site-{i}")
}

fn callsites(h: &mut String, k: usize, p: &Program) {
    if p.callsites.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h4 id=\"p{k}-callsites\">Call sites</h4>\n<p class=\"hint\">Where the program called each MPI and I/O function (file and line from its debug information; the function and offset without it). Waiting: wait states in these calls; caused: what other ranks waited for these calls.</p>\n\
         <div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>Place</th><th>Function</th><th>In</th><th>Calls</th><th>Bytes</th><th>Time</th><th>Waiting</th><th>Caused</th></tr></thead><tbody>\n",
    );
    for (i, c) in p.callsites.iter().enumerate() {
        let waited = facts::total(c.waits.values().map(|w| w.time_ns));
        let caused = facts::total(c.caused.values().map(|w| w.time_ns));
        let _ = write!(
            h,
            "<tr id=\"{}\"><td title=\"{}\">{}</td><td>{}</td><td>{}</td>",
            site_anchor(k, i),
            esc(&c.object),
            esc(&c.place()),
            esc(&c.function),
            esc(c.symbol.as_deref().unwrap_or(""))
        );
        num(h, c.calls as f64, &count(c.calls));
        num(h, c.bytes as f64, &bytes(c.bytes));
        num(h, c.time_ns as f64, &duration(c.time_ns as f64));
        num(h, waited as f64, &duration(waited as f64));
        num(h, caused as f64, &duration(caused as f64));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

/// Cells for the smallest value (with its rank), optionally the mean, and
/// the largest value (with its rank).
fn spread_cells(
    h: &mut String,
    p: &Program,
    s: &Spread,
    fmt: &dyn Fn(f64) -> String,
    with_mean: bool,
) {
    let rank = |i| facts::rank_label(p, i);
    num(h, s.min, &format!("{} ({})", fmt(s.min), rank(s.min_rank)));
    if with_mean {
        num(h, s.mean, &fmt(s.mean));
    }
    num(h, s.max, &format!("{} ({})", fmt(s.max), rank(s.max_rank)));
}

fn imbalance(s: &Spread) -> f64 {
    if s.max > 0.0 {
        (s.max - s.mean) / s.max
    } else {
        0.0
    }
}

/// A matrix to draw: its title, the matrix, how to print a value.
type Heat<'a> = (&'a str, &'a Vec<Vec<u64>>, &'a dyn Fn(u64) -> String);

/// The axes of a traffic matrix.
const TRAFFIC: svg::Axes<'static> = svg::Axes {
    rows: "from rank",
    columns: "to rank",
};

/// How to print a value of a metric.
type Format = Box<dyn Fn(f64) -> String>;

fn p2p(h: &mut String, p: &Program) {
    let total = facts::total(p.p2p.messages.iter().flatten().copied());
    let one_sided = facts::total(p.p2p.one_sided.messages.iter().flatten().copied());
    if total == 0 && one_sided == 0 {
        h.push_str(
            "<p class=\"none\">No point-to-point messages or one-sided operations between ranks.</p>\n",
        );
        return;
    }
    if total == 0 {
        h.push_str("<p class=\"none\">No point-to-point messages between ranks.</p>\n");
    } else {
        messages(h, p);
    }
    if one_sided > 0 {
        one_sided_traffic(h, p);
    }
}

/// The axes of a one-sided traffic matrix.
const ORIGIN_TARGET: svg::Axes<'static> = svg::Axes {
    rows: "origin rank",
    columns: "target rank",
};

/// One-sided operations and bytes, origin to target, and the heaviest
/// pairs.
fn one_sided_traffic(h: &mut String, p: &Program) {
    let o = &p.p2p.one_sided;
    h.push_str("<h4>One-sided operations</h4><div class=\"figures\">");
    let maps: [Heat<'_>; 2] = [
        ("Operations", &o.messages, &count),
        ("Bytes", &o.bytes, &bytes),
    ];
    heatmaps(h, p, &maps, &ORIGIN_TARGET, |title| {
        (
            format!("one-sided {title}"),
            format!(
                "One-sided {} from origin rank (row) to target rank (column), whichever way the data goes",
                title.to_lowercase()
            ),
        )
    });
    h.push_str("</div>\n<h4>Heaviest one-sided pairs</h4>");
    let pairs = facts::heaviest_one_sided(p, 10);
    pairs_table(h, p, &pairs, ["Origin", "Target", "Operations"]);
}

/// A figure per matrix of `maps` with any value; `label` gives a map's
/// heatmap title (after the program's name) and its caption.
fn heatmaps(
    h: &mut String,
    p: &Program,
    maps: &[Heat<'_>],
    axes: &svg::Axes<'_>,
    label: impl Fn(&str) -> (String, String),
) {
    let n = facts::ranks(p);
    for &(title, m, fmt) in maps {
        if m.iter().flatten().all(|&v| v == 0) {
            continue;
        }
        let (name, caption) = label(title);
        let _ = write!(
            h,
            "<figure>{}<figcaption>{caption}</figcaption></figure>",
            svg::heatmap(&format!("{}: {name}", p.name), m, n, axes, fmt),
        );
    }
}

/// A sortable table of `pairs`, headed by `names` and "Bytes".
fn pairs_table(h: &mut String, p: &Program, pairs: &[facts::Pair], names: [&str; 3]) {
    let [from, to, what] = names;
    let _ = write!(
        h,
        "<table class=\"sortable\"><thead><tr><th>{from}</th><th>{to}</th><th>{what}</th><th>Bytes</th></tr></thead><tbody>"
    );
    for pair in pairs {
        h.push_str("<tr>");
        let (from, to) = (facts::rank_at(p, pair.from), facts::rank_at(p, pair.to));
        num(h, from as f64, &from.to_string());
        num(h, to as f64, &to.to_string());
        num(h, pair.messages as f64, &count(pair.messages));
        num(h, pair.bytes as f64, &bytes(pair.bytes));
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table>\n");
}

/// Point-to-point messages: matrices, the heaviest pairs, and every
/// function's totals (one-sided ones included).
fn messages(h: &mut String, p: &Program) {
    h.push_str("<div class=\"figures\">");
    let maps: [Heat<'_>; 3] = [
        ("Messages", &p.p2p.messages, &count),
        ("Bytes", &p.p2p.bytes, &bytes),
        ("Time in sends", &p.p2p.time_ns, &|v| duration(v as f64)),
    ];
    heatmaps(h, p, &maps, &TRAFFIC, |title| {
        (
            title.to_string(),
            format!("{title} from rank (row) to rank (column)"),
        )
    });
    h.push_str("</div>\n");
    h.push_str("<div class=\"cols\"><div><h4>Heaviest pairs</h4>");
    let pairs = facts::heaviest_pairs(p, 10);
    pairs_table(h, p, &pairs, ["From", "To", "Messages"]);
    h.push_str("</div>\n");
    if !p.p2p.by_function.is_empty() {
        h.push_str("<div><h4>By function</h4><table class=\"sortable\"><thead><tr><th>Function</th><th>Messages or operations</th><th>Bytes</th><th>Time</th></tr></thead><tbody>");
        for (name, m) in &p.p2p.by_function {
            let msgs = facts::total(m.messages.iter().flatten().copied());
            let b = facts::total(m.bytes.iter().flatten().copied());
            let t = facts::total(m.time_ns.iter().flatten().copied());
            let _ = write!(h, "<tr><td>{}</td>", esc(name));
            num(h, msgs as f64, &count(msgs));
            num(h, b as f64, &bytes(b));
            num(h, t as f64, &duration(t as f64));
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table></div>");
    }
    h.push_str("</div>\n");
}

/// Most edges drawn by Hark's own graph; the heaviest are kept.
const MAX_DRAWN_EDGES: usize = 2000;
/// Above this many edges Graphviz is not asked (its layout time grows fast).
const MAX_GRAPHVIZ_EDGES: usize = 4000;

fn topology(h: &mut String, p: &Program, options: &Options) {
    let n = facts::ranks(p);
    let mut edges = Vec::new();
    for i in 0..n {
        for j in 0..n {
            let m = cell(&p.p2p.messages, i, j);
            let b = cell(&p.p2p.bytes, i, j);
            if m > 0 || b > 0 {
                edges.push(svg::Edge {
                    from: i,
                    to: j,
                    weight: b.max(m),
                    label: format!("{i} → {j}: {} messages, {}", count(m), bytes(b)),
                });
            }
        }
    }
    if edges.is_empty() {
        h.push_str("<p class=\"none\">No point-to-point traffic to draw.</p>\n");
        return;
    }
    let drawn = if options.graphviz && edges.len() <= MAX_GRAPHVIZ_EDGES {
        dot::to_svg(&dot::render(p))
    } else {
        None
    };
    match drawn {
        Some(svg) => {
            let _ = writeln!(
                h,
                "<figure class=\"graphviz\">{}<figcaption>Laid out by Graphviz from <code>topology/*.dot</code>. Edge width grows with bytes.</figcaption></figure>",
                svg
            );
        }
        None => {
            edges.sort_by_key(|e| std::cmp::Reverse(e.weight));
            let kept = edges.len().min(MAX_DRAWN_EDGES);
            let note = if kept < edges.len() {
                format!(" The {kept} heaviest of {} edges are shown.", edges.len())
            } else {
                String::new()
            };
            let _ = writeln!(
                h,
                "<figure>{}<figcaption>Ranks on a circle; an arrow i → j for each pair that exchanged messages, wider and brighter for more bytes.{note}</figcaption></figure>",
                svg::circle_graph(&format!("{}: topology", p.name), n, &edges[..kept])
            );
        }
    }
}

fn density(h: &mut String, p: &Program) {
    let n = facts::ranks(p);
    if n == 0 {
        h.push_str("<p class=\"none\">No ranks.</p>\n");
        return;
    }
    let per_rank = |f: &dyn Fn(usize) -> u64| (0..n).map(|r| f(r) as f64).collect::<Vec<f64>>();
    let dur = || Box::new(|v: f64| duration(v)) as Box<dyn Fn(f64) -> String>;
    let byt = || Box::new(|v: f64| bytes(v as u64)) as Box<dyn Fn(f64) -> String>;
    let cnt = || Box::new(|v: f64| count(v as u64)) as Box<dyn Fn(f64) -> String>;
    let mut cols = vec![
        svg::Column {
            name: "MPI share".into(),
            values: facts::mpi_percent_per_rank(p),
            fmt: Box::new(|v| format!("{v:.1} %")),
        },
        svg::Column {
            name: "MPI time".into(),
            values: per_rank(&|r| p.mpi_time_ns.get(r).copied().unwrap_or(0)),
            fmt: dur(),
        },
        svg::Column {
            name: "MPI calls".into(),
            values: per_rank(&|r| {
                facts::total(p.mpi.values().map(|f| f.calls.get(r).copied().unwrap_or(0)))
            }),
            fmt: cnt(),
        },
        svg::Column {
            name: "messages sent".into(),
            values: per_rank(&|r| {
                p.p2p
                    .messages
                    .get(r)
                    .map_or(0, |row| facts::total(row.iter().copied()))
            }),
            fmt: cnt(),
        },
        svg::Column {
            name: "bytes sent".into(),
            values: per_rank(&|r| {
                p.p2p
                    .bytes
                    .get(r)
                    .map_or(0, |row| facts::total(row.iter().copied()))
            }),
            fmt: byt(),
        },
        svg::Column {
            name: "bytes received".into(),
            values: per_rank(&|r| facts::total((0..n).map(|i| cell(&p.p2p.bytes, i, r)))),
            fmt: byt(),
        },
        svg::Column {
            name: "I/O bytes".into(),
            values: per_rank(&|r| {
                facts::total(p.io.files.iter().flat_map(|f| {
                    [
                        f.read_bytes.get(r).copied().unwrap_or(0),
                        f.write_bytes.get(r).copied().unwrap_or(0),
                    ]
                }))
            }),
            fmt: byt(),
        },
    ];
    for f in facts::functions_by_time(p).iter().take(5) {
        let prof = &p.mpi[f.name];
        cols.push(svg::Column {
            name: f.name.to_string(),
            values: per_rank(&|r| prof.time_ns.get(r).copied().unwrap_or(0)),
            fmt: dur(),
        });
    }
    let _ = writeln!(
        h,
        "<figure>{}<figcaption>One row per rank; each column is coloured against its own largest value (hover for numbers).</figcaption></figure>",
        svg::density(
            &format!("{}: per-rank metrics", p.name),
            n,
            &cols,
            svg::Scale::PerColumn
        )
    );
    density_maps(h, p);
}

/// Most per-metric density maps drawn; the most imbalanced come first and
/// the table below lists them all.
const MAX_DENSITY_MAPS: usize = 12;

fn density_maps(h: &mut String, p: &Program) {
    if p.density.is_empty() {
        return;
    }
    let mut maps: Vec<_> = p.density.iter().collect();
    maps.sort_by(|a, b| density_order(a.0, a.1, b.0, b.1));
    let _ = write!(
        h,
        "<h4>One map per metric</h4><p class=\"hint\">Each metric on a grid of ranks (rank r at row r / columns, column r mod columns). Times first, ordered by the time imbalance costs (max − mean), then the other metrics by max / mean.</p>\n<div class=\"figures smalls\">"
    );
    for (name, map) in maps.iter().take(MAX_DENSITY_MAPS) {
        let fmt = metric_format(name);
        let _ = write!(
            h,
            "<figure>{}<figcaption><b>{}</b><br><span class=\"nw\">max/mean {:.2}</span> · <span class=\"nw\">max {}</span> <span class=\"nw\">({})</span></figcaption></figure>",
            svg::density_grid(name, &map.values, map.columns, &|v| fmt(v as f64)),
            esc(name),
            map.imbalance,
            esc(&fmt(map.spread.max)),
            esc(&facts::rank_label(p, map.spread.max_rank))
        );
    }
    let _ = write!(
        h,
        "</div>\n<details><summary>All {} per-rank metrics</summary><div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>Metric</th><th>Min</th><th>Mean</th><th>Max</th><th>Max / mean</th></tr></thead><tbody>\n",
        maps.len()
    );
    for (name, map) in &maps {
        let fmt = metric_format(name);
        let _ = write!(h, "<tr><td>{}</td>", esc(name));
        spread_cells(h, p, &map.spread, &*fmt, true);
        num(h, map.imbalance, &format!("{:.2}", map.imbalance));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div></details>\n");
}

/// Density maps in the order they are shown: time metrics first, by the
/// time the imbalance costs (max − mean); then the others by max / mean.
fn density_order(an: &str, a: &DensityMap, bn: &str, b: &DensityMap) -> std::cmp::Ordering {
    let (at, bt) = (an.ends_with("_ns"), bn.ends_with("_ns"));
    let cost = |m: &DensityMap| m.spread.max - m.spread.mean;
    bt.cmp(&at)
        .then_with(|| {
            if at && bt {
                cost(b).total_cmp(&cost(a))
            } else {
                b.imbalance.total_cmp(&a.imbalance)
            }
        })
        .then(an.cmp(bn))
}

/// How to print a metric named like `MPI_Send.time_ns`, `write.bytes` or
/// `MPI_Send.calls`: by its unit suffix.
fn metric_format(name: &str) -> Format {
    if name.ends_with("_ns") {
        Box::new(duration)
    } else if name.ends_with("bytes") {
        Box::new(|v| bytes(v as u64))
    } else {
        Box::new(|v| count(v.round() as u64))
    }
}

fn diagnostics(h: &mut String, p: &Program) {
    if p.diagnostics.is_empty() {
        h.push_str("<p class=\"none\">The analyses noticed nothing unusual.</p>\n");
        return;
    }
    h.push_str("<ul class=\"diagnostics\">");
    for d in &p.diagnostics {
        let _ = write!(h, "<li>{}</li>", esc(d));
    }
    h.push_str("</ul>\n");
}

fn members(m: &[i32]) -> String {
    let contiguous = m.windows(2).all(|w| w[1] == w[0] + 1);
    match (m.first(), m.last()) {
        (Some(a), Some(b)) if contiguous && m.len() > 2 => format!("ranks {a}–{b}"),
        _ if m.len() > 12 => {
            let head: Vec<String> = m[..10].iter().map(i32::to_string).collect();
            format!("ranks {}, … ({} in all)", head.join(", "), m.len())
        }
        _ => {
            let all: Vec<String> = m.iter().map(i32::to_string).collect();
            format!("ranks {}", all.join(", "))
        }
    }
}

/// Communicators listed by name in a grouped row of the collectives table;
/// the rest are counted.
const GROUP_NAMES: usize = 4;

/// A row of the collectives table: one function on every communicator of
/// one size.
struct CollectiveRow<'a> {
    size: usize,
    function: &'a str,
    comms: Vec<&'a [i32]>,
    totals: Totals,
}

/// The collectives table: one row per function and communicator size,
/// communicators of one size calling one function summed together (hpcc
/// splits the world into dozens of row and column communicators that would
/// otherwise repeat one row dozens of times).
fn collectives(h: &mut String, p: &Program) {
    if p.collectives.iter().all(|c| c.functions.is_empty()) {
        h.push_str("<p class=\"none\">No collective operations were recorded.</p>\n");
        return;
    }
    // (size, function) → communicators and totals, in order of first use.
    let mut groups: Vec<CollectiveRow<'_>> = Vec::new();
    for c in &p.collectives {
        for (name, t) in &c.functions {
            let key = (c.members.len(), name.as_str());
            let k = match groups.iter().position(|g| (g.size, g.function) == key) {
                Some(k) => k,
                None => {
                    groups.push(CollectiveRow {
                        size: key.0,
                        function: key.1,
                        comms: Vec::new(),
                        totals: Totals::default(),
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[k];
            g.comms.push(&c.members);
            g.totals.calls = g.totals.calls.saturating_add(t.calls);
            g.totals.bytes = g.totals.bytes.saturating_add(t.bytes);
            g.totals.time_ns = g.totals.time_ns.saturating_add(t.time_ns);
        }
    }
    h.push_str("<table class=\"sortable\"><thead><tr><th>Communicator</th><th>Size</th><th>Function</th><th>Calls</th><th>Bytes</th><th>Time</th></tr></thead><tbody>\n");
    for g in &groups {
        let (size, name, t) = (g.size, g.function, &g.totals);
        let who = match g.comms.as_slice() {
            [one] => members(one),
            many => {
                let named: Vec<String> =
                    many.iter().take(GROUP_NAMES).map(|m| members(m)).collect();
                let more = if many.len() > GROUP_NAMES {
                    "; …"
                } else {
                    ""
                };
                format!("{} communicators ({}{more})", many.len(), named.join("; "))
            }
        };
        let _ = write!(h, "<tr><td>{}</td>", esc(&who));
        num(h, size as f64, &size.to_string());
        let _ = write!(h, "<td>{}</td>", esc(name));
        num(h, t.calls as f64, &count(t.calls));
        num(h, t.bytes as f64, &bytes(t.bytes));
        num(h, t.time_ns as f64, &duration(t.time_ns as f64));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
}

fn over_time(h: &mut String, p: &Program) {
    let ts = &p.timeslices;
    // Slices where no rank recorded anything past the last busy one are
    // capacity, not time.
    let used = ts
        .metrics
        .values()
        .flatten()
        .filter_map(|row| row.iter().rposition(|&v| v > 0))
        .max()
        .map_or(0, |k| k + 1);
    let capacity = ts
        .metrics
        .values()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    if ts.metrics.is_empty() || ts.slice_ns == 0 || used == 0 {
        h.push_str("<p class=\"none\">No time slices were recorded.</p>\n");
        return;
    }
    let axis = svg::TimeAxis {
        slice_ns: ts.slice_ns,
        end_ns: facts::slices_end(used, capacity, ts.slice_ns, p.wall_ns),
    };
    let _ = write!(
        h,
        "<p class=\"hint\">{} slices of {} each. The line is the mean over ranks, the band spans the lowest to the highest rank.</p>\n<div class=\"figures\">",
        used,
        duration(ts.slice_ns as f64)
    );
    let cut = |rows: &[Vec<u64>]| -> Vec<Vec<u64>> {
        rows.iter()
            .map(|r| r[..used.min(r.len())].to_vec())
            .collect()
    };
    // Whole-program metrics (`mpi_time_ns`, `p2p_bytes`) are shown; the
    // per-function ones (`MPI_Send.time_ns`) fold away, there can be dozens.
    let (overall, per_function): (Vec<_>, Vec<_>) =
        ts.metrics.iter().partition(|(name, _)| !name.contains('.'));
    for (name, per_rank) in overall {
        h.push_str(&time_chart(name, &cut(per_rank), &axis));
    }
    h.push_str("</div>\n");
    if !per_function.is_empty() {
        let _ = write!(
            h,
            "<details><summary>Per function and operation ({} metrics)</summary><div class=\"figures\">",
            per_function.len()
        );
        for (name, per_rank) in per_function {
            h.push_str(&time_chart(name, &cut(per_rank), &axis));
        }
        h.push_str("</div></details>\n");
    }
}

/// One metric over time as a chart in a figure, titled by what it means;
/// its model name is in the tooltip.
fn time_chart(name: &str, per_rank: &[Vec<u64>], axis: &svg::TimeAxis) -> String {
    let slice = axis.slice_ns as f64;
    let what = metric_title(name);
    let (series, fmt, title): (Vec<Vec<f64>>, Format, String) = if name.ends_with("_ns") {
        // Time in a slice reads best as the share of the slice.
        (
            per_rank
                .iter()
                .map(|r| r.iter().map(|&v| 100.0 * v as f64 / slice).collect())
                .collect(),
            Box::new(|v| format!("{v:.0} %")),
            format!("{what}, % of each slice"),
        )
    } else if name.ends_with("bytes") {
        (
            to_f64(per_rank),
            Box::new(|v| bytes(v as u64)),
            format!("{what} per slice"),
        )
    } else {
        (
            to_f64(per_rank),
            Box::new(|v| count(v.round() as u64)),
            format!("{what} per slice"),
        )
    };
    format!(
        "<figure title=\"{}\">{}</figure>",
        esc(name),
        svg::spread_chart(&title, &series, axis, &duration(axis.end_ns as f64), &*fmt)
    )
}

/// What a time-slice metric of the model (`docs/profile-json.md`) means,
/// in words: `collective_time_ns` is "Time in collectives",
/// `MPI_Send.calls` is "MPI_Send calls".
pub(crate) fn metric_title(name: &str) -> String {
    let fixed = match name {
        "mpi_time_ns" => "Time in MPI",
        "mpi_calls" => "MPI calls",
        "p2p_messages" => "Point-to-point messages",
        "p2p_bytes" => "Point-to-point bytes sent",
        "p2p_time_ns" => "Time in point-to-point",
        "collective_calls" => "Collective calls",
        "collective_bytes" => "Collective bytes sent",
        "collective_time_ns" => "Time in collectives",
        "io_ops" => "I/O operations",
        "io_bytes" => "I/O bytes",
        "io_time_ns" => "Time in I/O",
        "paused_ns" => "Time paused",
        "cpu.on_cpu_ns" => "Time on a CPU",
        "cpu.runnable_wait_ns" => "Time waiting for a CPU",
        _ => "",
    };
    if !fixed.is_empty() {
        return fixed.to_string();
    }
    let Some((subject, measure)) = name.rsplit_once('.') else {
        return name.replace('_', " ");
    };
    let (kind, subject) = match subject.split_once(':') {
        Some((kind, rest)) => (kind, rest),
        None => ("", subject),
    };
    let subject = match kind {
        "file" => format!("file {subject}"),
        "comm" => format!("communicator {subject}"),
        "region" => format!("region {subject}"),
        "counter" => format!("counter {subject}"),
        "p2p_to" => format!("to rank {subject}"),
        _ => subject.to_string(),
    };
    match measure {
        "time_ns" | "inclusive_ns" => format!("Time in {subject}"),
        "read_bytes" => format!("Bytes read from {subject}"),
        "write_bytes" => format!("Bytes written to {subject}"),
        "ops" => format!("Operations on {subject}"),
        "calls" if kind == "region" => format!("Entries into {subject}"),
        _ if kind == "p2p_to" => format!("{} sent {subject}", capitalised(measure)),
        // A function's name is shown as it is spelled.
        _ if kind.is_empty() => format!("{subject} {}", measure.replace('_', " ")),
        _ => format!("{} {}", capitalised(&subject), measure.replace('_', " ")),
    }
}

fn to_f64(m: &[Vec<u64>]) -> Vec<Vec<f64>> {
    m.iter()
        .map(|r| r.iter().map(|&v| v as f64).collect())
        .collect()
}

fn io(h: &mut String, p: &Program) {
    if p.io.files.is_empty() {
        h.push_str("<p class=\"none\">No file I/O was recorded.</p>\n");
        return;
    }
    let t = facts::io_totals(p);
    let _ = writeln!(
        h,
        "<p>{} files, {} calls, {} read, {} written, {} in I/O calls.</p>",
        t.files,
        count(t.calls),
        bytes(t.read_bytes),
        bytes(t.write_bytes),
        duration(t.time_ns as f64)
    );
    h.push_str("<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>File</th><th>Ranks</th><th>Read</th><th>Written</th><th>Calls</th><th>Time</th><th>Operations</th></tr></thead><tbody>\n");
    for f in &p.io.files {
        let ranks = (0..facts::ranks(p))
            .filter(|&r| {
                // Opening a file uses it, even if no byte moves.
                [&f.calls, &f.read_bytes, &f.write_bytes]
                    .iter()
                    .any(|per_rank| per_rank.get(r).is_some_and(|&v| v > 0))
            })
            .count();
        let read = facts::total(f.read_bytes.iter().copied());
        let written = facts::total(f.write_bytes.iter().copied());
        let calls = facts::total(f.ops.values().map(|o| o.calls));
        let time = facts::total(f.ops.values().map(|o| o.time_ns));
        let ops: Vec<String> = f
            .ops
            .iter()
            .map(|(name, o)| format!("{name} ×{}", count(o.calls)))
            .collect();
        let _ = write!(h, "<tr><td class=\"path\">{}</td>", esc(&f.path));
        num(h, ranks as f64, &ranks.to_string());
        num(h, read as f64, &bytes(read));
        num(h, written as f64, &bytes(written));
        num(h, calls as f64, &count(calls));
        num(h, time as f64, &duration(time as f64));
        let _ = writeln!(h, "<td>{}</td></tr>", esc(&ops.join(", ")));
    }
    h.push_str("</tbody></table></div>\n");
}

fn regions(h: &mut String, p: &Program) {
    let r = &p.regions;
    if r.paths.is_empty() && r.counters.is_empty() {
        h.push_str("<p class=\"none\">No user regions or counters (see <code>hark.h</code> to add some).</p>\n");
        return;
    }
    if !r.paths.is_empty() {
        h.push_str("<table class=\"sortable\"><thead><tr><th>Region</th><th>Calls</th><th>Inclusive</th><th>Exclusive</th><th>Inclusive min per rank</th><th>Inclusive max per rank</th><th>Imbalance</th></tr></thead><tbody>\n");
        for (path, prof) in &r.paths {
            let depth = path.matches('/').count();
            let calls = facts::total(prof.calls.iter().copied());
            let inc = facts::total(prof.inclusive_ns.iter().copied());
            let exc = facts::total(prof.exclusive_ns.iter().copied());
            let spread = Spread::of(
                &prof
                    .inclusive_ns
                    .iter()
                    .map(|&v| v as f64)
                    .collect::<Vec<_>>(),
            );
            let _ = write!(
                h,
                "<tr><td style=\"padding-left:{}em\">{}</td>",
                0.4 + 1.2 * depth as f64,
                esc(path)
            );
            num(h, calls as f64, &count(calls));
            num(h, inc as f64, &duration(inc as f64));
            num(h, exc as f64, &duration(exc as f64));
            spread_cells(h, p, &spread, &duration, false);
            let imb = imbalance(&spread);
            num(h, imb, &format!("{:.1} %", 100.0 * imb));
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table>\n");
    }
    if !r.counters.is_empty() {
        h.push_str("<h4>Counters</h4><table class=\"sortable\"><thead><tr><th>Counter</th><th>Values</th><th>Min</th><th>Mean</th><th>Max</th></tr></thead><tbody>\n");
        for (name, c) in &r.counters {
            let _ = write!(h, "<tr><td>{}</td>", esc(name));
            num(h, c.count as f64, &count(c.count));
            num(h, c.min as f64, &c.min.to_string());
            num(h, c.mean, &format!("{:.2}", c.mean));
            num(h, c.max as f64, &c.max.to_string());
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table>\n");
    }
}

fn ranks(h: &mut String, p: &Program) {
    let acc = p.accounting();
    let _ = writeln!(h, "<p>{}.</p>", esc(&facts::accounting_line(&acc)));
    if let Some(clock) = facts::clock_line(p) {
        let _ = writeln!(h, "<p>Clocks: {}.</p>", esc(&clock));
    }
    h.push_str("<div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>Rank</th><th>World rank</th><th>Host</th><th>PID</th><th>Wall</th><th>MPI</th><th>Events written</th><th>Received</th><th>Analysed</th><th>Dropped</th><th>Stream</th></tr></thead><tbody>\n");
    for (r, info) in p.rank_info.iter().enumerate() {
        let a = &info.accounting;
        h.push_str("<tr>");
        num(h, r as f64, &r.to_string());
        if info.folded > 0 {
            // The row of processes folded together: no one world rank or pid.
            let _ = write!(
                h,
                "<td>{} other processes</td><td>{}</td><td></td>",
                count(info.folded),
                esc(&info.host)
            );
        } else {
            num(h, info.world_rank as f64, &info.world_rank.to_string());
            let _ = write!(h, "<td>{}</td>", esc(&info.host));
            num(h, info.pid as f64, &info.pid.to_string());
        }
        let wall = p.rank_wall_ns.get(r).copied().unwrap_or(0);
        let mpi = p.mpi_time_ns.get(r).copied().unwrap_or(0);
        num(h, wall as f64, &duration(wall as f64));
        num(h, mpi as f64, &duration(mpi as f64));
        num(h, a.events_written as f64, &count(a.events_written));
        num(h, a.events_received as f64, &count(a.events_received));
        num(h, a.events_analysed as f64, &count(a.events_analysed));
        num(h, a.events_dropped as f64, &count(a.events_dropped));
        if info.folded > 0 && a.partial_ranks > 0 {
            let _ = write!(
                h,
                "<td class=\"bad\">{} of them partial (no end record)</td>",
                count(a.partial_ranks)
            );
        } else if info.partial {
            h.push_str("<td class=\"bad\">partial (no end record)</td>");
        } else {
            h.push_str("<td>complete</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

const STYLE: &str = r#"
:root{--ink:#1d2733;--muted:#5b6775;--line:#d9dee5;--accent:#2f5d8a;--soft:#f5f7fa;--mpi:#3b528b;--comp:#c9d3df}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--ink);background:#fff}
header,main,footer{max-width:1280px;margin:0 auto;padding:0 24px}
header{padding-top:18px;border-bottom:1px solid var(--line);padding-bottom:12px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:21px;margin:28px 0 6px;padding-top:14px;border-top:3px solid var(--accent)}
h3{font-size:16px;margin:22px 0 8px;color:var(--accent)}
h4{font-size:14px;margin:10px 0 6px}
.meta,.hint,figcaption,footer{color:var(--muted)}
.hint{font-size:12.5px;margin:4px 0}
.warn{background:#fff4e5;border-left:4px solid #e8912d;padding:6px 10px}
.warn.failed{background:#fdecea;border-left-color:#b3261e}
.none{color:var(--muted);font-style:italic}
code{font:12.5px ui-monospace,Menlo,Consolas,monospace;background:var(--soft);padding:1px 4px;border-radius:3px;word-break:break-all}
.toc{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:13px;margin:4px 0 8px}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px;background:var(--soft)}
.card .label{font-size:12px;color:var(--muted)}.card .value{font-size:20px;font-weight:600}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.path{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-all}
td.bad{color:#b3261e;font-weight:600}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" ▲";font-size:10px}
table.sortable th[aria-sort=descending]::after{content:" ▼";font-size:10px}
tbody tr:hover{background:#f0f4f9}
.scroll{overflow-x:auto}
.figures,.cols{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
figure{margin:6px 0}
figcaption{font-size:12px;max-width:520px}
.smalls figcaption{max-width:170px}.smalls figcaption b{overflow-wrap:anywhere}
.nw{white-space:nowrap}
details{margin:8px 0}summary{cursor:pointer;color:var(--accent);font-weight:600}
svg{display:block;max-width:100%;height:auto}
svg text{font-family:system-ui,Helvetica,Arial,sans-serif}
svg .tick{font-size:10px;fill:#5b6775}svg .axis{font-size:11px;fill:#5b6775}
svg .cell{font-size:9px}
svg .charttitle{font-size:12px;font-weight:600;fill:#1d2733}
svg .axisline{stroke:#9aa5b1;stroke-width:1}
svg .band{fill:#21918c;fill-opacity:.22;stroke:none}
svg .line{fill:none;stroke:#3b528b;stroke-width:1.8}
svg .mpi{fill:var(--mpi)}svg .comp{fill:var(--comp)}
svg .grid{stroke:#e3e7ec;stroke-width:1}svg .track{fill:var(--soft)}
svg .good,td.good{fill:#3a9a5b;color:#1f6b3a}svg .fair,td.fair{fill:#e8912d;color:#9a5a0c}svg .poor,td.poor{fill:#c8453b;color:#b3261e}
svg .e-par,svg .e-lb,svg .e-comm,svg .e-ser,svg .e-tr{fill:none;stroke-width:1.8}
svg .e-par{stroke:#1d2733;stroke-width:2.4}svg .e-lb{stroke:#21918c}svg .e-comm{stroke:#3b528b}
svg .e-ser{stroke:#e8912d}svg .e-tr{stroke:#b3261e}
svg path.raw{stroke-width:1;stroke-opacity:.3}
.panels{display:flex;flex-wrap:wrap;gap:8px 14px}
.verdict{margin:6px 0 10px}
table.eff td.n{font-weight:600}
ol.digest{margin:6px 0 10px;padding-left:0;list-style:none;max-width:980px}
ol.digest li{border-left:4px solid var(--line);background:var(--soft);padding:6px 10px;margin:6px 0}
ol.digest .sev{display:inline-block;min-width:4.5em;font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.04em}
ol.digest .cost{color:var(--muted);font-size:12.5px;margin-left:6px}
li.sev-high{border-left-color:#c8453b!important}li.sev-high .sev{color:#b3261e}
li.sev-medium{border-left-color:#e8912d!important}li.sev-medium .sev{color:#9a5a0c}
li.sev-low{border-left-color:#9aa5b1!important}li.sev-low .sev{color:var(--muted)}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:0}ul.tree ul{padding-left:1.4em}
ul.tree{max-width:900px;font-size:13px}ul.tree details{margin:0}ul.tree summary{font-weight:400;color:var(--ink)}
ul.tree li>.trow{margin-left:1.1em}
.trow{display:inline-flex;align-items:center;gap:10px;width:calc(100% - 1.2em);padding:2px 0;border-bottom:1px solid #eef0f3}
.trow.pattern .tname{font-weight:600}.trow.group{color:var(--muted);font-style:italic;border-bottom:none}
.tname{flex:1 1 auto;min-width:8em;word-break:break-all}
.pbar{flex:0 0 120px;height:9px;background:var(--soft);border:1px solid var(--line)}.pbar i{display:block;height:100%;background:var(--mpi)}
.tnum{flex:0 0 6.5em;text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.tnum.share{flex-basis:4.5em}.tnum.inst{flex-basis:10em}
svg .edge{fill:none;stroke-opacity:.85}svg circle.edge{stroke:#3b528b}
svg .node{fill:#dbe8f6;stroke:#2f5d8a;stroke-width:1.5}
svg .nodelabel{font-size:11px;fill:#1d2733}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:var(--muted);margin:4px 0}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
svg .t-useful,.legend .t-useful{fill:#3a9a5b;background:#3a9a5b}svg .t-barrier,.legend .t-barrier{fill:#c8453b;background:#c8453b}
svg .t-idle,.legend .t-idle{fill:#c9d3df;background:#c9d3df}svg .t-lock,.legend .t-lock{fill:#a463f2;background:#a463f2}
svg .t-mgmt,.legend .t-mgmt{fill:#e8912d;background:#e8912d}svg .t-mpi,.legend .t-mpi{fill:var(--mpi);background:var(--mpi)}
svg .t-io,.legend .t-io{fill:#6cc5b0;background:#6cc5b0}
footer{border-top:1px solid var(--line);margin-top:30px;padding-top:10px;padding-bottom:30px;font-size:12px}
"#;

const SCRIPT: &str = r#"
(function () {
  "use strict";
  function key(td) {
    var v = td.getAttribute("data-v");
    return v === null ? null : parseFloat(v);
  }
  function sortBy(th) {
    var table = th.closest("table");
    var body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = body.rows.length > 0 && body.rows[0].cells[col] && key(body.rows[0].cells[col]) !== null;
    // Numbers sort largest first on the first click, names A to Z.
    var current = th.getAttribute("aria-sort");
    var dir = current ? (current === "ascending" ? -1 : 1) : (numeric ? -1 : 1);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[col], y = b.cells[col];
      if (!x || !y) { return 0; }
      var kx = key(x), ky = key(y);
      if (kx !== null && ky !== null) { return (kx - ky) * dir; }
      return x.textContent.localeCompare(y.textContent) * dir;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
  });
  document.body.setAttribute("data-ready", "1");
})();
"#;

/// Writes `report.html`.
pub(crate) struct Html;

impl Output for Html {
    fn name(&self) -> &'static str {
        "html"
    }

    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error> {
        let html = render(run, &Options::default());
        crate::write_file(&dir.join(FILE_NAME), html.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_quotes_and_control_characters() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>\u{7}"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;\u{fffd}"
        );
    }

    #[test]
    fn communicators_are_named_by_their_members() {
        assert_eq!(members(&[0, 1, 2, 3]), "ranks 0–3");
        assert_eq!(members(&[0, 2]), "ranks 0, 2");
        let many: Vec<i32> = (0..40).map(|r| 2 * r).collect();
        assert_eq!(
            members(&many),
            "ranks 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, … (40 in all)"
        );
    }
}
