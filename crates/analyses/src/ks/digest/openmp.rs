//! The digest's OpenMP findings: barrier waiting (load imbalance among a
//! team's threads), threads idle while the master runs alone
//! (serialisation), lock contention and the runtime's fork and join.
//!
//! They are costed on the same scale as the MPI findings, rank time: a
//! rank whose `n` OpenMP threads lose `L` ns of thread time between them
//! would run `L / n` ns shorter if they lost none, so a finding costs, over
//! ranks, its thread time divided by its rank's OpenMP threads. A finding
//! under [`MIN_SHARE`] of rank time is not made at all: OpenMP threads
//! always wait a little at barriers and forks.

use super::{duration, pct, share};
use crate::sat::total;
use hark_model::{Finding, OmpRegion, Program, ThreadTimes};

/// An OpenMP finding costs at least this share of rank time, in percent.
pub const MIN_SHARE: f64 = 0.5;

/// The OpenMP threads of one rank: those that ran in a team.
fn team(threads: &[ThreadTimes]) -> u64 {
    (threads.iter().filter(|t| t.omp_thread >= 0).count() as u64).max(1)
}

/// Rank time lost to `what`: per rank, its threads' time over its OpenMP
/// threads (see the module documentation).
fn cost(p: &Program, what: impl Fn(&ThreadTimes) -> u64) -> u64 {
    total((p.threads.iter()).map(|ts| total(ts.iter().map(&what)) / team(ts)))
}

/// Thread time lost to `what`, over all threads of all ranks.
fn thread_time(p: &Program, what: impl Fn(&ThreadTimes) -> u64) -> u64 {
    total(p.threads.iter().flatten().map(what))
}

/// Whose time the shares are of: a program without MPI has processes,
/// not ranks (as the I/O finding says).
fn whose(p: &Program) -> &'static str {
    if p.mpi.is_empty() {
        "process"
    } else {
        "rank"
    }
}

/// "thread 3", or "thread 3 of rank 1" in a program of several ranks.
fn thread_name(p: &Program, rank: usize, index: usize) -> String {
    let num = (p.threads.get(rank))
        .and_then(|ts| ts.get(index))
        .map_or(index as i32, |t| t.omp_thread);
    if p.threads.len() > 1 {
        format!("thread {num} of rank {rank}")
    } else {
        format!("thread {num}")
    }
}

/// The findings worth making, in no order.
pub(super) fn findings(p: &Program, rank_time: u64) -> Vec<Finding> {
    if p.threads.is_empty() {
        return Vec::new();
    }
    [
        barrier(p, rank_time),
        idle(p, rank_time),
        lock(p, rank_time),
        management(p, rank_time),
    ]
    .into_iter()
    .flatten()
    .filter(|f| pct(f.time_ns, rank_time) >= MIN_SHARE)
    .collect()
}

/// A region's barrier waiting over all its threads.
fn barrier_of(r: &OmpRegion) -> u64 {
    total(r.barrier_ns.iter().flatten().copied())
}

