//! `hark run --analysers 1 --no-virtualise -- mpirun -np 2 ./ocean : -np 2
//! ./atmos`: the two programs share one `MPI_COMM_WORLD`, the analyser
//! excluded, and exchange messages through it; the profile still names
//! both programs, each with its own ranks (`docs/analysers.md`,
//! "`--no-virtualise`").

mod common;

use common::*;

const N: u64 = 25;

fn one_world(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("no-virtualise-{}", mpi.cc));
    let exe = compile(mpi.cc, "mpmd_world.c".as_ref(), &dir, &[]);
    for name in ["ocean", "atmos"] {
        std::fs::copy(&exe, dir.join(name)).unwrap();
    }
    let np = if mpi.run.contains("mpich") {
        "-n"
    } else {
        "-np"
    };
    let mut command = launcher(mpi, 2);
    command.extend([
        "./ocean".into(),
        N.to_string(),
        ":".into(),
        np.into(),
        "2".into(),
    ]);
    command.extend(["./atmos".into(), N.to_string()]);

    let (out, run_dir) = hark_run(
        &dir,
        &["--no-http", "--analysers", "1", "--no-virtualise"],
        &command,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_exit(&out, 0);
    // One world of the four writers, the analyser not in it.
    assert_eq!(stdout.matches(" of 4 (program ").count(), 4, "{stdout}");
    assert_eq!(stdout.matches(": sum 4").count(), 4, "{stdout}");
    assert!(!stdout.contains("wrong rank"), "{stdout}");

    let profile = profile(&run_dir);
    let programs = profile["programs"].as_array().unwrap();
    let mut names: Vec<&str> = programs
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["atmos", "ocean"], "{err}");
    for (k, p) in programs.iter().enumerate() {
        assert_eq!(p["ranks"].as_u64(), Some(2));
        assert_eq!(per_rank(&profile, k, "MPI_Sendrecv", "calls"), vec![N, N]);
        assert_eq!(per_rank(&profile, k, "MPI_Allreduce", "calls"), vec![1, 1]);
    }

    // Virtualised (the default), each program's world holds its own two
    // ranks only: the same programs then see a world of 2.
    let (out, _) = hark_run(&dir, &["--no-http", "--analysers", "1"], &command);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(" of 2 (program ").count(), 4, "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_virtualise_keeps_one_world_for_mpmd_programs_under_open_mpi() {
    one_world(OPEN_MPI);
}

#[test]
fn no_virtualise_keeps_one_world_for_mpmd_programs_under_mpich() {
    one_world(MPICH);
}
