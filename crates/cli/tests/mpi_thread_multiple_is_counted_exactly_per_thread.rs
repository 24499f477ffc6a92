//! `MPI_THREAD_MULTIPLE`: two ranks whose three OpenMP threads (gcc's
//! libgomp, and clang's libomp), or three pthreads, each exchange messages
//! with their namesake on the other rank at once, under their own tags
//! (`tests/programs/thread_multiple.c`), on Open MPI and MPICH. Every function's calls and send bytes per rank must
//! equal the independent counter's (`common/independent_count.rs`,
//! preloaded before the probe) and nothing may be lost. OpenMP threads:
//! each thread's time in MPI must be no more than what it timed around its
//! own calls (+1 %, +1 ms), and at least 80 % of it less 20 µs a call and
//! less the time the thread waited for a CPU (on a loaded machine a thread
//! is preempted some 30 times a run, now and then between its clock and the
//! call; and the probe's own work around a call, 12 µs in a debug build, is
//! in the program's bracket, not in the call), with its time on a CPU read.
//! Pthreads, which end before the program does, with the periodic readings
//! an hour apart (so that a pthread's one reading is the one it takes
//! itself as it ends): their time on a CPU together within max(5 %, 2 ms
//! each) of what they read of their own CPU time.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::*;
use independent_count::*;

const THREADS: usize = 3;
const ITERS: &str = "100";

/// What one thread said of itself: (rank, thread, MPI ns, calls).
fn measured(stdout: &str) -> Vec<(usize, i64, f64, u64)> {
    (thread_reports(stdout, "thread").into_iter())
        .map(|(r, t, v)| (r, t, v[0], v[1] as u64))
        .collect()
}

/// Which compiler the MPI wrapper runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cc {
    /// Its own, gcc: OpenMP through libgomp.
    Gcc,
    /// clang: OpenMP through LLVM's libomp.
    Clang,
}

fn check(mpi: Mpi, pthreads: bool) {
    check_with(mpi, pthreads, Cc::Gcc);
}

