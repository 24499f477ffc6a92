//! Queries over a time interval, answered from a run's time slices alone.
//!
//! The model keeps every metric over time in at most 256 slices per rank
//! (`docs/profile-json.md`, `TimeSlices`), so the profile of any interval is
//! a sum over the slices that overlap it: no trace, and a cost bounded by
//! ranks × metrics × slices whatever the run's length. The price is the
//! resolution: an interval is widened to whole slices, and slices double
//! their width each time the run outgrows them. [`profile`] says which
//! interval it actually covered, in a diagnostic of each program.

use hark_model::{
    FileIo, FunctionProfile, Io, P2p, Program, RegionProfile, Regions, Run, Spread, TimeSlices,
    Totals, WaitPattern,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// An interval in ns since the run's start ([`start_ns`]); `None` is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// First ns included.
    pub from_ns: Option<u64>,
    /// First ns excluded.
    pub to_ns: Option<u64>,
}

impl Interval {
    /// The interval, or why it holds nothing: an end at or before its
    /// start is a mistake to name, not an empty answer.
    pub fn checked(self) -> Result<Interval, String> {
        match (self.from_ns, self.to_ns) {
            (Some(from), Some(to)) if to <= from => Err(format!(
                "the interval ends ({to} ns) at or before it starts ({from} ns): give an end after the start"
            )),
            _ => Ok(self),
        }
    }
}

/// When the run started, in ns since the epoch: the earliest origin of its
/// programs' time slices (0 for a run with no program yet).
pub fn start_ns(run: &Run) -> u64 {
    run.programs
        .iter()
        .map(|p| p.timeslices.origin_ns)
        .filter(|&o| o > 0)
        .min()
        .unwrap_or(0)
}

/// The run's length so far, in ns since [`start_ns`]: the end of the last
/// slice that holds anything.
pub fn length_ns(run: &Run) -> u64 {
    let start = start_ns(run);
    run.programs
        .iter()
        .map(|p| {
            let t = &p.timeslices;
            t.origin_ns.saturating_sub(start) + slices_of(t) as u64 * t.slice_ns
        })
        .max()
        .unwrap_or(0)
}

fn slices_of(t: &TimeSlices) -> usize {
    t.metrics
        .values()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
}

/// The slices `a..b` of a program that overlap `iv`, with the program's
/// origin `offset` ns after the run's start.
fn covered(t: &TimeSlices, offset: u64, iv: Interval) -> (usize, usize) {
    let n = slices_of(t);
    let w = t.slice_ns.max(1);
    let from = iv.from_ns.unwrap_or(0).saturating_sub(offset);
    let a = ((from / w) as usize).min(n);
    let b = match iv.to_ns {
        None => n,
        Some(to) => (to.saturating_sub(offset).div_ceil(w) as usize).clamp(a, n),
    };
    (a, b)
}

/// Per rank, the sum of `metric` over slices `a..b` (`None`: not recorded).
fn sums(t: &TimeSlices, metric: &str, (a, b): (usize, usize)) -> Option<Vec<u64>> {
    t.metrics.get(metric).map(|rows| {
        rows.iter()
            .map(|row| {
                row.get(a..b.min(row.len()))
                    .unwrap_or(&[])
                    .iter()
                    .fold(0u64, |s, &v| s.saturating_add(v))
            })
            .collect()
    })
}

/// The profile of the interval `iv`, in the schema of `profile.json`.
///
/// Computed from the time slices: per rank and function the calls, bytes
/// and time; `mpi_time_ns`; the point-to-point matrices of messages and
/// bytes (kept over time for programs of at most 64 ranks); I/O per rank
/// and per file; regions' calls and inclusive time; wait states and
/// efficiencies per slice. What the slices do not hold is left empty: the
/// minimum and maximum call durations and histograms, collectives per
/// function, exclusive region time, user counters, region performance
/// counts, density maps, the digest and
/// the whole-program efficiency. The interval is widened to whole slices;
/// each program's first diagnostic says which interval was covered.
pub fn profile(run: &Run, iv: Interval) -> Run {
    let start = start_ns(run);
    Run {
        hark_version: run.hark_version.clone(),
        accounting: run.accounting.clone(),
        programs: run
            .programs
            .iter()
            .map(|p| program(p, p.timeslices.origin_ns.saturating_sub(start), iv))
            .collect(),
        missing: run.missing.clone(),
        exit: run.exit,
        command_pid: run.command_pid,
    }
}

