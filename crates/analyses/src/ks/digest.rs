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
//! - polling: time in tests and non-blocking probes called in a loop
//!   (many short calls), which no pattern judges since they do not block;
//! - transfer: the rest of the time in MPI not spent waiting, with the
//!   function that holds most of it;
//! - I/O: time in I/O calls, with the file that takes most;
//! - waiting for a CPU: the host whose processes were runnable but waited
//!   for a CPU the longest. When they waited at least
//!   [`CPU_FIRST`] of their runnable time it comes first whatever its cost,
//!   since every MPI finding below is then distorted by it, and each
//!   wait-state finding says how much of it overlapped such waiting;
//! - OpenMP ([`openmp`]): threads waiting at barriers (with the construct
//!   whose threads wait most, its slowest and fastest thread), idle while
//!   the master runs alone, waiting for critical sections and locks, and
//!   the runtime's fork and join, each its thread time over its rank's
//!   threads.
//!
//! The five costliest are kept, costliest first; those under 0.5 % of rank
//! time only to make up three. Severity ([`severity`]): high from 10 % of
//! rank time, medium from 3 %, but a finding worth too little time per
//! rank to matter is low whatever its share (a run of `ls` spends a third
//! of its 50 µs in I/O): high needs 10 ms per rank on average, medium 1 ms.

use crate::analysis::{Analysis, Finish, NoState, Sensitivity, Spec};
use crate::derived::Pattern;
use crate::sat::total;
use hark_model::{count, Finding, Program};
use hark_wire::mpi::{by_name, Class};

mod openmp;

/// See the module documentation.
pub struct Digest;

/// Findings kept at most.
pub const MAX_FINDINGS: usize = 5;

/// Findings kept, when there are as many, however small.
pub const MIN_FINDINGS: usize = 3;

static SPEC: Spec = Spec {
    name: "digest",
    description: "The job digest: the costliest wait states, imbalance, transfer, I/O and OpenMP findings, one sentence each; runs last.",
    sensitivities: &[Sensitivity::ProgramEnd],
    fills: &["digest"],
};

/// Time per rank, on average, a `high` finding costs at least.
pub const HIGH_PER_RANK_NS: u64 = 10_000_000;

/// Time per rank, on average, a `medium` finding costs at least.
pub const MEDIUM_PER_RANK_NS: u64 = 1_000_000;

