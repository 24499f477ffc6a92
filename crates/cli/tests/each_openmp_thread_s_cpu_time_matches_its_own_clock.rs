//! CPU availability per thread: an OpenMP program
//! (`tests/programs/omp_cpu_time.c`, gcc and libgomp) whose threads spin
//! and time themselves, on 2 ranks × 3 threads of Open MPI, unbound, so six
//! busy threads share the machine's cores (and whatever else runs on it).
//! Every thread's `on_cpu_ns` beside its OpenMP times must be within
//! max(5 %, 2 ms) of the CPU time it read from `CLOCK_THREAD_CPUTIME_ID`,
//! and, for the threads the runtime started (their lives are the spins:
//! the main thread's also holds MPI's start and end), its share of
//! runnable time spent waiting for a CPU,
//! `runnable_wait / (on_cpu + runnable_wait)`, within 10 % (or 0.02) of
//! `(wall − cpu) / wall` over its spins, which never sleep; the host's CPU
//! time must hold all six threads' CPU time. Compared with what happened:
//! on an idle machine the shares are near 2/3, on a loaded one higher.

mod common;

use common::*;

const THREADS: usize = 3;
const UNIT_MS: &str = "60";
const ROUNDS: &str = "3";

/// What one thread said of itself: (rank, thread, cpu ns, spin wall ns,
/// spin cpu ns).
fn measured(stdout: &str) -> Vec<(usize, i64, f64, f64, f64)> {
    (thread_reports(stdout, "cpu").into_iter())
        .map(|(r, t, v)| (r, t, v[0], v[1], v[2]))
        .collect()
}

#[test]
fn two_ranks_of_three_busy_threads_on_open_mpi() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch("omp-cpu-time");
    let exe = compile(
        mpi.cc,
        "omp_cpu_time.c".as_ref(),
        &dir,
        &["-fopenmp", "-DWITH_MPI"],
    );
    let np = 2;
    let mut command = launcher(mpi, np);
    command.extend(["-x", "OMP_WAIT_POLICY", "--bind-to", "none"].map(String::from));
    command.extend([
        exe.display().to_string(),
        THREADS.to_string(),
        UNIT_MS.into(),
        ROUNDS.into(),
    ]);
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &[("OMP_WAIT_POLICY", "passive")]);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let p = &profile["programs"][0];
    let stdout = String::from_utf8_lossy(&out.stdout);
    let own = measured(&stdout);
    assert_eq!(own.len(), np * THREADS, "the program's output:\n{stdout}");
    let report = format!(
        "program:\n{stdout}\nhark threads: {}\ncpu: {}",
        p["threads"], p["cpu"]
    );
    assert_eq!(p["cpu"]["wait_measured"], true, "{report}");
    let mut all_cpu = 0.0;
    for &(rank, t, cpu, wall, spun) in &own {
        let hark = p["threads"][rank]
            .as_array()
            .and_then(|ts| ts.iter().find(|x| x["omp_thread"] == t))
            .unwrap_or_else(|| panic!("no thread {t} of rank {rank}: {report}"));
        let on = hark["on_cpu_ns"].as_u64().unwrap() as f64;
        let wait = hark["runnable_wait_ns"].as_u64().unwrap() as f64;
        assert!(
            (on - cpu).abs() <= (0.05 * cpu).max(2e6),
            "rank {rank} thread {t}: {on} ns on a CPU by Hark, {cpu} by its own clock: {report}"
        );
        let share = wait / (on + wait);
        let own_share = (wall - spun) / wall;
        eprintln!(
            "rank {rank} thread {t}: on a CPU {:.1} ms (own {:.1}), waiting share {share:.3} (own {own_share:.3})",
            on / 1e6,
            cpu / 1e6
        );
        // The main thread's readings span MPI's start and end too, where
        // it blocks in the library rather than spins: its share is of
        // other time than its spins', and only its CPU time compares.
        assert!(
            t == 0 || (share - own_share).abs() <= (0.1 * own_share).max(0.02),
            "rank {rank} thread {t}: waited {share:.3} of its runnable time by Hark, \
             {own_share:.3} by its own clocks: {report}"
        );
        all_cpu += cpu;
    }
    let host = p["cpu"]["hosts"][0]["on_cpu_ns"].as_u64().unwrap() as f64;
    assert!(
        host >= 0.95 * all_cpu,
        "the host's {host} ns on a CPU hold less than its threads' {all_cpu}: {report}"
    );
}
