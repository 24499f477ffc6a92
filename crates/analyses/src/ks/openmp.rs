//! OpenMP: per rank and thread, where the time goes (useful, barrier
//! waits, idle out of parallel regions, lock waits, fork and join, MPI,
//! I/O); the parallel regions by construct; the OpenMP wait states; and
//! the hybrid POP efficiencies after DLB's TALP (`docs/analyses.md`,
//! "OpenMP"). From the `op::OMP_*` events of either runtime's adapter.
//!
//! A thread is a forking thread if it forked a region or is the main
//! thread: its window is the rank's; its useful time is that window less
//! its MPI, I/O, OpenMP waits and fork/join. Any other thread that ran
//! implicit tasks is a worker: its time in teams less its waits, MPI and
//! I/O is useful, and the rest of the rank's window is idle (the master
//! ran serial code). Workers are taken to call MPI and I/O only inside
//! teams.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::sat::{total, Sat};
use crate::stream::StreamCx;
use crate::unify::{IdMap, UNDEFINED};
use hark_model::{OmpEfficiency, OmpRegion, Program, ThreadTimes, WaitPattern};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op::{self, OpKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct OpenMpTimes;

static SPEC: Spec = Spec {
    name: "openmp",
    description: "OpenMP per rank and thread (useful, barrier, idle, lock, fork/join, MPI, I/O time), parallel regions, OpenMP wait states and the hybrid POP efficiencies.",
    sensitivities: &[
        Sensitivity::Defs,
        Sensitivity::Events,
        Sensitivity::ProgramEnd,
    ],
    fills: &["threads", "openmp", "efficiency.openmp", "waits"],
};

/// Threads kept per rank; the rest are summed into the last.
const MAX_THREADS: usize = 256;
/// Region instances a rank keeps waiting for their join or their tasks.
const MAX_PENDING: usize = 4096;
/// Constructs kept per rank; the rest are not listed.
const MAX_REGIONS: usize = 256;

/// One thread's sums, in ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Thread {
    omp_thread: Option<i32>,
    first: Option<u64>,
    last: u64,
    forked: u64,
    /// Its implicit tasks as thread 0 of their team, and as any.
    own_tasks: u64,
    in_team: u64,
    tasks: u64,
    barrier: u64,
    barriers: u64,
    lock: u64,
    locks: u64,
    mpi: u64,
    io: u64,
}

/// One construct on one rank.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Region {
    calls: u64,
    threads: u64,
    time: u64,
    /// Per thread (the rank's index), its barrier waits in this construct.
    #[serde(default)]
    barrier: Vec<u64>,
    /// Lock waits in this construct: critical, lock, ordered.
    #[serde(default)]
    locks: [u64; 3],
}

impl Region {
    fn wait(&mut self, thread: u16, what: Wait, ns: u64) {
        match what {
            Wait::Barrier => {
                let t = (thread as usize).min(MAX_THREADS - 1);
                if self.barrier.len() <= t {
                    self.barrier.resize(t + 1, 0);
                }
                self.barrier[t].sat(ns);
            }
            Wait::Lock(kind) => self.locks[kind.min(2) as usize].sat(ns),
        }
    }

    fn absorb(&mut self, o: &Region) {
        self.calls.sat(o.calls);
        self.time.sat(o.time);
        self.threads = self.threads.max(o.threads);
        if self.barrier.len() < o.barrier.len() {
            self.barrier.resize(o.barrier.len(), 0);
        }
        for (a, b) in self.barrier.iter_mut().zip(&o.barrier) {
            a.sat(*b);
        }
        for (a, b) in self.locks.iter_mut().zip(o.locks) {
            a.sat(b);
        }
    }
}

/// A wait inside a region instance, put in its construct once the
/// instance's construct is known (a thread's waits arrive before its
/// implicit task, which names the construct).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum Wait {
    Barrier,
    /// By the lock-wait event's kind: 0 critical, 1 lock, 2 ordered.
    Lock(u8),
}

