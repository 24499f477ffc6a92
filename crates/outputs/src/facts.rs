//! Quantities derived from the model that more than one output shows: the
//! functions ranked by time, the heaviest pairs, I/O totals, the accounting
//! line. Computing them here once keeps the summary and the report agreeing.

use crate::units;
use hark_model::{Accounting, Efficiency, Finding, Program, Run, Spread};
use std::collections::BTreeMap;

/// One MPI function of a program, totalled over ranks.
pub(crate) struct FunctionRow<'a> {
    pub name: &'a str,
    pub calls: u64,
    pub bytes: u64,
    pub time_ns: u64,
    /// Time per rank across ranks (computed from the per-rank times, so it
    /// holds whatever the server filled in `time_across_ranks`).
    pub spread: Spread,
    /// Mean time of one call, in ns.
    pub mean_call_ns: f64,
}

/// The program's MPI functions, longest total time first (ties by name).
pub(crate) fn functions_by_time(p: &Program) -> Vec<FunctionRow<'_>> {
    let mut rows: Vec<FunctionRow<'_>> = p
        .mpi
        .iter()
        .map(|(name, f)| {
            let calls = total(f.calls.iter().copied());
            let time_ns = total(f.time_ns.iter().copied());
            let per_rank: Vec<f64> = f.time_ns.iter().map(|&t| t as f64).collect();
            FunctionRow {
                name,
                calls,
                bytes: total(f.bytes.iter().copied()),
                time_ns,
                spread: Spread::of(&per_rank),
                mean_call_ns: if calls == 0 {
                    0.0
                } else {
                    time_ns as f64 / calls as f64
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.name.cmp(b.name)));
    rows
}

/// Traffic from one rank to another.
pub(crate) struct Pair {
    pub from: usize,
    pub to: usize,
    pub messages: u64,
    pub bytes: u64,
}

/// The `n` pairs that moved the most bytes (then messages), heaviest first.
pub(crate) fn heaviest_pairs(p: &Program, n: usize) -> Vec<Pair> {
    heaviest(&p.p2p.messages, &p.p2p.bytes, n)
}

/// [`heaviest_pairs`] of one-sided operations (`messages` counts them),
/// from origin to target.
pub(crate) fn heaviest_one_sided(p: &Program, n: usize) -> Vec<Pair> {
    heaviest(&p.p2p.one_sided.messages, &p.p2p.one_sided.bytes, n)
}

fn heaviest(messages: &[Vec<u64>], bytes: &[Vec<u64>], n: usize) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for (from, row) in messages.iter().enumerate() {
        for (to, &messages) in row.iter().enumerate() {
            let bytes = cell(bytes, from, to);
            if messages > 0 || bytes > 0 {
                pairs.push(Pair {
                    from,
                    to,
                    messages,
                    bytes,
                });
            }
        }
    }
    pairs.sort_by(|a, b| {
        (b.bytes, b.messages, a.from, a.to).cmp(&(a.bytes, a.messages, b.from, b.to))
    });
    pairs.truncate(n);
    pairs
}

/// `m[i][j]`, or 0 where the matrix is smaller than expected.
pub(crate) fn cell(m: &[Vec<u64>], i: usize, j: usize) -> u64 {
    m.get(i).and_then(|r| r.get(j)).copied().unwrap_or(0)
}

/// A program's I/O over all files and ranks.
#[derive(Default)]
pub(crate) struct IoTotals {
    pub files: usize,
    pub calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub time_ns: u64,
}

pub(crate) fn io_totals(p: &Program) -> IoTotals {
    let mut t = IoTotals {
        files: p.io.files.len(),
        ..IoTotals::default()
    };
    for f in &p.io.files {
        t.read_bytes = total([t.read_bytes, total(f.read_bytes.iter().copied())]);
        t.write_bytes = total([t.write_bytes, total(f.write_bytes.iter().copied())]);
        for op in f.ops.values() {
            t.calls = t.calls.saturating_add(op.calls);
            t.time_ns = t.time_ns.saturating_add(op.time_ns);
        }
    }
    t
}

