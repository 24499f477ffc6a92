//! What the clock alignment costs each rank: `tests/programs/mpi/init_barrier_finalize.c`
//! (init, one barrier, finalize) runs under real `mpirun` with the probe,
//! with the alignment on and off (`HARK_CLOCK_SYNC`), at 2 and 4 ranks,
//! with Open MPI and MPICH. A collector in this process receives the
//! streams. The cost is read from each rank's own events, so the noise of
//! `MPI_Init` itself does not enter: at init, the gap from the end of
//! `MPI_Init` to the start of `MPI_Barrier` (the alignment runs after the
//! real `MPI_Init`, outside its event); at finalize, from the end of
//! `MPI_Barrier` to the start of `MPI_Finalize` (it runs before the real
//! call, outside its event too).
//!
//! `cargo bench -p hark-probe --bench clock_alignment` prints a Markdown
//! table of medians over ranks and repetitions (`HARK_BENCH_ROUNDS`, 5), in
//! µs. Numbers go in BENCHMARKS.md.

mod support;

use hark_transport::collect;
use hark_wire::{op, Event};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{build, libhark};

/// Per rank of one run: the gaps at init and at finalize, in µs.
fn run(flavour: &str, exe: &Path, np: usize, sync: bool, n: usize) -> Vec<(f64, f64)> {
    let sock =
        std::env::temp_dir().join(format!("hark-clock-bench-{}-{n}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let addr = format!("unix:{}", sock.display());
    let collector = collect::serve_collect(&addr).unwrap();
    let mut cmd = Command::new(format!("mpirun.{flavour}"));
    let vars = [
        ("LD_PRELOAD", libhark().display().to_string()),
        ("HARK_ADDR", addr.clone()),
        ("HARK_IO", "0".into()),
        ("HARK_CLOCK_SYNC", if sync { "1" } else { "0" }.into()),
    ];
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    if flavour == "openmpi" {
        cmd.arg("--oversubscribe");
        for (k, _) in &vars {
            cmd.args(["-x", k]);
        }
    }
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    let st = cmd
        .arg("-np")
        .arg(np.to_string())
        .arg(exe)
        .status()
        .unwrap();
    assert!(st.success(), "the job failed");
    let streams = collector.wait_closed(np, Duration::from_secs(30)).unwrap();
    drop(collector);
    let _ = std::fs::remove_file(&sock);
    let find = |events: &[Event], name: &str| {
        let code = op::mpi_op(name).unwrap();
        *events.iter().find(|e| e.op.get() == code).unwrap()
    };
    streams
        .iter()
        .map(|s| {
            let init = find(&s.events, "MPI_Init");
            let barrier = find(&s.events, "MPI_Barrier");
            let fin = find(&s.events, "MPI_Finalize");
            let us = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e3;
            (
                us(init.end.get(), barrier.start.get()),
                us(barrier.end.get(), fin.start.get()),
            )
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("HARK_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("hark-clock-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "| MPI | ranks | init, off (µs) | init, on (µs) | finalize, off (µs) | finalize, on (µs) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let mut n = 0;
    for flavour in ["openmpi", "mpich"] {
        let exe = build(flavour, "init_barrier_finalize.c", "-O1", &dir);
        for np in [2, 4] {
            let mut gaps = [Vec::new(), Vec::new()];
            // Alternate on and off, so that a change in the machine's load
            // hits both alike.
            for _ in 0..rounds {
                for (i, sync) in [false, true].into_iter().enumerate() {
                    n += 1;
                    gaps[i].extend(run(flavour, &exe, np, sync, n));
                }
            }
            let [off, on] = gaps.map(|g| {
                let (i, f): (Vec<f64>, Vec<f64>) = g.into_iter().unzip();
                (median(i), median(f))
            });
            println!(
                "| {flavour} | {np} | {:.1} | {:.1} | {:.1} | {:.1} |",
                off.0, on.0, off.1, on.1
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
