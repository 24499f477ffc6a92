//! OpenMP per thread: a hybrid program with known per-thread imbalance
//! (`tests/programs/omp_imbalance.c`: thread `t` works `t + 1` units, waits
//! at a barrier, works `(n − t) / 2` units more and meets the others at the
//! region's end), which times its own work and both barrier waits with
//! `CLOCK_MONOTONIC`. Built with gcc (libgomp, whose `GOMP_*` entry points
//! the probe wraps), gfortran (`omp_imbalance.f90`, libgomp), clang
//! (LLVM libomp, its `__kmpc_*` entry points wrapped, and through OMPT
//! with `HARK_OMPT=1`), and as C++ (`omp_imbalance.cpp`, its region
//! a lambda in a class template) with g++ and clang++, with and without MPI, at np 1 and 2 with 2 and 3
//! threads on Open MPI and MPICH: every thread's `useful_ns` and
//! `omp_barrier_ns` must be within max(5 %, 1 ms) of what it measured (plus
//! the time the kernel says the thread waited for a CPU: near nothing on a
//! quiet machine), and
//! the OpenMP load balance within 0.02 of the one computed from the
//! program's own work and barrier times (with Hark's MPI, I/O and idle
//! times, which the program does not measure), plus what one preempted
//! thread can move (`check`). Compared with what
//! happened, not with what was built, so it holds on a loaded machine.

mod common;

use common::*;

/// Long enough that 5 % of a thread's time exceeds a scheduler time slice:
/// a thread preempted between its last instruction of work and the
/// runtime's barrier looks busy to the one and waiting to the other.
const UNIT_MS: &str = "40";
const ROUNDS: &str = "3";

/// Within max(5 %, 1 ms), plus the time the thread waited for a CPU
/// (`slack`, as the kernel measured it): a thread preempted between its own
/// clock readings and the runtime's has that time counted differently by
/// the two, and on a quiet machine it is about nothing.
fn close(hark: f64, own: f64, slack: f64) -> bool {
    (hark - own).abs() <= (0.05 * own).max(1e6) + slack
}

/// Runs `command` under Hark with `threads` OpenMP threads and checks
/// every thread of every one of `np` ranks.
fn check(dir: &std::path::Path, command: Vec<String>, np: usize, threads: usize) {
    check_env(dir, command, np, threads, &[]);
}

/// [`check`] with `env` set too.
fn check_env(
    dir: &std::path::Path,
    command: Vec<String>,
    np: usize,
    threads: usize,
    env: &[(&str, &str)],
) {
    let n = threads.to_string();
    let mut env = env.to_vec();
    env.push(("OMP_NUM_THREADS", &n));
    let (out, run_dir) = hark_run_env(dir, &[], &command, &env);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let p = &profile["programs"][0];
    let stdout = String::from_utf8_lossy(&out.stdout);
    let own: Vec<(usize, i64, f64, f64)> = (omp_imbalance_threads(&stdout).into_iter())
        .map(|(r, t, work, barrier)| (r, t, work as f64, barrier as f64))
        .collect();
    assert_eq!(own.len(), np * threads, "the program's output:\n{stdout}");
    let report = format!(
        "{} on {np} rank(s) × {threads} threads\nprogram:\n{stdout}\nhark threads: {}\nefficiency: {}",
        command.join(" "),
        p["threads"],
        p["efficiency"]
    );
    let (mut u, mut l, mut other, mut idle) = (0.0, 0.0, 0.0, 0.0);
    // The most time one thread's waits for a CPU moved between its work
    // and its barriers (below).
    let mut stray: f64 = 0.0;
    for &(rank, t, work, barrier) in &own {
        let hark = p["threads"][rank]
            .as_array()
            .and_then(|ts| ts.iter().find(|x| x["omp_thread"] == t))
            .unwrap_or_else(|| panic!("no thread {t} of rank {rank}: {report}"));
        let f = |k: &str| hark[k].as_u64().unwrap() as f64;
        let waited = hark["runnable_wait_ns"].as_u64().unwrap_or(0) as f64;
        assert!(
            close(f("useful_ns"), work, waited),
            "rank {rank} thread {t}: useful {} against {work}: {report}",
            f("useful_ns")
        );
        assert!(
            close(f("omp_barrier_ns"), barrier, waited),
            "rank {rank} thread {t}: barrier {} against {barrier}: {report}",
            f("omp_barrier_ns")
        );
        let moved = (f("useful_ns") - work).abs() + (f("omp_barrier_ns") - barrier).abs();
        stray = stray.max(moved.min(waited));
        u += work;
        l += barrier;
        other += f("mpi_ns") + f("io_ns");
        idle += f("omp_idle_ns");
    }
    let total = u + other + idle + l;
    let lb = (u + other + idle) / total;
    let hark_lb = p["openmp"]["efficiency"]["load_balance"].as_f64().unwrap();
    // With MPI, the same efficiencies join the MPI ones.
    if !p["efficiency"].is_null() {
        assert_eq!(
            p["efficiency"]["openmp"], p["openmp"]["efficiency"],
            "{report}"
        );
        assert!(p["efficiency"]["mpi_load_balance_in"].is_f64(), "{report}");
    }
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("OpenMP: "), "no OpenMP line: {summary}");
    // A thread preempted between its own clock reading and the probe's
    // (a window of nanoseconds, hit about once in a hundred runs on a loaded
    // machine) has a whole time slice counted as work by the one and as
    // barrier by the other; such a move shifts the load balance by at most
    // its length over `total`. One such thread is forgiven, up to the time
    // it waited for a CPU: nothing on a quiet machine.
    let tolerance = 0.02 + stray / total;
    assert!(
        (hark_lb - lb).abs() <= tolerance,
        "OpenMP load balance {hark_lb}, the program's {lb} (± {tolerance}): {report}"
    );
    let region = &p["openmp"]["regions"][0];
    assert_eq!(region["calls"].as_u64(), Some(np as u64 * 3), "{report}");
    assert_eq!(region["threads"].as_u64(), Some(threads as u64), "{report}");
    for pattern in ["omp_barrier", "omp_idle", "omp_lock", "omp_management"] {
        assert!(p["waits"][pattern].is_object(), "no {pattern}: {report}");
    }
}

