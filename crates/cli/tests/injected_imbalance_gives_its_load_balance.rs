//! A program whose imbalance is known by construction
//! (`tests/programs/imbalance.c`: in each round rank `r` works outside MPI
//! for `(r + 1)` units of time, then all meet in `MPI_Barrier`),
//! measured through real `mpirun` with Open MPI and MPICH. Time outside MPI
//! is then `(r + 1)` units per round, so the load balance (mean useful time
//! over the largest) of `n` ranks is `(n + 1) / 2n`: `profile.json` must give
//! it within 0.02, with every efficiency a fraction of 1 and
//! `parallel = load_balance × communication`,
//! `communication = serialisation × transfer` to 1e-9.

mod common;

use common::*;

/// Milliseconds of one unit of work, and rounds.
const UNIT_MS: u64 = 100;
const ROUNDS: u64 = 5;

fn check(mpi: Mpi, np: usize) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("imbalance-{}", mpi.cc));
    let exe = compile(mpi.cc, "imbalance.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, np);
    command.extend([
        exe.display().to_string(),
        UNIT_MS.to_string(),
        ROUNDS.to_string(),
    ]);
    let injected = (np + 1) as f64 / (2 * np) as f64;
    // One more run if the first is off: on an oversubscribed machine a
    // sleeping rank can wake late, which changes the work that happened,
    // not what Hark measures of it. A real error shows in both runs.
    let mut last = String::new();
    for attempt in 0..2 {
        let _ = std::fs::remove_dir_all(dir.join("run"));
        let (out, run_dir) = hark_run(&dir, &[], &command);
        assert_exit(&out, 0);
        let profile = profile(&run_dir);
        assert_eq!(lost(&profile), 0, "events lost");
        let e = efficiency(&profile, 0);
        check_waits_fit(&profile, 0);
        if (e["load_balance"] - injected).abs() <= 0.02 {
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        last = format!(
            "{} ranks on {}: load balance {:.4}, injected {injected:.4} (mean {} units over \
             max {np}, {ROUNDS} rounds of {UNIT_MS} ms)\nefficiency: {}\n--- hark\n{}",
            np,
            mpi.name,
            e["load_balance"],
            (np + 1) as f64 / 2.0,
            profile["programs"][0]["efficiency"],
            String::from_utf8_lossy(&out.stderr),
        );
        eprintln!("attempt {attempt} is off:\n{last}");
    }
    panic!("twice off: {last}");
}

#[test]
fn four_ranks_on_open_mpi_balance_to_five_eighths() {
    check(OPEN_MPI, 4);
}

#[test]
fn three_ranks_on_mpich_balance_to_two_thirds() {
    check(MPICH, 3);
}
