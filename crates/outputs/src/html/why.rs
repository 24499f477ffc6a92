//! Why a program is slow: the verdict that opens its chapter (the POP
//! efficiencies and the job digest) and the "Why" section (efficiency bars,
//! the wait-state tree, who waits where, efficiencies over time).
//!
//! Every share here is of the program's *rank time*, the sum of its ranks'
//! wall times, the same whole the digest and the MPI share use, so the
//! numbers of a pattern, its functions and its call paths add up on one
//! scale.

use super::{esc, num, svg};
use crate::facts::{self, cell};
use crate::units::{count, duration, fraction, percent};
use hark_model::{Efficiency, Program, WaitCell, WaitPattern};
use std::fmt::Write as _;

/// The wait-state patterns Hark computes, in the order of Scalasca's
/// catalogue, with the names people know them by.
const PATTERNS: [(&str, &str); 7] = [
    ("late_sender", "Late Sender"),
    ("late_sender_wrong_order", "Late Sender / Wrong Order"),
    ("late_receiver", "Late Receiver"),
    ("wait_nxn", "Wait at N×N"),
    ("wait_barrier", "Wait at Barrier"),
    ("late_broadcast", "Late Broadcast"),
    ("early_reduce", "Early Reduce"),
];

/// The name a pattern is shown by: its catalogue name, or the model's key
/// for a pattern this report does not know.
fn pattern_name(key: &str) -> &str {
    PATTERNS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(key, |(_, name)| name)
}

/// The program's patterns: the catalogue's first, in its order, then any
/// other the model holds, by key.
fn patterns(p: &Program) -> Vec<(&str, &WaitPattern)> {
    let known = PATTERNS
        .iter()
        .filter_map(|(k, _)| p.waits.get_key_value(*k));
    let other = p
        .waits
        .iter()
        .filter(|(k, _)| !PATTERNS.iter().any(|(known, _)| known == k));
    known.chain(other).map(|(k, w)| (k.as_str(), w)).collect()
}

/// A call path as the tree shows it.
fn callpath(path: &str) -> &str {
    if path.is_empty() {
        "(outside any region)"
    } else {
        path
    }
}

/// The efficiencies table and the digest that open chapter `k`; nothing
/// for a program that has neither.
pub(super) fn verdict(h: &mut String, k: usize, p: &Program) {
    let (_, rank_time) = facts::mpi_and_wall(p);
    if p.efficiency.is_none() && p.digest.is_empty() && p.openmp.efficiency.is_none() {
        return;
    }
    h.push_str("<div class=\"verdict\">\n");
    if let Some(e) = &p.efficiency {
        h.push_str("<table class=\"eff\"><thead><tr><th>Efficiency</th>");
        for (name, _, _) in facts::efficiencies(e) {
            let _ = write!(h, "<th>{}</th>", capitalised(name));
        }
        h.push_str("<th>Runtime</th></tr></thead><tbody>\n");
        efficiency_row(h, "whole program", e);
        for (name, e) in facts::regions_by_runtime(p) {
            efficiency_row(h, &format!("region <code>{}</code>", esc(name)), e);
        }
        h.push_str("</tbody></table>\n");
    }
    hybrid_table(h, p);
    if p.digest.is_empty() {
        h.push_str("<p class=\"none\">No findings: the digest is empty.</p>\n");
    } else {
        h.push_str("<ol class=\"digest\">");
        for f in facts::findings(p) {
            // Only the three known severities become a class.
            let sev = match f.severity.as_str() {
                s @ ("high" | "medium" | "low") => s,
                _ => "other",
            };
            let _ = write!(
                h,
                "<li class=\"sev-{sev}\"><span class=\"sev\">{}</span> <b>{}</b> <span class=\"cost\">{} · {} of rank time</span><br>{}</li>",
                esc(&f.severity),
                esc(&f.title),
                duration(f.time_ns as f64),
                percent(f.time_ns as f64, rank_time as f64),
                site_links(&code_spans(&esc(&f.detail)), k, p)
            );
        }
        h.push_str("</ol>\n");
    }
    h.push_str("</div>\n");
}

