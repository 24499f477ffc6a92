//! `MPI_THREAD_MULTIPLE`: two ranks whose three OpenMP threads each
//! exchange messages with their namesake on the other rank at once, under
//! their own tags (`tests/programs/thread_multiple.c`), on Open MPI and
//! MPICH. Every function's calls and send bytes per rank must equal the
//! independent counter's (`common/independent_count.rs`, preloaded before
//! the probe), nothing may be lost, and each thread's time in MPI must be
//! within max(5 %, 1 ms) of what it timed around its own calls, with its
//! time on a CPU read.

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

fn check(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("thread-multiple-{}", mpi.cc));
    let exe = compile(mpi.cc, "thread_multiple.c".as_ref(), &dir, &["-fopenmp"]);
    let np = 2;
    let mut command = launcher(mpi, np);
    if mpi.run.contains("openmpi") {
        command.extend(["--bind-to", "none"].map(String::from));
    }
    command.extend([exe.display().to_string(), THREADS.to_string(), ITERS.into()]);
    let (out, run_dir) = counted_run_on(mpi, &dir, "run", &[], &command);
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
    for &(rank, t, mpi_ns, calls) in &own {
        assert_eq!(calls, 2 * iters, "{report}");
        let hark = p["threads"][rank]
            .as_array()
            .and_then(|ts| ts.iter().find(|x| x["omp_thread"] == t))
            .unwrap_or_else(|| panic!("no thread {t} of rank {rank}: {report}"));
        let h = hark["mpi_ns"].as_u64().unwrap() as f64;
        assert!(
            (h - mpi_ns).abs() <= (0.05 * mpi_ns).max(1e6),
            "rank {rank} thread {t}: {h} ns in MPI by Hark, {mpi_ns} by its own clock: {report}"
        );
        assert!(
            hark["on_cpu_ns"].as_u64().unwrap() > 0,
            "rank {rank} thread {t}: no time on a CPU: {report}"
        );
    }
}

#[test]
fn open_mpi_threads_send_and_receive_at_once() {
    check(OPEN_MPI);
}

#[test]
fn mpich_threads_send_and_receive_at_once() {
    check(MPICH);
}
