//! `hark scaling RUN...`: the POP table of a scaling series, runs of one
//! program at different rank counts (strong scaling: the same problem).
//!
//! Per run, against the first (the reference, the one with the fewest
//! ranks after sorting):
//!
//! - **global efficiency** = parallel efficiency × computational scalability;
//! - **parallel efficiency** (and its load balance and communication
//!   efficiency) as each run measured it (`efficiency`);
//! - **computational scalability** = useful time of the reference / useful
//!   time of the run, useful time summed over all ranks (time outside MPI):
//!   1 when the ranks together compute no longer than the reference did;
//! - where the runs have `cycles` and `instructions`: **instruction
//!   scaling** = instructions of the reference / of the run, **IPC scaling**
//!   = IPC of the run / of the reference, **frequency scaling** = frequency
//!   of the run / of the reference, the frequency being cycles per ns of
//!   useful time, so that computational scalability = instruction × IPC ×
//!   frequency scaling exactly.
//!
//! The counts are the whole rank's (`counters`), inside MPI calls too: the
//! probe does not read counters at MPI calls (`docs/probe.md`, "Counters"),
//! so instructions a library spends polling are in them. The table says so.

use crate::units::{count, duration};
use hark_model::{Program, Run};
use std::fmt::Write;

/// One run's figures for the table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    /// Ranks of the program in this run.
    pub ranks: usize,
    /// Useful time (outside MPI) summed over the ranks, in ns.
    pub useful_ns: f64,
    /// Parallel efficiency, load balance and communication efficiency as
    /// the run measured them; `None` without MPI.
    pub parallel: Option<[f64; 3]>,
    /// Instructions and cycles summed over the ranks, where counted.
    pub instructions: Option<f64>,
    /// See `instructions`.
    pub cycles: Option<f64>,
}

impl Point {
    /// The figures of program `p`.
    pub fn of(p: &Program) -> Point {
        let useful: u64 = p
            .rank_wall_ns
            .iter()
            .enumerate()
            .map(|(r, &w)| w.saturating_sub(p.mpi_time_ns.get(r).copied().unwrap_or(0)))
            .sum();
        let sum = |name: &str| -> Option<f64> {
            let v: Vec<u64> = p
                .counters
                .iter()
                .filter_map(|c| c.get(name).copied())
                .collect();
            (!v.is_empty()).then(|| v.iter().map(|&x| x as f64).sum())
        };
        Point {
            ranks: p.ranks,
            useful_ns: useful as f64,
            parallel: p
                .efficiency
                .map(|e| [e.parallel, e.load_balance, e.communication]),
            instructions: sum("instructions"),
            cycles: sum("cycles"),
        }
    }

    /// Instructions per cycle.
    pub fn ipc(&self) -> Option<f64> {
        let (i, c) = (self.instructions?, self.cycles?);
        (c > 0.0).then(|| i / c)
    }

    /// Cycles per ns of useful time (GHz).
    pub fn frequency(&self) -> Option<f64> {
        let c = self.cycles?;
        (self.useful_ns > 0.0).then(|| c / self.useful_ns)
    }
}

/// One run's row of scalings against the reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scaled {
    /// Computational scalability: reference useful time / this run's.
    pub computational: Option<f64>,
    /// Parallel × computational.
    pub global: Option<f64>,
    /// Reference instructions / this run's.
    pub instruction: Option<f64>,
    /// This run's IPC / the reference's.
    pub ipc: Option<f64>,
    /// This run's frequency / the reference's.
    pub frequency: Option<f64>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

/// The scalings of `p` against the reference `r`.
pub fn scaled(r: &Point, p: &Point) -> Scaled {
    let computational = ratio(Some(r.useful_ns), Some(p.useful_ns));
    Scaled {
        computational,
        global: p.parallel.zip(computational).map(|(e, c)| e[0] * c),
        instruction: ratio(r.instructions, p.instructions),
        ipc: ratio(p.ipc(), r.ipc()),
        frequency: ratio(p.frequency(), r.frequency()),
    }
}

