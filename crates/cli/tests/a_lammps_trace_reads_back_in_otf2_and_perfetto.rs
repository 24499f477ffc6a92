//! `hark run --trace` on Debian's LAMMPS (the Lennard-Jones melt) at np 4,
//! read back by the tools' own readers: OTF2's Python reader
//! (`python3-otf2`) and `otf2-print` for `trace.otf2/`, Perfetto's
//! (`trace_processor`, or the `perfetto` package's protobuf schema where
//! its binary cannot be downloaded) for `trace.perfetto-trace`. What they
//! read must equal what Hark's analyses counted in `profile.json` — calls
//! per rank and function, messages and bytes per pair — for the whole run
//! and, with `--trace=ranks=1-2,window=…`, for that window's time slices;
//! and the times must be the store's, on the aligned clock.
//!
//! The readers come from `scripts/deps.sh` (Debian's `otf2-tools` and
//! `python3-otf2`; a virtual environment `.venv/` with `perfetto`).

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// LAMMPS's melt at np 4 under `hark run <args>`; its run directory.
/// The run directory, in the scratch directory that goes with it.
fn lammps(tag: &str, args: &[&str]) -> (Scratch, PathBuf) {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.run) {
        panic!("LAMMPS (lmp, lammps-examples) and Open MPI are needed: run scripts/deps.sh");
    }
    let dir = scratch(tag);
    std::fs::copy(input, dir.join("in.melt")).unwrap();
    let mut command = launcher(OPEN_MPI, 4);
    command.extend(["lmp", "-in", "in.melt", "-log", "none"].map(String::from));
    let (out, run) = hark_run(&dir, args, &command);
    assert_exit(&out, 0);
    (dir, run)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// Enter times per MPI function of one rank, as OTF2 read them.
fn mpi_enters(rank: &Value) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in rank["enter"].as_array().unwrap() {
        let name = e[0].as_str().unwrap();
        if name.starts_with("MPI_") {
            out.entry(name.to_string()).or_default().push(u(&e[1]));
        }
    }
    out
}

#[test]
fn the_whole_run_reads_back_with_the_profiles_counts_and_the_stores_times() {
    let (_dir, run) = lammps("trace-all", &["--trace"]);
    let profile = profile(&run);
    let p = &profile["programs"][0];
    let archive = run.join("trace.otf2/traces.otf2");

    assert!(otf2_print(&archive).contains("MPI_SEND"));

    let otf2 = read_with("read_otf2.py", &archive);
    let ranks = &otf2["ranks"];
    let store = hark_server::trace::read(&run.join("trace")).unwrap();
    assert_eq!(store.streams.len(), 4);
    for r in 0..4usize {
        let rank = &ranks[r.to_string()];
        let enters = mpi_enters(rank);
        // Calls per function equal the profile's.
        for (f, profile_f) in p["mpi"].as_object().unwrap() {
            let want = u(&profile_f["calls"][r]);
            let got = enters.get(f).map_or(0, Vec::len) as u64;
            assert_eq!(got, want, "rank {r} {f}: OTF2 enters vs profile.json calls");
        }
        assert_eq!(
            rank["enter"].as_array().unwrap().len(),
            rank["leave"].as_array().unwrap().len()
        );
        // The times are the store's events on the aligned clock.
        let s = &store.streams[r];
        assert_eq!(s.world_rank, r as i32);
        let mut from_store: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for e in &s.events {
            if let hark_wire::op::OpKind::Mpi(_) = hark_wire::op::kind(e.op()) {
                from_store
                    .entry(hark_wire::op::name(e.op()).to_string())
                    .or_default()
                    .push(s.mapping.common(e.start.get()));
            }
        }
        for v in from_store.values_mut() {
            v.sort_unstable();
        }
        let mut enters = enters;
        for v in enters.values_mut() {
            v.sort_unstable();
        }
        assert_eq!(enters, from_store, "rank {r}: enter times");
        // Messages: partners and bytes equal the profile's matrices.
        for (side, matrix_of) in [("send", false), ("recv", true)] {
            let mut messages = [0u64; 4];
            let mut bytes = [0u64; 4];
            for m in rank[side].as_array().unwrap() {
                let peer = m[1].as_i64().unwrap() as usize;
                messages[peer] += 1;
                bytes[peer] += u(&m[2]);
            }
            for (peer, (&n, &b)) in messages.iter().zip(&bytes).enumerate() {
                let (from, to) = if matrix_of { (peer, r) } else { (r, peer) };
                assert_eq!(n, u(&p["p2p"]["messages"][from][to]), "{side} {from}->{to}");
                assert_eq!(
                    b,
                    u(&p["p2p"]["bytes"][from][to]),
                    "{side} bytes {from}->{to}"
                );
            }
        }
    }

    // Perfetto: slices per rank and function, and the flows.
    let perfetto = read_with("read_perfetto.py", &run.join("trace.perfetto-trace"));
    eprintln!("Perfetto read by {}", perfetto["reader"]);
    let mut messages = 0;
    for r in 0..4usize {
        let slices = &perfetto["slices"][format!("rank {r}")];
        for (f, profile_f) in p["mpi"].as_object().unwrap() {
            let got = slices.get(f).map_or(0, u);
            assert_eq!(got, u(&profile_f["calls"][r]), "Perfetto rank {r} {f}");
        }
        for to in 0..4 {
            messages += u(&p["p2p"]["messages"][r][to]);
        }
    }
    assert!(messages > 1000, "LAMMPS sent only {messages} messages");
    assert_eq!(
        u(&perfetto["flows"]),
        messages,
        "one flow per matched message"
    );
    if let Some(n) = perfetto.get("flow_ends_without_start") {
        assert_eq!(u(n), 0);
    }

    // `hark export` writes the same traces again from the store.
    let again = run.with_file_name("exported");
    let out = Command::new(hark())
        .args(["export", "--format", "perfetto,otf2", "-o"])
        .arg(&again)
        .arg(&run)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(
        std::fs::read(again.join("trace.perfetto-trace")).unwrap(),
        std::fs::read(run.join("trace.perfetto-trace")).unwrap()
    );
    assert!(again.join("trace.otf2/traces.otf2").exists());
}