/// Threads waiting at barriers for the slowest of their team.
fn barrier(p: &Program, rank_time: u64) -> Option<Finding> {
    let time = cost(p, |t| t.omp_barrier_ns);
    let all = thread_time(p, |t| t.omp_barrier_ns);
    if time == 0 {
        return None;
    }
    let balance = p.openmp.efficiency.map(|e| e.load_balance);
    let mut detail = format!(
        "Threads wait {} at OpenMP barriers and for their region's join ({} of {} time",
        duration(all),
        share(time, rank_time),
        whose(p)
    );
    if let Some(b) = balance {
        detail.push_str(&format!("; OpenMP load balance {:.1} %", 100.0 * b));
    }
    detail.push(')');
    let region = (p.openmp.regions.iter())
        .filter(|r| barrier_of(r) > 0)
        .max_by(|a, b| barrier_of(a).cmp(&barrier_of(b)).then(b.name.cmp(&a.name)));
    let Some(r) = region else {
        detail.push_str(": look at how each parallel region divides its work between threads.");
        return Some(Finding {
            severity: String::new(),
            title: "OpenMP load imbalance".into(),
            detail,
            time_ns: time,
        });
    };
    detail.push_str(&format!(
        ", {:.0} % of it in `{}` ({} call{}, {} threads)",
        pct(barrier_of(r), all),
        r.name,
        r.calls,
        if r.calls == 1 { "" } else { "s" },
        r.threads
    ));
    // The threads of the team: those that ran in one; the one waiting
    // least is the one the others wait for.
    let waits: Vec<(usize, usize, u64)> = (p.threads.iter().enumerate())
        .flat_map(|(rank, ts)| {
            (ts.iter().enumerate())
                .filter(|(_, t)| t.omp_thread >= 0)
                .map(move |(i, _)| (rank, i))
        })
        .map(|(rank, i)| {
            let w = (r.barrier_ns.get(rank)).and_then(|b| b.get(i)).copied();
            (rank, i, w.unwrap_or(0))
        })
        .collect();
    let slowest = waits.iter().min_by_key(|w| (w.2, w.0, w.1));
    let fastest = waits
        .iter()
        .max_by_key(|w| (w.2, std::cmp::Reverse((w.0, w.1))));
    if let (Some(s), Some(f)) = (slowest, fastest) {
        if f.2 > s.2 {
            detail.push_str(&format!(
                ": {} is the slowest (it waits {} there) and {} the fastest (it waits {})",
                thread_name(p, s.0, s.1),
                duration(s.2),
                thread_name(p, f.0, f.1),
                duration(f.2)
            ));
        }
    }
    detail.push_str(&format!(
        ": the threads of `{}` get unequal work; look at how its loops divide it (`schedule(dynamic)` or `guided` for iterations of unequal cost) and at work only some threads do.",
        r.name
    ));
    Some(Finding {
        severity: String::new(),
        title: format!("OpenMP load imbalance in {}", r.name),
        detail,
        time_ns: time,
    })
}

/// Threads idle out of parallel regions while the master runs alone.
fn idle(p: &Program, rank_time: u64) -> Option<Finding> {
    let time = cost(p, |t| t.omp_idle_ns);
    if time == 0 {
        return None;
    }
    let all = thread_time(p, |t| t.omp_idle_ns);
    let mut detail = format!(
        "Worker threads idle {} out of parallel regions while the master thread runs serial code ({} of {} time",
        duration(all),
        share(time, rank_time),
        whose(p)
    );
    if let Some(e) = p.openmp.efficiency {
        detail.push_str(&format!(
            "; OpenMP serialisation efficiency {:.1} %",
            100.0 * e.serialisation
        ));
    }
    detail.push(')');
    if p.threads.len() > 1 {
        let worst = (p.threads.iter().enumerate())
            .map(|(r, ts)| (r, total(ts.iter().map(|t| t.omp_idle_ns)) / team(ts)))
            .max_by_key(|&(r, t)| (t, std::cmp::Reverse(r)));
        if let Some((r, t)) = worst {
            detail.push_str(&format!(
                "; on rank {r} the master runs alone {} of its time",
                share(t, p.rank_wall_ns.get(r).copied().unwrap_or(0))
            ));
        }
    }
    detail.push_str(": look at the code between parallel regions and parallelise the longest part of it, or put more of the work inside the regions.");
    Some(Finding {
        severity: String::new(),
        title: "Serial code: OpenMP threads idle".into(),
        detail,
        time_ns: time,
    })
}

/// Threads waiting to enter critical sections, for locks and ordered
/// sections.
fn lock(p: &Program, rank_time: u64) -> Option<Finding> {
    let time = cost(p, |t| t.omp_lock_ns);
    if time == 0 {
        return None;
    }
    let all = thread_time(p, |t| t.omp_lock_ns);
    let mut detail = format!(
        "Threads wait {} to enter critical sections or for locks ({} of {} time)",
        duration(all),
        share(time, rank_time),
        whose(p)
    );
    // The costliest kind of wait in the costliest construct.
    let top = (p.openmp.regions.iter())
        .flat_map(|r| {
            [
                (r, "critical sections", r.critical_ns),
                (r, "OpenMP locks", r.lock_ns),
                (r, "ordered sections", r.ordered_ns),
            ]
        })
        .filter(|x| x.2 > 0)
        .max_by(|a, b| a.2.cmp(&b.2).then(b.0.name.cmp(&a.0.name)));
    let (title, advice) = match top {
        Some((r, kind, t)) => {
            detail.push_str(&format!(
                ", {:.0} % of it for {kind} in `{}`",
                pct(t, all),
                r.name
            ));
            let advice = match kind {
                "ordered sections" => "do less inside the ordered section, or let the loop's iterations finish out of order",
                _ => "hold it for less time (move work out of it), or replace it by an atomic update or a reduction over per-thread partial results",
            };
            (format!("OpenMP lock contention in {}", r.name), advice)
        }
        None => (
            "OpenMP lock contention".to_string(),
            "hold critical sections and locks for less time, or use atomics or reductions",
        ),
    };
    detail.push_str(&format!(": {advice}."));
    Some(Finding {
        severity: String::new(),
        title,
        detail,
        time_ns: time,
    })
}

