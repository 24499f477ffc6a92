//! How long the trace exports take, and how big they are, for a trace
//! store (`HARK_BENCH_TRACE_STORE`, e.g. the 10^7 events the server's
//! flood bench keeps with `HARK_FLOOD_TRACE=all HARK_FLOOD_TRACE_DIR=...`).
//!
//! `HARK_BENCH_TRACE_STORE=DIR cargo bench -p hark-cli --features otf2 --bench trace_export`
//!
//! Prints, `HARK_BENCH_RUNS` times (default 3): the time to read the store,
//! to write `trace.perfetto-trace` and to write `trace.otf2/` (when built
//! with the `otf2` feature), and each file's size per event next to the
//! store's.

use std::path::Path;
use std::time::Instant;

fn size(p: &Path) -> u64 {
    if p.is_dir() {
        std::fs::read_dir(p)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| size(&e.path())).sum())
            .unwrap_or(0)
    } else {
        p.metadata().map_or(0, |m| m.len())
    }
}

/// CPU time this process has had, in s (`/proc/self/schedstat`): on a
/// shared, loaded machine it says more than the wall clock.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

fn main() {
    let Some(store) = std::env::var_os("HARK_BENCH_TRACE_STORE") else {
        eprintln!(
            "trace_export: set HARK_BENCH_TRACE_STORE to a trace store (see the doc comment)"
        );
        return;
    };
    let store = Path::new(&store);
    let runs: usize = std::env::var("HARK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let out = std::env::temp_dir().join(format!("hark-trace-export-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_s());
        let trace = hark_server::trace::read(store).expect("reading the store");
        let (read, read_cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        let events: usize = trace.streams.iter().map(|s| s.events.len()).sum();
        let (t, c) = (Instant::now(), cpu_s());
        let perfetto =
            hark_outputs::trace::write_perfetto(&trace, &Default::default(), &out).unwrap();
        let (perfetto_s, perfetto_cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        let (t, c) = (Instant::now(), cpu_s());
        let otf2 = hark_outputs::trace::write_otf2(&trace, &Default::default(), &out);
        let (otf2_s, otf2_cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        let per = |b: u64| b as f64 / events.max(1) as f64;
        println!(
            "trace_export: {events} events (wall s / CPU s); read store {read:.2} / {read_cpu:.2} s ({:.1} B/event); perfetto {perfetto_s:.2} / {perfetto_cpu:.2} s ({:.1} B/event); otf2 {}",
            per(size(store)),
            per(size(&perfetto)),
            match otf2 {
                Ok(_) => format!(
                    "{otf2_s:.2} / {otf2_cpu:.2} s ({:.1} B/event)",
                    per(size(&out.join("trace.otf2")))
                ),
                Err(e) => format!("not written: {e}"),
            }
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
