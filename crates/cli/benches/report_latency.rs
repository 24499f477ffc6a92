//! How soon the report is ready after the measured command ends.
//!
//! Runs `hark run -v --lossless -- mpirun -np NP many_events N` (each rank
//! calls `MPI_Iprobe` N times: NP × N events in all, 10^8 by default) a few
//! times and reports the median of hark's own "report ready X s after the
//! command ended" line, split into draining and analysing the streams, and
//! writing the outputs. Also reports the whole run's wall time and events/s.
//!
//! `cargo bench -p hark-cli --bench report_latency`
//! Environment: `HARK_BENCH_EVENTS` (default 100000000), `HARK_BENCH_NP`
//! (default 4), `HARK_BENCH_RUNS` (default 3).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The seconds after `key` in hark's verbose line.
fn seconds_after(text: &str, key: &str) -> Option<f64> {
    let at = text.find(key)? + key.len();
    text[at..].split_whitespace().next()?.parse().ok()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    let events = env_or("HARK_BENCH_EVENTS", 100_000_000);
    let np = env_or("HARK_BENCH_NP", 4);
    let runs = env_or("HARK_BENCH_RUNS", 3).max(1);
    let hark = PathBuf::from(env!("CARGO_BIN_EXE_hark"));
    let probe = hark.with_file_name("libhark.so");
    if !probe.exists() {
        let release = hark.components().any(|c| c.as_os_str() == "release");
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["build", "-q", "-p", "hark-probe"]);
        if release {
            cmd.arg("--release");
        }
        assert!(cmd.status().unwrap().success(), "building the probe failed");
    }
    let dir = std::env::temp_dir().join(format!("hark-bench-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("many_events");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/many_events.c");
    let ok = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mpicc failed");

    let per_rank = events / np;
    let (mut ready, mut drain, mut write, mut wall, mut rate) =
        (vec![], vec![], vec![], vec![], vec![]);
    for run in 0..runs {
        let out_dir = dir.join(format!("run{run}"));
        let t0 = Instant::now();
        let out = Command::new(&hark)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .args(["run", "-v", "--lossless", "-o"])
            .arg(&out_dir)
            .args(["--", "mpirun", "--oversubscribe", "-np", &np.to_string()])
            .arg(&exe)
            .arg(per_rank.to_string())
            .output()
            .unwrap();
        let elapsed = t0.elapsed().as_secs_f64();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "hark failed:\n{text}");
        let r = seconds_after(&text, "report ready ").expect("no 'report ready' line");
        let d = seconds_after(&text, "drained and analysed in ").unwrap();
        let w = seconds_after(&text, "outputs written in ").unwrap();
        let summary = std::fs::read_to_string(out_dir.join("summary.txt")).unwrap();
        let analysed = summary.lines().last().unwrap_or("").to_string();
        println!(
            "run {run}: {analysed}; wall {elapsed:.1} s; report ready {r:.3} s after the command ended (drain+analyse {d:.3} s, outputs {w:.3} s)"
        );
        ready.push(r);
        drain.push(d);
        write.push(w);
        wall.push(elapsed);
        rate.push(events as f64 / elapsed);
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
    println!(
        "median of {runs}: report ready {:.3} s after the command ended (drain+analyse {:.3} s, outputs {:.3} s); run wall {:.1} s, {:.2} M events/s end to end",
        median(&mut ready),
        median(&mut drain),
        median(&mut write),
        median(&mut wall),
        median(&mut rate) / 1e6
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
