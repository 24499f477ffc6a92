//! A newcomer's pass over README.md: `scripts/readme-check.sh` clones the
//! committed tree, builds it with the README's build line (in debug here,
//! into a target directory of its own seeded with this checkout's
//! third-party builds: building into the checkout's would replace the
//! `hark` and `libhark.so`, built with the tests' features, that the tests
//! after this one run) and
//! runs every command of the README that can run on one machine as written;
//! the ones that cannot are listed by the script with why. Skips, saying
//! so, without LAMMPS, Open MPI, MPICH or git.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn every_readme_command_that_can_run_here_runs_as_written() {
    for tool in [
        "lmp",
        "mpirun.openmpi",
        "mpiexec.mpich",
        "mpicc.mpich",
        "git",
    ] {
        if !common::have(tool) {
            eprintln!("skipped: no {tool} (scripts/deps.sh installs it)");
            return;
        }
    }
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let seed = Path::new(env!("CARGO_TARGET_TMPDIR")).join("..");
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-check");
    let target = scratch.join("target");
    let out = Command::new(top.join("scripts/readme-check.sh"))
        .env("HARK_README_PROFILE", "debug")
        .env("HARK_README_TARGET", &target)
        .env("HARK_README_SEED", &seed)
        .env("HARK_README_SCRATCH", &scratch)
        .output()
        .expect("cannot run scripts/readme-check.sh");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("every command that can run here ran as written"),
        "{said}"
    );
    // The commands a newcomer meets first did run.
    for first in [
        "ok    hark run -- mpirun -np 4 lmp -in in.melt",
        "ok    hark run --help",
    ] {
        assert!(said.contains(first), "{first} did not run: {said}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
