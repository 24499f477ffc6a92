//! OpenMP regions forked by threads other than `main`, which then exit
//! (`tests/programs/omp_roots.c`: two threads of the program's own fork
//! three regions of two threads each and end; then `main` forks one more).
//! Each such root thread has its own team, and the probe its own stacks of
//! open regions and tasks, dropped with the thread: the run must end
//! normally and every region must be counted, with LLVM's libomp (its
//! `__kmpc_*` entry points wrapped, and through OMPT) and with GCC's
//! libgomp (the `GOMP_*` wrappers).

mod common;

use common::*;

/// Runs the program built with `compiler` under Hark with `env` and
/// checks its regions.
fn check(compiler: &str, env: &[(&str, &str)]) {
    if !have(compiler) {
        eprintln!("skipped: {compiler} is not installed");
        return;
    }
    let dir = scratch(&format!("omp-roots-{compiler}"));
    let exe = compile(
        compiler,
        "omp_roots.c".as_ref(),
        &dir,
        &["-fopenmp", "-lpthread"],
    );
    let (out, run_dir) = hark_run_env(&dir, &[], &[exe.display().to_string()], env);
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let regions = profile["programs"][0]["openmp"]["regions"]
        .as_array()
        .expect("openmp.regions")
        .iter()
        .filter(|r| r["kind"] == "parallel")
        .map(|r| (r["calls"].as_u64().unwrap(), r["threads"].as_u64().unwrap()))
        .collect::<Vec<_>>();
    let mut calls: Vec<u64> = regions.iter().map(|r| r.0).collect();
    calls.sort();
    // The root threads' construct (3 forks each) and main's (one).
    assert_eq!(calls, [1, 6], "{compiler}: regions {regions:?}");
    assert!(
        regions.iter().all(|r| r.1 == 2),
        "{compiler}: regions {regions:?}"
    );
}

#[test]
fn clang_libomp() {
    check("clang", &[]);
}

#[test]
fn clang_libomp_through_ompt() {
    check("clang", &[("HARK_OMPT", "1")]);
}

#[test]
fn gcc_libgomp() {
    check("gcc", &[]);
}
