//! Open MPI makes the ranks of an oversubscribed node yield the processor
//! in every MPI call that finds nothing to do. The analyser partition must
//! not switch the programs' ranks into that mode: under `hark run
//! --analysers 1` each rank yields exactly when it does in the same
//! `mpirun` without Hark (`docs/analysers.md`, "The programs' ranks do not
//! start yielding"). On this 2-core machine np 2 is the case that matters:
//! 2 ranks fill the cores, the analyser makes 3.

mod common;

use common::*;
use std::process::Output;

/// Each rank's `(rank, yields)` as the program printed them.
fn yields(out: &Output) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["rank", r, "yield", y] => Some((r.parse().ok()?, y.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_analysers_leave_the_programs_ranks_yielding_as_without_them() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("yield-when-idle");
    let exe = compile(mpi.cc, "yield_when_idle.c".as_ref(), &dir, &[]);
    // (ranks, the user's own setting)
    for (np, user) in [(1, None), (2, None), (3, None), (2, Some("1"))] {
        let mut command = launcher(mpi, np);
        command.push(exe.display().to_string());
        let env: Vec<(&str, &str)> = user
            .map(|v| ("OMPI_MCA_mpi_yield_when_idle", v))
            .into_iter()
            .collect();
        let mut plain = std::process::Command::new(&command[0]);
        plain.current_dir(&dir).args(&command[1..]);
        mpi_env(&mut plain).env_remove("OMPI_MCA_mpi_yield_when_idle");
        plain.envs(env.iter().copied());
        let plain = plain.output_within().expect("cannot run mpirun");
        assert_exit(&plain, 0);
        let out_dir = dir.join(format!("run-{np}-{}", user.unwrap_or("unset")));
        let mut hark =
            hark_run_command(&dir, &out_dir, &["--no-http", "--analysers", "1"], &command);
        hark.env_remove("OMPI_MCA_mpi_yield_when_idle")
            .envs(env.iter().copied());
        probe();
        let hark = hark.output_within().expect("cannot run hark");
        assert_exit(&hark, 0);
        let want = yields(&plain);
        assert_eq!(want.len(), np, "every rank printed: {want:?}");
        assert_eq!(
            yields(&hark),
            want,
            "np {np}, the user's setting {user:?}: under --analysers 1 as without Hark"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