/// The severity of a finding costing `time_ns` of `rank_time` (summed over
/// `ranks` ranks): by its share (high from 10 %, medium from 3 %), but no
/// higher than its time per rank is worth (see the module documentation).
pub fn severity(time_ns: u64, rank_time: u64, ranks: usize) -> &'static str {
    let share = pct(time_ns, rank_time);
    let per_rank = time_ns / ranks.max(1) as u64;
    if share >= 10.0 && per_rank >= HIGH_PER_RANK_NS {
        "high"
    } else if share >= 3.0 && per_rank >= MEDIUM_PER_RANK_NS {
        "medium"
    } else {
        "low"
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A time for a sentence: `1.56 s`, `400.0 ms`, and below a millisecond
/// `16.9 µs` or `420 ns`, so that a short run's findings still give their
/// numbers instead of `0.0 ms`.
fn duration(ns: u64) -> String {
    let x = ns as f64;
    if x >= 1e9 {
        format!("{:.2} s", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.1} ms", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} µs", x / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// `part` as a share of `whole` for a sentence: `3.6 %`, or `under 0.1 %`
/// when it is not zero but would print as `0.0 %`.
fn share(part: u64, whole: u64) -> String {
    let p = pct(part, whole);
    if p > 0.0 && p < 0.05 {
        "under 0.1 %".into()
    } else {
        format!("{p:.1} %")
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
    let time = total(w.time_ns.iter().copied());
    let instances = total(w.instances.iter().copied());
    if time == 0 || instances == 0 {
        return None;
    }
    let (func, cell) = top(w.by_function.iter(), |c| c.time_ns)?;
    // Where in the program, when call sites are known: the waiting call's
    // costliest site for this pattern, and the late side's.
    let at = site_of(p, pattern, Some(func), false)
        .map(|s| format!(" at `{}`", s.place()))
        .unwrap_or_default();
    let late_site = site_of(p, pattern, None, true);
    // The function's own numbers when the pattern happens in others too:
    // the pattern's total is not the function's.
    let (title, mut detail) = if cell.time_ns >= time {
        let title = format!("{}{at} in {func}", pattern.title());
        let detail = format!(
            "{title} costs {} of rank time ({} over {} instances)",
            share(time, rank_time),
            duration(time),
            count(instances)
        );
        (title, detail)
    } else {
        let detail = format!(
            "{} costs {} of rank time ({} over {} instances), {:.0} % of it in {func} ({} over {} instances)",
            pattern.title(),
            share(time, rank_time),
            duration(time),
            count(instances),
            pct(cell.time_ns, time),
            duration(cell.time_ns),
            count(cell.instances)
        );
        (format!("{}, most{at} in {func}", pattern.title()), detail)
    };
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
        if let Some(site) = late_site {
            detail.push_str(&format!(
                ", late from `{}` ({})",
                site.place(),
                site.function
            ));
        }
        if let Some((path, _)) = top(w.cause_callpaths.iter(), |c| c.time_ns) {
            detail.push_str(&format!(", arriving from {}", region(path)));
            if !path.is_empty() {
                if let Some(r) = p.regions.paths.get(path.as_str()) {
                    let n = r.inclusive_ns.len().max(1) as f64;
                    let mean = total(r.inclusive_ns.iter().copied()) as f64 / n;
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
            } else if let Some(site) = late_site {
                look = format!("look at what rank {late} does before `{}`", site.place());
            } else {
                look = format!("look at what rank {late} does before {func}");
            }
        }
    }
    detail.push_str(&cpu_overlap(p, pattern).unwrap_or_default());
    Some(Finding {
        severity: String::new(),
        title,
        detail: format!("{detail}: {look}."),
        time_ns: time,
    })
}

/// The call site with the most time in `pattern`: on the waiting side
/// (in function `func` if given), or on the late side (`late`).
fn site_of<'a>(
    p: &'a Program,
    pattern: Pattern,
    func: Option<&str>,
    late: bool,
) -> Option<&'a hark_model::Callsite> {
    p.callsites
        .iter()
        .filter(|c| func.is_none_or(|f| c.function == f))
        .filter_map(|c| {
            let map = if late { &c.caused } else { &c.waits };
            Some((c, map.get(pattern.key())?.time_ns))
        })
        .filter(|(_, t)| *t > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.place().cmp(&a.0.place())))
        .map(|(c, _)| c)
}

/// A host whose processes waited at least this share of their runnable
/// time for a CPU puts that finding first.
pub const CPU_FIRST: f64 = 0.1;

/// The host whose processes waited longest for a CPU, and whether it
/// dominates ([`CPU_FIRST`]).
fn cpu_finding(p: &Program) -> Option<(Finding, bool)> {
    let h = p
        .cpu
        .hosts
        .iter()
        .max_by_key(|h| h.total.runnable_wait_ns)?;
    let wait = h.total.runnable_wait_ns;
    if wait == 0 {
        return None;
    }
    let runnable = h.total.on_cpu_ns.saturating_add(wait);
    let dominates = h.wait_share >= CPU_FIRST;
    let estimated = if p.cpu.wait_measured {
        ""
    } else {
        " (estimated from context switches: this kernel keeps no scheduler statistics)"
    };
    let who = match h.processes {
        1 => "1 process".to_string(),
        n => format!("{n} processes"),
    };
    let between = if h.processes == 1 {
        ""
    } else {
        " between them"
    };
    let mut detail = format!(
        "{who} on {} had {:.1} CPUs{between} and waited {:.1} % of {} time for a CPU ({} of {} runnable){estimated}",
        h.host,
        h.cpus_used,
        100.0 * h.wait_share,
        if h.processes == 1 { "its" } else { "their" },
        duration(wait),
        duration(runnable)
    );
    let mpi = !p.mpi.is_empty();
    detail.push_str(match (dominates, mpi) {
        (true, true) => ": give each rank a core of its own (fewer ranks per node, or as many slots as cores and `--bind-to core`), or, if each had one, find what else ran on the node; the MPI findings below are distorted by it.",
        (true, false) => ": other work on the node took the CPUs; measure again on a quieter node, or give the program cores of its own.",
        (false, true) => ": other work on the node took CPUs from the ranks at times.",
        (false, false) => ": other work on the node took CPUs from the processes at times.",
    });
    // The readings cover the stream's whole span (up to its last reading
    // at exit), a little more than the wall time the digest weighs
    // against: a finding never costs more than the time it is weighed by.
    let rank_time = total(p.rank_wall_ns.iter().copied());
    let finding = Finding {
        severity: String::new(),
        title: format!("Waiting for a CPU on {}", h.host),
        detail,
        time_ns: wait.min(rank_time),
    };
    Some((finding, dominates))
}

/// The sentence a wait-state finding gains when ranks waited for a CPU.
fn cpu_overlap(p: &Program, pattern: Pattern) -> Option<String> {
    let share = *p.cpu.wait_state_overlap.get(pattern.key())?;
    (share > 0.0).then(|| {
        format!(
            " ({:.0} % of this waiting fell in time slices in which the waiting rank itself waited for a CPU)",
            100.0 * share
        )
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
        duration(e.max_useful_ns),
        duration(e.mean_useful_ns),
        duration(time)
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

/// Functions that return at once whether or not anything is complete
/// (`MPI_Test*`, `MPI_Iprobe`, `MPI_Improbe`): time adds up in them only
/// when a loop calls them again and again.
fn returns_at_once(name: &str) -> bool {
    matches!(name, "MPI_Iprobe" | "MPI_Improbe")
        || by_name(name).is_some_and(|(_, f)| f.class == Class::Test)
}

/// A polling loop calls at least this many times per calling rank...
const POLL_CALLS: u64 = 1000;
/// ...and each call takes at most this long on average (ns): a slower
/// test is the library's progress, not a loop.
const POLL_CALL_NS: u64 = 50_000;

/// The waiting judged in MPI function `func`, over all patterns and ranks.
fn judged(p: &Program, func: &str) -> u64 {
    total(
        (p.waits.values())
            .filter_map(|w| w.by_function.get(func))
            .map(|c| c.time_ns),
    )
}

/// Calls and time (less any waiting judged in them) of each function
/// called by a polling loop, costliest first.
type Polled<'a> = Vec<(&'a String, u64, u64)>;

fn polling(p: &Program) -> Polled<'_> {
    let mut polled: Vec<_> = (p.mpi.iter())
        .filter(|(f, _)| returns_at_once(f))
        .filter_map(|(f, prof)| {
            let calls: u64 = prof.calls.iter().sum();
            let ranks = prof.calls.iter().filter(|&&c| c > 0).count() as u64;
            let time = total(prof.time_ns.iter().copied()).saturating_sub(judged(p, f));
            let polls = calls >= POLL_CALLS.saturating_mul(ranks.max(1))
                && time <= POLL_CALL_NS.saturating_mul(calls);
            (polls && time > 0).then_some((f, calls, time))
        })
        .collect();
    polled.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    polled
}

/// A loop polling for messages: its time counts as transfer, since no
/// wait-state pattern judges a call that does not block.
fn polling_finding(p: &Program, polled: &Polled, rank_time: u64) -> Option<Finding> {
    let e = p.efficiency?;
    let &(func, calls, time) = polled.first()?;
    let all = total(polled.iter().map(|x| x.2));
    let mut detail = format!(
        "{func} is called {} times for {} ({} of rank time, {:.1} µs a call)",
        count(calls),
        duration(time),
        share(time, rank_time),
        time as f64 / calls as f64 / 1e3
    );
    if polled.len() > 1 {
        detail.push_str(&format!(
            ", and other tests and probes in loops take {} more",
            duration(all - time)
        ));
    }
    // Where: the rank that polls longest, and the call path holding most.
    let longest = (p.mpi.get(func.as_str()))
        .and_then(|f| {
            f.time_ns
                .iter()
                .enumerate()
                .max_by_key(|(r, t)| (**t, std::cmp::Reverse(*r)))
        })
        .map(|(r, t)| (r, *t));
    let path = top(
        (p.regions.mpi.iter()).filter_map(|(path, funcs)| {
            Some((
                path,
                total(funcs.get(func.as_str())?.time_ns.iter().copied()),
            ))
        }),
        |&t| t,
    )
    .filter(|(path, t)| !path.is_empty() && *t > 0);
    let mut whose = "the polling rank".to_string();
    if let Some((r, t)) = longest.filter(|&(_, t)| t > 0) {
        detail.push_str(&format!("; rank {r} polls longest ({})", duration(t)));
        whose = format!("rank {r}");
    }
    if let Some((path, t)) = path {
        detail.push_str(&format!(
            "; {:.0} % of the polling is in region `{path}`",
            pct(t, time)
        ));
        whose.push_str(&format!(" in `{path}`"));
    }
    detail.push_str(&format!(
        ": each call returns at once, done or not, so this is a loop polling for messages or requests. No wait-state pattern judges a call that does not block, so this waiting counts as transfer (transfer efficiency {:.1} %) and names no late rank: to see who is late, complete the requests with MPI_Wait* instead, or look at what {whose} waits for.",
        100.0 * e.transfer
    ));
    Some(Finding {
        severity: String::new(),
        title: format!("Polling in {func}"),
        detail,
        time_ns: all,
    })
}

/// The transfer finding: time in MPI neither judged waiting nor `polled`
/// (the polling finding's, so that the two never count one call twice).
fn transfer_finding(p: &Program, polled: &Polled, rank_time: u64) -> Option<Finding> {
    let e = p.efficiency?;
    // `MPI_Init` and `MPI_Finalize` are outside every rank's window.
    let counted =
        |f: &str| by_name(f).is_none_or(|(_, f)| !matches!(f.class, Class::Init | Class::Finalize));
    // OpenMP waits (`omp_*`) are not in MPI.
    let waiting = total(
        (p.waits.iter())
            .filter(|(k, _)| !k.starts_with("omp_"))
            .flat_map(|(_, w)| w.time_ns.iter().copied()),
    );
    let mpi = total(
        (p.mpi.iter())
            .filter(|(f, _)| counted(f))
            .flat_map(|(_, f)| f.time_ns.iter().copied()),
    );
    // A polling loop's time is its own finding.
    let time = mpi
        .saturating_sub(waiting)
        .saturating_sub(total(polled.iter().map(|x| x.2)));
    if time == 0 {
        return None;
    }
    // Each function's part of it: its time less the waiting judged in it
    // (a `MPI_Waitany` that only waited moved no data), costliest first.
    let mut parts: Vec<(&String, u64)> = (p.mpi.iter())
        .filter(|(f, _)| counted(f) && !polled.iter().any(|x| x.0 == *f))
        .map(|(f, prof)| {
            let t = total(prof.time_ns.iter().copied());
            (f, t.saturating_sub(judged(p, f)))
        })
        .filter(|&(_, t)| t > 0)
        .collect();
    parts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let &(func, top_time) = parts.first()?;
    let besides = if polled.is_empty() {
        ""
    } else {
        ", besides the polling"
    };
    let (time_s, of_rank) = (duration(time), share(time, rank_time));
    let transfer = 100.0 * e.transfer;
    let of_it = |t: u64| pct(t, time);
    // Only a call that moves data is said to: a one-sided synchronisation
    // also waits for its targets, a barrier moves nothing, and a set-up
    // call (a communicator, a window, a file) moves no message data.
    let (kind, nature, advice) = match by_name(func).map(|(_, f)| f.class) {
        _ if matches!(func.as_str(), "MPI_Barrier" | "MPI_Ibarrier") => (
            "synchronisation",
            "which moves no data: past the wait for the last rank, which is judged, its time is the library synchronising the ranks",
            "Look at how often the program synchronises.",
        ),
        Some(Class::RmaSync) => (
            "one-sided synchronisation",
            "a one-sided synchronisation: its time is the transfers it completes and the waiting for its targets, which no pattern tells apart",
            "Look at how often the program synchronises its windows, and at the sizes and counts of its one-sided calls.",
        ),
        Some(
            Class::CommCreate
            | Class::CommFree
            | Class::Win
            | Class::FileMeta
            | Class::RequestMisc
            | Class::Other
            | Class::Query,
        ) => (
            "MPI set-up calls",
            "which moves no message data: it creates or frees communicators, windows or files, or manages the library, and the waiting inside it for other ranks is not judged",
            "Look at how often the program calls it.",
        ),
        _ => (
            "",
            "",
            "look at message sizes and counts, or overlap communication with work.",
        ),
    };
    let outside = format!(
        "MPI calls spend {time_s} ({of_rank} of rank time) outside the wait states Hark judges{besides} (transfer efficiency {transfer:.1} %)"
    );
    // A title speaks for the whole time only when one function holds most
    // of it; otherwise it names the largest part and the detail the next.
    let (title, detail) = if top_time.saturating_mul(2) < time {
        let next: String = (parts[1..].iter().take(2))
            .map(|&(f, t)| format!(", {:.0} % in {f}", of_it(t)))
            .collect();
        // The largest part's nature as a sentence of its own.
        let about = match nature.strip_prefix("which ") {
            _ if kind.is_empty() => format!(
                "{func} moves data: look at message sizes and counts, or overlap communication with work."
            ),
            Some(rest) => format!("{func} {rest}. {advice}"),
            None => format!("{func} is {nature}. {advice}"),
        };
        (
            format!("Time in MPI calls, the largest part in {func}"),
            format!(
                "{outside}, spread over several functions: {:.0} % of it in {func}{next}. {about}",
                of_it(top_time),
            ),
        )
    } else if kind.is_empty() {
        (
            "Time moving data".to_string(),
            format!(
                "MPI calls spend {time_s} ({of_rank} of rank time) moving data rather than waiting{besides} (transfer efficiency {transfer:.1} %), most in {func} ({:.0} % of it): {advice}",
                of_it(top_time)
            ),
        )
    } else {
        (
            format!("Time in {kind}, most in {func}"),
            format!(
                "{outside}, most in {func} ({:.0} % of it), {nature}. {advice}",
                of_it(top_time)
            ),
        )
    };
    Some(Finding {
        severity: String::new(),
        title,
        detail,
        time_ns: time,
    })
}

fn io_finding(p: &Program, rank_time: u64) -> Option<Finding> {
    let time = total(
        p.io.per_rank
            .iter()
            .flat_map(|ops| ops.values().map(|t| t.time_ns)),
    );
    if time == 0 {
        return None;
    }
    let file =
        p.io.files
            .iter()
            .map(|f| (f, total(f.ops.values().map(|t| t.time_ns))))
            .max_by_key(|(_, t)| *t);
    // A program without MPI has processes, not ranks.
    let whose = if p.mpi.is_empty() { "process" } else { "rank" };
    let mut detail = format!(
        "I/O calls take {} ({} of {whose} time)",
        duration(time),
        share(time, rank_time)
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
        digest(out);
    }
}

/// Fills `out.digest` from the rest of `out`.
fn digest(out: &mut Program) {
    let rank_time = total(out.rank_wall_ns.iter().copied());
    if rank_time == 0 {
        return;
    }
    let polled = polling(out);
    let cpu = cpu_finding(out);
    let first = cpu.as_ref().is_some_and(|c| c.1);
    let mut findings: Vec<Finding> = Pattern::ALL
        .iter()
        .filter_map(|&pattern| wait_finding(out, pattern, rank_time))
        .chain(imbalance_finding(out))
        .chain(polling_finding(out, &polled, rank_time))
        .chain(transfer_finding(out, &polled, rank_time))
        .chain(io_finding(out, rank_time))
        .chain(openmp::findings(out, rank_time))
        .chain(cpu.as_ref().filter(|c| !c.1).map(|c| c.0.clone()))
        .collect();
    findings.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.title.cmp(&b.title)));
    if let Some((f, true)) = cpu {
        findings.insert(0, f);
    }
    // The costliest five; below 0.5 % of rank time only to make up
    // three, the least a reader needs to compare.
    let significant = findings
        .iter()
        .filter(|f| pct(f.time_ns, rank_time) >= 0.5)
        .count()
        .max(first as usize);
    findings.truncate(significant.clamp(MIN_FINDINGS, MAX_FINDINGS));
    let ranks = out.rank_wall_ns.len();
    for f in &mut findings {
        f.severity = severity(f.time_ns, rank_time, ranks).into();
    }
    out.digest = findings;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{Efficiency, FunctionProfile, WaitCell, WaitPattern};

    fn calls(p: &mut Program, name: &str, calls: [u64; 2], time_ns: [u64; 2]) {
        p.mpi.insert(
            name.into(),
            FunctionProfile {
                calls: calls.to_vec(),
                time_ns: time_ns.to_vec(),
                ..FunctionProfile::default()
            },
        );
    }

    /// Two ranks for 10 s each: rank 1 polls `MPI_Testany` 2 million
    /// times for 4 s; both spend 1 s in `MPI_Send`; rank 0 waits in Late
    /// Sender 0.3 s in `MPI_Recv` and 0.1 s in `MPI_Wait`.
    fn program() -> Program {
        let mut p = Program {
            ranks: 2,
            rank_wall_ns: vec![10_000_000_000; 2],
            efficiency: Some(Efficiency {
                transfer: 0.5,
                ..Efficiency::default()
            }),
            ..Program::default()
        };
        calls(&mut p, "MPI_Testany", [0, 2_000_000], [0, 4_000_000_000]);
        calls(&mut p, "MPI_Send", [100, 100], [1_000_000_000; 2]);
        calls(&mut p, "MPI_Recv", [50, 0], [300_000_000, 0]);
        calls(&mut p, "MPI_Wait", [10, 0], [100_000_000, 0]);
        let cell = |t, n| WaitCell {
            time_ns: t,
            instances: n,
        };
        let late_sender = WaitPattern {
            time_ns: vec![400_000_000, 0],
            instances: vec![60, 0],
            by_function: [
                ("MPI_Recv".to_string(), cell(300_000_000, 50)),
                ("MPI_Wait".to_string(), cell(100_000_000, 10)),
            ]
            .into(),
            late: vec![cell(0, 0), cell(400_000_000, 60)],
            ..WaitPattern::default()
        };
        p.waits.insert("late_sender".into(), late_sender);
        p
    }

    #[test]
    fn a_loop_of_tests_is_polling_not_moving_data() {
        let p = program();
        let rank_time = 20_000_000_000;
        let f = polling_finding(&p, &polling(&p), rank_time).expect("a polling finding");
        assert_eq!(f.title, "Polling in MPI_Testany");
        assert_eq!(f.time_ns, 4_000_000_000);
        assert!(
            f.detail
                .contains("2,000,000 times for 4.00 s (20.0 % of rank time, 2.0 µs a call)"),
            "{}",
            f.detail
        );
        assert!(
            f.detail.contains("; rank 1 polls longest (4.00 s):")
                && f.detail.ends_with("look at what rank 1 waits for."),
            "{}",
            f.detail
        );
        // In a region, the finding names it.
        let mut inside = program();
        let cell = hark_model::PathCalls {
            calls: vec![0, 2_000_000],
            time_ns: vec![0, 3_000_000_000],
        };
        let outside = hark_model::PathCalls {
            calls: vec![0, 1],
            time_ns: vec![0, 1_000_000_000],
        };
        inside.regions.mpi.insert(
            "solve/halo".into(),
            [("MPI_Testany".to_string(), cell)].into(),
        );
        inside
            .regions
            .mpi
            .insert(String::new(), [("MPI_Testany".to_string(), outside)].into());
        let f = polling_finding(&inside, &polling(&inside), rank_time).unwrap();
        assert!(
            f.detail.contains(
                "; rank 1 polls longest (4.00 s); 75 % of the polling is in region `solve/halo`:"
            ) && f
                .detail
                .ends_with("look at what rank 1 in `solve/halo` waits for."),
            "{}",
            f.detail
        );
        // What is left is moving data: the sends, not the tests.
        let t = transfer_finding(&p, &polling(&p), rank_time).expect("a transfer finding");
        assert_eq!(t.time_ns, 2_000_000_000);
        assert!(t.detail.contains("most in MPI_Send"), "{}", t.detail);
        // A function that only waited moved no data, however long.
        let mut waited = program();
        calls(&mut waited, "MPI_Recv", [50, 0], [3_000_000_000, 0]);
        let w = waited.waits.get_mut("late_sender").unwrap();
        w.time_ns[0] = 3_100_000_000;
        w.by_function.get_mut("MPI_Recv").unwrap().time_ns = 3_000_000_000;
        let t = transfer_finding(&waited, &polling(&waited), rank_time).unwrap();
        assert!(t.detail.contains("most in MPI_Send"), "{}", t.detail);
        // Tests that are few, or slow each, are not a loop.
        let mut few = program();
        calls(&mut few, "MPI_Testany", [0, 999], [0, 4_000_000]);
        assert!(polling_finding(&few, &polling(&few), rank_time).is_none());
        let mut slow = program();
        calls(&mut slow, "MPI_Testany", [0, 2000], [0, 2000 * 60_000]);
        assert!(polling_finding(&slow, &polling(&slow), rank_time).is_none());
        let t = transfer_finding(&slow, &polling(&slow), rank_time).unwrap();
        assert_eq!(t.time_ns, 2_000_000_000 + 2000 * 60_000);
    }

    #[test]
    fn time_in_synchronisation_or_set_up_calls_is_not_called_moving_data() {
        let rank_time = 20_000_000_000;
        let mut p = program();
        calls(
            &mut p,
            "MPI_Win_flush_all",
            [9000, 9000],
            [3_000_000_000; 2],
        );
        let t = transfer_finding(&p, &polling(&p), rank_time).unwrap();
        assert_eq!(t.time_ns, 8_000_000_000);
        assert_eq!(
            t.title,
            "Time in one-sided synchronisation, most in MPI_Win_flush_all"
        );
        assert!(
            t.detail.starts_with(
                "MPI calls spend 8.00 s (40.0 % of rank time) outside the wait states Hark judges, besides the polling (transfer efficiency 50.0 %), most in MPI_Win_flush_all (75 % of it), a one-sided synchronisation:"
            ) && !t.detail.contains("moving data"),
            "{}",
            t.detail
        );
        // Creating windows moves no data either.
        let mut set_up = program();
        calls(
            &mut set_up,
            "MPI_Win_allocate",
            [900, 900],
            [3_000_000_000; 2],
        );
        let t = transfer_finding(&set_up, &polling(&set_up), rank_time).unwrap();
        assert_eq!(
            t.title,
            "Time in MPI set-up calls, most in MPI_Win_allocate"
        );
        assert!(
            t.detail
                .contains("most in MPI_Win_allocate (75 % of it), which moves no message data:")
                && !t.detail.contains("moving data"),
            "{}",
            t.detail
        );
        // Nor does a barrier, past its judged waiting.
        let mut barrier = program();
        calls(&mut barrier, "MPI_Barrier", [900, 900], [3_000_000_000; 2]);
        let t = transfer_finding(&barrier, &polling(&barrier), rank_time).unwrap();
        assert_eq!(t.title, "Time in synchronisation, most in MPI_Barrier");
        assert!(!t.detail.contains("moving data"), "{}", t.detail);
        // Data movement itself (MPI_Put) is moving data.
        let mut put = program();
        calls(&mut put, "MPI_Put", [9000, 9000], [3_000_000_000; 2]);
        let t = transfer_finding(&put, &polling(&put), rank_time).unwrap();
        assert_eq!(t.title, "Time moving data");
        assert!(
            t.detail.contains("most in MPI_Put (75 % of it):"),
            "{}",
            t.detail
        );
        // Spread over several functions, none holding half (Quantum
        // ESPRESSO: communicators split, all-to-alls, barriers): the title
        // does not speak for the whole time.
        let mut spread = program();
        calls(
            &mut spread,
            "MPI_Comm_split",
            [600, 600],
            [1_500_000_000; 2],
        );
        calls(&mut spread, "MPI_Alltoall", [900, 900], [1_000_000_000; 2]);
        let t = transfer_finding(&spread, &polling(&spread), rank_time).unwrap();
        assert_eq!(
            t.title,
            "Time in MPI calls, the largest part in MPI_Comm_split"
        );
        assert!(
            t.detail.contains(
                "spread over several functions: 43 % of it in MPI_Comm_split, 29 % in MPI_Alltoall, 29 % in MPI_Send. MPI_Comm_split moves no message data: it creates"
            ) && t.detail.ends_with("Look at how often the program calls it."),
            "{}",
            t.detail
        );
    }

    #[test]
    fn a_pattern_in_several_functions_gives_the_top_ones_own_numbers() {
        let p = program();
        let f = wait_finding(&p, Pattern::LateSender, 20_000_000_000).unwrap();
        assert_eq!(f.title, "Late Sender, most in MPI_Recv");
        assert!(
            f.detail.starts_with("Late Sender costs 2.0 % of rank time (400.0 ms over 60 instances), 75 % of it in MPI_Recv (300.0 ms over 50 instances); rank 1 is the late one in 100 % of the instances"),
            "{}",
            f.detail
        );
        // In one function only, the title names it and the numbers are one.
        let mut one = program();
        let w = one.waits.get_mut("late_sender").unwrap();
        w.by_function.remove("MPI_Wait");
        w.by_function.get_mut("MPI_Recv").unwrap().time_ns = 400_000_000;
        let f = wait_finding(&one, Pattern::LateSender, 20_000_000_000).unwrap();
        assert_eq!(f.title, "Late Sender in MPI_Recv");
        assert!(f.detail.starts_with("Late Sender in MPI_Recv costs 2.0 % of rank time (400.0 ms over 60 instances); rank 1"), "{}", f.detail);
    }

    #[test]
    fn severity_weighs_the_time_per_rank_as_well_as_the_share() {
        // `ls`: 15.58 µs of I/O in 50 µs is a third of the run, and nothing.
        assert_eq!(severity(15_580, 50_000, 1), "low");
        // 4 ranks of 1.3 s: 20 % is high, 5 % medium, 1 % low.
        let rank_time = 4 * 1_300_000_000;
        assert_eq!(severity(rank_time / 5, rank_time, 4), "high");
        assert_eq!(severity(rank_time / 20, rank_time, 4), "medium");
        assert_eq!(severity(rank_time / 100, rank_time, 4), "low");
        // 20 % of a 40 ms run: 8 ms per rank is worth medium, not high.
        assert_eq!(severity(4 * 8_000_000, 4 * 40_000_000, 4), "medium");
    }

    #[test]
    fn a_short_run_s_findings_still_give_their_numbers() {
        // A wait of 16.9 µs in a run of 20 s of rank time: neither
        // "0.0 ms" nor "0.0 %".
        let mut p = program();
        let w = p.waits.get_mut("late_sender").unwrap();
        w.by_function.remove("MPI_Wait");
        w.by_function.get_mut("MPI_Recv").unwrap().time_ns = 16_900;
        w.time_ns = vec![16_900, 0];
        let f = wait_finding(&p, Pattern::LateSender, 20_000_000_000).unwrap();
        assert!(
            f.detail.starts_with(
                "Late Sender in MPI_Recv costs under 0.1 % of rank time (16.9 µs over 60 instances)"
            ),
            "{}",
            f.detail
        );
        assert_eq!(duration(420), "420 ns");
        assert_eq!(duration(1_560_000_000), "1.56 s");
        assert_eq!(share(0, 100), "0.0 %");
        assert_eq!(share(5, 10_000), "0.1 %");
    }

    /// The host's ranks waited `wait` ns for a CPU, on a CPU for `on`.
    fn starved(p: &mut Program, on: u64, wait: u64) {
        let total = hark_model::CpuTimes {
            on_cpu_ns: on,
            runnable_wait_ns: wait,
            ..Default::default()
        };
        p.cpu.hosts = vec![hark_model::CpuHost {
            host: "node7".into(),
            processes: 2,
            cpus_used: 1.0,
            total,
            wait_share: total.wait_share(),
        }];
        p.cpu.wait_measured = true;
        p.cpu.wait_state_overlap.insert("late_sender".into(), 0.75);
    }

    #[test]
    fn ranks_short_of_cpus_come_first_and_the_waits_say_how_much_overlapped() {
        // 200 ms of waiting for a CPU in 300 ms runnable: less than the
        // 4 s of polling, but everything else is distorted by it.
        let mut p = program();
        starved(&mut p, 100_000_000, 200_000_000);
        digest(&mut p);
        let first = &p.digest[0];
        assert_eq!(first.title, "Waiting for a CPU on node7");
        assert!(
            first.detail.starts_with("2 processes on node7 had 1.0 CPUs between them and waited 66.7 % of their time for a CPU (200.0 ms of 300.0 ms runnable): give each rank a core of its own"),
            "{}",
            first.detail
        );
        let late = p
            .digest
            .iter()
            .find(|f| f.title.starts_with("Late Sender"))
            .unwrap();
        assert!(late.detail.contains("(75 % of this waiting fell in time slices in which the waiting rank itself waited for a CPU)"), "{}", late.detail);
        // Waiting 5 % of the time: a finding like others, by its cost.
        let mut p = program();
        starved(&mut p, 3_800_000_000, 200_000_000);
        digest(&mut p);
        assert!(
            !p.digest[0].title.starts_with("Waiting for a CPU"),
            "{:?}",
            p.digest
        );
    }
}