/// One rank's OpenMP state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rank {
    threads: Vec<Thread>,
    /// Per construct (global name id).
    regions: BTreeMap<u32, Region>,
    first: Option<u64>,
    last: u64,
    init_end: Option<u64>,
    fin_start: Option<u64>,
    omp_events: u64,
    /// Region instances whose end (join) is waited for: the implicit tasks
    /// that ended before it, (thread, end, whether it was thread 0 of its
    /// team) (threads' packs arrive in any order).
    waiting_join: BTreeMap<u64, Vec<(u16, u64, bool)>>,
    /// Region instances joined: when, how many of their implicit tasks
    /// are still to come, and their construct.
    joined: BTreeMap<u64, (u64, u64, u32)>,
    /// The construct of recent region instances (the oldest forgotten
    /// past [`MAX_PENDING`]).
    #[serde(default)]
    constructs: BTreeMap<u64, u32>,
    /// Waits in region instances whose construct is not known yet.
    #[serde(default)]
    unplaced: BTreeMap<u64, Vec<(u16, Wait, u64)>>,
}

impl Rank {
    fn thread(&mut self, t: u16) -> &mut Thread {
        let t = (t as usize).min(MAX_THREADS - 1);
        if self.threads.len() <= t {
            self.threads.resize(t + 1, Thread::default());
        }
        &mut self.threads[t]
    }

    fn window(&self) -> u64 {
        let Some(start) = self.init_end.or(self.first) else {
            return 0;
        };
        self.fin_start.unwrap_or(self.last).saturating_sub(start)
    }

    /// Each thread's times over the rank's window.
    fn times(&self) -> Vec<ThreadTimes> {
        let window = self.window();
        (self.threads.iter().enumerate())
            .map(|(i, t)| {
                let waits = t.barrier.saturating_add(t.lock);
                let outside = t.mpi.saturating_add(t.io);
                let mut tt = ThreadTimes {
                    omp_thread: t.omp_thread.unwrap_or(-1),
                    omp_barrier_ns: t.barrier,
                    omp_lock_ns: t.lock,
                    mpi_ns: t.mpi,
                    io_ns: t.io,
                    ..ThreadTimes::default()
                };
                if t.forked > 0 || (i == 0 && t.tasks == 0) {
                    tt.omp_management_ns = t.forked.saturating_sub(t.own_tasks);
                    tt.useful_ns = window
                        .saturating_sub(waits)
                        .saturating_sub(outside)
                        .saturating_sub(tt.omp_management_ns);
                } else if t.tasks > 0 {
                    tt.useful_ns = t.in_team.saturating_sub(waits).saturating_sub(outside);
                    tt.omp_idle_ns = window.saturating_sub(t.in_team);
                } else {
                    let span = t.first.map_or(0, |f| t.last.saturating_sub(f));
                    tt.useful_ns = span.saturating_sub(outside);
                }
                tt
            })
            .collect()
    }
}

/// One thread's consecutive events of a pack, folded into a thread's
/// window and MPI and I/O time at once ([`Rank::add_run`]).
struct Run {
    thread: u16,
    first: u64,
    last: u64,
    mpi: u64,
    io: u64,
}

impl Run {
    fn new(thread: u16) -> Run {
        Run {
            thread,
            first: u64::MAX,
            last: 0,
            mpi: 0,
            io: 0,
        }
    }
}

