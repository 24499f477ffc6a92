//! Every OpenMP construct the probe records, on LLVM's libomp through its
//! `__kmpc_*` entry points (the default) and through OMPT
//! (`HARK_OMPT=1`), and on GCC's libgomp: `tests/programs/omp_constructs.c`
//! runs, three times on three threads, a region with more shared variables
//! than registers carry, barriers, critical, locks, single, master, loops,
//! sections, reductions, ordered, tasks with taskwait and taskgroup, a
//! nested region and an `if(0)` one, and checks its own results. Under
//! Hark the results must stay right (the wrapped fork passes every shared
//! variable on), both libomp paths must count the same regions, lock
//! waits and barrier waits, and libgomp the same waits.

mod common;

use common::*;

const ROUNDS: u64 = 3;
const THREADS: u64 = 3;

/// What a run recorded: its regions (name, calls, threads), sorted, and
/// its barrier and lock wait instances.
#[derive(Debug, PartialEq)]
struct Counts {
    regions: Vec<(String, u64, u64)>,
    barriers: u64,
    locks: u64,
}

/// Runs the program built with `compiler` under Hark with `env`.
fn run(compiler: &str, env: &[(&str, &str)]) -> Counts {
    let dir = scratch(&format!("omp-constructs-{compiler}"));
    let exe = compile(compiler, "omp_constructs.c".as_ref(), &dir, &["-fopenmp"]);
    let threads = THREADS.to_string();
    let mut env = env.to_vec();
    env.push(("OMP_NUM_THREADS", &threads));
    let command = [exe.display().to_string(), ROUNDS.to_string()];
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_exit(&out, 0);
    assert!(
        stdout.contains("constructs ok"),
        "{compiler} {env:?}: {stdout}"
    );
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let p = &profile["programs"][0];
    let mut regions: Vec<(String, u64, u64)> = p["openmp"]["regions"]
        .as_array()
        .expect("openmp.regions")
        .iter()
        .filter(|r| r["kind"] == "parallel")
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["calls"].as_u64().unwrap(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    regions.sort();
    let instances = |pattern: &str| p["waits"][pattern]["instances"][0].as_u64().unwrap();
    Counts {
        regions,
        barriers: instances("omp_barrier"),
        locks: instances("omp_lock"),
    }
}

/// Lock waits per round and thread: one critical, one `omp_set_lock`, and
/// twenty ordered iterations over the team.
const LOCKS: u64 = ROUNDS * THREADS * 2 + ROUNDS * 20;

#[test]
fn clang_entry_points_and_ompt_count_the_same() {
    if !have("clang") {
        eprintln!("skipped: clang is not installed");
        return;
    }
    let entry = run("clang", &[]);
    let ompt = run("clang", &[("HARK_OMPT", "1")]);
    // The nested region, forked from the outer one's outlined function
    // (`.omp_outlined..3`) and serialized by the runtime into one thread,
    // and those forked in `main` (the main, the nesting and the if(0)
    // region).
    assert_eq!(entry.regions, ompt.regions);
    assert_eq!(
        entry.regions.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        [(2 * ROUNDS, 1), (3 * ROUNDS, THREADS)],
        "{entry:?}"
    );
    assert_eq!((entry.locks, ompt.locks), (LOCKS, LOCKS));
    // A blocking reduction is two waits through the entry points (its
    // start, where a tree reduction gathers the team, and its end's
    // barrier), one through OMPT on this team (an atomic reduction, which
    // gathers nothing): two reductions a round on every thread.
    assert_eq!(
        entry.barriers,
        ompt.barriers + 2 * ROUNDS * THREADS,
        "{entry:?} {ompt:?}"
    );
    // Per round and thread: two explicit barriers, the ends of three
    // singles, the sections, three loops and two reductions; and the
    // single thread's 88 taskwaits of fib(10) and one taskgroup.
    assert_eq!(ompt.barriers, ROUNDS * (THREADS * 11 + 89), "{ompt:?}");
}

#[test]
fn gcc_libgomp_counts_the_same_waits() {
    let gcc = run("gcc", &[]);
    assert_eq!(gcc.locks, LOCKS, "{gcc:?}");
    // As through OMPT but for the reductions, which gcc makes with atomics
    // before the loop's own end barrier: nine barriers a round and thread,
    // and the single thread's taskwaits and taskgroup.
    assert_eq!(gcc.barriers, ROUNDS * (THREADS * 9 + 89), "{gcc:?}");
}
