//! `hark run --trace=auto` keeps the time windows where the analyses found
//! the most wait-state time, and a trace store never grows past its cap:
//! what is dropped is said in `summary.txt` and `profile.json`. Measured on
//! Debian's LAMMPS (the melt) at np 4 under Open MPI.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn lammps(tag: &str, args: &[&str]) -> PathBuf {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    assert!(
        have("lmp") && input.exists() && have(OPEN_MPI.run),
        "LAMMPS (lmp, lammps-examples) and Open MPI are needed: run scripts/deps.sh"
    );
    let dir = scratch(tag);
    std::fs::copy(input, dir.join("in.melt")).unwrap();
    let mut command = launcher(OPEN_MPI, 4);
    command.extend(["lmp", "-in", "in.melt", "-log", "none"].map(String::from));
    let (out, run) = hark_run(&dir, args, &command);
    assert_exit(&out, 0);
    run
}

/// The `auto` windows (numbers) whose chunk files the store holds.
fn windows_kept(store: &Path) -> BTreeSet<u64> {
    std::fs::read_dir(store)
        .unwrap()
        .filter_map(|d| {
            let name = d.unwrap().file_name().into_string().unwrap();
            let (_, k) = name.strip_suffix(".hkt")?.split_once(".w")?;
            k.parse().ok()
        })
        .collect()
}

/// Wait-state time per `auto` window, from `profile.json`'s per-slice wait
/// states, each slice spread evenly over the windows it covers.
fn wait_per_window(p: &Value) -> Vec<(u64, u64)> {
    let shift = hark_analyses::trace::AUTO_WINDOW_SHIFT;
    let width = p["timeslices"]["slice_ns"].as_u64().unwrap();
    let mut per: std::collections::BTreeMap<u64, u64> = Default::default();
    for pattern in p["waits"].as_object().unwrap().values() {
        for (i, cell) in pattern["slices"].as_array().unwrap().iter().enumerate() {
            let from = i as u64 * width;
            let (a, b) = (from >> shift, (from + width - 1) >> shift);
            let t = cell["time_ns"].as_u64().unwrap();
            for k in a..=b {
                *per.entry(k).or_default() += t / (b - a + 1);
            }
        }
    }
    let mut v: Vec<(u64, u64)> = per.into_iter().filter(|(_, t)| *t > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[test]
fn auto_keeps_the_two_windows_with_the_most_waiting() {
    let run = lammps("trace-auto", &["--trace=auto=2"]);
    let profile = profile(&run);
    let p = &profile["programs"][0];
    let ranked = wait_per_window(p);
    assert!(ranked.len() > 2, "LAMMPS waited in only {ranked:?}");
    let want: BTreeSet<u64> = ranked.iter().take(2).map(|(k, _)| *k).collect();
    assert_eq!(windows_kept(&run.join("trace")), want, "ranked: {ranked:?}");
    let said = p["diagnostics"].to_string();
    assert!(said.contains("kept 2 window(s)"), "{said}");
    // The exports hold those windows' events, and both readers' files exist.
    let trace = hark_server::trace::read(&run.join("trace")).unwrap();
    let events: usize = trace.streams.iter().map(|s| s.events.len()).sum();
    assert!(events > 0);
    assert!(run.join("trace.perfetto-trace").exists());
}

#[test]
fn a_store_stops_at_its_cap_and_says_what_it_dropped() {
    let cap = 300 << 10;
    for (tag, spec, says) in [
        ("trace-cap", "--trace", "cap of 307200 bytes was reached"),
        (
            "trace-cap-auto",
            "--trace=auto",
            "evicted at the cap of 307200 bytes",
        ),
    ] {
        let run = lammps(tag, &[spec, "--trace-cap", "300K"]);
        let store = run.join("trace");
        // Pack bytes: the stream files less their few definition frames.
        let bytes: u64 = std::fs::read_dir(&store)
            .unwrap()
            .map(|d| d.unwrap())
            .filter(|d| d.file_name().to_string_lossy().ends_with(".hkt"))
            .map(|d| d.metadata().unwrap().len())
            .sum();
        // `auto` spares the window still filling when it evicts at the cap
        // (docs/trace.md): the store may exceed the cap by that one window,
        // its chunks `stream-<conn>.w<k>.hkt` of every stream.
        let mut per_window: std::collections::BTreeMap<String, u64> = Default::default();
        for d in std::fs::read_dir(&store).unwrap().map(|d| d.unwrap()) {
            let name = d.file_name().to_string_lossy().into_owned();
            if let Some((_, w)) = name.strip_suffix(".hkt").and_then(|n| n.rsplit_once(".w")) {
                *per_window.entry(w.to_string()).or_default() += d.metadata().unwrap().len();
            }
        }
        let spared = per_window.values().copied().max().unwrap_or(0);
        assert!(
            bytes <= cap + spared + (64 << 10),
            "{spec}: {bytes} bytes in the store (the largest window {spared})"
        );
        let index = std::fs::read_to_string(store.join("index.tsv")).unwrap();
        let dropped: u64 = index
            .lines()
            .skip(1)
            .map(|l| l.split('\t').nth(5).unwrap().parse::<u64>().unwrap())
            .sum();
        assert!(dropped > 0, "{spec}: nothing dropped:\n{index}");
        let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
        assert!(summary.contains(says), "{spec}: {summary}");
        let profile = profile(&run);
        assert!(profile["programs"][0]["diagnostics"]
            .to_string()
            .contains(says));
    }
}