/// With OpenMP, the hybrid model's efficiencies of the whole program
/// that the table above does not hold (`facts::efficiency_tree`).
fn hybrid_table(h: &mut String, p: &Program) {
    let names = facts::efficiencies(&Efficiency::default()).map(|(name, _, _)| name);
    let rows: Vec<_> = (facts::efficiency_tree(p).into_iter())
        .filter(|(name, _, _)| !names.contains(name))
        .collect();
    if p.openmp.efficiency.is_none() || rows.is_empty() {
        return;
    }
    h.push_str("<table class=\"eff hybrid\"><thead><tr><th>Hybrid model</th>");
    for (name, _, _) in &rows {
        let name = match *name {
            "within nodes" => "MPI load balance within nodes",
            "across nodes" => "MPI load balance across nodes",
            n => n,
        };
        let _ = write!(h, "<th>{}</th>", esc(name));
    }
    h.push_str("</tr></thead><tbody><tr><td>whole program</td>");
    for &(_, _, v) in &rows {
        let _ = write!(h, "<td class=\"n {}\">{}</td>", svg::grade(v), fraction(v));
    }
    h.push_str("</tr></tbody></table>\n");
}

fn capitalised(name: &str) -> String {
    let mut c = name.chars();
    c.next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A row of the efficiencies table; `label` is HTML.
fn efficiency_row(h: &mut String, label: &str, e: &Efficiency) {
    let _ = write!(h, "<tr><td>{label}</td>");
    for (_, _, v) in facts::efficiencies(e) {
        let _ = write!(h, "<td class=\"n {}\">{}</td>", svg::grade(v), fraction(v));
    }
    let _ = writeln!(
        h,
        "<td class=\"n\">{}</td></tr>",
        duration(e.runtime_ns as f64)
    );
}

/// `html` with each `<code>` span that names a call site's place
/// (`file.c:42`) made a link to that site's row of the call-site table,
/// the costliest site of that place when several share it.
fn site_links(html: &str, k: usize, p: &Program) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find("<code>") {
        let inner = &rest[at + "<code>".len()..];
        let Some(end) = inner.find("</code>") else {
            break;
        };
        out.push_str(&rest[..at]);
        let text = &inner[..end];
        let site = p
            .callsites
            .iter()
            .enumerate()
            .filter(|(_, c)| esc(&c.place()) == text)
            .max_by_key(|(i, c)| (c.time_ns, std::cmp::Reverse(*i)));
        match site {
            Some((i, _)) => {
                let _ = write!(
                    out,
                    "<a href=\"#{}\"><code>{text}</code></a>",
                    super::site_anchor(k, i)
                );
            }
            None => {
                let _ = write!(out, "<code>{text}</code>");
            }
        }
        rest = &inner[end + "</code>".len()..];
    }
    out.push_str(rest);
    out
}

