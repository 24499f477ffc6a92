//! `mpirun -np 2 ./run.sh`, where the script runs a tool and then the MPI
//! program without `exec`: the launcher gives the script's processes (and
//! the tool's) the ranks' world ranks, and they connect first. The MPI
//! program is still the run's first program, in `profile.json` and at the
//! top of `summary.txt`, and keeps its counts; the script and the tool
//! follow it. Under MPICH, whose Hydra names no job, each rank's job was
//! its parent's pid, the script's: the program was split into one program
//! per rank, each with its messages unmatched.
//!
//! The script also runs a nested `sh -c`: a process of the rank under the
//! script's own name, which must not be taken for a second claim to the
//! rank (its write lost): it is the script's child.

mod common;

use common::*;

fn wrapped_ring(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("wrapper-{}", mpi.cc));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let script = dir.join("run.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nhostname > /dev/null\nsh -c 'echo nested > nested.$$'\n{}\n",
            exe.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = launcher(mpi, 2);
    command.push(script.display().to_string());
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let names: Vec<&str> = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let ring = exe.file_name().unwrap().to_str().unwrap();
    assert_eq!(names.first(), Some(&ring), "{}: {names:?}", mpi.name);
    assert!(names.contains(&"sh"), "{}: {names:?}", mpi.name);
    // Each rank's nested `sh` is a child of that rank's script, with its
    // write; nothing was refused.
    let programs = profile["programs"].as_array().unwrap();
    let sh = programs.iter().find(|p| p["name"] == "sh").unwrap();
    assert_eq!(sh["ranks"], 2, "{}", mpi.name);
    let mut children: Vec<(i64, u64, u64)> = sh["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let rank = c["world_rank"].as_i64().unwrap();
            let parent = c["parent_pid"].as_u64().unwrap();
            let holder = sh["rank_info"].as_array().unwrap().iter();
            let holder = holder
                .filter(|r| r["world_rank"] == rank)
                .map(|r| r["pid"].as_u64().unwrap());
            assert_eq!(holder.collect::<Vec<_>>(), [parent], "{}", mpi.name);
            (rank, parent, c["write_bytes"].as_u64().unwrap())
        })
        .collect();
    children.sort();
    assert_eq!(
        children.iter().map(|c| (c.0, c.2)).collect::<Vec<_>>(),
        [(0, 7), (1, 7)],
        "{}",
        mpi.name
    );
    for p in programs {
        for d in p["diagnostics"].as_array().unwrap() {
            assert!(!d.as_str().unwrap().starts_with("refused"), "{d}");
        }
    }
    // The ring's own counts, as without the script (ring.c: 100 rounds
    // of one MPI_Isend and one MPI_Allreduce per rank).
    assert_eq!(per_rank(&profile, 0, "MPI_Isend", "calls"), [100, 100]);
    assert_eq!(per_rank(&profile, 0, "MPI_Allreduce", "calls"), [100, 100]);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let first = summary.lines().find(|l| l.starts_with("== ")).unwrap();
    assert!(
        first.starts_with(&format!("== {ring} — 2 ranks")),
        "{summary}"
    );
}

#[test]
fn open_mpi() {
    wrapped_ring(OPEN_MPI);
}

#[test]
fn mpich() {
    wrapped_ring(MPICH);
}
