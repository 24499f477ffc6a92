//! The job digest: the few findings that cost the most time, each one
//! sentence with its numbers, where the time goes and where to look next.
//!
//! It reads only what the knowledge sources before it put in the model
//! (wait states, efficiencies, the MPI and I/O profiles, the regions), so it
//! says nothing the data does not support. Candidates, each costed in rank
//! time (summed over ranks):
//!
//! - each wait-state pattern: its waiting time, the function it happens in,
//!   the rank most often late and the region it came from;
//! - load imbalance: `(max U − mean U) × ranks` of useful time, with the
//!   top-level region whose balance is worst;
//! - transfer: time in MPI moving data rather than waiting, with the
//!   function that holds most of it;
//! - I/O: time in I/O calls, with the file that takes most.
//!
//! The five costliest are kept, costliest first; those under 0.5 % of rank
//! time only to make up three. Severity: high from 10 % of rank time,
//! medium from 3 %.

use crate::analysis::{Analysis, Finish, NoState, Sensitivity, Spec};
use crate::track::Pattern;
use hark_model::{Finding, Program};

/// See the module documentation.
pub struct Digest;

/// Findings kept at most.
pub const MAX_FINDINGS: usize = 5;

/// Findings kept, when there are as many, however small.
pub const MIN_FINDINGS: usize = 3;

static SPEC: Spec = Spec {
    name: "digest",
    description: "The job digest: the costliest wait states, imbalance, transfer and I/O findings, one sentence each; runs last.",
    sensitivities: &[Sensitivity::ProgramEnd],
    fills: &["digest"],
};

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// The costliest entry of a map of (time, instances) cells.
fn top<'a, V>(
    map: impl IntoIterator<Item = (&'a String, V)>,
    time: impl Fn(&V) -> u64,
) -> Option<(&'a String, V)> {
    map.into_iter()
        .max_by(|a, b| time(&a.1).cmp(&time(&b.1)).then(b.0.cmp(a.0)))
}

fn region(path: &str) -> String {
    if path.is_empty() {
        "outside any region".to_string()
    } else {
        format!("region `{path}`")
    }
}

fn wait_finding(p: &Program, pattern: Pattern, rank_time: u64) -> Option<Finding> {
    let w = p.waits.get(pattern.key())?;
    let time: u64 = w.time_ns.iter().sum();
    let instances: u64 = w.instances.iter().sum();
    if time == 0 || instances == 0 {
        return None;
    }
    let (func, _) = top(w.by_function.iter(), |c| c.time_ns)?;
    let mut detail = format!(
        "{} in {func} costs {:.1} % of rank time ({} over {instances} instances)",
        pattern.title(),
        pct(time, rank_time),
        ms(time)
    );
    let late = w
        .late
        .iter()
        .enumerate()
        .max_by_key(|(r, c)| (c.instances, std::cmp::Reverse(*r)));
    let mut look = format!("look at what precedes {func}");
    if let Some((late, c)) = late.filter(|(_, c)| c.instances > 0) {
        let share = pct(c.instances, instances);
        detail.push_str(&format!(
            "; rank {late} is the late one in {share:.0} % of the instances"
        ));
        if let Some((path, _)) = top(w.cause_callpaths.iter(), |c| c.time_ns) {
            detail.push_str(&format!(", arriving from {}", region(path)));
            if !path.is_empty() {
                if let Some(r) = p.regions.paths.get(path.as_str()) {
                    let n = r.inclusive_ns.len().max(1) as f64;
                    let mean = r.inclusive_ns.iter().sum::<u64>() as f64 / n;
                    if let Some(&mine) = r.inclusive_ns.get(late) {
                        if mean > 0.0 {
                            detail.push_str(&format!(
                                ", which takes {:.2}× its mean there",
                                mine as f64 / mean
                            ));
                        }
                    }
                }
                look = format!("look at the balance of `{path}`");
            } else {
                look = format!("look at what rank {late} does before {func}");
            }
        }
    }
    Some(Finding {
        severity: String::new(),
        title: format!("{} in {func}", pattern.title()),
        detail: format!("{detail}: {look}."),
        time_ns: time,
    })
}