/// The sum of `values`, saturating: per-rank numbers come from the probes'
/// streams, and a stream can say anything.
pub(crate) use hark_model::sat::total;

/// The rank that index `index` of a per-rank array (and a [`Spread`]'s
/// `min_rank` / `max_rank`) stands for: its world rank, or, for a process
/// without one (not MPI), its place among the program's processes. The two
/// differ whenever a world rank is missing (a rank killed before it
/// connected, `MPI_Abort`) or a program is the second of an MPMD launch.
pub(crate) fn rank_at(p: &Program, index: usize) -> i64 {
    p.rank_info
        .get(index)
        .map(|r| r.world_rank)
        .filter(|w| *w >= 0)
        .map_or(index as i64, i64::from)
}

/// How a row is named where a rank is cited (a spread's min and max, a
/// density map's peak): its rank, or "the N other processes" for the row
/// of processes folded together.
pub(crate) fn rank_label(p: &Program, index: usize) -> String {
    match p.rank_info.get(index) {
        Some(r) if r.folded > 0 => format!("the {} other processes", units::count(r.folded)),
        _ => format!("rank {}", rank_at(p, index)),
    }
}

/// [`rank_label`] in a table cell: `r4`, or `others`.
pub(crate) fn rank_short(p: &Program, index: usize) -> String {
    match p.rank_info.get(index) {
        Some(r) if r.folded > 0 => "others".to_string(),
        _ => format!("r{}", rank_at(p, index)),
    }
}

/// What a run measured, for the summary's first line: "2 programs, 6
/// ranks", "1 program, 1 process", with the helper programs (see
/// [`crate::roles`]) counted apart: ", and 24 short-lived processes of 7
/// other programs".
pub(crate) fn measured_phrase(run: &Run, helpers: &[usize]) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        format!("{} {}", units::count(n), if n == 1 { one } else { many })
    };
    let shown: Vec<&Program> = run
        .programs
        .iter()
        .enumerate()
        .filter(|(i, _)| !helpers.contains(i))
        .map(|(_, p)| p)
        .collect();
    let count = |mpi: bool| -> u64 {
        shown
            .iter()
            .filter(|p| crate::roles::has_mpi(p) == mpi)
            .map(|p| p.processes())
            .sum()
    };
    let (ranks, processes) = (count(true), count(false));
    let mut s = plural(shown.len() as u64, "program", "programs");
    if ranks > 0 || processes == 0 {
        s.push_str(&format!(", {}", plural(ranks, "rank", "ranks")));
    }
    if processes > 0 {
        let joint = if ranks > 0 { " and" } else { "," };
        s.push_str(&format!(
            "{joint} {}",
            plural(processes, "process", "processes")
        ));
    }
    if !helpers.is_empty() {
        let n: u64 = helpers.iter().map(|&i| run.programs[i].processes()).sum();
        s.push_str(&format!(
            ", and {} of {}",
            plural(n, "short-lived process", "short-lived processes"),
            plural(helpers.len() as u64, "other program", "other programs")
        ));
    }
    s
}

/// "N ranks", or for a program whose later processes were folded into one
/// row, "N processes (M of them in one row: \"M other processes\")".
pub(crate) fn ranks_phrase(p: &Program) -> String {
    let folded: u64 = p.rank_info.iter().map(|r| r.folded).sum();
    if folded == 0 {
        let n = p.ranks;
        return format!("{n} {}", crate::roles::unit(p, n as u64));
    }
    format!(
        "{} processes ({} of them folded into one row, \"{} other processes\", to bound memory)",
        units::count(p.processes()),
        units::count(folded),
        units::count(folded)
    )
}

