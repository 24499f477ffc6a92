//! `hark run --analysers` refuses what it cannot do, before anything runs,
//! and says what to do instead.

mod common;

use common::*;

fn hark_run_args(args: &[&str]) -> std::process::Output {
    probe();
    let dir = scratch("analysers-refused");
    let out = std::process::Command::new(hark())
        .current_dir(&dir)
        .args(args)
        .output()
        .expect("cannot run hark");
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

#[test]
fn analysers_need_an_mpi_launcher_and_a_valid_count() {
    for (args, says) in [
        (
            &["run", "--no-http", "--analysers", "2", "--", "true"][..],
            "needs an MPI launcher",
        ),
        (
            &[
                "run",
                "--no-http",
                "--analysers",
                "0",
                "--",
                "mpirun",
                "-np",
                "2",
                "true",
            ][..],
            "is not valid",
        ),
        (
            &[
                "run",
                "--no-http",
                "--analysers",
                "1:0",
                "--",
                "mpirun",
                "-np",
                "2",
                "true",
            ][..],
            "is not valid",
        ),
        (
            &[
                "run",
                "--no-http",
                "--trace",
                "--analysers",
                "1",
                "--",
                "mpirun",
                "-np",
                "2",
                "true",
            ][..],
            "--trace is not available with --analysers",
        ),
    ] {
        let out = hark_run_args(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
