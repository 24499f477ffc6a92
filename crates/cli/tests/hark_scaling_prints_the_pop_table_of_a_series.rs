//! `hark scaling` of runs of one program at 1 and 2 ranks
//! (`tests/programs/counted_regions.c`): the POP table, with its
//! computational scalability equal to the useful time of the reference over
//! the run's (summed over the ranks from each `profile.json`), the global
//! efficiency equal to the parallel efficiency × computational
//! scalability, and, where the runs have no cycles and instructions (this
//! VM has no PMU), one line that says why the hardware scalings are
//! missing. The arithmetic of the hardware scalings is tested on recorded
//! values in `hark_outputs::scaling`. Then LAMMPS at 1, 2 and 4 ranks,
//! and the same LAMMPS job three times a side through `hark diff`: nothing
//! beyond its run-to-run noise, counters included.

mod common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;

fn useful_ns(profile: &Value) -> f64 {
    let p = &profile["programs"][0];
    let wall = p["rank_wall_ns"].as_array().unwrap();
    let mpi = p["mpi_time_ns"].as_array().unwrap();
    wall.iter()
        .zip(mpi)
        .map(|(w, m)| w.as_u64().unwrap().saturating_sub(m.as_u64().unwrap()) as f64)
        .sum()
}

/// The percentages of a row of the table, by its label.
fn row(table: &str, label: &str) -> Vec<f64> {
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no row {label}:\n{table}"));
    line[line.find(label).unwrap() + label.len()..]
        .split('%')
        .filter_map(|c| c.trim().parse().ok())
        .collect()
}

#[test]
fn a_series_at_one_and_two_ranks_gives_the_pop_table() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("scaling");
    let include = format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"));
    let exe = compile(OPEN_MPI.cc, "counted_regions.c".as_ref(), &dir, &[&include]);
    let mut runs: Vec<PathBuf> = Vec::new();
    for np in [1, 2] {
        let mut command = launcher(OPEN_MPI, np);
        command.extend([exe.display().to_string(), "4000".into(), "10".into()]);
        let (out, run_dir) = hark_run(&dir, &["-q"], &command);
        assert_exit(&out, 0);
        let to = dir.join(format!("np{np}"));
        std::fs::rename(&run_dir, &to).unwrap();
        runs.push(to);
    }
    // Given in the wrong order: the one with the fewest ranks is the reference.
    let out = std::process::Command::new(hark())
        .arg("scaling")
        .args(runs.iter().rev())
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains("(1 ranks)"), "{table}");

    let profiles: Vec<Value> = runs.iter().map(|r| profile(r)).collect();
    let want = useful_ns(&profiles[0]) / useful_ns(&profiles[1]);
    let cs = row(&table, "Computational scalability");
    assert_eq!(cs.len(), 2, "{table}");
    assert!((cs[0] - 100.0).abs() < 0.05, "{table}");
    assert!((cs[1] - 100.0 * want).abs() < 0.06, "want {want}\n{table}");
    let pe = row(&table, "Parallel efficiency");
    let ge = row(&table, "Global efficiency");
    assert!((ge[1] - pe[1] * cs[1] / 100.0).abs() < 0.2, "{table}");

    let has_ipc = profiles.iter().all(|p| {
        p["programs"][0]["counters"][0]["instructions"]
            .as_u64()
            .is_some()
            && p["programs"][0]["counters"][0]["cycles"].as_u64().is_some()
    });
    if has_ipc {
        assert_eq!(row(&table, "IPC scaling").len(), 2, "{table}");
    } else {
        assert!(
            table.contains("need the cycles and instructions counters in every run"),
            "{table}"
        );
    }
}

/// LAMMPS (Debian's `lmp`, the melt example) in `dir` at `np` ranks, its
/// run directory renamed `name`.
fn lammps(dir: &std::path::Path, np: usize, name: &str) -> PathBuf {
    let mut command = launcher(OPEN_MPI, np);
    command
        .extend(["--bind-to", "none", "lmp", "-in", "in.melt", "-log", "none"].map(String::from));
    let (out, run_dir) = hark_run(dir, &["-q"], &command);
    assert_exit(&out, 0);
    let to = dir.join(name);
    std::fs::rename(&run_dir, &to).unwrap();
    to
}