fn imbalance_finding(p: &Program) -> Option<Finding> {
    let e = p.efficiency?;
    let n = p.ranks as u64;
    let time = (e.max_useful_ns.saturating_sub(e.mean_useful_ns)).saturating_mul(n);
    if time == 0 {
        return None;
    }
    let mut detail = format!(
        "Load balance is {:.1} %: the busiest rank computes {} outside MPI against {} on average, so the others wait {} in all",
        100.0 * e.load_balance,
        ms(e.max_useful_ns),
        ms(e.mean_useful_ns),
        ms(time)
    );
    let worst = p
        .efficiency_by_region
        .iter()
        .filter(|(_, r)| r.max_useful_ns > r.mean_useful_ns)
        .max_by_key(|(_, r)| r.max_useful_ns - r.mean_useful_ns);
    match worst {
        Some((name, r)) => detail.push_str(&format!(
            "; region `{name}` is the least balanced ({:.1} %): look at how its work is divided.",
            100.0 * r.load_balance
        )),
        None => detail.push_str(": look at how the work is divided between ranks."),
    }
    Some(Finding {
        severity: String::new(),
        title: "Load imbalance".into(),
        detail,
        time_ns: time,
    })
}

fn transfer_finding(p: &Program, rank_time: u64) -> Option<Finding> {
    let e = p.efficiency?;
    let waiting: u64 = p.waits.values().flat_map(|w| w.time_ns.iter()).sum();
    let mpi: u64 = p
        .mpi
        .iter()
        .filter(|(f, _)| !matches!(f.as_str(), "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize"))
        .flat_map(|(_, f)| f.time_ns.iter())
        .sum();
    let time = mpi.saturating_sub(waiting);
    if time == 0 {
        return None;
    }
    let (func, _) = top(
        p.mpi.iter().filter(|(f, _)| {
            !matches!(f.as_str(), "MPI_Init" | "MPI_Init_thread" | "MPI_Finalize")
        }),
        |f| f.time_ns.iter().sum(),
    )?;
    Some(Finding {
        severity: String::new(),
        title: "Time moving data".into(),
        detail: format!(
            "MPI calls spend {} ({:.1} % of rank time) moving data rather than waiting (transfer efficiency {:.1} %), most in {func}: look at message sizes and counts, or overlap communication with work.",
            ms(time),
            pct(time, rank_time),
            100.0 * e.transfer
        ),
        time_ns: time,
    })
}

fn io_finding(p: &Program, rank_time: u64) -> Option<Finding> {
    let time: u64 =
        p.io.per_rank
            .iter()
            .flat_map(|ops| ops.values().map(|t| t.time_ns))
            .sum();
    if time == 0 {
        return None;
    }
    let file =
        p.io.files
            .iter()
            .map(|f| (f, f.ops.values().map(|t| t.time_ns).sum::<u64>()))
            .max_by_key(|(_, t)| *t);
    let mut detail = format!(
        "I/O calls take {} ({:.1} % of rank time)",
        ms(time),
        pct(time, rank_time)
    );
    if let Some((f, t)) = file {
        detail.push_str(&format!(", {:.0} % of it on `{}`", pct(t, time), f.path));
    }
    detail.push_str(": look at the I/O profile for small or synchronous operations.");
    Some(Finding {
        severity: String::new(),
        title: "I/O".into(),
        detail,
        time_ns: time,
    })
}

impl Analysis for Digest {
    type Rank = NoState;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> NoState {
        NoState
    }
    fn finish(&self, _: &Finish<'_>, _: &[&NoState], out: &mut Program) {
        let rank_time: u64 = out.rank_wall_ns.iter().sum();
        if rank_time == 0 {
            return;
        }
        let mut findings: Vec<Finding> = Pattern::ALL
            .iter()
            .filter_map(|&pattern| wait_finding(out, pattern, rank_time))
            .chain(imbalance_finding(out))
            .chain(transfer_finding(out, rank_time))
            .chain(io_finding(out, rank_time))
            .collect();
        findings.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.title.cmp(&b.title)));
        // The costliest five; below 0.5 % of rank time only to make up
        // three, the least a reader needs to compare.
        let significant = findings
            .iter()
            .filter(|f| pct(f.time_ns, rank_time) >= 0.5)
            .count();
        findings.truncate(significant.clamp(MIN_FINDINGS, MAX_FINDINGS));
        for f in &mut findings {
            let share = pct(f.time_ns, rank_time);
            f.severity = if share >= 10.0 {
                "high"
            } else if share >= 3.0 {
                "medium"
            } else {
                "low"
            }
            .into();
        }
        out.digest = findings;
    }
}
