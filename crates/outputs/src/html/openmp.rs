//! The "OpenMP" section: per rank, where each thread's time went (a
//! stacked bar a thread: useful, barrier, idle, lock, fork/join, MPI,
//! I/O), and the parallel regions by construct.
//!
//! The bars are drawn against the rank's longest thread, so a rank's
//! threads compare at a glance; the numbers are in each part's tooltip and
//! at the end of its bar.

use super::{esc, num};
use crate::facts;
use crate::units::{count, duration};
use hark_model::{Program, ThreadTimes};
use std::fmt::Write as _;

/// Ranks drawn at most; the rest are counted in a note.
const MAX_RANKS: usize = 64;

/// The section.
pub(super) fn openmp(h: &mut String, p: &Program) {
    if p.threads.is_empty() {
        h.push_str("<p class=\"none\">No OpenMP: the program ran no parallel region Hark saw (libgomp or an OMPT runtime).</p>\n");
        return;
    }
    h.push_str("<p class=\"hint\">Per rank, each thread's time over the rank's measured window: useful work, waiting at barriers and for the region's join (load imbalance between threads), idle out of parallel regions while the master runs alone (serial code), waiting for critical sections and locks, the runtime's fork and join, MPI and I/O. Bars are drawn against the rank's longest thread.</p>\n<p class=\"legend\">");
    for (name, class, _) in facts::thread_parts(&ThreadTimes::default()) {
        let _ = write!(h, "<span><i class=\"{class}\"></i>{name}</span>");
    }
    h.push_str("</p>\n<div class=\"figures\">");
    for (rank, threads) in p.threads.iter().enumerate().take(MAX_RANKS) {
        let _ = write!(
            h,
            "<figure class=\"threads\">{}<figcaption>Rank {rank}: {} {}.</figcaption></figure>",
            thread_bars(rank, threads),
            threads.len(),
            if threads.len() == 1 {
                "thread"
            } else {
                "threads"
            }
        );
    }
    h.push_str("</div>\n");
    if p.threads.len() > MAX_RANKS {
        let _ = writeln!(
            h,
            "<p class=\"hint\">… and {} more ranks, in <code>profile.json</code> (<code>threads</code>).</p>",
            p.threads.len() - MAX_RANKS
        );
    }
    regions(h, p);
}

/// A thread's label: its number in its team, or its place in the rank
/// for a thread never in one.
fn label(index: usize, t: &ThreadTimes) -> String {
    if t.omp_thread >= 0 {
        format!("thread {}", t.omp_thread)
    } else {
        format!("#{index} (no team)")
    }
}

/// One rank's threads, a stacked bar each.
fn thread_bars(rank: usize, threads: &[ThreadTimes]) -> String {
    let bh = 16.0;
    let (left, width) = (96.0, 360.0);
    let (w, h) = (left + width + 72.0, 6.0 + bh * threads.len() as f64);
    // Saturating: the parts come from the program's stream, whatever it says.
    let total = |t: &ThreadTimes| facts::total(facts::thread_parts(t).iter().map(|x| x.2));
    let max = threads.iter().map(total).max().unwrap_or(0).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="tbars" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="Rank {rank}: time per thread"><title>Rank {rank}: where each thread's time went</title>"#
    );
    // By number in the team (the probe lists threads as it first saw
    // them), threads never in one last.
    let mut order: Vec<(usize, &ThreadTimes)> = threads.iter().enumerate().collect();
    order.sort_by_key(|&(i, t)| (t.omp_thread < 0, t.omp_thread, i));
    for (row, &(i, t)) in order.iter().enumerate() {
        let y = 3.0 + bh * row as f64;
        let name = label(i, t);
        let _ = write!(
            s,
            r#"<g class="thread" data-rank="{rank}" data-thread="{}"><text x="{:.0}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            t.omp_thread,
            left - 4.0,
            y + bh - 5.0,
            esc(&name)
        );
        let mut x = left;
        for (part, class, v) in facts::thread_parts(t) {
            if v == 0 {
                continue;
            }
            let pw = width * v as f64 / max;
            let _ = write!(
                s,
                r#"<rect x="{x:.2}" y="{y:.1}" width="{pw:.2}" height="{:.1}" class="{class}"><title>rank {rank}, {}: {part} {}</title></rect>"#,
                bh - 3.0,
                esc(&name),
                esc(&duration(v as f64))
            );
            x += pw;
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="tick">{}</text></g>"#,
            x + 4.0,
            y + bh - 5.0,
            esc(&duration(total(t) as f64))
        );
    }
    s.push_str("</svg>");
    s
}

/// The parallel regions by construct, most time first.
fn regions(h: &mut String, p: &Program) {
    let regions = &p.openmp.regions;
    if regions.is_empty() {
        h.push_str("<p class=\"none\">No parallel region was named (the runtime's events carried no construct).</p>\n");
        return;
    }
    h.push_str("<h4>Parallel regions</h4><p class=\"hint\">One row per construct over all ranks: its outlined function (or object and offset), the calls, the largest team, the time from fork to join on the forking thread, and the threads' waits inside it.</p>\n<div class=\"scroll\"><table class=\"sortable omp\"><thead><tr><th>Construct</th><th>Kind</th><th>Calls</th><th>Threads</th><th>Time</th><th>Barrier waits</th><th>Lock waits</th></tr></thead><tbody>\n");
    for r in regions {
        let _ = write!(
            h,
            "<tr><td class=\"path\">{}</td><td>{}</td>",
            esc(&r.name),
            esc(&r.kind)
        );
        let barrier = facts::total(r.barrier_ns.iter().flatten().copied());
        let locks = facts::total([r.critical_ns, r.lock_ns, r.ordered_ns]);
        num(h, r.calls as f64, &count(r.calls));
        num(h, r.threads as f64, &count(r.threads));
        num(h, r.time_ns as f64, &duration(r.time_ns as f64));
        num(h, barrier as f64, &duration(barrier as f64));
        num(h, locks as f64, &duration(locks as f64));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}