/// A program nobody here wrote as a series: LAMMPS at 1, 2 and 4 ranks
/// gives the POP table with computational scalability from the runs' useful
/// time; and the same job (np 2) run three times and three times again
/// shows no change that matters beyond its run-to-run noise, counters
/// included, measured over the repeated runs (a comparison that finds one
/// is made again on fresh runs, where the same quantity must not matter
/// again). The counts (calls, bytes) of a deterministic program do not
/// change at all.
#[test]
fn lammps_at_1_2_4_ranks_gives_the_pop_table_and_the_same_job_twice_changes_nothing_that_matters() {
    let input = std::path::Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.run) {
        eprintln!("skipped: LAMMPS (lmp, lammps-examples) or Open MPI is not installed");
        return;
    }
    let dir = scratch("scaling-lammps");
    std::fs::copy(input, dir.join("in.melt")).unwrap();
    let series: Vec<PathBuf> = [1, 2, 4]
        .into_iter()
        .map(|np| lammps(&dir, np, &format!("np{np}")))
        .collect();
    let out = std::process::Command::new(hark())
        .arg("scaling")
        .args(&series)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{table}");
    let profiles: Vec<Value> = series.iter().map(|r| profile(r)).collect();
    let cs = row(&table, "Computational scalability");
    assert_eq!(cs.len(), 3, "{table}");
    for (i, p) in profiles.iter().enumerate() {
        let want = useful_ns(&profiles[0]) / useful_ns(p);
        assert!(
            (cs[i] - 100.0 * want).abs() < 0.06,
            "run {i}: want {want}\n{table}"
        );
    }
    let (pe, ge) = (
        row(&table, "Parallel efficiency"),
        row(&table, "Global efficiency"),
    );
    for i in 0..3 {
        assert!((ge[i] - pe[i] * cs[i] / 100.0).abs() < 0.2, "{table}");
    }

    // Each quantity is judged at 99 % on its own; dozens are, so one
    // comparison in a few may find a change in noise alone (CI saw it
    // twice, once in MPI_Init). A change the job really makes shows in fresh
    // runs too: a comparison that finds one is made once more, and no
    // quantity may matter in both.
    let first = same_job_twice(&dir, "1");
    let suspects = mattering(&first);
    if suspects.is_empty() {
        assert!(first.contains(NONE), "{first}");
        return;
    }
    eprintln!(
        "note: the first comparison found {suspects:?} beyond the noise; comparing fresh runs"
    );
    let second = same_job_twice(&dir, "2");
    let again: Vec<String> = mattering(&second)
        .intersection(&suspects)
        .cloned()
        .collect();
    assert!(
        again.is_empty(),
        "the same job changed {again:?} beyond its run-to-run noise in two comparisons of fresh runs:\n{first}\n{second}"
    );
}

/// What `hark diff` says when nothing changed beyond the noise.
const NONE: &str = "none: every difference is within the runs' own noise";

/// The quantities `hark diff`'s text lists as changes that matter, each by
/// its kind and name (the line's first 45 characters, their fixed columns).
fn mattering(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Changes that matter"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.contains(NONE))
        .map(|l| l.chars().take(45).collect::<String>().trim().to_string())
        .collect()
}

/// The same LAMMPS job (np 2), three runs a side, through `hark diff`; the
/// runs are named after `round`. Checks what every comparison must hold
/// (run-to-run noise, counters compared, the same counts) and gives the
/// text.
fn same_job_twice(dir: &std::path::Path, round: &str) -> String {
    // The sides run in turns: a drift of the machine (the other test of
    // this file ending, say) must land on both, as it did not when one side
    // ran first (CI saw task-clock 12 % lower on the side that ran last).
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for k in 1..=3 {
        a.push(lammps(dir, 2, &format!("{round}a{k}")));
        b.push(lammps(dir, 2, &format!("{round}b{k}")));
    }
    let page = dir.join(format!("diff{round}.html"));
    let mut diff = std::process::Command::new(hark());
    diff.arg("diff").arg("-o").arg(&page);
    diff.args(&a).arg("--").args(&b);
    let out = diff.output().unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    assert!(text.contains("noise: the run-to-run spread"), "{text}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(">counter<") && html.contains("page-faults"),
        "the counters are compared: {html}"
    );
    assert!(
        !text.contains("Counts that changed"),
        "LAMMPS's calls and bytes are the same in every run:\n{text}"
    );
    text
}

/// `mattering` reads the quantities off `hark diff`'s text, and none when
/// nothing matters.
#[test]
fn the_changes_that_matter_are_read_by_kind_and_name() {
    let text = "\
Changes that matter, costliest first (per rank; noise: the run-to-run spread):
  function   MPI_Init                             95.10 ms -> 118.40 ms      +23.30 ms  (noise 4.20 ms)  [lmp]
  wait state late_receiver                        31.29 ms -> 38.25 ms        +6.96 ms  (noise 1.61 ms)  [lmp]

Within the noise (2; the largest):
  function   MPI_Send                             46.64 ms -> 53.39 ms        +6.75 ms  (noise 20.75 ms)
";
    let found: Vec<String> = mattering(text).into_iter().collect();
    assert_eq!(found, ["function   MPI_Init", "wait state late_receiver"]);
    let quiet = format!("Changes that matter, costliest first (per rank):\n  {NONE}\n\nWithin the noise (1; the largest):\n  function   MPI_Send   1 ms -> 1 ms   +0 ns  (noise 1 ms)\n");
    assert!(mattering(&quiet).is_empty());
}
