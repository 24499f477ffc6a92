//! OpenMP in a library the program opens with `dlopen(RTLD_LOCAL)`, as
//! Python opens an extension module (`tests/programs/omp_local_main.c`
//! opens `omp_local_lib.c`, built with gcc and with clang): the library's
//! calls reach the probe's wrappers, which come first in the global scope,
//! while its OpenMP runtime is not in that scope, where `dlsym(RTLD_NEXT)`
//! looks. The wrappers must still find the runtime, so that the region
//! runs on its team and its reduction is right, and record it.

mod common;

use common::*;

/// Runs the library built with `compiler` three times on two threads.
fn check(compiler: &str) {
    if !have(compiler) {
        eprintln!("skipped: {compiler} is not installed");
        return;
    }
    let dir = scratch(&format!("omp-local-{compiler}"));
    let lib = compile(
        compiler,
        "omp_local_lib.c".as_ref(),
        &dir,
        &["-fopenmp", "-shared", "-fPIC"],
    );
    let exe = compile(compiler, "omp_local_main.c".as_ref(), &dir, &["-ldl"]);
    let command = [
        exe.display().to_string(),
        lib.display().to_string(),
        "3".into(),
    ];
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &[("OMP_NUM_THREADS", "2")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_exit(&out, 0);
    assert!(stdout.contains("local ok: team 2"), "{compiler}: {stdout}");
    let profile = profile(&run_dir);
    let regions: Vec<(u64, u64)> = profile["programs"][0]["openmp"]["regions"]
        .as_array()
        .expect("openmp.regions")
        .iter()
        .map(|r| (r["calls"].as_u64().unwrap(), r["threads"].as_u64().unwrap()))
        .collect();
    assert_eq!(regions, [(3, 2)], "{compiler}");
}

#[test]
fn gcc_libgomp() {
    check("gcc");
}

#[test]
fn clang_libomp() {
    check("clang");
}