impl Rank {
    /// Adds a run of one thread's events (at least one) to the rank's and
    /// the thread's window and times: minima, maxima and saturating sums,
    /// which come out the same however the events are grouped.
    fn add_run(&mut self, r: &Run) {
        self.first = Some(self.first.map_or(r.first, |f| f.min(r.first)));
        self.last = self.last.max(r.last);
        let t = self.thread(r.thread);
        t.first = Some(t.first.map_or(r.first, |f| f.min(r.first)));
        t.last = t.last.max(r.last);
        t.mpi.sat(r.mpi);
        t.io.sat(r.io);
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        // Most events are a thread's MPI or I/O calls, in runs of one
        // thread: summed in a run and added to the thread once per run, not
        // looked up per event (this analysis sees every event of every
        // program, with OpenMP or not).
        let mut run: Option<Run> = None;
        for ev in input.events {
            let code = ev.op();
            let kind = op::kind(code);
            if matches!(kind, OpKind::Detail | OpKind::Sample | OpKind::Unknown) {
                continue;
            }
            let (s, e, d) = (ev.start.get(), ev.end.get(), ev.duration());
            let thread = ev.thread.get();
            let r = match &mut run {
                Some(r) if r.thread == thread => r,
                _ => {
                    if let Some(r) = run.take() {
                        self.add_run(&r);
                    }
                    run.insert(Run::new(thread))
                }
            };
            r.first = r.first.min(s);
            r.last = r.last.max(e);
            match kind {
                OpKind::Mpi(i) => match FUNCTIONS[i].class {
                    Class::Init => self.init_end = Some(e),
                    Class::Finalize => self.fin_start = Some(s),
                    _ => r.mpi.sat(d),
                },
                OpKind::Io(_) => r.io.sat(d),
                OpKind::OpenMp => {
                    // The OpenMP event's fold reads its thread's state:
                    // the run so far (this event's window with it) first.
                    if let Some(r) = run.take() {
                        self.add_run(&r);
                    }
                    self.omp_events += 1;
                    self.openmp(cx, ev);
                }
                _ => {}
            }
        }
        if let Some(r) = run {
            self.add_run(&r);
        }
    }

    fn remap(&mut self, ids: &IdMap) {
        self.regions = std::mem::take(&mut self.regions)
            .into_iter()
            .map(|(name, r)| (ids.name(name), r))
            .collect();
        for c in self.constructs.values_mut() {
            *c = ids.name(*c);
        }
        for j in self.joined.values_mut() {
            j.2 = ids.name(j.2);
        }
    }

    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        if self.threads.len() < o.threads.len() {
            self.threads.resize(o.threads.len(), Thread::default());
        }
        for (a, b) in self.threads.iter_mut().zip(&o.threads) {
            a.omp_thread = a.omp_thread.or(b.omp_thread);
            a.first = match (a.first, b.first) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            a.last = a.last.max(b.last);
            for (x, y) in [
                (&mut a.forked, b.forked),
                (&mut a.own_tasks, b.own_tasks),
                (&mut a.in_team, b.in_team),
                (&mut a.tasks, b.tasks),
                (&mut a.barrier, b.barrier),
                (&mut a.barriers, b.barriers),
                (&mut a.lock, b.lock),
                (&mut a.locks, b.locks),
                (&mut a.mpi, b.mpi),
                (&mut a.io, b.io),
            ] {
                x.sat(y);
            }
        }
        for (name, r) in &o.regions {
            self.regions.entry(*name).or_default().absorb(r);
        }
        self.first = match (self.first, o.first) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.last = self.last.max(o.last);
        self.init_end = self.init_end.or(o.init_end);
        self.fin_start = self.fin_start.or(o.fin_start);
        self.omp_events.sat(o.omp_events);
        // Instances are numbered per process: another's unresolved ones
        // are not this one's, and are dropped.
    }
}

impl Rank {
    fn openmp(&mut self, cx: &StreamCx<'_>, ev: &hark_wire::Event) {
        let d = ev.duration();
        // Barriers and locks, most of the events, name no construct.
        let construct = || cx.name(ev.obj.get());
        let team = ev.tag.get().max(0) as u64;
        match ev.op() {
            op::OMP_PARALLEL => {
                let construct = construct();
                self.thread(ev.thread.get()).forked.sat(d);
                self.placed(ev.extra.get(), construct);
                self.join(ev.extra.get(), ev.end.get(), team, construct);
                if let Some(r) = region(&mut self.regions, construct) {
                    r.calls += 1;
                    r.time.sat(d);
                }
            }
            op::OMP_IMPLICIT_TASK => {
                let construct = construct();
                let num = ev.peer.get();
                let t = self.thread(ev.thread.get());
                t.omp_thread = Some(num);
                t.tasks += 1;
                t.in_team.sat(d);
                if num == 0 {
                    t.own_tasks.sat(d);
                }
                self.placed(ev.extra.get(), construct);
                self.task_ended(ev.extra.get(), ev.thread.get(), ev.end.get(), num == 0);
                if let Some(r) = region(&mut self.regions, construct) {
                    r.threads = r.threads.max(team);
                }
            }
            op::OMP_BARRIER => {
                let t = self.thread(ev.thread.get());
                // Every OpenMP event names the thread's number in its team:
                // a thread is known by it from its first wait on, not only
                // once an implicit task of it ended (the live view).
                t.omp_thread.get_or_insert(ev.peer.get());
                t.barrier.sat(d);
                t.barriers += 1;
                self.wait_in(ev.extra.get(), ev.thread.get(), Wait::Barrier, d);
            }
            op::OMP_LOCK_WAIT => {
                let t = self.thread(ev.thread.get());
                t.omp_thread.get_or_insert(ev.peer.get());
                t.lock.sat(d);
                t.locks += 1;
                let kind = Wait::Lock(ev.tag.get().clamp(0, 2) as u8);
                self.wait_in(ev.extra.get(), ev.thread.get(), kind, d);
            }
            _ => {}
        }
    }
}

