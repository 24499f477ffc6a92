//! What the probe adds to an MPI call: `tests/programs/mpi/bench/overhead.c`
//! (a loop of `MPI_Iprobe` and one of `MPI_Test` on a pending receive, on 1
//! rank, and an 8-byte ping-pong on 2 ranks) runs under real `mpirun`,
//! alternately with and without `libhark.so` preloaded, with Open MPI and
//! with MPICH. With the probe, a counting server in this process receives
//! the streams (so every call is recorded and shipped, as in real use). The
//! loops run on one rank so that, on a 2-core machine, the rank does not
//! share its core with the server and the probe's shipper.
//!
//! `cargo bench -p hark-probe --bench mpi_overhead` prints a Markdown table:
//! medians over all repetitions of ns per call (per round trip for the
//! ping-pong) and the difference. Numbers go in BENCHMARKS.md.
//!
//! It then prints the floor of any timed wrapper on this machine: the cost
//! of two back-to-back `rdtsc` (the start and end reads every recorded call
//! needs), measured in this process during the same run.
//!
//! To compare two builds of the probe in one run (the machine is too noisy
//! for numbers from different runs to be compared), point
//! `HARK_BENCH_BASELINE` at another `libhark.so`: each round then also runs
//! it, and the table gains its columns. `HARK_BENCH_ONLY=mpich/test` (a
//! comma-separated list of `library/loop`) runs only those rows, and
//! `HARK_BENCH_ROUNDS` sets the rounds (3). Open MPI runs with `--bind-to
//! none` unless `HARK_BENCH_OMPI_BIND` says otherwise (see [`run`]).
//!
//! Last, where valgrind is installed, it counts with callgrind the
//! instructions the probe adds to each `Iprobe` and `Test` (see
//! [`instructions`]), also with worlds virtualised (`HARK_VIRTUALISE=1`):
//! exact and repeatable, unlike the times.
//! `HARK_BENCH_INSTRUCTIONS=0` skips that.

mod support;

use hark_transport::{Closed, ConnId, Listener, Sink};
use hark_wire::{Frame, Hello};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use support::libhark;

#[derive(Default)]
struct Count {
    events: AtomicU64,
}

impl Sink for Count {
    fn on_hello(&self, _: ConnId, _: &Hello, _: i64) {}
    fn on_frame(&self, _: ConnId, frame: Frame<'_>) {
        if let Frame::Pack { events, .. } = frame {
            self.events
                .fetch_add(events.len() as u64, Ordering::Relaxed);
        }
    }
    fn on_close(&self, _: ConnId, _: Closed) {}
}

fn build(flavour: &str, dir: &Path) -> PathBuf {
    support::build(flavour, "bench/overhead.c", "-O2", dir)
}