/// Program `p` over the interval `iv`, its origin `offset` ns after the
/// run's start: each part of its profile summed over the slices covered.
fn program(p: &Program, offset: u64, iv: Interval) -> Program {
    let s = Slices::of(p, offset, iv);
    let (t, w, ranks) = (s.t, s.t.slice_ns, p.ranks);
    let width = s.width_ns();
    Program {
        name: p.name.clone(),
        command: p.command.clone(),
        ranks,
        rank_info: p.rank_info.clone(),
        wall_ns: width,
        mpi_time_ns: s.get("mpi_time_ns"),
        rank_wall_ns: vec![width; ranks],
        mpi: s.mpi(),
        p2p: s.p2p(),
        collectives: Vec::new(),
        io: s.io(),
        regions: Regions {
            paths: s.region_paths(),
            counters: BTreeMap::new(),
            // MPI per call path is not in the time slices.
            mpi: BTreeMap::new(),
        },
        timeslices: TimeSlices {
            slice_ns: w,
            origin_ns: t.origin_ns + s.a as u64 * w,
            metrics: s.metrics(),
        },
        density: BTreeMap::new(),
        waits: s.waits(),
        wait_causes: Default::default(),
        efficiency: None,
        efficiency_by_region: BTreeMap::new(),
        efficiency_slices: s.cut(&p.efficiency_slices).to_vec(),
        digest: Vec::new(),
        // Call sites are not in the time slices: the whole run's only.
        callsites: Vec::new(),
        diagnostics: s.diagnostics(offset, iv),
        clock: p.clock.clone(),
        children: Vec::new(),
        // Per interval, CPU availability is in the slices (`cpu.*`).
        cpu: Default::default(),
        // Per interval, the node sensors are in the slices (`node.*`) too.
        nodes: Vec::new(),
        // Per thread and per region: the whole run's, not per interval.
        threads: Vec::new(),
        openmp: Default::default(),
        counters: s.counters(),
        counter_info: Default::default(),
        // Which slices were paused is not kept: the whole run's total.
        paused_ns: p.paused_ns.clone(),
    }
}

/// The slices `a..b` of a program that an interval covers.
struct Slices<'p> {
    p: &'p Program,
    t: &'p TimeSlices,
    a: usize,
    b: usize,
}