impl Rank {
    /// Region `instance` is of `construct`: its waits seen so far go to it.
    fn placed(&mut self, instance: u64, construct: u32) {
        if instance == hark_wire::EXTRA_NONE || construct == UNDEFINED {
            return;
        }
        if self.constructs.insert(instance, construct).is_none()
            && self.constructs.len() > MAX_PENDING
        {
            self.constructs.pop_first();
        }
        if let Some(waits) = self.unplaced.remove(&instance) {
            if let Some(r) = region(&mut self.regions, construct) {
                for (thread, what, ns) in waits {
                    r.wait(thread, what, ns);
                }
            }
        }
    }

    /// Thread `thread` waited `ns` in region `instance`: in its construct
    /// if known, else until it is.
    fn wait_in(&mut self, instance: u64, thread: u16, what: Wait, ns: u64) {
        if instance == hark_wire::EXTRA_NONE || ns == 0 {
            return;
        }
        if let Some(&construct) = self.constructs.get(&instance) {
            if let Some(r) = region(&mut self.regions, construct) {
                r.wait(thread, what, ns);
            }
        } else if self.unplaced.contains_key(&instance) || self.unplaced.len() < MAX_PENDING {
            (self.unplaced.entry(instance).or_default()).push((thread, what, ns));
        }
    }

    /// Region `instance` of `team` threads was joined at `at`: the threads
    /// whose implicit tasks ended before waited for that until then.
    fn join(&mut self, instance: u64, at: u64, team: u64, construct: u32) {
        let ended = self.waiting_join.remove(&instance).unwrap_or_default();
        let left = team.saturating_sub(ended.len() as u64);
        for (thread, end, first) in ended {
            self.until_join(thread, end, at, first, construct);
        }
        if left > 0 && self.joined.len() < MAX_PENDING {
            self.joined.insert(instance, (at, left, construct));
        }
    }

    /// Thread `thread`'s implicit task of region `instance` ended at `end`.
    fn task_ended(&mut self, instance: u64, thread: u16, end: u64, first: bool) {
        if let Some((at, left, construct)) = self.joined.get_mut(&instance) {
            let (at, construct) = (*at, *construct);
            *left -= 1;
            if *left == 0 {
                self.joined.remove(&instance);
            }
            self.until_join(thread, end, at, first, construct);
        } else if self.waiting_join.len() < MAX_PENDING {
            self.waiting_join
                .entry(instance)
                .or_default()
                .push((thread, end, first));
        }
    }

    /// From its release at the end barrier to the join, a thread still
    /// waits for the region to end (as in TALP, where the join moves the
    /// team's threads out of the region).
    fn until_join(&mut self, thread: u16, end: u64, at: u64, first: bool, construct: u32) {
        let extra = at.saturating_sub(end);
        let t = self.thread(thread);
        t.barrier.sat(extra);
        t.in_team.sat(extra);
        if first {
            t.own_tasks.sat(extra);
        }
        if extra > 0 {
            if let Some(r) = region(&mut self.regions, construct) {
                r.wait(thread, Wait::Barrier, extra);
            }
        }
    }
}

