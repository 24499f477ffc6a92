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
        .output_within()
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
        (
            &[
                "run",
                "--no-http",
                "--no-virtualise",
                "--",
                "mpirun",
                "-np",
                "2",
                "true",
            ][..],
            "--analysers",
        ),
    ] {
        let out = hark_run_args(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A writer rank that dies makes Open MPI's launcher end the whole job,
/// analysers included: `hark` passes the job's status on, says what
/// happened, and writes the run directory from what the analysers' keepers
/// kept (docs/analysers.md, "When a rank dies"; counts are checked in
/// `a_dying_writer_leaves_a_partial_run_with_mpi_analysers.rs`).
#[test]
fn a_dying_writer_ends_an_mpi_analysed_job_with_a_clear_message() {
    probe();
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("analysers-dying-writer");
    let die = compile(OPEN_MPI.cc, "die.c".as_ref(), &dir, &[]);
    let mut command = launcher(OPEN_MPI, 2);
    command.extend([die.display().to_string(), "segv".into(), "5".into()]);
    let (out, run_dir) = hark_run(&dir, &["--no-http", "--analysers", "1"], &command);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("before the analysers merged"), "{err}");
    assert!(run_dir.join("profile.json").exists(), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A job whose programs and analysers need more slots than the host has,
/// without `--oversubscribe`: Open MPI refuses it before any rank starts,
/// and `hark` says why and what to add (docs/analysers.md, "The programs'
/// ranks do not start yielding").
#[test]
fn a_job_without_room_for_its_analysers_is_told_to_oversubscribe() {
    probe();
    if !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("analysers-no-room");
    // 1000 ranks: more than any host here has cores, so nothing starts.
    let command: Vec<String> = [OPEN_MPI.run, "-np", "1000", "true"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut cmd = hark_run_command(
        &dir,
        &dir.join("run"),
        &["--no-http", "--analysers", "1"],
        &command,
    );
    cmd.env_remove("OMPI_MCA_rmaps_base_oversubscribe");
    let out = cmd.output_within().expect("cannot run hark");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the job needs 1001 slots"), "{err}");
    assert!(err.contains("add --oversubscribe"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