impl<'p> Slices<'p> {
    fn of(p: &'p Program, offset: u64, iv: Interval) -> Slices<'p> {
        let t = &p.timeslices;
        let (a, b) = covered(t, offset, iv);
        Slices { p, t, a, b }
    }

    /// The interval's width once widened to whole slices.
    fn width_ns(&self) -> u64 {
        (self.b - self.a) as u64 * self.t.slice_ns
    }

    /// The covered part of a per-slice row.
    fn cut<'r, T>(&self, row: &'r [T]) -> &'r [T] {
        row.get(self.a..self.b.min(row.len())).unwrap_or(&[])
    }

    /// Per rank, the sum of `metric` (zeros if it was not recorded).
    fn get(&self, metric: &str) -> Vec<u64> {
        sums(self.t, metric, (self.a, self.b)).unwrap_or_else(|| vec![0; self.p.ranks])
    }

    /// Per MPI function: calls, bytes and time per rank, and the spread of
    /// the time.
    fn mpi(&self) -> BTreeMap<String, FunctionProfile> {
        let mut mpi = BTreeMap::new();
        for name in self.p.mpi.keys() {
            let time_ns = self.get(&format!("{name}.time_ns"));
            mpi.insert(
                name.clone(),
                FunctionProfile {
                    calls: self.get(&format!("{name}.calls")),
                    bytes: self.get(&format!("{name}.bytes")),
                    time_across_ranks: spread(&time_ns),
                    time_ns,
                    ..FunctionProfile::default()
                },
            );
        }
        mpi
    }

    /// The point-to-point matrices, if the slices kept them.
    fn p2p(&self) -> P2p {
        let ranks = self.p.ranks;
        let mut messages = Vec::new();
        let mut bytes = Vec::new();
        if self.t.metrics.keys().any(|k| k.starts_with("p2p_to:")) {
            for to in 0..ranks {
                messages.push(self.get(&format!("p2p_to:{to}.messages")));
                bytes.push(self.get(&format!("p2p_to:{to}.bytes")));
            }
            // Rows were per destination: the model's are per sender.
            messages = transpose(&messages, ranks);
            bytes = transpose(&bytes, ranks);
        }
        P2p {
            messages,
            bytes,
            ..P2p::default()
        }
    }

    /// I/O per rank and call, and per file.
    fn io(&self) -> Io {
        let p = self.p;
        let io_names: Vec<&String> = p.io.per_rank.iter().flat_map(|m| m.keys()).collect();
        let per_rank = (0..p.ranks)
            .map(|r| {
                let mut m = BTreeMap::new();
                for name in &io_names {
                    let v = |what: &str| {
                        sums(self.t, &format!("{name}.{what}"), (self.a, self.b))
                            .and_then(|s| s.get(r).copied())
                            .unwrap_or(0)
                    };
                    m.insert(
                        (*name).clone(),
                        Totals {
                            calls: v("calls"),
                            bytes: v("bytes"),
                            time_ns: v("time_ns"),
                        },
                    );
                }
                m
            })
            .collect();
        let files =
            p.io.files
                .iter()
                .map(|f| FileIo {
                    path: f.path.clone(),
                    ops: BTreeMap::new(),
                    read_bytes: self.get(&format!("file:{}.read_bytes", f.path)),
                    write_bytes: self.get(&format!("file:{}.write_bytes", f.path)),
                    calls: self.get(&format!("file:{}.ops", f.path)),
                })
                .collect();
        Io { files, per_rank }
    }

    /// Per rank: the performance counts in the covered slices
    /// (`counters.<name>`), for the counters the whole run has.
    fn counters(&self) -> Vec<hark_model::Counts> {
        let mut names: Vec<&String> = self.p.counters.iter().flat_map(|c| c.keys()).collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return Vec::new();
        }
        let mut out = vec![hark_model::Counts::new(); self.p.ranks];
        for name in names {
            for (r, v) in self
                .get(&format!("counters.{name}"))
                .into_iter()
                .enumerate()
            {
                if let Some(c) = out.get_mut(r) {
                    c.insert(name.clone(), v);
                }
            }
        }
        out
    }

    /// Per region path: calls and inclusive time.
    fn region_paths(&self) -> BTreeMap<String, RegionProfile> {
        self.p
            .regions
            .paths
            .keys()
            .map(|path| {
                (
                    path.clone(),
                    RegionProfile {
                        calls: self.get(&format!("region:{path}.calls")),
                        inclusive_ns: self.get(&format!("region:{path}.inclusive_ns")),
                        exclusive_ns: Vec::new(),
                        // Region counts are not in the slices.
                        counters: BTreeMap::new(),
                    },
                )
            })
            .collect()
    }

    /// Per wait state, its covered slices.
    fn waits(&self) -> BTreeMap<String, WaitPattern> {
        self.p
            .waits
            .iter()
            .map(|(name, w)| {
                (
                    name.clone(),
                    WaitPattern {
                        slices: self.cut(&w.slices).to_vec(),
                        ..WaitPattern::default()
                    },
                )
            })
            .collect()
    }

    /// Every metric's covered slices, per rank.
    fn metrics(&self) -> BTreeMap<String, Vec<Vec<u64>>> {
        self.t
            .metrics
            .iter()
            .map(|(k, rows)| {
                let rows = rows.iter().map(|row| self.cut(row).to_vec()).collect();
                (k.clone(), rows)
            })
            .collect()
    }

    /// The interval covered and the one asked for, then the program's own
    /// diagnostics.
    fn diagnostics(&self, offset: u64, iv: Interval) -> Vec<String> {
        let (a, b, w) = (self.a, self.b, self.t.slice_ns);
        let mut diagnostics = vec![format!(
            "Interval: {} ns to {} ns after the run's start, {} time slice(s) of {} ns (asked: {} to {}).",
            offset + a as u64 * w,
            offset + b as u64 * w,
            b - a,
            w,
            iv.from_ns.map_or("the start".into(), |v| format!("{v} ns")),
            iv.to_ns.map_or("the end".into(), |v| format!("{v} ns")),
        )];
        diagnostics.extend(self.p.diagnostics.iter().cloned());
        diagnostics
    }
}