/// Time in MPI over all ranks, and the ranks' wall time over all ranks.
pub(crate) fn mpi_and_wall(p: &Program) -> (u64, u64) {
    (
        total(p.mpi_time_ns.iter().copied()),
        total(p.rank_wall_ns.iter().copied()),
    )
}

/// The ranks the per-rank data actually covers: `p.ranks`, but never more
/// than the longest per-rank vector, so a hand-edited `profile.json` that
/// claims a billion ranks cannot make an output loop a billion times.
pub(crate) fn ranks(p: &Program) -> usize {
    let held = [
        p.rank_info.len(),
        p.p2p.messages.len(),
        p.mpi_time_ns.len(),
        p.rank_wall_ns.len(),
    ]
    .into_iter()
    .chain(p.mpi.values().map(|f| f.calls.len()))
    .max()
    .unwrap_or(0);
    p.ranks.min(held)
}

/// Share of each rank's wall time spent in MPI, in percent.
pub(crate) fn mpi_percent_per_rank(p: &Program) -> Vec<f64> {
    (0..ranks(p))
        .map(|r| {
            let mpi = p.mpi_time_ns.get(r).copied().unwrap_or(0) as f64;
            let wall = p.rank_wall_ns.get(r).copied().unwrap_or(0) as f64;
            if wall > 0.0 {
                100.0 * mpi / wall
            } else {
                0.0
            }
        })
        .collect()
}

/// Events recorded but never analysed, whatever the reason. The probe
/// counts dropped events among those it recorded, so this is
/// `written - analysed`; [`lost_detail`] splits it by where it happened.
pub(crate) fn lost(a: &Accounting) -> u64 {
    a.events_written.saturating_sub(a.events_analysed)
}

/// Where the lost events went, empty when none were lost.
pub(crate) fn lost_detail(a: &Accounting) -> Vec<String> {
    let mut parts = Vec::new();
    if a.events_dropped > 0 {
        parts.push(format!(
            "{} dropped by the probes",
            units::count(a.events_dropped)
        ));
    }
    let sent = a.events_written.saturating_sub(a.events_dropped);
    let in_transit = sent.saturating_sub(a.events_received);
    if in_transit > 0 {
        parts.push(format!(
            "{} never reached the server",
            units::count(in_transit)
        ));
    }
    let unanalysed = a.events_received.saturating_sub(a.events_analysed);
    if unanalysed > 0 {
        parts.push(format!(
            "{} received but not analysed",
            units::count(unanalysed)
        ));
    }
    parts
}

/// "N events, M lost", with the reasons when M is not 0. When streams
/// ended without their end record, what they lost is not known: the line
/// then says "loss unknown for K ranks" (and child processes) instead of
/// calling the loss zero, and any loss that is known is "at least".
pub(crate) fn accounting_line(a: &Accounting) -> String {
    let unknown = unknown_loss(a);
    let mut line = format!("{} events", units::count(a.events_written));
    let known = lost(a);
    match (&unknown, known) {
        (None, _) => line.push_str(&format!(", {} lost", units::count(known))),
        (Some(_), 0) => {}
        (Some(_), _) => line.push_str(&format!(", at least {} lost", units::count(known))),
    }
    let detail = lost_detail(a);
    if !detail.is_empty() {
        line.push_str(&format!(" ({})", detail.join(", ")));
    }
    if let Some(unknown) = unknown {
        line.push_str(&format!(", {unknown}"));
    }
    line
}

/// "loss unknown for K ranks[ and C child processes]" when some streams
/// ended without their end record; `None` when every loss is known.
pub(crate) fn unknown_loss(a: &Accounting) -> Option<String> {
    let mut parts = Vec::new();
    if a.partial_ranks > 0 {
        let n = a.partial_ranks;
        parts.push(format!("{n} {}", if n == 1 { "rank" } else { "ranks" }));
    }
    if a.partial_children > 0 {
        let n = a.partial_children;
        parts.push(format!(
            "{n} {}",
            if n == 1 {
                "child process"
            } else {
                "child processes"
            }
        ));
    }
    (!parts.is_empty()).then(|| format!("loss unknown for {}", parts.join(" and ")))
}

