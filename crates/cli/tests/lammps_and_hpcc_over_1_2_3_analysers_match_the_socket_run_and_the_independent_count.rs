//! Programs nobody here wrote, at np 4, 5 and 6, with 1, 2 and 3 analyser
//! ranks (`hark run --analysers`, docs/analysers.md), every run lossless and
//! with the independent counter (`tests/programs/count_mpi.c`) preloaded:
//!
//! - Debian's LAMMPS (the Lennard-Jones melt, 50 steps): the profile equals
//!   the socket run's in every count, byte, matrix cell and collective
//!   (times, wait states and the I/O of the timings LAMMPS prints aside),
//!   and calls and bytes equal the independent count, in every run.
//! - `hpcc` (the shipped example input, N = 200, one row of np columns) at
//!   np 4 with 1, np 5 with 2 and np 6 with 3 analysers (each run takes
//!   seconds on two loaded cores: the diagonal keeps CI short): calls and
//!   bytes equal the independent count in every run. hpcc is not
//!   compared with a socket run: its call counts differ between two socket
//!   runs (its bandwidth and RandomAccess phases poll with `MPI_Test` and
//!   `MPI_Testany` as long as messages take, and its timed loops repeat
//!   until a time has passed), so the counter in the same run is its truth.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;
#[path = "common/profiles.rs"]
mod profiles;

use common::*;
use independent_count::{compare, counted_run_with, counts_of, read_counts};
use profiles::assert_same;
use std::path::Path;

/// A counted run: its exit status checked, its calls and bytes compared
/// with the counter's; returns the profile.
fn checked(
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
    np: usize,
) -> serde_json::Value {
    let (out, run_dir) = counted_run_with(dir, name, hark_args, command);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    compare(&p, &read_counts(&dir.join(counts_of(name)), np));
    p
}

#[test]
fn lammps_at_np_4_to_6_gives_the_socket_runs_profile_with_1_2_and_3_analysers() {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.cc) {
        eprintln!(
            "skipped: needs lammps, lammps-examples and Open MPI (scripts/deps.sh installs them)"
        );
        return;
    }
    let dir = scratch("analysers-lammps-np");
    let text = std::fs::read_to_string(input)
        .unwrap()
        .replace("run\t\t250", "run\t\t50");
    assert!(text.contains("run\t\t50"), "in.melt changed shape");
    std::fs::write(dir.join("in.melt"), text).unwrap();
    let io = ["io"];
    for np in 4..=6 {
        let mut command = launcher(OPEN_MPI, np);
        command.extend(["lmp", "-in", "in.melt", "-log", "none"].map(String::from));
        let socket = checked(&dir, &format!("socket-{np}"), &[], &command, np);
        for n in ["1", "2", "3"] {
            let name = format!("np{np}-a{n}");
            let over_mpi = checked(&dir, &name, &["--analysers", n], &command, np);
            assert_same(
                &socket,
                &over_mpi,
                &io,
                &format!("LAMMPS at np {np}, {n} analyser(s)"),
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hpcc_at_np_4_5_6_matches_the_independent_count_with_1_2_3_analysers() {
    let example = Path::new("/usr/share/doc/hpcc/examples/_hpccinf.txt");
    if !have("hpcc") || !example.exists() || !have(OPEN_MPI.cc) {
        eprintln!("skipped: needs hpcc and Open MPI (scripts/deps.sh installs them)");
        return;
    }
    let dir = scratch("analysers-hpcc-np");
    let shipped = std::fs::read_to_string(example).unwrap();
    for (np, n) in [(4, "1"), (5, "2"), (6, "3")] {
        // The shipped example on a 1 x np grid with N = 200: seconds.
        let input = shipped
            .replace("1000         Ns", "200          Ns")
            .replace("80           NBs", "40           NBs")
            .replace("2            Ps", "1            Ps")
            .replace("2            Qs", &format!("{np}            Qs"));
        assert!(
            input.contains(&format!("\n{np}            Qs")),
            "hpccinf.txt changed shape"
        );
        std::fs::write(dir.join("hpccinf.txt"), input).unwrap();
        let mut command = launcher(OPEN_MPI, np);
        command.push("hpcc".into());
        {
            let _ = std::fs::remove_file(dir.join("hpccoutf.txt"));
            let p = checked(
                &dir,
                &format!("np{np}-a{n}"),
                &["--analysers", n],
                &command,
                np,
            );
            let results = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
            assert!(
                results.contains("End of HPC Challenge tests."),
                "hpcc did not finish at np {np} with {n} analyser(s)"
            );
            assert_eq!(
                results.matches("FAILED").count(),
                0,
                "hpcc reports a failed check"
            );
            assert_eq!(p["programs"].as_array().unwrap().len(), 1);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