#[test]
fn export_without_a_trace_store_says_how_to_get_one() {
    let dir = scratch("trace-none");
    let out = Command::new(hark())
        .args(["export", "--format", "perfetto"])
        .arg(&dir)
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hark run --trace"), "{err}");
    let out = Command::new(hark())
        .args(["export", "--format", "vampir"])
        .arg(&dir)
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("otf2, perfetto"));
}

/// `--trace=ranks=1-2,window=…`: only ranks 1 and 2, only events that
/// overlap the window, and in the time slices inside it every call and
/// message the profile counted.
#[test]
fn a_window_of_two_ranks_holds_every_call_and_message_the_profile_counts_there() {
    // The window must fall in LAMMPS's time steps: after MPI_Init, before
    // the end. The whole run takes 0.6 s on a quiet machine (MPI_Init 0.3 s)
    // and seconds on a loaded one; if the first window missed the steps,
    // the next one is placed in the last run's steps.
    let (mut from_s, mut len_s) = (1.0, 1.5);
    for attempt in 0..3 {
        let (checked, init_s, wall_s) = window_run(attempt, from_s, len_s);
        if checked > 100 {
            return;
        }
        eprintln!(
            "attempt {attempt}: the window {from_s}-{} s held {checked} calls \
             (MPI_Init took {init_s:.2} s, the run {wall_s:.2} s)",
            from_s + len_s
        );
        from_s = init_s + 0.02;
        len_s = ((wall_s - from_s) * 0.6).max(0.1);
    }
    panic!("three windows after MPI_Init held too few calls: is LAMMPS's run that short?");
}

