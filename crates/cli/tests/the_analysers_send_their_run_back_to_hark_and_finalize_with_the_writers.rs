//! Under `hark run --analysers`, the analysers' merged run comes back to
//! `hark run`, which writes the run directory (`docs/analysers.md`, "The
//! run comes back to `hark run`"); `hark` exits with the job's status,
//! whether or not a run came; and every rank of the job calls the real
//! `MPI_Finalize` together, the writers waiting for their analyser's
//! release ("Finalizing together"). Real `mpirun` and `mpiexec` jobs, Open
//! MPI and MPICH, on one node; the same across emulated nodes is in
//! `the_analysers_run_comes_back_across_emulated_nodes.rs`.

mod common;

use common::*;

const ROUNDS: u64 = 50;

/// The ring's command for `mpi` at np 2.
fn ring(mpi: Mpi, dir: &std::path::Path) -> Vec<String> {
    let exe = compile(mpi.cc, "ring.c".as_ref(), dir, &[]);
    let mut command = launcher(mpi, 2);
    command.extend([exe.display().to_string(), ROUNDS.to_string()]);
    command
}

/// Each rank's `MPI_Isend` count equals the ring's rounds: the run is the
/// job's, whole.
fn check_ring(run_dir: &std::path::Path, err: &str) {
    let p = profile(run_dir);
    assert_eq!(
        per_rank(&p, 0, "MPI_Isend", "calls"),
        [ROUNDS, ROUNDS],
        "{err}"
    );
}

/// The analysers held 4 s once their streams ended (a long merge): the
/// writers wait in `MPI_Finalize` for their release, so every rank, writer
/// and analyser, calls the real `MPI_Finalize` within a moment of the
/// others; without the wait the writers call it 4 s before the analysers.
#[test]
fn every_rank_calls_mpi_finalize_together_however_long_the_analysers_merge() {
    if !test_hooks_or_skip() {
        return;
    }
    for mpi in [OPEN_MPI, MPICH] {
        if !have(mpi.cc) || !have(mpi.run) {
            eprintln!("skipped: {} is not installed", mpi.name);
            continue;
        }
        for analysers in [1, 2] {
            let dir = scratch(&format!("finalize-together-{analysers}"));
            let log = dir.join("finalize.log");
            let command = ring(mpi, &dir);
            let (out, run_dir) = hark_run_env(
                &dir,
                &["--no-http", "--analysers", &analysers.to_string()],
                &command,
                &[
                    ("HARK_TEST_ANALYSER_DELAY_MS", "4000"),
                    ("HARK_TEST_FINALIZE_LOG", log.to_str().unwrap()),
                ],
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_exit(&out, 0);
            check_ring(&run_dir, &err);
            let text = std::fs::read_to_string(&log).unwrap();
            let lines: Vec<(&str, u64)> = text
                .lines()
                .map(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    (w[0], w[2].parse().unwrap())
                })
                .collect();
            let count = |role: &str| lines.iter().filter(|(r, _)| *r == role).count();
            assert_eq!(count("writer"), 2, "{} {analysers}: {text}", mpi.name);
            assert_eq!(
                count("analyser"),
                analysers,
                "{} {analysers}: {text}",
                mpi.name
            );
            let first = lines.iter().map(|l| l.1).min().unwrap();
            let last = lines.iter().map(|l| l.1).max().unwrap();
            // 4 s apart without the release; a loaded machine's scheduling
            // delays, with it.
            assert!(
                last - first < 2_000_000_000,
                "{} with {analysers} analyser(s): ranks entered MPI_Finalize {} ms apart: {text}",
                mpi.name,
                (last - first) / 1_000_000
            );
            drop(dir);
        }
    }
}

/// `HARK_TEST_RELAY=tcp`: `hark run` offers analyser rank 0 only a TCP
/// address (no Unix socket), the path of a rank 0 on another node; the run
/// comes over it, and `hark run` writes the run directory.
#[test]
fn the_run_comes_back_over_tcp_where_the_unix_socket_is_not_offered() {
    if !test_hooks_or_skip() {
        return;
    }
    for mpi in [OPEN_MPI, MPICH] {
        if !have(mpi.cc) || !have(mpi.run) {
            eprintln!("skipped: {} is not installed", mpi.name);
            continue;
        }
        let dir = scratch("run-over-tcp");
        let command = ring(mpi, &dir);
        let (out, run_dir) = hark_run_env(
            &dir,
            &["-v", "--analysers", "2"],
            &command,
            &[("HARK_TEST_RELAY", "tcp")],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_exit(&out, 0);
        assert!(err.contains("reaches hark run at tcp:127.0.0.1:"), "{err}");
        assert!(!err.contains("--hark unix:"), "{err}");
        check_ring(&run_dir, &err);
        assert!(run_dir.join("report.html").exists(), "{err}");
        assert!(!run_dir.join(".partials").exists(), "{err}");
        drop(dir);
    }
}

/// The job's status passes through `hark` with the run written; and when
/// the run never comes back (analyser rank 0 drops it: `HARK_TEST_LOSE_RUN`),
/// `hark` says so, writes the run from what the keepers left, and still
/// exits with the job's status, 0 included.
#[test]
fn hark_exits_with_the_jobs_status_whether_or_not_the_run_came_back() {
    if !test_hooks_or_skip() {
        return;
    }
    for mpi in [OPEN_MPI, MPICH] {
        if !have(mpi.cc) || !have(mpi.run) {
            eprintln!("skipped: {} is not installed", mpi.name);
            continue;
        }
        let dir = scratch("analysers-status");
        let exe = compile(mpi.cc, "exit_after_finalize.c".as_ref(), &dir, &[]);
        for code in [0, 3] {
            let mut command = launcher(mpi, 2);
            command.extend([exe.display().to_string(), code.to_string()]);
            for lose in [false, true] {
                let env: &[(&str, &str)] = match lose {
                    true => &[("HARK_TEST_LOSE_RUN", "1")],
                    false => &[],
                };
                let (out, run_dir) =
                    hark_run_env(&dir, &["--no-http", "--analysers", "1"], &command, env);
                let err = String::from_utf8_lossy(&out.stderr);
                let what = format!("{} status {code}, run lost: {lose}: {err}", mpi.name);
                assert_eq!(out.status.code(), Some(code), "{what}");
                if lose {
                    // On one node the keepers' partial results are in the
                    // run directory, and hark merges them; across nodes
                    // they may not be (the other test file).
                    assert!(
                        err.contains("never reached hark run")
                            || err.contains("before the analysers merged"),
                        "{what}"
                    );
                    assert!(err.contains(&format!("status {code}")), "{what}");
                } else {
                    assert!(run_dir.join("profile.json").exists(), "{what}");
                    assert!(!err.contains("warning"), "{what}");
                    assert!(err.contains("Run directory:"), "{what}");
                }
                std::fs::remove_dir_all(&run_dir).unwrap();
            }
        }
        drop(dir);
    }
}