fn transpose(rows: &[Vec<u64>], n: usize) -> Vec<Vec<u64>> {
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| rows[j].get(i).copied().unwrap_or(0))
                .collect()
        })
        .collect()
}

fn spread(values: &[u64]) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    let n = values.len() as f64;
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = values
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    let (min_rank, min) = values
        .iter()
        .enumerate()
        .min_by_key(|(_, &v)| v)
        .map_or((0, 0), |(r, &v)| (r, v));
    let (max_rank, max) = values
        .iter()
        .enumerate()
        .max_by_key(|(_, &v)| v)
        .map_or((0, 0), |(r, &v)| (r, v));
    Spread {
        mean,
        stddev: var.sqrt(),
        min: min as f64,
        min_rank,
        max: max as f64,
        max_rank,
    }
}

/// Per rank, where the time of an interval went, in bins.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// The interval covered, in ns since the run's start (widened to whole
    /// slices, and to whole bins of the first program).
    pub from_ns: u64,
    /// End of the interval covered.
    pub to_ns: u64,
    /// One entry per program.
    pub programs: Vec<ProgramTimeline>,
}

/// One program's part of a [`Timeline`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProgramTimeline {
    /// The program's name.
    pub name: String,
    /// Where its first bin starts, in ns since the run's start.
    pub start_ns: u64,
    /// Width of one bin in ns: a whole number of time slices.
    pub bin_ns: u64,
    /// Per rank (program rank order).
    pub ranks: Vec<RankTimeline>,
}

/// One rank's bins: each the ns spent in MPI, in I/O and outside both.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RankTimeline {
    /// Time inside MPI calls.
    pub mpi_ns: Vec<u64>,
    /// Time inside POSIX, STDIO and MPI-IO calls.
    pub io_ns: Vec<u64>,
    /// The rest of the bin, while the rank was alive (between the first and
    /// last slice in which it recorded anything) and recording; 0 outside.
    pub useful_ns: Vec<u64>,
    /// Time recording was paused (not measured, so not useful).
    pub paused_ns: Vec<u64>,
}

