//! A program whose imbalance is known by construction
//! (`tests/programs/imbalance.c`: in each round rank `r` works outside MPI
//! for `(r + 1)` units of time, then all meet in `MPI_Barrier`),
//! measured through real `mpirun` with Open MPI and MPICH. Time outside MPI
//! is then `(r + 1)` units per round, so the load balance (mean useful time
//! over the largest) of `n` ranks is `(n + 1) / 2n`: `profile.json` must give
//! it within 0.02, with every efficiency a fraction of 1 and
//! `parallel = load_balance × communication`,
//! `communication = serialisation × transfer` to 1e-9. A loaded machine
//! wakes sleeping ranks late and so changes the imbalance that happens: the
//! program times its own work outside MPI, and Hark must match that to 0.01
//! (and the injected ratio to 0.02 whenever what happened is the injected).

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
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let e = efficiency(&profile, 0);
    check_waits_fit(&profile, 0);
    // The imbalance that happened, timed by the program itself: on a loaded
    // machine a sleeping rank wakes late, and that is work outside MPI too.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let useful: Vec<f64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("useful_ns "))
        .unwrap_or_else(|| panic!("no useful_ns line in the program's output:\n{stdout}"))
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(useful.len(), np);
    let max = useful.iter().copied().fold(0.0, f64::max);
    let happened = useful.iter().sum::<f64>() / np as f64 / max;
    let report = format!(
        "{np} ranks on {}: Hark's load balance {:.4}, the program's own {happened:.4}, \
         injected {injected:.4} ({ROUNDS} rounds of {UNIT_MS} ms units)\nefficiency: {}\n\
         --- hark\n{}",
        mpi.name,
        e["load_balance"],
        profile["programs"][0]["efficiency"],
        String::from_utf8_lossy(&out.stderr),
    );
    // Hark measures what happened, to 0.01; on a quiet machine what happened
    // is what was injected, and then Hark is within 0.02 of that as well.
    assert!((e["load_balance"] - happened).abs() <= 0.01, "{report}");
    if (happened - injected).abs() <= 0.01 {
        assert!((e["load_balance"] - injected).abs() <= 0.02, "{report}");
    } else {
        assert!(
            (happened - injected).abs() <= 0.15,
            "the program did not run as built: {report}"
        );
        eprintln!("the machine stretched the work (checked against what happened): {report}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn four_ranks_on_open_mpi_balance_to_five_eighths() {
    check(OPEN_MPI, 4);
}

#[test]
fn three_ranks_on_mpich_balance_to_two_thirds() {
    check(MPICH, 3);
}