/// Escaped text with each pair of backticks made a `<code>` span, as the
/// digest quotes region names: `` `solve` ``. Text with an odd number of
/// backticks is left as it is.
fn code_spans(escaped: &str) -> String {
    if escaped.matches('`').count() % 2 == 1 {
        return escaped.to_string();
    }
    let mut out = String::with_capacity(escaped.len() + 16);
    for (k, part) in escaped.split('`').enumerate() {
        if k % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// The "Why" section.
pub(super) fn why(h: &mut String, p: &Program) {
    let patterns = patterns(p);
    let waited = |w: &WaitPattern| facts::total(w.time_ns.iter().copied());
    let any_wait = patterns.iter().any(|(_, w)| waited(w) > 0);
    let tree = facts::efficiency_tree(p);
    if tree.is_empty() && !any_wait {
        h.push_str("<p class=\"none\">No efficiencies or wait states were computed for this program (they need MPI or OpenMP).</p>\n");
        return;
    }
    let (_, rank_time) = facts::mpi_and_wall(p);
    // The hybrid model's factors, when there are any.
    let hybrid = if p.openmp.efficiency.is_some() {
        " OpenMP parallel efficiency = OpenMP load balance × scheduling × serialisation, over all threads' time; MPI load balance splits into within and across nodes (docs/analyses.md, \"OpenMP\")."
    } else {
        ""
    };
    let bars = svg::efficiency_bars(&format!("{}: efficiencies", p.name), &tree);
    if let Some(e) = &p.efficiency {
        let _ = writeln!(
            h,
            "<div class=\"figures\"><figure>{bars}<figcaption>Parallel efficiency = load balance × communication efficiency; communication = serialisation × transfer.{hybrid} Useful time (outside MPI): mean rank {}, busiest rank {}; runtime {}, ideal runtime (no time moving data) {}. Green from 80 %, orange from 60 %, red below.</figcaption></figure></div>",
            duration(e.mean_useful_ns as f64),
            duration(e.max_useful_ns as f64),
            duration(e.runtime_ns as f64),
            duration(e.ideal_runtime_ns as f64),
        );
    } else if !tree.is_empty() {
        let _ = writeln!(
            h,
            "<div class=\"figures\"><figure>{bars}<figcaption>{} Green from 80 %, orange from 60 %, red below.</figcaption></figure></div>",
            hybrid.trim_start()
        );
    }
    if !any_wait {
        h.push_str("<p class=\"none\">No rank waited for another in any wait-state pattern.</p>\n");
    } else {
        wait_tree(h, &patterns, rank_time);
        who_waits(h, p, &patterns);
    }
    over_time(h, p);
}

/// Pattern → MPI function, call path of the waiting rank, and call path of
/// the late rank, each with its share of rank time.
fn wait_tree(h: &mut String, patterns: &[(&str, &WaitPattern)], rank_time: u64) {
    let mut rows: Vec<(&str, &WaitPattern, WaitCell)> = patterns
        .iter()
        .map(|&(k, w)| {
            let cell = WaitCell {
                time_ns: facts::total(w.time_ns.iter().copied()),
                instances: facts::total(w.instances.iter().copied()),
            };
            (k, w, cell)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.2.time_ns));
    let total = facts::total(rows.iter().map(|r| r.2.time_ns));
    // Bars are drawn against the costliest pattern, so the small ones
    // still show; the numbers beside them are shares of rank time.
    let scale = Scale {
        rank_time,
        longest: rows.first().map_or(0, |r| r.2.time_ns),
    };
    let _ = writeln!(
        h,
        "<h4>Wait states</h4><p class=\"hint\">Ranks waited {} in all, {} of rank time ({} summed over ranks). Open a pattern for the MPI functions it waited in, the call paths of the waiting ranks, and where the late ranks were before they arrived. Shares are of rank time; bars are drawn against the costliest pattern.</p>",
        duration(total as f64),
        percent(total as f64, rank_time as f64),
        duration(rank_time as f64)
    );
    h.push_str("<ul class=\"tree\">");
    let none: Vec<&str> = rows
        .iter()
        .filter(|r| r.2.time_ns == 0)
        .map(|r| pattern_name(r.0))
        .collect();
    for (k, (key, w, cell)) in rows.iter().filter(|r| r.2.time_ns > 0).enumerate() {
        let _ = write!(
            h,
            "<li><details{}><summary>",
            if k == 0 { " open" } else { "" }
        );
        tree_row(h, pattern_name(key), cell, &scale, "pattern");
        h.push_str("</summary><ul>");
        for (title, cells, paths) in [
            ("In MPI function", &w.by_function, false),
            ("At call path (waiting rank)", &w.by_callpath, true),
            ("After call path (late rank)", &w.cause_callpaths, true),
        ] {
            if cells.is_empty() {
                continue;
            }
            let _ = write!(
                h,
                "<li><details open><summary><span class=\"trow group\">{title}</span></summary><ul>"
            );
            let mut sorted: Vec<_> = cells.iter().collect();
            sorted.sort_by(|a, b| b.1.time_ns.cmp(&a.1.time_ns).then(a.0.cmp(b.0)));
            for (label, c) in sorted {
                h.push_str("<li>");
                let name = if paths { callpath(label) } else { label };
                tree_row(h, name, c, &scale, "leaf");
                h.push_str("</li>");
            }
            h.push_str("</ul></details></li>");
        }
        h.push_str("</ul></details></li>\n");
    }
    h.push_str("</ul>\n");
    if !none.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"hint\">No waiting in: {}.</p>",
            esc(&none.join(", "))
        );
    }
}

/// What the numbers and bars of the wait-state tree are measured against.
struct Scale {
    /// The whole that shares are of.
    rank_time: u64,
    /// The time a full bar stands for.
    longest: u64,
}

/// One line of the wait-state tree: name, a bar and the numbers.
fn tree_row(h: &mut String, name: &str, c: &WaitCell, scale: &Scale, class: &str) {
    let rank_time = scale.rank_time;
    let bar = if scale.longest > 0 {
        100.0 * c.time_ns as f64 / scale.longest as f64
    } else {
        0.0
    };
    let _ = write!(
        h,
        "<span class=\"trow {class}\"><span class=\"tname\">{}</span><span class=\"pbar\"><i style=\"width:{:.1}%\"></i></span><span class=\"tnum share\">{}</span><span class=\"tnum\">{}</span><span class=\"tnum inst\">{} instances</span></span>",
        esc(name),
        bar.clamp(0.0, 100.0),
        percent(c.time_ns as f64, rank_time as f64),
        duration(c.time_ns as f64),
        count(c.instances)
    );
}