/// The per-rank timeline of MPI, I/O and useful time over `iv`, in at most
/// `bins` bins (at least 1) of whole slices each: any zoom down to one
/// slice per bin.
pub fn timeline(run: &Run, iv: Interval, bins: usize) -> Timeline {
    let start = start_ns(run);
    let bins = bins.max(1);
    let mut out = Timeline::default();
    for (i, p) in run.programs.iter().enumerate() {
        let t = &p.timeslices;
        let offset = t.origin_ns.saturating_sub(start);
        let (a, b) = covered(t, offset, iv);
        let per = (b - a).div_ceil(bins).max(1);
        let n = (b - a).div_ceil(per);
        let w = t.slice_ns;
        let bin_ns = per as u64 * w;
        if i == 0 {
            out.from_ns = offset + a as u64 * w;
            out.to_ns = offset + b as u64 * w;
        }
        let row = |m: &str, r: usize| -> Vec<u64> {
            t.metrics
                .get(m)
                .and_then(|rows| rows.get(r))
                .cloned()
                .unwrap_or_default()
        };
        let ranks = (0..p.ranks)
            .map(|r| {
                let mpi = row("mpi_time_ns", r);
                let io = row("io_time_ns", r);
                let paused = row("paused_ns", r);
                let calls = row("mpi_calls", r);
                let ops = row("io_ops", r);
                let busy = |s: usize| {
                    [&mpi, &io, &calls, &ops]
                        .iter()
                        .any(|v| v.get(s).is_some_and(|&x| x > 0))
                };
                let first = (0..slices_of(t)).find(|&s| busy(s));
                let last = (0..slices_of(t)).rev().find(|&s| busy(s));
                let mut out = RankTimeline {
                    mpi_ns: vec![0; n],
                    io_ns: vec![0; n],
                    useful_ns: vec![0; n],
                    paused_ns: vec![0; n],
                };
                for s in a..b {
                    let k = (s - a) / per;
                    let m = mpi.get(s).copied().unwrap_or(0);
                    let o = io.get(s).copied().unwrap_or(0);
                    let z = paused.get(s).copied().unwrap_or(0);
                    out.mpi_ns[k] += m;
                    out.io_ns[k] += o;
                    out.paused_ns[k] += z;
                    let alive = first.is_some_and(|f| f <= s) && last.is_some_and(|l| s <= l);
                    if alive {
                        out.useful_ns[k] += w.saturating_sub(m.saturating_add(o).saturating_add(z));
                    }
                }
                out
            })
            .collect();
        out.programs.push(ProgramTimeline {
            name: p.name.clone(),
            start_ns: offset + a as u64 * w,
            bin_ns,
            ranks,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks, 4 slices of 100 ns: rank 0 sends to 1 in slice 1, each
    /// rank spends time in MPI_Send in slices 1 and 3.
    fn run() -> Run {
        let mut t = TimeSlices {
            slice_ns: 100,
            origin_ns: 1_000,
            metrics: BTreeMap::new(),
        };
        t.metrics.insert(
            "MPI_Send.calls".into(),
            vec![vec![0, 1, 0, 2], vec![0, 0, 0, 1]],
        );
        t.metrics.insert(
            "MPI_Send.time_ns".into(),
            vec![vec![0, 10, 0, 40], vec![0, 0, 0, 30]],
        );
        t.metrics
            .insert("mpi_time_ns".into(), t.metrics["MPI_Send.time_ns"].clone());
        t.metrics.insert(
            "p2p_to:1.messages".into(),
            vec![vec![0, 1, 0, 0], vec![0; 4]],
        );
        t.metrics.insert(
            "p2p_to:0.messages".into(),
            vec![vec![0; 4], vec![0, 0, 0, 1]],
        );
        let mut mpi = BTreeMap::new();
        mpi.insert("MPI_Send".to_string(), FunctionProfile::default());
        Run {
            programs: vec![Program {
                name: "a".into(),
                ranks: 2,
                mpi,
                timeslices: t,
                ..Program::default()
            }],
            ..Run::default()
        }
    }

    fn at(from: u64, to: u64) -> Interval {
        Interval {
            from_ns: Some(from),
            to_ns: Some(to),
        }
    }

    #[test]
    fn an_interval_sums_the_slices_it_overlaps() {
        let r = run();
        let all = profile(&r, Interval::default());
        assert_eq!(all.programs[0].mpi["MPI_Send"].calls, vec![3, 1]);
        let p = profile(&r, at(150, 250));
        let p = &p.programs[0];
        // 150..250 overlaps slices 1 and 2: widened to 100..300.
        assert_eq!(p.mpi["MPI_Send"].calls, vec![1, 0]);
        assert_eq!(p.mpi["MPI_Send"].time_ns, vec![10, 0]);
        assert_eq!(p.mpi_time_ns, vec![10, 0]);
        assert_eq!(p.wall_ns, 200);
        assert_eq!(p.p2p.messages, vec![vec![0, 1], vec![0, 0]]);
        assert!(
            p.diagnostics[0].contains("100 ns to 300 ns"),
            "{:?}",
            p.diagnostics
        );
        assert_eq!(p.timeslices.origin_ns, 1_100);
        let late = profile(&r, at(300, 400));
        assert_eq!(late.programs[0].p2p.messages, vec![vec![0, 0], vec![1, 0]]);
    }

    #[test]
    fn an_interval_outside_the_run_is_empty_not_an_error() {
        let p = profile(&run(), at(10_000, 20_000));
        assert_eq!(p.programs[0].mpi["MPI_Send"].calls, vec![0, 0]);
        assert_eq!(p.programs[0].wall_ns, 0);
        let p = profile(&run(), at(300, 100));
        assert_eq!(p.programs[0].wall_ns, 0);
    }

    #[test]
    fn a_timeline_splits_each_bin_into_mpi_io_and_useful_time() {
        let t = timeline(&run(), Interval::default(), 2);
        let p = &t.programs[0];
        assert_eq!((p.bin_ns, t.from_ns, t.to_ns), (200, 0, 400));
        // Rank 0 is alive from slice 1 (its first call) to slice 3.
        assert_eq!(p.ranks[0].mpi_ns, vec![10, 40]);
        assert_eq!(p.ranks[0].useful_ns, vec![90, 160]);
        // Rank 1 only in slice 3.
        assert_eq!(p.ranks[1].useful_ns, vec![0, 70]);
        let fine = timeline(&run(), at(100, 200), 100);
        assert_eq!(fine.programs[0].ranks[0].mpi_ns, vec![10]);
        assert_eq!(fine.programs[0].bin_ns, 100);
    }
}