/// The state of `construct`, unless it is undefined or one too many.
fn region(regions: &mut BTreeMap<u32, Region>, construct: u32) -> Option<&mut Region> {
    if construct == UNDEFINED {
        return None;
    }
    // One search of the map per wait, which every barrier event makes.
    if regions.len() >= MAX_REGIONS {
        return regions.get_mut(&construct);
    }
    Some(regions.entry(construct).or_default())
}

impl Analysis for OpenMpTimes {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        if ranks.iter().all(|r| r.omp_events == 0) {
            return;
        }
        out.threads = ranks.iter().map(|r| r.times()).collect();
        cpu_times(out);
        regions(cx, ranks, out);
        waits(ranks, out);
        efficiency(cx, ranks, out);
    }
}

/// Each thread's time on a CPU and waiting for one, from the CPU
/// availability (`ks/cpu.rs`, folded before this), which numbers threads
/// as these are numbered.
fn cpu_times(out: &mut Program) {
    for (threads, cpu) in out.threads.iter_mut().zip(&out.cpu.ranks) {
        for (t, c) in threads.iter_mut().zip(&cpu.threads) {
            t.on_cpu_ns = c.on_cpu_ns;
            t.runnable_wait_ns = c.runnable_wait_ns;
        }
    }
}

/// The constructs over all ranks, most time first.
fn regions(cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
    let mut all: BTreeMap<u32, (Region, Vec<Vec<u64>>)> = BTreeMap::new();
    for (k, r) in ranks.iter().enumerate() {
        for (name, g) in &r.regions {
            let (m, barrier) = all.entry(*name).or_default();
            m.absorb(&Region {
                barrier: Vec::new(),
                ..g.clone()
            });
            barrier.resize(ranks.len(), Vec::new());
            barrier[k] = g.barrier.clone();
        }
    }
    let mut list: Vec<OmpRegion> = (all.into_iter())
        .map(|(name, (g, barrier_ns))| OmpRegion {
            name: cx.unifier.name(name).unwrap_or("?").to_string(),
            kind: "parallel".into(),
            calls: g.calls,
            threads: g.threads,
            time_ns: g.time,
            barrier_ns,
            critical_ns: g.locks[0],
            lock_ns: g.locks[1],
            ordered_ns: g.locks[2],
        })
        .collect();
    list.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.name.cmp(&b.name)));
    out.openmp.regions = list;
}

/// The OpenMP wait states, per rank: barrier waits, lock contention,
/// thread idleness out of parallel regions, and fork/join management.
fn waits(ranks: &[&Rank], out: &mut Program) {
    let pattern = |time: &dyn Fn(&ThreadTimes) -> u64, count: &dyn Fn(&Thread) -> u64| {
        let mut w = WaitPattern::default();
        for (r, times) in ranks.iter().zip(&out.threads) {
            w.time_ns.push(total(times.iter().map(time)));
            w.instances.push(total(r.threads.iter().map(count)));
        }
        w
    };
    let barrier = pattern(&|t| t.omp_barrier_ns, &|t| t.barriers);
    let lock = pattern(&|t| t.omp_lock_ns, &|t| t.locks);
    let idle = pattern(&|t| t.omp_idle_ns, &|_| 0);
    let management = pattern(&|t| t.omp_management_ns, &|_| 0);
    out.waits.insert("omp_barrier".into(), barrier);
    out.waits.insert("omp_lock".into(), lock);
    out.waits.insert("omp_idle".into(), idle);
    out.waits.insert("omp_management".into(), management);
}