/// Each partial rank as `program rank r (world w, host h, pid p)`.
pub(crate) fn partial_ranks(run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for p in &run.programs {
        for (r, info) in p.rank_info.iter().enumerate() {
            if info.partial {
                out.push(format!(
                    "{} rank {r} (world rank {}, host {}, pid {})",
                    p.name, info.world_rank, info.host, info.pid
                ));
            }
            if info.folded > 0 && info.accounting.partial_ranks > 0 {
                out.push(format!(
                    "{} of the {} other processes of {} (named in the diagnostics)",
                    info.accounting.partial_ranks, info.folded, p.name
                ));
            }
        }
    }
    out
}

/// The five POP efficiencies in the order they nest (parallel = load
/// balance × communication, communication = serialisation × transfer),
/// with their names and their depth in that tree.
pub(crate) fn efficiencies(e: &Efficiency) -> [(&'static str, usize, f64); 5] {
    [
        ("parallel", 0, e.parallel),
        ("load balance", 1, e.load_balance),
        ("communication", 1, e.communication),
        ("serialisation", 2, e.serialisation),
        ("transfer", 2, e.transfer),
    ]
}

/// The program's efficiency tree, `(name, depth, value)` in the order
/// the factors nest: the five POP efficiencies ([`efficiencies`]) with, in
/// the hybrid model (`docs/analyses.md`, "OpenMP"), MPI load balance split
/// within and across nodes under load balance; then OpenMP parallel
/// efficiency = load balance × scheduling × serialisation. Without MPI only
/// the OpenMP rows, without OpenMP only the five.
pub(crate) fn efficiency_tree(p: &Program) -> Vec<(&'static str, usize, f64)> {
    let mut rows = Vec::new();
    if let Some(e) = &p.efficiency {
        for row in efficiencies(e) {
            rows.push(row);
            if row.0 == "load balance" {
                if let Some(v) = e.mpi_load_balance_in {
                    rows.push(("within nodes", 2, v));
                }
                if let Some(v) = e.mpi_load_balance_out {
                    rows.push(("across nodes", 2, v));
                }
            }
        }
    }
    if let Some(o) = p.openmp.efficiency {
        rows.extend([
            ("OpenMP parallel", 0, o.parallel),
            ("OpenMP load balance", 1, o.load_balance),
            ("OpenMP scheduling", 1, o.scheduling),
            ("OpenMP serialisation", 1, o.serialisation),
        ]);
    }
    rows
}

/// The OpenMP time categories of [`ThreadTimes`], in the order the
/// per-thread bars stack them: name, CSS class, value.
pub(crate) fn thread_parts(t: &hark_model::ThreadTimes) -> [(&'static str, &'static str, u64); 7] {
    [
        ("useful", "t-useful", t.useful_ns),
        ("barrier", "t-barrier", t.omp_barrier_ns),
        ("idle", "t-idle", t.omp_idle_ns),
        ("lock", "t-lock", t.omp_lock_ns),
        ("fork/join", "t-mgmt", t.omp_management_ns),
        ("MPI", "t-mpi", t.mpi_ns),
        ("I/O", "t-io", t.io_ns),
    ]
}

/// Where a time axis ends for `used` slices of `slice_ns` with data out of
/// `capacity`: at the program's wall time `wall_ns` when that falls after
/// the last slice with data began and within the capacity (the program may
/// end quietly), else at the last slice with data. Never at the capacity
/// of the slices for its own sake.
pub(crate) fn slices_end(used: usize, capacity: usize, slice_ns: u64, wall_ns: u64) -> u64 {
    let full = (used as u64).saturating_mul(slice_ns);
    let last_start = full.saturating_sub(slice_ns);
    let room = (capacity.max(used) as u64).saturating_mul(slice_ns);
    if wall_ns > last_start && wall_ns <= room {
        wall_ns
    } else {
        full
    }
}

/// The program's top-level regions that have efficiencies, longest
/// runtime first (ties by name).
pub(crate) fn regions_by_runtime(p: &Program) -> Vec<(&str, &Efficiency)> {
    let mut rows: Vec<(&str, &Efficiency)> = p
        .efficiency_by_region
        .iter()
        .map(|(name, e)| (name.as_str(), e))
        .collect();
    rows.sort_by(|a, b| b.1.runtime_ns.cmp(&a.1.runtime_ns).then(a.0.cmp(b.0)));
    rows
}

/// The digest's findings, costliest first (the analyses order them so; a
/// hand-edited `profile.json` may not), ties in the model's order.
pub(crate) fn findings(p: &Program) -> Vec<&Finding> {
    let mut f: Vec<&Finding> = p.digest.iter().collect();
    f.sort_by_key(|f| std::cmp::Reverse(f.time_ns));
    f
}

/// How the program's ranks were put on one timeline, in one line; `None`
/// for a model without clock records (older `profile.json`).
pub(crate) fn clock_line(p: &Program) -> Option<String> {
    let c = &p.clock;
    if c.ranks.is_empty() {
        return None;
    }
    let aligned = c.ranks.iter().filter(|r| r.method == "ping-pong").count();
    let worst_trip = c
        .ranks
        .iter()
        .flat_map(|r| [r.init, r.finalize])
        .flatten()
        .map(|m| m.round_trip_ns)
        .max()
        .unwrap_or(0);
    // Older models name no reference: theirs was world rank 0.
    let with = if c
        .ranks
        .iter()
        .filter(|r| r.method == "ping-pong")
        .all(|r| r.reference == "hark")
    {
        "hark's clock"
    } else {
        "world rank 0"
    };
    let how = if aligned == 0 {
        "handshake only, good to about 1 ms".to_string()
    } else {
        format!(
            "{aligned} of {} ranks aligned with {with} by ping-pong (round trips up to {})",
            c.ranks.len(),
            units::duration(worst_trip as f64)
        )
    };
    Some(format!(
        "{how}; residual alignment error at most {}; {} clock-condition violations",
        units::duration(c.residual_ns as f64),
        units::count(c.violations)
    ))
}

/// The ranks that never reached hark, one clause per job ("1 of 2 ranks
/// measured: rank 1 never reached hark"), joined by "; "; `None` when
/// every rank of every job whose size is known connected. Ranks whose
/// probe said why are named with their host and reason ("rank 1 on n2
/// could not reach hark: Connection refused (os error 111)"), grouped by
/// both, the first [`UNREACHED_GROUPS`] groups.
pub(crate) fn missing_line(run: &hark_model::Run) -> Option<String> {
    let several = run.missing.len() > 1;
    let clauses: Vec<String> = run
        .missing
        .iter()
        .map(|m| {
            let absent = m.world_size.saturating_sub(m.measured) as usize;
            let job = if several {
                format!("job {}: ", m.job)
            } else {
                String::new()
            };
            let mut parts = unreached_parts(&m.unreached);
            let said: std::collections::BTreeSet<u32> =
                m.unreached.iter().map(|u| u.rank).collect();
            let silent: Vec<u32> = m
                .ranks
                .iter()
                .copied()
                .filter(|r| !said.contains(r))
                .collect();
            let rest = absent.saturating_sub(said.len());
            if rest > 0 {
                parts.push(format!("{} never reached hark", rank_list(&silent, rest)));
            }
            format!(
                "{job}{} of {} ranks measured: {}",
                m.measured,
                m.world_size,
                parts.join("; "),
            )
        })
        .collect();
    (!clauses.is_empty()).then(|| clauses.join("; "))
}

/// Groups of unreached ranks [`missing_line`] names; the rest are counted.
const UNREACHED_GROUPS: usize = 4;

/// "rank 1 on n2 could not reach hark: REASON", one per host and reason.
fn unreached_parts(unreached: &[hark_model::Unreached]) -> Vec<String> {
    let mut groups: BTreeMap<(&str, &str), Vec<u32>> = BTreeMap::new();
    for u in unreached {
        groups.entry((&u.host, &u.reason)).or_default().push(u.rank);
    }
    let mut parts = Vec::new();
    let mut named = 0;
    for ((host, reason), mut ranks) in groups.into_iter().take(UNREACHED_GROUPS) {
        ranks.sort_unstable();
        ranks.dedup();
        named += ranks.len();
        parts.push(format!(
            "{} on {host} could not reach hark: {reason}",
            rank_list(&ranks, ranks.len())
        ));
    }
    let more = unreached.len().saturating_sub(named);
    if more > 0 {
        let word = if more == 1 { "rank" } else { "ranks" };
        parts.push(format!("{more} more {word} could not reach hark"));
    }
    parts
}

/// "rank 1", "ranks 1, 3 and 5", "ranks 4–7 and 9": runs of consecutive
/// ranks as ranges, at most eight items, then how many more of `total`.
fn rank_list(ranks: &[u32], total: usize) -> String {
    let mut items: Vec<String> = Vec::new();
    let mut listed = 0;
    let mut i = 0;
    while i < ranks.len() && items.len() < 8 {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        items.push(if j > i + 1 {
            format!("{}–{}", ranks[i], ranks[j])
        } else if j == i + 1 {
            // Two in a row read better as a pair than a range.
            j = i;
            ranks[i].to_string()
        } else {
            ranks[i].to_string()
        });
        listed += j - i + 1;
        i = j + 1;
    }
    if total > listed {
        items.push(format!("{} more", total - listed));
    }
    let word = if total == 1 { "rank" } else { "ranks" };
    match items.as_slice() {
        [] => word.to_string(),
        [one] => format!("{word} {one}"),
        [rest @ .., last] => format!("{word} {} and {last}", rest.join(", ")),
    }
}

/// One performance counter of a program: its name, its total over the
/// ranks, the least and most of one rank, and the smallest share of time
/// it counted when the kernel multiplexed it.
pub(crate) struct CounterRow<'p> {
    pub name: &'p str,
    pub total: u64,
    pub min: u64,
    pub max: u64,
    pub multiplexed: Option<f64>,
}

