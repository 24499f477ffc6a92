//! Performance counters and node sensors in the OTF2 export
//! (`crates/outputs/src/trace/otf2.rs`), read back with OTF2's own Python
//! reader (`python3-otf2`) and checked by `otf2-print`: two busy ranks
//! (`tests/programs/cpu_busy.c`) under `hark run --trace` with software
//! counters and sensors every 100 ms. Each rank's counters, summed over
//! its threads' locations (running totals: the last point of each), must
//! equal `profile.json`'s `counters[rank]`; the node's metric location
//! must hold one memory point per reading and the totals and highest
//! values `profile.json`'s `nodes` gives.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// Per member name: its points (time, value) on one location, in order.
fn members(points: &Value) -> BTreeMap<String, Vec<(u64, f64)>> {
    let mut out: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for p in points.as_array().unwrap() {
        out.entry(p[0].as_str().unwrap().to_string())
            .or_default()
            .push((p[2].as_u64().unwrap(), p[3].as_f64().unwrap()));
    }
    out
}

/// A running total's last value, after checking it starts at 0, never
/// falls and comes in time order.
fn total(name: &str, points: &[(u64, f64)]) -> u64 {
    assert_eq!(points[0].1, 0.0, "{name}: a running total starts at 0");
    for w in points.windows(2) {
        assert!(w[0].0 <= w[1].0 && w[0].1 <= w[1].1, "{name}: {w:?}");
    }
    points.last().unwrap().1 as u64
}

fn highest(points: &[(u64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(f64::MIN, f64::max)
}

/// Two busy ranks under `hark run <trace>` with counters and sensors: the
/// profile and, per location name, the OTF2 archive's metric points.
fn run(tag: &str, trace: &str) -> Option<(Value, serde_json::Map<String, Value>)> {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    let dir = scratch(tag);
    let exe = compile(mpi.cc, "cpu_busy.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.extend(["--bind-to".into(), "none".into()]);
    command.extend([exe.display().to_string(), "1500".to_string()]);
    let (out, run) = hark_run(
        &dir,
        &[
            trace,
            "--counters",
            "task-clock,page-faults,context-switches",
            "--sensors-ms",
            "100",
        ],
        &command,
    );
    assert_exit(&out, 0);
    let archive = run.join("trace.otf2/traces.otf2");
    assert!(otf2_print(&archive).contains("METRIC"));
    let otf2 = read_with("read_otf2.py", &archive);
    Some((profile(&run), otf2["metrics"].as_object().unwrap().clone()))
}

/// Per counter, rank `r`'s totals over its threads' locations.
fn rank_totals(metrics: &serde_json::Map<String, Value>, r: usize) -> BTreeMap<String, u64> {
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for (loc, points) in metrics {
        if !loc.starts_with(&format!("rank {r} thread ")) {
            continue;
        }
        for (name, points) in members(points) {
            *got.entry(name.clone()).or_default() += total(&name, &points);
        }
    }
    got
}

#[test]
fn each_rank_s_counters_and_the_node_s_sensors_equal_the_profile() {
    let Some((profile, metrics)) = run("otf2-metrics", "--trace") else {
        return;
    };
    let metrics = &metrics;
    let p = &profile["programs"][0];
    let shown = serde_json::to_string(metrics).unwrap();
    let shown = &shown[..shown.len().min(4000)];

    // Counts are running totals, gauges values at their point.
    for points in metrics.values() {
        for p in points.as_array().unwrap() {
            let (name, mode) = (p[0].as_str().unwrap(), p[1].as_str().unwrap());
            let want = match name {
                "memory used" | "memory available" | "load1" => "ABSOLUTE_POINT",
                "cpu busy" => "ABSOLUTE_LAST",
                _ => "ACCUMULATED_START",
            };
            assert!(mode.ends_with(want), "{name}: {mode}");
        }
    }

    // Counters: per rank, the totals over its threads' locations.
    let counters = p["counters"]
        .as_array()
        .expect("no counters in profile.json");
    assert_eq!(counters.len(), 2);
    for (r, want) in counters.iter().enumerate() {
        let want = want.as_object().unwrap();
        assert!(want["task-clock"].as_u64().unwrap() > 0, "{want:?}");
        let got = rank_totals(metrics, r);
        for (name, v) in want {
            assert_eq!(
                got.get(name).copied().unwrap_or(0),
                v.as_u64().unwrap(),
                "rank {r} {name}: OTF2 metric total vs profile.json counters[{r}]\n{shown}"
            );
        }
        assert_eq!(got.len(), want.len(), "rank {r}: {got:?} vs {want:?}");
    }

    // Sensors: the node's metric location.
    let nodes = p["nodes"].as_array().expect("no nodes in profile.json");
    assert_eq!(nodes.len(), 1);
    let node = &nodes[0];
    let host = node["host"].as_str().unwrap();
    let loc = format!("node {host} sensors");
    let m = members(
        metrics
            .get(&loc)
            .unwrap_or_else(|| panic!("no location {loc}: {shown}")),
    );
    let readings = node["readings"].as_u64().unwrap();
    assert!(readings >= 5, "{node}");
    assert_eq!(m["memory used"].len() as u64, readings, "{node}");
    assert_eq!(m["memory available"].len() as u64, readings, "{node}");
    assert_eq!(
        highest(&m["memory used"]) as u64,
        node["memory"]["used_bytes_max"].as_u64().unwrap(),
        "{node}"
    );
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let busy = highest(&m["cpu busy"]);
    let busy_max = node["cpu"]["busy_max"].as_f64().unwrap();
    assert!(close(busy, busy_max), "cpu busy {busy} vs {node}");
    let load = highest(&m["load1"]);
    let load_max = node["load"]["load1_max"].as_f64().unwrap();
    assert!(close(load, load_max), "load1 {load} vs {node}");
    for (group, received, sent) in [
        ("network", "network received", "network sent"),
        ("disk", "disk read", "disk written"),
    ] {
        let Some(t) = node.get(group) else {
            assert!(
                !m.contains_key(received),
                "{group} in OTF2 but not in {node}"
            );
            continue;
        };
        for (name, key) in [(received, "in_bytes"), (sent, "out_bytes")] {
            let want = t[key].as_u64().unwrap();
            let got = m.get(name).map_or(0, |p| total(name, p));
            assert_eq!(got, want, "{name} vs nodes[0].{group}.{key}: {node}");
        }
    }
}

/// A trace of rank 1 alone keeps rank 1's readings, all of them (no
/// window): its totals are still the profile's, and no other rank has a
/// counter location; the node's sensors are there if rank 1 sampled.
#[test]
fn a_trace_of_one_rank_keeps_that_rank_s_readings() {
    let Some((profile, metrics)) = run("otf2-metrics-rank1", "--trace=ranks=1") else {
        return;
    };
    let p = &profile["programs"][0];
    let shown = serde_json::to_string(&metrics).unwrap();
    assert!(
        !metrics.keys().any(|l| l.starts_with("rank 0 ")),
        "rank 0 was not chosen: {shown}"
    );
    let want = p["counters"][1].as_object().unwrap();
    let got = rank_totals(&metrics, 1);
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (name, v) in want {
        assert_eq!(got[name], v.as_u64().unwrap(), "rank 1 {name}");
    }
    let node = &p["nodes"][0];
    let sampled_by_1 = node["samplers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["rank"] == 1);
    let loc = format!("node {} sensors", node["host"].as_str().unwrap());
    assert_eq!(metrics.contains_key(&loc), sampled_by_1, "{node}\n{shown}");
}
