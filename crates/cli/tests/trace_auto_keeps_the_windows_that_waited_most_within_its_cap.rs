//! `hark run --trace=auto` keeps the time windows where the analyses found
//! the most wait-state time, and a trace store never grows past its cap:
//! what is dropped is said in `summary.txt` and `profile.json`. Measured on
//! Debian's LAMMPS (the melt) at np 4 under Open MPI.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The run directory, in the scratch directory that goes with it.
fn lammps(tag: &str, args: &[&str]) -> (Scratch, PathBuf) {
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
    (dir, run)
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
    let shift = hark_engine::trace::AUTO_WINDOW_SHIFT;
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
    // A window where nothing starts (every rank inside a call begun
    // before it, as on a loaded machine) holds no event to keep: the
    // store ranks only windows that hold events. Calls count in the slice
    // of their start, as events go to the window of theirs.
    let mut holds = BTreeSet::new();
    for family in ["mpi_calls", "io_ops"] {
        for rank in p["timeslices"]["metrics"][family].as_array().unwrap() {
            for (i, n) in rank.as_array().unwrap().iter().enumerate() {
                if n.as_u64().unwrap() > 0 {
                    holds.insert((i as u64 * width) >> shift);
                }
            }
        }
    }
    assert!(
        width <= 1 << shift,
        "slices wider than a window: the test cannot tell which windows hold events"
    );
    let mut v: Vec<(u64, u64)> = per
        .into_iter()
        .filter(|(k, t)| *t > 0 && holds.contains(k))
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[test]
fn auto_keeps_the_two_windows_with_the_most_waiting() {
    let (_dir, run) = lammps("trace-auto", &["--trace=auto=2"]);
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
    // At 20 KiB one window of LAMMPS (134 ms) is more than the cap holds:
    // `auto` must cut it rather than keep it whole.
    for (tag, spec, cap, says) in [
        (
            "trace-cap",
            "--trace",
            300 << 10,
            "cap of 307200 bytes was reached",
        ),
        (
            "trace-cap-auto",
            "--trace=auto",
            300 << 10,
            "evicted at the cap of 307200 bytes",
        ),
        (
            "trace-cut-auto",
            "--trace=auto",
            20 << 10,
            "evicted at the cap of 20480 bytes",
        ),
    ] {
        let cap_arg = format!("{}K", cap >> 10);
        let (_dir, run) = lammps(tag, &[spec, "--trace-cap", &cap_arg]);
        let store = run.join("trace");
        // The cap bounds the bytes of pack frames (the few definition,
        // clock and end frames are always kept), exactly, `auto` too.
        let bytes: u64 = std::fs::read_dir(&store)
            .unwrap()
            .map(|d| d.unwrap())
            .filter(|d| d.file_name().to_string_lossy().ends_with(".hkt"))
            .map(|d| pack_bytes(&std::fs::read(d.path()).unwrap()))
            .sum();
        assert!(bytes <= cap, "{spec}: {bytes} bytes of packs in the store");
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
        if spec == "--trace=auto" {
            // What the line says was dropped, at the end, at the cap by
            // eviction and by cutting a window, is what the index counts.
            let said = summary.lines().find(|l| l.contains(says)).unwrap();
            let number_before = |what: &str| -> u64 {
                let head = &said[..said.find(what).unwrap_or_else(|| panic!("{what}: {said}"))];
                head.trim_end().rsplit(' ').next().unwrap().parse().unwrap()
            };
            let parts = number_before(" events of the other windows at the end")
                + number_before(" of windows evicted at the cap")
                + number_before(" of window(s) cut at the cap");
            assert_eq!(parts, dropped, "{said}\n{index}");
            if cap < 100 << 10 {
                assert!(number_before(" of window(s) cut at the cap") > 0, "{said}");
            }
        }
        let kept: u64 = index
            .lines()
            .skip(1)
            .map(|l| l.split('\t').nth(4).unwrap().parse::<u64>().unwrap())
            .sum();
        let trace = hark_server::trace::read(&store).unwrap();
        let read: usize = trace.streams.iter().map(|s| s.events.len()).sum();
        assert_eq!(
            read as u64, kept,
            "{spec}: the index counts what the store holds"
        );
    }
}

/// The bytes of the pack frames (header included) in a stream or chunk
/// file: frames are an 8-byte header (kind, then body length, both
/// little-endian u32) and a body (`docs/wire.md`).
fn pack_bytes(file: &[u8]) -> u64 {
    let (mut at, mut packs) = (0, 0u64);
    while at + hark_wire::HEADER_SIZE <= file.len() {
        let kind = u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(file[at + 4..at + 8].try_into().unwrap()) as usize;
        let size = hark_wire::HEADER_SIZE + len;
        if kind == hark_wire::Kind::Pack as u32 {
            packs += size as u64;
        }
        at += size;
    }
    assert_eq!(at, file.len(), "a truncated frame");
    packs
}
