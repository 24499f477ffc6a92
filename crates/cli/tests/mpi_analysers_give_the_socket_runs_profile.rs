//! `hark run --analysers N` (the analyser as an MPI job, docs/analysers.md)
//! gives the profile the socket path gives, with 1, 2 and 3 analyser ranks:
//! every count, byte and matrix cell, and every wait-state instance count
//! (times differ between two runs of a program, and are not compared). Two
//! programs launched MPMD with their analysers too.

mod common;
#[path = "common/profiles.rs"]
mod profiles;

use common::*;
use profiles::*;
use serde_json::Value;
use std::path::Path;

#[test]
fn mpi_analysers_give_the_socket_runs_profile() {
    probe();
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("mpi-analysers");
    let ring = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let waits = compile(mpi.cc, "waits.c".as_ref(), &dir, &[]);

    // Counts, bytes and matrices: the ring's are the same in every run.
    let mut command = launcher(mpi, 4);
    command.extend([ring.display().to_string(), "40".into()]);
    let socket = run(&dir, "ring-socket", &[], &command);
    for n in ["1", "2", "3"] {
        // The default, lossy: small writes share a queue place, so that
        // even a loaded machine drops nothing of so small a job.
        let over_mpi = run(&dir, &format!("ring-{n}"), &["--analysers", n], &command);
        assert_same(
            &socket,
            &over_mpi,
            &[],
            &format!("the ring with {n} analyser(s)"),
        );
        assert_eq!(lost(&over_mpi), 0);
    }

    // Wait states of known length: the same instances, whichever analyser
    // holds each side of a pair (with 2 analysers every pair is split).
    // 100 ms each, so that a loaded machine (a sleeper woken late, a waiter
    // switched out) does not change which of them happen, in either run.
    let mut command = launcher(mpi, 4);
    command.extend([
        waits.display().to_string(),
        "reps=4".into(),
        "late_sender=100".into(),
        "late_receiver=100".into(),
        "wait_nxn=100".into(),
        "wait_barrier=100".into(),
    ]);
    let socket = run(&dir, "waits-socket", &[], &command);
    for n in ["1", "2", "3"] {
        let over_mpi = run(&dir, &format!("waits-{n}"), &["--analysers", n], &command);
        assert_eq!(
            instances(&over_mpi),
            instances(&socket),
            "wait-state instances with {n} analyser(s)"
        );
        assert_eq!(lost(&over_mpi), 0);
    }

    // Two programs of one MPMD launch, with their analysers.
    for name in ["ocean", "atmos"] {
        std::fs::copy(&ring, dir.join(name)).unwrap();
    }
    let mut command = launcher(mpi, 2);
    command.extend(
        ["./ocean", "30", ":", "-np", "3", "./atmos", "20"]
            .iter()
            .map(|s| s.to_string()),
    );
    // Under --analysers each program has its own world (virtualised): so
    // must the socket run, for the same collectives.
    let socket = run_env(
        &dir,
        "mpmd-socket",
        &[],
        &command,
        &[("HARK_VIRTUALISE", "1")],
    );
    let over_mpi = run(&dir, "mpmd-2", &["--analysers", "2"], &command);
    assert_same(&socket, &over_mpi, &[], "two programs with 2 analysers");
    assert_eq!(over_mpi["programs"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mpich_analysers_give_the_socket_runs_profile() {
    probe();
    let mpi = MPICH;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: MPICH is not installed");
        return;
    }
    let dir = scratch("mpich-analysers");
    let ring = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend([ring.display().to_string(), "40".into()]);
    let socket = run(&dir, "ring-socket", &[], &command);
    for n in ["1", "2"] {
        // The default, lossy: small writes share a queue place, so that
        // even a loaded machine drops nothing of so small a job.
        let over_mpi = run(&dir, &format!("ring-{n}"), &["--analysers", n], &command);
        assert_same(
            &socket,
            &over_mpi,
            &[],
            &format!("the ring with {n} analyser(s)"),
        );
        assert_eq!(lost(&over_mpi), 0);
        let aligned = over_mpi["programs"][0]["clock"]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "ping-pong")
            .count();
        assert_eq!(
            aligned, 4,
            "every rank aligned by ping-pong with {n} analyser(s)"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Back-pressure over MPI, with packs of 4 KiB and a pool of 2: lossless,
/// every event arrives; lossy (the default), written = received + dropped.
#[test]
fn mpi_streams_keep_the_accounting_lossy_and_lossless() {
    probe();
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("mpi-analysers-accounting");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/mpi/bench/overhead.c");
    let exe = compile(mpi.cc, &src, &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.extend([
        exe.display().to_string(),
        "iprobe".into(),
        "100000".into(),
        "1".into(),
    ]);
    let small = ["--pack-size", "4K", "--buffers", "2", "--analysers", "1"];
    for lossless in [true, false] {
        let mut args = small.to_vec();
        if lossless {
            args.push("--lossless");
        }
        let p = run(
            &dir,
            if lossless { "lossless" } else { "lossy" },
            &args,
            &command,
        );
        let acc = &p["accounting"];
        let (w, r, d) = (
            acc["events_written"].as_u64().unwrap(),
            acc["events_received"].as_u64().unwrap(),
            acc["events_dropped"].as_u64().unwrap(),
        );
        // Two ranks, a warm-up and one repetition of 100,000 calls each.
        assert!(w >= 400_000, "{w} events written");
        assert_eq!(
            w,
            r + d,
            "written = received + dropped (lossless: {lossless})"
        );
        if lossless {
            assert_eq!(d, 0, "nothing dropped in lossless mode");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Debian's LAMMPS (the Lennard-Jones melt) at np 4 with 2 analysers: the
/// MPI profile, matrices and collectives of the socket run. LAMMPS prints
/// its timings into its log and stdout, so the I/O bytes differ between
/// two runs and are left out with the times and the waits.
#[test]
fn lammps_over_mpi_analysers_gives_the_socket_runs_profile() {
    probe();
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.cc) {
        eprintln!(
            "skipped: needs lammps, lammps-examples and Open MPI (scripts/deps.sh installs them)"
        );
        return;
    }
    let dir = scratch("mpi-analysers-lammps");
    std::fs::copy(input, dir.join("in.melt")).unwrap();
    let mut command = launcher(OPEN_MPI, 4);
    command.extend(["lmp".into(), "-in".into(), "in.melt".into()]);
    let without_io = |mut v: Value| {
        for p in v["programs"].as_array_mut().unwrap() {
            p.as_object_mut().unwrap().remove("io");
        }
        v
    };
    let socket = without_io(run(&dir, "socket", &[], &command));
    let over_mpi = without_io(run(&dir, "mpi-2", &["--analysers", "2"], &command));
    assert_same(&socket, &over_mpi, &[], "LAMMPS with 2 analysers");
    assert!(socket["programs"][0]["mpi"]["MPI_Send"]["calls"].is_array());
    std::fs::remove_dir_all(&dir).unwrap();
}