/// The POP table of the programs the runs share, as text; runs are sorted
/// by rank count (the first is the reference). `names` labels the runs.
pub fn text(runs: &[(String, Run)]) -> String {
    let mut s = String::new();
    let Some((_, first)) = runs.first() else {
        return "hark scaling: no runs given\n".into();
    };
    for prog in &first.programs {
        let mut series: Vec<(&str, Point, Option<String>)> = runs
            .iter()
            .filter_map(|(name, run)| {
                let p = run.programs.iter().find(|p| p.name == prog.name)?;
                Some((name.as_str(), Point::of(p), p.counter_info.refused_line()))
            })
            .collect();
        if series.len() < 2 {
            let _ = writeln!(
                s,
                "{}: in {} of the runs; a scaling series needs two or more",
                prog.name,
                series.len()
            );
            continue;
        }
        series.sort_by_key(|x| x.1.ranks);
        table(&mut s, &prog.name, &series);
    }
    s
}

fn table(s: &mut String, name: &str, series: &[(&str, Point, Option<String>)]) {
    let reference = &series[0].1;
    let _ = writeln!(
        s,
        "POP scaling of {name}: {} runs, the reference is {} ({} ranks)\n",
        series.len(),
        series[0].0,
        reference.ranks
    );
    let rows: Vec<(Point, Scaled)> = series
        .iter()
        .map(|(_, p, _)| (p.clone(), scaled(reference, p)))
        .collect();
    let pct = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{:.1} %", 100.0 * x));
    // Columns are named by their ranks (run paths are long: they are
    // listed above the table), numbered where two runs have as many.
    let label = |k: usize, p: &Point| {
        let same = series.iter().filter(|x| x.1.ranks == p.ranks).count();
        let ranks = match p.ranks {
            1 => "1 rank".to_string(),
            n => format!("{n} ranks"),
        };
        match same {
            1 => ranks,
            _ => format!("{ranks} #{}", k + 1),
        }
    };
    for (k, (n, p, _)) in series.iter().enumerate() {
        let _ = writeln!(s, "   {}: {n}", label(k, p));
    }
    let _ = writeln!(s);
    let mut header = format!("{:<30}", "");
    for (k, (_, p, _)) in series.iter().enumerate() {
        header.push_str(&format!("{:>16}", label(k, p)));
    }
    let _ = writeln!(s, "   {}", header.trim_end());
    let mut line = |label: &str, cell: &dyn Fn(&Point, &Scaled) -> String| {
        let mut l = format!("{label:<30}");
        for (p, sc) in &rows {
            l.push_str(&format!("{:>16}", cell(p, sc)));
        }
        let _ = writeln!(s, "   {}", l.trim_end());
    };
    line("Global efficiency", &|_, sc| pct(sc.global));
    line("  Parallel efficiency", &|p, _| {
        pct(p.parallel.map(|e| e[0]))
    });
    line("    Load balance", &|p, _| pct(p.parallel.map(|e| e[1])));
    line("    Communication", &|p, _| pct(p.parallel.map(|e| e[2])));
    line(
        "  Computational scalability",
        &|_, sc| pct(sc.computational),
    );
    line("    Instruction scaling", &|_, sc| pct(sc.instruction));
    line("    IPC scaling", &|_, sc| pct(sc.ipc));
    line("    Frequency scaling", &|_, sc| pct(sc.frequency));
    line("Useful time, all ranks", &|p, _| duration(p.useful_ns));
    line("Useful time per rank", &|p, _| {
        duration(p.useful_ns / p.ranks.max(1) as f64)
    });
    line("Instructions per rank", &|p, _| {
        p.instructions
            .map_or("–".into(), |i| count((i / p.ranks.max(1) as f64) as u64))
    });
    line("IPC", &|p, _| {
        p.ipc().map_or("–".into(), |x| format!("{x:.2}"))
    });
    line("Frequency (GHz)", &|p, _| {
        p.frequency().map_or("–".into(), |x| format!("{x:.2}"))
    });
    if rows.iter().any(|(p, _)| p.ipc().is_none()) {
        let why = series
            .iter()
            .find_map(|(_, _, r)| r.clone())
            .unwrap_or_else(|| "the runs were made without them (`--counters`)".into());
        let _ = writeln!(
            s,
            "   Instruction, IPC and frequency scaling need the cycles and instructions counters in every run: {why}"
        );
    } else {
        s.push_str(
            "   Counts cover whole ranks, inside MPI calls too (counters are not read at MPI calls).\n",
        );
    }
    s.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(ranks: usize, useful_ms: f64, pe: f64, instr: f64, cycles: f64) -> Point {
        Point {
            ranks,
            useful_ns: useful_ms * 1e6,
            parallel: Some([pe, 1.0, pe]),
            instructions: Some(instr),
            cycles: Some(cycles),
        }
    }

    #[test]
    fn computational_scalability_is_instruction_times_ipc_times_frequency_scaling() {
        // Recorded as a scaling series would: 1 rank computes 1000 ms with
        // 4e9 instructions in 2e9 cycles (IPC 2, 2 GHz); 4 ranks compute
        // 1250 ms together with 4.4e9 instructions (10 % more work) in
        // 2.75e9 cycles (IPC 1.6, 2.2 GHz).
        let r = point(1, 1000.0, 1.0, 4e9, 2e9);
        let p = point(4, 1250.0, 0.9, 4.4e9, 2.75e9);
        let sc = scaled(&r, &p);
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-9;
        assert!(close(sc.computational, 0.8));
        assert!(close(sc.global, 0.72));
        assert!(close(sc.instruction, 1.0 / 1.1));
        assert!(close(sc.ipc, 0.8));
        assert!(close(sc.frequency, 1.1));
        let product = sc.instruction.unwrap() * sc.ipc.unwrap() * sc.frequency.unwrap();
        assert!((product - sc.computational.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn without_hardware_counters_only_useful_time_scales() {
        let mut r = point(1, 1000.0, 1.0, 0.0, 0.0);
        let mut p = point(2, 1100.0, 0.95, 0.0, 0.0);
        (r.instructions, r.cycles, p.instructions, p.cycles) = (None, None, None, None);
        let sc = scaled(&r, &p);
        assert!((sc.computational.unwrap() - 1000.0 / 1100.0).abs() < 1e-12);
        assert_eq!((sc.instruction, sc.ipc, sc.frequency), (None, None, None));
    }

    #[test]
    fn the_table_names_what_it_lacks() {
        let mut a = Program {
            name: "app".into(),
            ranks: 1,
            rank_wall_ns: vec![1_000_000],
            mpi_time_ns: vec![0],
            ..Program::default()
        };
        a.counter_info
            .refused
            .insert("cycles".into(), "ENOENT: no PMU (on vm)".into());
        let mut b = a.clone();
        b.ranks = 2;
        b.rank_wall_ns = vec![600_000, 600_000];
        b.mpi_time_ns = vec![50_000, 50_000];
        let runs = vec![
            (
                "b".to_string(),
                Run {
                    programs: vec![b],
                    ..Run::default()
                },
            ),
            (
                "a".to_string(),
                Run {
                    programs: vec![a],
                    ..Run::default()
                },
            ),
        ];
        let t = text(&runs);
        assert!(t.contains("the reference is a (1 ranks)"), "{t}");
        // 1 ms against 1.1 ms of useful time.
        assert!(t.contains("90.9 %"), "{t}");
        assert!(
            t.contains("need the cycles and instructions counters"),
            "{t}"
        );
        assert!(t.contains("ENOENT"), "{t}");
    }
}