/// The rank × pattern heatmap, who made whom wait, and per rank how long
/// it waited and how often it was the late one.
fn who_waits(h: &mut String, p: &Program, patterns: &[(&str, &WaitPattern)]) {
    let n = facts::ranks(p);
    if n == 0 {
        return;
    }
    h.push_str("<h4>Who waits, and for whom</h4><div class=\"figures\">");
    let columns: Vec<svg::Column> = patterns
        .iter()
        .map(|(k, w)| svg::Column {
            name: pattern_name(k).to_string(),
            values: (0..n)
                .map(|r| w.time_ns.get(r).copied().unwrap_or(0) as f64)
                .collect(),
            fmt: Box::new(duration),
        })
        .collect();
    let _ = write!(
        h,
        "<figure>{}<figcaption>Time each rank waited, per pattern, on one colour scale (hover for numbers).</figcaption></figure>",
        svg::density(
            &format!("{}: waiting per rank and pattern", p.name),
            n,
            &columns,
            svg::Scale::Shared
        )
    );
    let causes = &p.wait_causes;
    let any_cause = causes.time_ns.iter().flatten().any(|&v| v > 0);
    if any_cause {
        let _ = write!(
            h,
            "<figure>{}<figcaption>Time the rank of each column waited for the late rank of each row, over all patterns.</figcaption></figure>",
            svg::heatmap(
                &format!("{}: who made whom wait", p.name),
                &causes.time_ns,
                n,
                &svg::Axes {
                    rows: "late rank",
                    columns: "waiting rank",
                },
                &|v| duration(v as f64)
            )
        );
    }
    h.push_str("</div>\n");
    let _ = writeln!(
        h,
        "<details{}><summary>Per rank</summary><div class=\"scroll\"><table class=\"sortable\"><thead><tr><th>Rank</th><th>Waited</th><th>% of its wall time</th><th>Made others wait</th><th>Late in (instances)</th></tr></thead><tbody>",
        if n <= 16 { " open" } else { "" }
    );
    for r in 0..n {
        let waited = facts::total(
            patterns
                .iter()
                .map(|(_, w)| w.time_ns.get(r).copied().unwrap_or(0)),
        );
        let wall = p.rank_wall_ns.get(r).copied().unwrap_or(0);
        let made_wait = facts::total((0..n).map(|j| cell(&causes.time_ns, r, j)));
        let late = causes.late_instances.get(r).copied().unwrap_or(0);
        h.push_str("<tr>");
        num(h, r as f64, &r.to_string());
        num(h, waited as f64, &duration(waited as f64));
        let share = if wall > 0 {
            waited as f64 / wall as f64
        } else {
            0.0
        };
        num(h, share, &percent(waited as f64, wall as f64));
        num(h, made_wait as f64, &duration(made_wait as f64));
        num(h, late as f64, &count(late));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div></details>\n");
}

/// The efficiencies per time slice as lines; a slice no rank was inside
/// leaves a gap.
fn over_time(h: &mut String, p: &Program) {
    let slice_ns = p.timeslices.slice_ns;
    // Slices past the program's end are capacity, not time: cut them.
    let used = p
        .efficiency_slices
        .iter()
        .rposition(|e| e.runtime_ns > 0)
        .map_or(0, |k| k + 1);
    let slices = &p.efficiency_slices[..used];
    if slices.is_empty() || slice_ns == 0 {
        return;
    }
    // One panel per efficiency, in the order they nest.
    const CLASSES: [&str; 5] = ["e-par", "e-lb", "e-comm", "e-ser", "e-tr"];
    let names = facts::efficiencies(&Efficiency::default()).map(|(name, _, _)| name);
    let lines: Vec<svg::Line<'_>> = (0..CLASSES.len())
        .map(|k| svg::Line {
            name: names[k],
            class: CLASSES[k],
            values: slices
                .iter()
                .map(|e| (e.runtime_ns > 0).then(|| facts::efficiencies(e)[k].2))
                .collect(),
        })
        .collect();
    let axis = svg::TimeAxis {
        slice_ns,
        end_ns: facts::slices_end(used, p.efficiency_slices.len(), slice_ns, p.wall_ns),
    };
    let _ = writeln!(
        h,
        "<h4>Efficiencies over time</h4><figure>{}<figcaption>{} slices of {} from the program's first connection to its end, one panel per efficiency: the faint line is each slice, the bold one their moving average; a gap is a slice no rank was running in.</figcaption></figure>",
        svg::line_panels(
            &format!("{}: efficiencies per slice", p.name),
            &lines,
            &axis,
            &duration(axis.end_ns as f64)
        ),
        used,
        duration(slice_ns as f64)
    );
}