/// Which compiler builds the program.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lang {
    /// The C program with the MPI wrapper's gcc (libgomp).
    Gcc,
    /// The C program with clang (LLVM libomp).
    Clang,
    /// The Fortran program with the MPI wrapper's gfortran (libgomp).
    Fortran,
    /// The C++ program with the MPI wrapper's g++ (libgomp).
    Gxx,
    /// The C++ program with clang++ (LLVM libomp).
    Clangxx,
}

/// The MPI wrapper for C++ of `mpi`.
fn mpicxx(mpi: Mpi) -> String {
    mpi.cc.replace("mpicc", "mpicxx")
}

/// The MPI program `src` built with `clang`: the MPI wrapper `wrapper`'s
/// own flags, with clang as the compiler.
fn compile_clang(
    mpi: Mpi,
    wrapper: &str,
    clang: &str,
    src: &str,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let flags = |what: &str| -> Vec<String> {
        let out = std::process::Command::new(wrapper)
            .arg(what)
            .output()
            .unwrap_or_else(|e| panic!("{wrapper} {what}: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .skip(1)
            .map(String::from)
            .collect()
    };
    // Open MPI's wrapper shows its command with --showme, MPICH's with -show.
    let show = if mpi.run.contains("openmpi") {
        "--showme"
    } else {
        "-show"
    };
    let mut args = flags(show);
    args.extend(["-fopenmp", "-DWITH_MPI"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(clang, src.as_ref(), dir, &args)
}

/// The program built as `lang` says, run on `np` ranks of `threads`
/// threads each.
fn with_mpi(mpi: Mpi, lang: Lang, np: usize, threads: usize) {
    with_mpi_env(mpi, lang, np, threads, &[]);
}

/// [`with_mpi`] with `env` set too.
fn with_mpi_env(mpi: Mpi, lang: Lang, np: usize, threads: usize, env: &[(&str, &str)]) {
    let cxx = mpicxx(mpi);
    let compiler = match lang {
        Lang::Fortran => mpi.fc,
        Lang::Gxx | Lang::Clangxx => &cxx,
        Lang::Gcc | Lang::Clang => mpi.cc,
    };
    let clang = match lang {
        Lang::Clang => "clang",
        _ => "clang++",
    };
    let needs_clang = matches!(lang, Lang::Clang | Lang::Clangxx);
    if !have(compiler) || !have(mpi.run) || (needs_clang && !have(clang)) {
        eprintln!("skipped: {} or {clang} is not installed", mpi.name);
        return;
    }
    // One directory per case: cases with one compiler run side by side.
    let dir = scratch(&format!(
        "omp-{compiler}-{lang:?}-{np}x{threads}-{}",
        env.len()
    ));
    let exe = match lang {
        Lang::Gcc => compile(
            compiler,
            "omp_imbalance.c".as_ref(),
            &dir,
            &["-fopenmp", "-DWITH_MPI"],
        ),
        Lang::Clang => compile_clang(mpi, compiler, clang, "omp_imbalance.c", &dir),
        Lang::Clangxx => compile_clang(mpi, compiler, clang, "omp_imbalance.cpp", &dir),
        Lang::Fortran => compile(compiler, "omp_imbalance.f90".as_ref(), &dir, &["-fopenmp"]),
        Lang::Gxx => compile(
            compiler,
            "omp_imbalance.cpp".as_ref(),
            &dir,
            &["-fopenmp", "-DWITH_MPI"],
        ),
    };
    let mut command = launcher(mpi, np);
    if mpi.run.contains("openmpi") {
        // Open MPI passes on only the variables it is told to, and binds
        // each rank to one core at np ≤ 2.
        command.extend(["-x", "OMP_NUM_THREADS", "--bind-to", "none"].map(String::from));
    }
    command.extend([exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()]);
    check_env(&dir, command, np, threads, env);
}

#[test]
fn gcc_without_mpi_three_threads() {
    let dir = scratch("omp-gcc");
    let exe = compile("gcc", "omp_imbalance.c".as_ref(), &dir, &["-fopenmp"]);
    let command = vec![exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()];
    check(&dir, command, 1, 3);
}

#[test]
fn gcc_open_mpi_one_rank_three_threads() {
    with_mpi(OPEN_MPI, Lang::Gcc, 1, 3);
}

#[test]
fn gcc_open_mpi_two_ranks_two_threads() {
    with_mpi(OPEN_MPI, Lang::Gcc, 2, 2);
}

#[test]
fn gcc_mpich_one_rank_two_threads() {
    with_mpi(MPICH, Lang::Gcc, 1, 2);
}

#[test]
fn gcc_mpich_two_ranks_three_threads() {
    with_mpi(MPICH, Lang::Gcc, 2, 3);
}

#[test]
fn gfortran_open_mpi_two_ranks_three_threads() {
    with_mpi(OPEN_MPI, Lang::Fortran, 2, 3);
}

#[test]
fn gfortran_mpich_one_rank_two_threads() {
    with_mpi(MPICH, Lang::Fortran, 1, 2);
}

/// The C program built with clang, without MPI, on three threads, with
/// `env` set.
fn clang_without_mpi(env: &[(&str, &str)]) {
    if !have("clang") {
        eprintln!("skipped: clang is not installed");
        return;
    }
    let dir = scratch(&format!("omp-clang-{}", env.len()));
    let exe = compile("clang", "omp_imbalance.c".as_ref(), &dir, &["-fopenmp"]);
    let command = vec![exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()];
    check_env(&dir, command, 1, 3, env);
}

#[test]
fn clang_without_mpi_three_threads() {
    clang_without_mpi(&[]);
}

#[test]
fn clang_without_mpi_three_threads_through_ompt() {
    clang_without_mpi(&[("HARK_OMPT", "1")]);
}

#[test]
fn clang_open_mpi_two_ranks_two_threads() {
    with_mpi(OPEN_MPI, Lang::Clang, 2, 2);
}

#[test]
fn clang_open_mpi_two_ranks_two_threads_through_ompt() {
    with_mpi_env(OPEN_MPI, Lang::Clang, 2, 2, &[("HARK_OMPT", "1")]);
}

#[test]
fn clang_mpich_one_rank_three_threads() {
    with_mpi(MPICH, Lang::Clang, 1, 3);
}

#[test]
fn clang_mpich_one_rank_three_threads_through_ompt() {
    with_mpi_env(MPICH, Lang::Clang, 1, 3, &[("HARK_OMPT", "1")]);
}

/// The C++ program without MPI, built with `compiler` (g++: libgomp;
/// clang++: LLVM libomp).
fn cxx_without_mpi(compiler: &str, threads: usize) {
    if !have(compiler) {
        eprintln!("skipped: {compiler} is not installed");
        return;
    }
    let dir = scratch(&format!("omp-{compiler}"));
    let exe = compile(compiler, "omp_imbalance.cpp".as_ref(), &dir, &["-fopenmp"]);
    let command = vec![exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()];
    check(&dir, command, 1, threads);
}

#[test]
fn gxx_without_mpi_three_threads() {
    cxx_without_mpi("g++", 3);
}

#[test]
fn gxx_open_mpi_two_ranks_three_threads() {
    with_mpi(OPEN_MPI, Lang::Gxx, 2, 3);
}

#[test]
fn gxx_mpich_one_rank_two_threads() {
    with_mpi(MPICH, Lang::Gxx, 1, 2);
}

#[test]
fn clangxx_without_mpi_three_threads() {
    cxx_without_mpi("clang++", 3);
}

#[test]
fn clangxx_mpich_two_ranks_two_threads() {
    with_mpi(MPICH, Lang::Clangxx, 2, 2);
}