/// One run with `--trace=ranks=1-2,window=FROM-(FROM+LEN)`, checked; the
/// calls it checked, how long MPI_Init took and how long the run (s). A
/// window that began after the run, or near its end, checked nothing.
fn window_run(attempt: usize, from_s: f64, len_s: f64) -> (u64, f64, f64) {
    let to_s = from_s + len_s;
    let spec = format!("--trace=ranks=1-2,window={from_s}-{to_s}");
    let (_dir, run) = lammps(&format!("trace-window-{attempt}"), &[&spec]);
    let profile = profile(&run);
    let p = &profile["programs"][0];
    let init_s = p["mpi"]["MPI_Init"]["max_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .max()
        .unwrap_or(0) as f64
        / 1e9;
    let wall_s = u(&p["wall_ns"]) as f64 / 1e9;
    // A window that begins after the run, or in its last 100 ms, holds too
    // little to check (a rank may have nothing left in it but the end of
    // MPI_Finalize): the next attempt places one inside this run's steps.
    if from_s + 0.1 > wall_s {
        return (0, init_s, wall_s);
    }
    let ts = &p["timeslices"];
    let (origin, width) = (u(&ts["origin_ns"]), u(&ts["slice_ns"]));
    // The profile places events with the clock alignment known when they
    // arrived, the trace with the final one (interpolated to the alignment
    // at MPI_Finalize; a pack that arrives before rank 0's alignment is
    // placed by the handshake): they differ by the alignment's residual, or
    // by the handshake's error: under a millisecond on a quiet host, a few
    // on a loaded one (the store's index gives each stream's).
    let slack = u(&p["clock"]["residual_ns"]) + handshake_error_ns(&run) + 2_000_000;
    let (w0, w1) = (origin + (from_s * 1e9) as u64, origin + (to_s * 1e9) as u64);
    let slice_of = |t: u64| t.saturating_sub(origin) / width;
    // Slices well inside the window.
    let (first, last) = (slice_of(w0 + slack) + 1, slice_of(w1 - slack) - 1);
    assert!(
        first < last,
        "the window holds no whole slice ({width} ns wide)"
    );
    // Near where the slices counted begin or end: such an event may be
    // counted on the other side by the profile.
    let (lo, hi) = (origin + first * width, origin + (last + 1) * width);
    let near_edge = |t: u64| t.abs_diff(lo) < slack || t.abs_diff(hi) < slack;

    let archive = run.join("trace.otf2/traces.otf2");
    let print = Command::new("otf2-print")
        .arg(&archive)
        .output_within()
        .unwrap();
    assert!(
        print.status.success(),
        "{}",
        String::from_utf8_lossy(&print.stderr)
    );
    let otf2 = read_with("read_otf2.py", &archive);
    let ranks = otf2["ranks"].as_object().unwrap();
    let mut seen: Vec<&String> = ranks.keys().collect();
    seen.sort();
    assert_eq!(seen, ["1", "2"], "only the chosen ranks have events");

    let mut calls_checked = 0;
    for r in [1usize, 2] {
        let rank = &ranks[&r.to_string()];
        // Every enter/leave pair overlaps the window.
        let enters = rank["enter"].as_array().unwrap();
        let leaves = rank["leave"].as_array().unwrap();
        for e in enters {
            assert!(u(&e[1]) <= w1 + slack, "entered after the window: {e}");
        }
        for l in leaves {
            assert!(u(&l[1]) + slack >= w0, "left before the window: {l}");
        }
        // Calls per function in the inside slices: what the profile counted.
        for (f, times) in mpi_enters(rank) {
            let Some(per_slice) = ts["metrics"].get(format!("{f}.calls")) else {
                continue;
            };
            let per_slice: Vec<u64> = per_slice[r].as_array().unwrap().iter().map(u).collect();
            // Trailing empty slices are cut: a window may reach past the run.
            let want: u64 = per_slice
                .iter()
                .take(last as usize + 1)
                .skip(first as usize)
                .sum();
            let inside = |t: &&u64| (first..=last).contains(&slice_of(**t));
            let sure = times
                .iter()
                .filter(inside)
                .filter(|t| !near_edge(**t))
                .count() as u64;
            let edge = times.iter().filter(|t| near_edge(**t)).count() as u64;
            assert!(
                sure <= want && want <= sure + edge,
                "rank {r} {f}: {sure} calls (+{edge} at a slice edge) in slices {first}..={last}, profile {want}"
            );
            calls_checked += want;
        }
        // Messages sent per destination: the profile's p2p_to slices.
        for to in 0..4usize {
            let Some(m) = ts["metrics"].get(format!("p2p_to:{to}.messages")) else {
                continue;
            };
            let b = &ts["metrics"][format!("p2p_to:{to}.bytes")];
            let sum = |v: &Value| -> u64 {
                v[r].as_array()
                    .unwrap()
                    .iter()
                    .take(last as usize + 1)
                    .skip(first as usize)
                    .map(u)
                    .sum()
            };
            let sends: Vec<(u64, u64)> = rank["send"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s[1].as_u64() == Some(to as u64))
                .map(|s| (u(&s[0]), u(&s[2])))
                .collect();
            let sure: Vec<&(u64, u64)> = sends
                .iter()
                .filter(|(t, _)| (first..=last).contains(&slice_of(*t)) && !near_edge(*t))
                .collect();
            let edge = sends.iter().filter(|(t, _)| near_edge(*t)).count() as u64;
            let (want_n, want_b) = (sum(m), sum(b));
            assert!(
                (sure.len() as u64) <= want_n && want_n <= sure.len() as u64 + edge,
                "rank {r} -> {to}: {} messages (+{edge} at an edge), profile {want_n}",
                sure.len()
            );
            if edge == 0 {
                assert_eq!(
                    sure.iter().map(|(_, b)| b).sum::<u64>(),
                    want_b,
                    "bytes {r} -> {to}"
                );
            }
        }
    }
    let summary = std::fs::read_to_string(run.join("summary.txt")).unwrap();
    assert!(summary.contains("trace store:"), "{summary}");
    (calls_checked, init_s, wall_s)
}

/// How far the handshake placed a stream from its node's reference offset,
/// at most over the streams in the trace store's index (a stream never
/// aligned, `-`, counts 0: the handshake placed all of it in both).
fn handshake_error_ns(run: &Path) -> u64 {
    let index = std::fs::read_to_string(run.join("trace/index.tsv")).unwrap();
    let column = |name: &str| {
        let head: Vec<&str> = index.lines().next().unwrap().split('\t').collect();
        head.iter().position(|c| *c == name).unwrap()
    };
    let (h, r) = (column("handshake_ns"), column("reference_ns"));
    index
        .lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            match (f[h].parse::<i64>(), f[r].parse::<i64>()) {
                (Ok(h), Ok(r)) => h.abs_diff(r),
                _ => 0,
            }
        })
        .max()
        .unwrap_or(0)
}