/// `a / b`, 1 when `b` is 0 (nothing to lose).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// The hybrid POP efficiencies (TALP's second hybrid model).
fn efficiency(cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
    let (mut useful, mut mpi, mut imbalance, mut scheduling, mut serial) =
        (0f64, 0f64, 0f64, 0f64, 0f64);
    for times in &out.threads {
        for t in times {
            useful += t.useful_ns as f64 + t.io_ns as f64;
            mpi += t.mpi_ns as f64;
            imbalance += t.omp_barrier_ns as f64;
            scheduling += (t.omp_lock_ns + t.omp_management_ns) as f64;
            serial += t.omp_idle_ns as f64;
        }
    }
    let non_omp = useful + mpi;
    let omp = OmpEfficiency {
        parallel: ratio(non_omp, non_omp + imbalance + scheduling + serial),
        load_balance: ratio(non_omp + serial, non_omp + serial + imbalance),
        scheduling: ratio(
            non_omp + serial + imbalance,
            non_omp + serial + imbalance + scheduling,
        ),
        serialisation: ratio(non_omp, non_omp + serial),
    };
    // MPI load balance within and across nodes: MPI time per CPU (thread)
    // of the least-MPI process and node against the whole program's.
    let elapsed = ranks.iter().map(|r| r.window()).max().unwrap_or(0) as f64;
    let cpus: usize = out.threads.iter().map(|t| t.len().max(1)).sum();
    let per_cpu = |m: f64, n: usize| m / n.max(1) as f64;
    let rank_mpi: Vec<(f64, usize)> = (out.threads.iter())
        .map(|t| (t.iter().map(|x| x.mpi_ns as f64).sum(), t.len().max(1)))
        .collect();
    let min_proc = (rank_mpi.iter())
        .map(|&(m, n)| per_cpu(m, n))
        .fold(f64::INFINITY, f64::min);
    let mut hosts: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (meta, &(m, n)) in cx.ranks.iter().zip(&rank_mpi) {
        let h = hosts.entry(meta.host.as_str()).or_default();
        h.0 += m;
        h.1 += n;
    }
    let min_node = (hosts.values())
        .map(|&(m, n)| per_cpu(m, n))
        .fold(f64::INFINITY, f64::min);
    let non_mpi_app = elapsed - per_cpu(mpi, cpus);
    out.openmp.efficiency = Some(omp);
    // Without MPI there are no MPI efficiencies to add these to.
    let Some(e) = out.efficiency.as_mut() else {
        return;
    };
    e.openmp = Some(omp);
    if min_proc.is_finite() && min_node.is_finite() {
        e.mpi_load_balance_in = Some(ratio(elapsed - min_node, elapsed - min_proc));
        e.mpi_load_balance_out = Some(ratio(non_mpi_app, elapsed - min_node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(forked: u64, own: u64, in_team: u64, barrier: u64, mpi: u64) -> Thread {
        Thread {
            forked,
            own_tasks: own,
            in_team,
            tasks: (in_team > 0) as u64,
            barrier,
            mpi,
            first: Some(0),
            ..Thread::default()
        }
    }

    #[test]
    fn the_forking_thread_and_a_worker_split_the_window() {
        let rank = Rank {
            threads: vec![thread(60, 55, 55, 10, 20), thread(0, 0, 55, 25, 0)],
            first: Some(0),
            last: 100,
            omp_events: 1,
            ..Rank::default()
        };
        let t = rank.times();
        // Master: 100 − 20 MPI − 10 barrier − 5 fork/join.
        assert_eq!(t[0].useful_ns, 65);
        assert_eq!(t[0].omp_management_ns, 5);
        assert_eq!(t[0].omp_idle_ns, 0);
        // Worker: 55 in the team less 25 waiting; idle the other 45.
        assert_eq!(t[1].useful_ns, 30);
        assert_eq!(t[1].omp_idle_ns, 45);
    }

    #[test]
    fn waits_go_to_their_construct_whenever_it_becomes_known() {
        let mut rank = Rank::default();
        // A thread's waits arrive before its implicit task names the
        // construct (3) of region instance 7.
        rank.wait_in(7, 1, Wait::Barrier, 30);
        rank.wait_in(7, 2, Wait::Lock(0), 5);
        rank.wait_in(hark_wire::EXTRA_NONE, 1, Wait::Barrier, 1000);
        assert!(rank.regions.is_empty());
        rank.placed(7, 3);
        rank.wait_in(7, 1, Wait::Barrier, 10);
        // Joined at 100; thread 2's task ended at 90: 10 more at the join.
        rank.join(7, 100, 1, 3);
        rank.task_ended(7, 2, 90, false);
        let r = &rank.regions[&3];
        assert_eq!(r.barrier, [0, 40, 10]);
        assert_eq!(r.locks, [5, 0, 0]);
        assert!(rank.unplaced.is_empty());
    }
}
