//! `mpirun -x LD_PRELOAD=lib.so` (Open MPI) or `mpiexec -env LD_PRELOAD
//! lib.so` (MPICH) sets the ranks' `LD_PRELOAD` over the one `hark run`
//! passes: nothing was measured ("no process connected"). The probe is now
//! added after the user's library, and both are loaded in every rank.

mod common;

use common::*;

fn preloaded_ring(mpi: Mpi, preload: &[&str]) {
    if !have(mpi.cc) || !have(mpi.run) || !have("gcc") {
        eprintln!("skipped: {} or gcc is not installed", mpi.name);
        return;
    }
    // Tests run in parallel: each its own directory (`-env` and `-genv`
    // share a compiler).
    let dir = scratch(&format!("preload-{}{}", mpi.cc, preload[0]));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let lib = compile(
        "gcc",
        "marker_preload.c".as_ref(),
        &dir,
        &["-shared", "-fPIC"],
    );
    let markers = dir.join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let mut command = launcher(mpi, 2);
    for word in preload {
        command.push(word.replace("LIB", &lib.display().to_string()));
    }
    command.extend([exe.display().to_string(), "10".into()]);
    let marker_dir = markers.display().to_string();
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &[("MARKER_DIR", &marker_dir)]);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(
        per_rank(&profile, 0, "MPI_Isend", "calls"),
        [10, 10],
        "{}: {}",
        mpi.name,
        String::from_utf8_lossy(&out.stderr)
    );
    // The user's library was loaded in both ranks too.
    let pids: Vec<u64> = profile["programs"][0]["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    for pid in pids {
        assert!(
            markers.join(format!("loaded-{pid}")).exists(),
            "{}: the user's preload was not loaded in rank pid {pid}",
            mpi.name
        );
    }
}

#[test]
fn open_mpi_x() {
    preloaded_ring(OPEN_MPI, &["-x", "LD_PRELOAD=LIB"]);
}

#[test]
fn mpich_env() {
    preloaded_ring(MPICH, &["-env", "LD_PRELOAD", "LIB"]);
}

#[test]
fn mpich_genv() {
    preloaded_ring(MPICH, &["-genv", "LD_PRELOAD", "LIB"]);
}