impl CounterRow<'_> {
    /// `v` as this counter's unit reads: clocks in time, the rest counted.
    pub fn shown(&self, v: u64) -> String {
        counter_shown(self.name, v)
    }
}

/// Count `v` of counter `name` as its unit reads: clocks in time, the rest
/// counted.
pub(crate) fn counter_shown(name: &str, v: u64) -> String {
    if name.ends_with("-clock") {
        units::duration(v as f64)
    } else {
        units::count(v)
    }
}

/// Every performance counter of `p`, by name.
pub(crate) fn counter_rows(p: &Program) -> Vec<CounterRow<'_>> {
    let mut names: Vec<&str> = p
        .counters
        .iter()
        .flat_map(|c| c.keys().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let per_rank: Vec<u64> = p
                .counters
                .iter()
                .map(|c| c.get(name).copied().unwrap_or(0))
                .collect();
            CounterRow {
                name,
                total: total(per_rank.iter().copied()),
                min: per_rank.iter().copied().min().unwrap_or(0),
                max: per_rank.iter().copied().max().unwrap_or(0),
                multiplexed: p.counter_info.multiplexed.get(name).copied(),
            }
        })
        .collect()
}

/// A node's figures over the run in words, one part per group (CPU,
/// memory, network, InfiniBand, disk, load): means, with the highest
/// reading.
pub fn node_figures(n: &hark_model::Node) -> Vec<String> {
    use crate::units::{bytes, fraction};
    let mut parts = Vec::new();
    if let Some(c) = &n.cpu {
        parts.push(format!(
            "CPU {} busy (max {}; user {}, system {}, iowait {}, steal {})",
            fraction(1.0 - c.idle - c.iowait),
            fraction(c.busy_max),
            fraction(c.user),
            fraction(c.system),
            fraction(c.iowait),
            fraction(c.steal)
        ));
    }
    if let Some(m) = &n.memory {
        parts.push(format!(
            "memory {} of {} used (max {})",
            bytes(m.used_bytes_mean as u64),
            bytes(m.total_bytes),
            bytes(m.used_bytes_max)
        ));
    }
    for (what, t, i, o) in [
        ("network", &n.network, "in", "out"),
        ("InfiniBand", &n.infiniband, "in", "out"),
        ("disk", &n.disk, "read", "written"),
    ] {
        if let Some(t) = t {
            parts.push(format!(
                "{what} {i} {}/s {o} {}/s (max {}/s, {}/s)",
                bytes(t.in_bytes_per_s_mean as u64),
                bytes(t.out_bytes_per_s_mean as u64),
                bytes(t.in_bytes_per_s_max as u64),
                bytes(t.out_bytes_per_s_max as u64)
            ));
        }
    }
    if let Some(l) = &n.load {
        parts.push(format!("load {:.2} (max {:.2})", l.load1_mean, l.load1_max));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{MissingRanks, Run};

    fn missing(job: &str, size: u32, ranks: &[u32]) -> MissingRanks {
        MissingRanks {
            job: job.into(),
            world_size: size,
            measured: size - ranks.len() as u32,
            ranks: ranks.to_vec(),
            unreached: Vec::new(),
        }
    }

    fn unreached(rank: u32, host: &str, reason: &str) -> hark_model::Unreached {
        hark_model::Unreached {
            rank,
            host: host.into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn ranks_that_said_why_are_named_with_their_host_and_reason() {
        let mut m = missing("j", 4, &[1, 2, 3]);
        m.unreached = vec![
            unreached(3, "n2", "Connection refused (os error 111)"),
            unreached(1, "n2", "Connection refused (os error 111)"),
        ];
        let run = Run {
            missing: vec![m],
            ..Run::default()
        };
        assert_eq!(
            missing_line(&run).unwrap(),
            "1 of 4 ranks measured: ranks 1 and 3 on n2 could not reach hark: \
             Connection refused (os error 111); rank 2 never reached hark"
        );
    }

    #[test]
    fn the_ranks_that_never_reached_hark_are_named() {
        let mut run = Run::default();
        assert_eq!(missing_line(&run), None);
        run.missing = vec![missing("j", 2, &[1])];
        assert_eq!(
            missing_line(&run).unwrap(),
            "1 of 2 ranks measured: rank 1 never reached hark"
        );
        run.missing = vec![missing("j", 16, &[1, 2, 4, 5, 6, 7, 9])];
        assert_eq!(
            missing_line(&run).unwrap(),
            "9 of 16 ranks measured: ranks 1, 2, 4–7 and 9 never reached hark"
        );
        run.missing = vec![missing("a", 2, &[0]), missing("b", 3, &[2])];
        assert_eq!(
            missing_line(&run).unwrap(),
            "job a: 1 of 2 ranks measured: rank 0 never reached hark; \
             job b: 2 of 3 ranks measured: rank 2 never reached hark"
        );
        let many: Vec<u32> = (0..40).map(|r| 2 * r).collect();
        let line = missing_line(&Run {
            missing: vec![missing("j", 80, &many)],
            ..Run::default()
        })
        .unwrap();
        assert!(
            line.ends_with("12, 14 and 32 more never reached hark"),
            "{line}"
        );
    }
}