/// The runtime forking and joining parallel regions.
fn management(p: &Program, rank_time: u64) -> Option<Finding> {
    let time = cost(p, |t| t.omp_management_ns);
    if time == 0 {
        return None;
    }
    let all = thread_time(p, |t| t.omp_management_ns);
    let calls: u64 = p.openmp.regions.iter().map(|r| r.calls).sum();
    let mut detail = format!(
        "Forking and joining parallel regions takes {} ({} of {} time) over {} fork{}",
        duration(all),
        share(time, rank_time),
        whose(p),
        hark_model::count(calls),
        if calls == 1 { "" } else { "s" },
    );
    if let Some(each) = all.checked_div(calls) {
        detail.push_str(&format!(", {} each", duration(each)));
    }
    let most =
        (p.openmp.regions.iter()).max_by(|a, b| a.calls.cmp(&b.calls).then(b.name.cmp(&a.name)));
    match most.filter(|r| r.calls > 0) {
        Some(r) => detail.push_str(&format!(
            "; `{}` is entered most ({} times, {} each on average): open one parallel region around the loop that enters it, or give each region more work.",
            r.name,
            hark_model::count(r.calls),
            duration(r.time_ns / r.calls)
        )),
        None => detail.push_str(": open fewer, larger parallel regions."),
    }
    Some(Finding {
        severity: String::new(),
        title: "OpenMP fork and join".into(),
        detail,
        time_ns: time,
    })
}

#[cfg(test)]
mod tests {
    use super::super::digest;
    use hark_model::{OmpEfficiency, OmpRegion, Program, ThreadTimes};

    fn thread(num: i32, useful: u64, barrier: u64, idle: u64, lock: u64, mgmt: u64) -> ThreadTimes {
        ThreadTimes {
            omp_thread: num,
            useful_ns: useful,
            omp_barrier_ns: barrier,
            omp_idle_ns: idle,
            omp_lock_ns: lock,
            omp_management_ns: mgmt,
            ..ThreadTimes::default()
        }
    }

    /// One rank of 10 s with 4 threads: threads 1..3 wait 3, 2 and 1 s at
    /// the barriers of `main._omp_fn.0` (thread 0 none), 0.4 s of lock
    /// waits in `main._omp_fn.1` (critical sections), workers idle 0.8 s
    /// each, the master forks and joins for 0.2 s.
    fn program() -> Program {
        let mut p = Program {
            ranks: 1,
            rank_wall_ns: vec![10_000_000_000],
            threads: vec![vec![
                thread(0, 9_700_000_000, 0, 0, 100_000_000, 200_000_000),
                thread(1, 6_100_000_000, 3_000_000_000, 800_000_000, 100_000_000, 0),
                thread(2, 7_100_000_000, 2_000_000_000, 800_000_000, 100_000_000, 0),
                thread(3, 8_100_000_000, 1_000_000_000, 800_000_000, 100_000_000, 0),
            ]],
            ..Program::default()
        };
        p.openmp.efficiency = Some(OmpEfficiency {
            parallel: 0.77,
            load_balance: 0.84,
            scheduling: 0.98,
            serialisation: 0.93,
        });
        p.openmp.regions = vec![
            OmpRegion {
                name: "main._omp_fn.0".into(),
                kind: "parallel".into(),
                calls: 10,
                threads: 4,
                time_ns: 8_000_000_000,
                barrier_ns: vec![vec![0, 3_000_000_000, 2_000_000_000, 1_000_000_000]],
                ..OmpRegion::default()
            },
            OmpRegion {
                name: "main._omp_fn.1".into(),
                kind: "parallel".into(),
                calls: 2000,
                threads: 4,
                time_ns: 1_000_000_000,
                critical_ns: 400_000_000,
                ..OmpRegion::default()
            },
        ];
        p
    }

