//! A program that splits `MPI_COMM_WORLD` and frees the result 2,400 times
//! (`tests/programs/many_comms.c`, as Quantum ESPRESSO does every step),
//! with one rank sleeping before the barrier on every 200th: past the first
//! 64 communicators with the same members (and past 1,000 in all), the rest
//! share one id per member set, and their barriers must still be matched
//! into wait states. Measured through real `mpirun` with Open MPI and
//! MPICH, and with two analysers over MPI, every rank waits in each
//! injected barrier it was not late to (all 12 are on communicators past
//! the first 64 alike): its Wait at Barrier is at least 75 % of what was
//! injected (a rank switched out before its own call waits less; the 2,400
//! barriers' own small waits add to it), and no instance is left
//! incomplete. Before, the barriers past the cap were on a communicator
//! with no members and found no wait: 27–55 % of it was found. The
//! diagnostics say what was folded.
//!
//! Then, ten times, rank 1 sends to rank 0 on two such communicators live
//! at once and rank 0 receives the later message first, waiting 60 ms for
//! it with the earlier one there: its Late Sender (both kinds) is within
//! 75–150 % of the 600 ms injected. With one channel for the communicators
//! sharing an id, each receive took the other's message and found no wait.

mod common;

use common::*;

const COMMS: u64 = 2400;
const EVERY: u64 = 200;
const MS: u64 = 60;
const PAIRS: u64 = 10;

fn check(mpi: Mpi, np: usize, hark_args: &[&str]) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("many-comms-{}-{}", mpi.cc, hark_args.join("")));
    let exe = compile(mpi.cc, "many_comms.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, np);
    command.extend([
        exe.display().to_string(),
        COMMS.to_string(),
        EVERY.to_string(),
        MS.to_string(),
        PAIRS.to_string(),
    ]);
    let (out, run_dir) = hark_run(&dir, hark_args, &command);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    check_waits_fit(&profile, 0);
    // Barriers each rank was late to, as the program counted them.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let late: Vec<u64> = (0..np)
        .map(|r| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("late {r} ")))
                .unwrap_or_else(|| panic!("no 'late {r}' line in the program's output:\n{stdout}"))
                .parse()
                .unwrap()
        })
        .collect();
    let injected = COMMS / EVERY;
    assert_eq!(late.iter().sum::<u64>(), injected);
    let (time_ns, instances) = waits(&profile, 0, "wait_barrier");
    let prog = &profile["programs"][0];
    let report = format!(
        "{np} ranks on {}: wait_barrier time {time_ns:?} instances {instances:?}, late {late:?}\n\
         diagnostics: {}\n--- hark\n{}",
        mpi.name,
        prog["diagnostics"],
        String::from_utf8_lossy(&out.stderr),
    );
    for r in 0..np {
        // Every barrier the rank was not late to is an instance of its
        // waiting, the injected ones among them.
        let waited = injected - late[r];
        assert!(instances[r] >= waited, "rank {r}: {report}");
        assert!(
            time_ns[r] >= waited * MS * 1_000_000 * 3 / 4,
            "rank {r} waited less than injected: {report}"
        );
    }
    // Rank 0's receives in the wrong order.
    let (late_sender, _) = waits(&profile, 0, "late_sender");
    let (wrong_order, _) = waits(&profile, 0, "late_sender_wrong_order");
    let got = late_sender[0] + wrong_order[0];
    let injected_ns = PAIRS * MS * 1_000_000;
    assert!(
        got >= injected_ns * 3 / 4 && got <= injected_ns * 3 / 2,
        "rank 0's Late Sender {late_sender:?} and Wrong Order {wrong_order:?} ns, \
         {injected_ns} ns injected: {report}"
    );
    let diagnostics = prog["diagnostics"].to_string();
    assert!(
        diagnostics.contains("beyond the first 64 with the same members")
            && diagnostics.contains("one communicator per member set"),
        "{report}"
    );
    assert!(
        !diagnostics.contains("never completed"),
        "an instance was split between ids: {report}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn three_ranks_on_open_mpi_wait_in_barriers_past_the_cap() {
    check(OPEN_MPI, 3, &[]);
}

#[test]
fn two_ranks_on_mpich_wait_in_barriers_past_the_cap() {
    check(MPICH, 2, &[]);
}

#[test]
fn three_ranks_on_open_mpi_with_two_analysers_wait_in_barriers_past_the_cap() {
    check(OPEN_MPI, 3, &["--analysers", "2"]);
}