fn check_with(mpi: Mpi, pthreads: bool, cc: Cc) {
    if !have(mpi.cc) || !have(mpi.run) || (cc == Cc::Clang && !have("clang")) {
        eprintln!("skipped: {} or clang is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("thread-multiple-{}-{pthreads}-{cc:?}", mpi.cc));
    let exe = match cc {
        Cc::Gcc => compile(mpi.cc, "thread_multiple.c".as_ref(), &dir, &["-fopenmp"]),
        Cc::Clang => {
            // Each MPI's wrapper runs the compiler its variable names.
            let var = if mpi.run.contains("openmpi") {
                "OMPI_CC=clang"
            } else {
                "MPICH_CC=clang"
            };
            let args = [var, mpi.cc, "-fopenmp"];
            compile("env", "thread_multiple.c".as_ref(), &dir, &args)
        }
    };
    let np = 2;
    let mut command = launcher(mpi, np);
    if mpi.run.contains("openmpi") {
        command.extend(["--bind-to", "none"].map(String::from));
    }
    command.extend([exe.display().to_string(), THREADS.to_string(), ITERS.into()]);
    if pthreads {
        command.push("pthreads".into());
    }
    let env: &[(&str, &str)] = if pthreads {
        &[("HARK_CPU_MS", "3600000")]
    } else {
        &[]
    };
    let (out, run_dir) = counted_run_env(mpi, &dir, "run", &[], &command, env);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(l) = stdout.lines().find(|l| l.starts_with("refused")) {
        eprintln!(
            "skipped: {} refuses MPI_THREAD_MULTIPLE (gives level {})",
            mpi.name,
            &l["refused ".len()..]
        );
        return;
    }
    let profile = profile(&run_dir);
    let counts = read_counts(&dir.join(counts_of("run")), np);
    compare(&profile, &counts);
    let iters: u64 = ITERS.parse().unwrap();
    let want_bytes: u64 = (0..THREADS as u64).map(|t| iters * (t + 1) * 800).sum();
    for c in &counts {
        // The counter saw every thread's calls: none raced another.
        assert_eq!(c["MPI_Send"], (THREADS as u64 * iters, want_bytes));
        assert_eq!(c["MPI_Recv"].0, THREADS as u64 * iters);
    }
    let p = &profile["programs"][0];
    let own = measured(&stdout);
    assert_eq!(own.len(), np * THREADS, "the program's output:\n{stdout}");
    let report = format!(
        "program:\n{stdout}\nhark threads: {}\ncpu: {}",
        p["threads"], p["cpu"]
    );
    if pthreads {
        check_pthreads(&thread_reports(&stdout, "cpu"), p, np, &report);
        return;
    }
    for &(rank, t, mpi_ns, calls) in &own {
        assert_eq!(calls, 2 * iters, "{report}");
        let hark = p["threads"][rank]
            .as_array()
            .and_then(|ts| ts.iter().find(|x| x["omp_thread"] == t))
            .unwrap_or_else(|| panic!("no thread {t} of rank {rank}: {report}"));
        let h = hark["mpi_ns"].as_u64().unwrap() as f64;
        // Time the thread waited for a CPU may fall between its clock and
        // the call: the lower bound gives it back.
        let waited = hark["runnable_wait_ns"].as_u64().unwrap_or(0) as f64;
        assert!(
            h <= 1.01 * mpi_ns + 1e6 && h >= 0.8 * mpi_ns - 20e3 * calls as f64 - waited,
            "rank {rank} thread {t}: {h} ns in MPI by Hark, {mpi_ns} by its own clock: {report}"
        );
        assert!(
            hark["on_cpu_ns"].as_u64().unwrap() > 0,
            "rank {rank} thread {t}: no time on a CPU: {report}"
        );
    }
}

/// Each rank's pthreads (every thread but the main one, which records
/// first, at `MPI_Init`) spent on a CPU together what they read of
/// themselves.
fn check_pthreads(own: &[(usize, i64, Vec<f64>)], p: &serde_json::Value, np: usize, report: &str) {
    assert_eq!(own.len(), np * THREADS, "{report}");
    for rank in 0..np {
        let threads = p["cpu"]["ranks"][rank]["threads"].as_array().unwrap();
        let read: Vec<f64> = (threads.iter())
            .map(|t| t["on_cpu_ns"].as_u64().unwrap() as f64)
            .collect();
        assert_eq!(
            read.iter().filter(|&&v| v > 0.0).count(),
            1 + THREADS,
            "rank {rank}: the main thread and {THREADS} pthreads read: {report}"
        );
        let hark: f64 = read[1..].iter().sum();
        let mine: f64 = (own.iter()).filter(|o| o.0 == rank).map(|o| o.2[0]).sum();
        eprintln!(
            "rank {rank}: pthreads on a CPU {:.2} ms by Hark, {:.2} ms by their own clocks",
            hark / 1e6,
            mine / 1e6
        );
        assert!(
            (hark - mine).abs() <= (0.05 * mine).max(2e6 * THREADS as f64),
            "rank {rank}: its pthreads {hark} ns on a CPU by Hark, {mine} by their own clocks: {report}"
        );
    }
}

#[test]
fn open_mpi_openmp_threads_send_and_receive_at_once() {
    check(OPEN_MPI, false);
}

#[test]
fn mpich_openmp_threads_send_and_receive_at_once() {
    check(MPICH, false);
}

#[test]
fn open_mpi_clang_openmp_threads_send_and_receive_at_once() {
    check_with(OPEN_MPI, false, Cc::Clang);
}

#[test]
fn mpich_clang_openmp_threads_send_and_receive_at_once() {
    check_with(MPICH, false, Cc::Clang);
}

#[test]
fn open_mpi_pthreads_send_and_receive_at_once() {
    check(OPEN_MPI, true);
}

#[test]
fn mpich_pthreads_send_and_receive_at_once() {
    check(MPICH, true);
}
