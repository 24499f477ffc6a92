//! Real applications run to completion under the probe with the same results
//! as without it: Debian's LAMMPS (`lmp`, the melt example cut to 100 steps)
//! prints the same thermo table, and `hpcc` (a tiny `hpccinf.txt`) reaches
//! the same verdicts and residuals, on 2 ranks with Open MPI (what Debian
//! builds both with). The recorded streams are whole and hold the MPI calls.

mod mpi_support;
#[path = "../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use hark_wire::op;
use mpi_support::*;
use std::path::Path;
use std::process::Command;

/// Runs `exe args` on 2 ranks in `dir` with or without the probe.
fn run_in(dir: &Path, exe: &str, args: &[&str], probe: bool) -> Job {
    std::fs::create_dir_all(dir).unwrap();
    let job = run_in_dir(Mpi::OpenMpi, 2, Path::new(exe), args, probe, &[], Some(dir));
    assert!(job.success, "{exe} failed: {}{}", job.stdout, job.stderr);
    job
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hark-app-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    remove_at_exit::remove_at_exit(&d);
    d
}

fn mpi_calls(job: &Job) -> usize {
    job.streams
        .iter()
        .map(|s| {
            assert!(s.is_clean(), "{:?}", s.closed);
            s.events
                .iter()
                .filter(|e| matches!(op::kind(e.op()), op::OpKind::Mpi(_)))
                .count()
        })
        .sum()
}

#[test]
fn lammps_prints_the_same_thermo_table() {
    if Command::new("lmp").arg("-h").output().is_err() {
        panic!("lmp (Debian package lammps) is not installed");
    }
    let input = repo().join("tests/programs/mpi/apps/in.melt");
    let input = input.to_str().unwrap();
    let args = ["-in", input, "-log", "none"];
    let thermo = |out: &str| -> Vec<String> {
        let mut lines = Vec::new();
        let mut on = false;
        for l in out.lines() {
            if l.trim_start().starts_with("Step") {
                on = true;
            }
            if l.starts_with("Loop time") {
                on = false;
            }
            if on {
                lines.push(l.to_string());
            }
        }
        lines
    };
    let plain = run_in(&scratch("lmp-plain"), "lmp", &args, false);
    let probed = run_in(&scratch("lmp-probed"), "lmp", &args, true);
    let want = thermo(&plain.stdout);
    assert_eq!(
        want.len(),
        4,
        "header and steps 0, 50, 100:\n{}",
        plain.stdout
    );
    assert_eq!(thermo(&probed.stdout), want);
    assert_eq!(probed.streams.len(), 2);
    let calls = mpi_calls(&probed);
    assert!(calls > 100, "only {calls} MPI calls recorded");
}

#[test]
fn hpcc_reaches_the_same_verdicts() {
    let verdicts = |dir: &Path| -> Vec<String> {
        let out = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
        out.lines()
            .filter(|l| {
                l.contains("residual checks")
                    || l.contains("errors in")
                    || l.starts_with("Success=")
                    || l.contains("||Ax-b||")
                    || l.contains("FAILED")
            })
            .map(String::from)
            .collect()
    };
    let input = repo().join("tests/programs/mpi/apps/hpccinf.txt");
    let (a, b) = (scratch("hpcc-plain"), scratch("hpcc-probed"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::copy(&input, d.join("hpccinf.txt")).unwrap();
    }
    run_in(&a, "hpcc", &[], false);
    let probed = run_in(&b, "hpcc", &[], true);
    let want = verdicts(&a);
    assert!(want.iter().any(|l| l.starts_with("Success=1")), "{want:?}");
    assert!(!want.iter().any(|l| l.contains("FAILED")), "{want:?}");
    assert_eq!(verdicts(&b), want);
    let calls = mpi_calls(&probed);
    assert!(calls > 1000, "only {calls} MPI calls recorded");
}