    #[test]
    fn barrier_waiting_names_the_region_and_its_slowest_and_fastest_thread() {
        let mut p = program();
        digest(&mut p);
        let titles: Vec<&str> = p.digest.iter().map(|f| f.title.as_str()).collect();
        // Costs in rank time, each thread time over the 4 threads: barrier
        // 6 s / 4, idle 2.4 s / 4, lock 0.4 s / 4, fork/join 0.2 s / 4
        // (0.5 % of the 10 s exactly: kept).
        assert_eq!(
            titles,
            [
                "OpenMP load imbalance in main._omp_fn.0",
                "Serial code: OpenMP threads idle",
                "OpenMP lock contention in main._omp_fn.1",
                "OpenMP fork and join"
            ]
        );
        let costs: Vec<u64> = p.digest.iter().map(|f| f.time_ns).collect();
        assert_eq!(costs, [1_500_000_000, 600_000_000, 100_000_000, 50_000_000]);
        let b = &p.digest[0];
        assert_eq!(b.severity, "high");
        assert_eq!(
            b.detail,
            "Threads wait 6.00 s at OpenMP barriers and for their region's join (15.0 % of process time; OpenMP load balance 84.0 %), 100 % of it in `main._omp_fn.0` (10 calls, 4 threads): thread 0 is the slowest (it waits 0 ns there) and thread 1 the fastest (it waits 3.00 s): the threads of `main._omp_fn.0` get unequal work; look at how its loops divide it (`schedule(dynamic)` or `guided` for iterations of unequal cost) and at work only some threads do."
        );
        assert!(
            p.digest[1]
                .detail
                .contains("(6.0 % of process time; OpenMP serialisation efficiency 93.0 %)"),
            "{}",
            p.digest[1].detail
        );
        assert!(
            p.digest[2].detail.contains(
                "100 % of it for critical sections in `main._omp_fn.1`: hold it for less time"
            ),
            "{}",
            p.digest[2].detail
        );
        assert!(
            p.digest[3].detail.contains(
                "`main._omp_fn.1` is entered most (2,000 times, 500.0 µs each on average)"
            ),
            "{}",
            p.digest[3].detail
        );
    }

    #[test]
    fn openmp_findings_rank_with_the_mpi_ones_and_small_ones_are_not_made() {
        // On two ranks, the second's threads wait as the first's: the cost
        // doubles with the rank time, the ranks are named.
        let mut two = program();
        two.ranks = 2;
        two.rank_wall_ns.push(10_000_000_000);
        two.threads.push(two.threads[0].clone());
        let r = &mut two.openmp.regions[0];
        r.barrier_ns
            .push(vec![0, 500_000_000, 400_000_000, 3_500_000_000]);
        let write = hark_model::Totals {
            calls: 10,
            bytes: 10,
            time_ns: 2_000_000_000,
        };
        two.io.per_rank = vec![[("write".to_string(), write)].into(), Default::default()];
        digest(&mut two);
        let titles: Vec<&str> = two.digest.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(titles[0], "OpenMP load imbalance in main._omp_fn.0");
        assert_eq!(two.digest[0].time_ns, 3_000_000_000);
        // The I/O, 2 s of rank time, falls between imbalance and idle.
        assert_eq!(titles[1], "I/O", "{titles:?}");
        assert!(
            two.digest[0].detail.contains(
                ": thread 0 of rank 0 is the slowest (it waits 0 ns there) and thread 3 of rank 1 the fastest (it waits 3.50 s)"
            ),
            "{}",
            two.digest[0].detail
        );
        // Fork and join worth under 0.5 % of rank time is no finding.
        let mut small = program();
        small.threads[0][0].omp_management_ns = 100_000_000;
        digest(&mut small);
        assert!(
            !small.digest.iter().any(|f| f.title.contains("fork")),
            "{:?}",
            small.digest
        );
        // Without OpenMP, none.
        let mut none = program();
        none.threads.clear();
        digest(&mut none);
        assert!(none.digest.iter().all(|f| !f.title.contains("OpenMP")));
    }
}