/// One job; rank 0's per-repetition numbers.
fn run(
    flavour: &str,
    exe: &Path,
    np: u32,
    mode: &str,
    n: u64,
    reps: u32,
    probe: Option<(&Path, &str)>,
) -> Vec<f64> {
    let mut cmd = Command::new(format!("mpirun.{flavour}"));
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("HARK_IO", "0");
    if let Some((lib, addr)) = probe {
        cmd.env("LD_PRELOAD", lib).env("HARK_ADDR", addr);
        if flavour == "openmpi" {
            cmd.args(["-x", "LD_PRELOAD", "-x", "HARK_ADDR", "-x", "HARK_IO"]);
        }
    }
    if flavour == "openmpi" {
        // Open MPI binds each rank to a core, and the probe's shipper thread
        // inherits the binding: shipping would then share the measured
        // rank's core, as it never does under MPICH (no binding). Unbound,
        // both libraries measure the call path alone (shipping has its own
        // bench); HARK_BENCH_OMPI_BIND=core measures the bound case.
        let bind = std::env::var("HARK_BENCH_OMPI_BIND").unwrap_or_else(|_| "none".into());
        cmd.args(["--bind-to", &bind]);
    }
    let out = cmd
        .arg("-np")
        .arg(np.to_string())
        .arg(exe)
        .args([mode, &n.to_string(), &reps.to_string()])
        .output()
        .expect("mpirun");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let dir = std::env::temp_dir().join(format!("hark-mpi-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("unix:{}", dir.join("sock").display());
    let sink = Arc::new(Count::default());
    let server = Listener::bind(&addr).expect("bind").serve(sink.clone());
    let rounds: u32 = std::env::var("HARK_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("HARK_BENCH_ONLY").unwrap_or_default();
    let baseline = std::env::var_os("HARK_BENCH_BASELINE").map(PathBuf::from);
    let lib = libhark();
    let extra = if baseline.is_some() {
        " baseline probe (median) | baseline added |"
    } else {
        ""
    };
    println!("| library | loop | ranks | calls × reps × rounds | without probe (median) |{extra} with probe (median) | added |");
    println!(
        "|---|---|---|---|---|{}---|---|",
        if baseline.is_some() { "---|---|" } else { "" }
    );
    for flavour in ["openmpi", "mpich"] {
        let exe = build(flavour, &dir);
        for (mode, np, n, unit) in [
            ("iprobe", 1, 200_000, "ns/call"),
            ("test", 1, 200_000, "ns/call"),
            ("pingpong", 2, 20_000, "ns/round trip"),
        ] {
            if !selected(&only, flavour, mode) {
                continue;
            }
            let reps = 7;
            let (mut plain, mut probed, mut based) = (Vec::new(), Vec::new(), Vec::new());
            let before = sink.events.load(Ordering::Relaxed);
            for _ in 0..rounds {
                plain.extend(run(flavour, &exe, np, mode, n, reps, None));
                if let Some(base) = &baseline {
                    based.extend(run(flavour, &exe, np, mode, n, reps, Some((base, &addr))));
                }
                probed.extend(run(flavour, &exe, np, mode, n, reps, Some((&lib, &addr))));
            }
            let recorded = sink.events.load(Ordering::Relaxed) - before;
            let (a, b) = (median(plain), median(probed));
            let base = if baseline.is_some() {
                let c = median(based);
                format!(" {c:.1} {unit} | {:+.1} {unit} |", c - a)
            } else {
                String::new()
            };
            // A round trip is four wrapped calls in a row: send and receive
            // on each rank.
            let per_call = if mode == "pingpong" {
                format!(" ({:+.1} ns per call)", (b - a) / 4.0)
            } else {
                String::new()
            };
            println!(
                "| {flavour} | {mode} | {np} | {n} × {reps} × {rounds} | {a:.1} {unit} |{base} {b:.1} {unit} | {:+.1} {unit}{per_call} |",
                b - a
            );
            // Every call of every repetition reached the server.
            let runs = if baseline.is_some() { 2 } else { 1 };
            let calls = np as u64 * n * (reps as u64 + 1) * rounds as u64 * runs;
            eprintln!("{flavour} {mode}: {recorded} events received for {calls} loop calls");
        }
    }
    instructions(&dir, &lib, baseline.as_deref(), &addr, &only);
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    println!(
        "Floor: two back-to-back rdtsc (start and end of a call) = {:.1} ns (median of 21 × 10^7)",
        two_rdtsc_ns()
    );
}

/// Whether `HARK_BENCH_ONLY` (`only`, empty for all) asks for this row.
fn selected(only: &str, flavour: &str, mode: &str) -> bool {
    only.is_empty() || only.split(',').any(|o| o == format!("{flavour}/{mode}"))
}

/// Prints the instructions the probe adds per call, counted by callgrind:
/// the same for the same binaries whatever else the machine is doing, so
/// it shows small changes the timings cannot. Each loop runs on one
/// process (no `mpirun`) at two lengths, with and without the probe; the
/// difference of the differences, per call, is what the probe adds.
/// Skipped when valgrind is missing.
fn instructions(dir: &Path, lib: &Path, baseline: Option<&Path>, addr: &str, only: &str) {
    if std::env::var("HARK_BENCH_INSTRUCTIONS").is_ok_and(|v| v == "0") {
        return;
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        println!("\n(valgrind not found: no instruction counts)");
        return;
    }
    println!();
    println!(
        "| library | loop | instructions per call, without probe | added by the probe | added, HARK_VIRTUALISE=1 |{}",
        if baseline.is_some() {
            " added by the baseline |"
        } else {
            ""
        }
    );
    println!(
        "|---|---|---|---|---|{}",
        if baseline.is_some() { "---|" } else { "" }
    );
    let (n1, n2) = (20_000u64, 40_000u64);
    for flavour in ["openmpi", "mpich"] {
        let exe = dir.join(format!("overhead-{flavour}"));
        for mode in ["iprobe", "test"] {
            if !selected(only, flavour, mode) {
                continue;
            }
            // Instructions per call of the loop: two lengths, one repetition
            // plus the warm-up (2 n calls each).
            let per_call_in = |probe: Option<&Path>, virt: bool| -> Option<f64> {
                let a = callgrind_total(dir, &exe, mode, n1, probe, addr, virt)?;
                let b = callgrind_total(dir, &exe, mode, n2, probe, addr, virt)?;
                Some((b as f64 - a as f64) / (2 * (n2 - n1)) as f64)
            };
            let per_call = |probe: Option<&Path>| per_call_in(probe, false);
            let plain = per_call(None);
            let probed = per_call(Some(lib));
            let virtualised = per_call_in(Some(lib), true);
            let based = baseline.map(|b| per_call(Some(b)));
            let show = |x: Option<f64>| x.map_or("?".to_string(), |x| format!("{x:.0}"));
            let diff = |x: Option<f64>| show(x.zip(plain).map(|(x, p)| x - p));
            let base = based.map_or(String::new(), |b| format!(" {} |", diff(b)));
            println!(
                "| {flavour} | {mode} | {} | {} | {} |{base}",
                show(plain),
                diff(probed),
                diff(virtualised)
            );
        }
    }
}

/// Instructions of one run of the loop under callgrind (`None` if it
/// failed); `virt` sets `HARK_VIRTUALISE=1`.
fn callgrind_total(
    dir: &Path,
    exe: &Path,
    mode: &str,
    n: u64,
    probe: Option<&Path>,
    addr: &str,
    virt: bool,
) -> Option<u64> {
    let out = dir.join("callgrind.out");
    let mut cmd = Command::new("valgrind");
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("HARK_IO", "0")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args([mode, &n.to_string(), "1"]);
    if let Some(lib) = probe {
        cmd.env("LD_PRELOAD", lib).env("HARK_ADDR", addr);
    }
    if virt {
        cmd.env("HARK_VIRTUALISE", "1");
    }
    let st = cmd.output().ok()?;
    if !st.status.success() {
        return None;
    }
    let text = std::fs::read_to_string(&out).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Nanoseconds per pair of `rdtsc` reads, the probe clock's own cost.
#[cfg(target_arch = "x86_64")]
fn two_rdtsc_ns() -> f64 {
    let n = 10_000_000u32;
    let mut per = Vec::new();
    for _ in 0..21 {
        let mut acc = 0u64;
        let t = std::time::Instant::now();
        for _ in 0..n {
            // SAFETY: rdtsc has no preconditions on x86_64.
            let (a, b) = unsafe { (core::arch::x86_64::_rdtsc(), core::arch::x86_64::_rdtsc()) };
            acc = acc.wrapping_add(b.wrapping_sub(a));
        }
        std::hint::black_box(acc);
        per.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    median(per)
}

#[cfg(not(target_arch = "x86_64"))]
fn two_rdtsc_ns() -> f64 {
    f64::NAN
}
