//! Comparing two `profile.json`s of the same program run two ways (the
//! socket path and `--analysers`, or two merge shapes): everything but times
//! and what depends on them. Included by path by the tests that compare
//! (next to `common`).
#![allow(dead_code)]

use super::common::*;
use serde_json::Value;
use std::path::Path;

/// Keys whose values are times or depend on them (a second run of the
/// same program differs there too): dropped before comparing.
pub fn timed(key: &str) -> bool {
    key.ends_with("_ns")
        || [
            "density",
            "digest",
            "efficiency",
            "efficiency_slices",
            "timeslices",
            "clock",
            "time_across_ranks",
            "time_histogram",
            "pid",
            "command_pid",
            "wait_causes",
            "slices",
            "late",
            "cause_callpaths",
            "hark_version",
            // Switches, migrations and shares follow the scheduler.
            "cpu",
            // Performance counts follow the run (page faults, switches).
            "counters",
            "counter_info",
            // The node's figures follow the machine and the run's length.
            "nodes",
        ]
        .contains(&key)
}

pub fn untimed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !timed(k))
                .map(|(k, v)| match (k.as_str(), v) {
                    ("callsites", Value::Array(sites)) => (k.clone(), untimed_sites(sites)),
                    _ => (k.clone(), untimed(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

/// Call sites without their times: in an order of their own (the profile
/// lists them costliest first), and without their wait states, which
/// another run finds in other calls (a Late Sender in `MPI_Wait` here,
/// in `MPI_Recv` there) even where the program-wide counts agree. An I/O
/// call site's bytes are left out too: what a program prints (LAMMPS its
/// timings) is as long as its numbers, which change from run to run.
fn untimed_sites(sites: &[Value]) -> Value {
    let mut out: Vec<Value> = sites
        .iter()
        .map(|s| {
            let mpi = s["function"]
                .as_str()
                .is_some_and(|f| f.starts_with("MPI_"));
            let mut s = untimed(s);
            if let Value::Object(m) = &mut s {
                m.remove("waits");
                m.remove("caused");
                if !mpi {
                    m.remove("bytes");
                }
            }
            s
        })
        .collect();
    out.sort_by_key(|s| s.to_string());
    Value::Array(out)
}

/// The paths where `a` and `b` differ.
pub fn differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differences(p, q, &format!("{path}/{k}"), out),
                    _ => out.push(format!("{path}/{k}: only in one")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{path}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} against {b}")),
        _ => {}
    }
}

pub fn run(dir: &Path, name: &str, hark_args: &[&str], command: &[String]) -> Value {
    run_env(dir, name, hark_args, command, &[])
}

pub fn run_env(
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
    env: &[(&str, &str)],
) -> Value {
    let out_dir = dir.join(name);
    let mut cmd = std::process::Command::new(hark());
    cmd.current_dir(dir)
        .args(["run", "-q", "--no-http", "-o"])
        .arg(&out_dir)
        .args(hark_args)
        .arg("--")
        .args(command);
    mpi_env(&mut cmd);
    cmd.envs(env.iter().copied());
    let out = cmd.output_within().expect("cannot run hark");
    assert_exit(&out, 0);
    profile(&out_dir)
}

/// Asserts that `b` equals `a` but for times, the programs' `drop`
/// sections (e.g. `io`, whose bytes follow timings a program prints) and
/// the wait states (natural waits differ between two runs: compared by
/// [`instances`] where a program's waits are of known length).
pub fn assert_same(a: &Value, b: &Value, drop: &[&str], what: &str) {
    let strip = |v: &Value| {
        let mut v = untimed(v);
        for p in v["programs"].as_array_mut().unwrap() {
            let p = p.as_object_mut().unwrap();
            p.remove("waits");
            for k in drop {
                p.remove(*k);
            }
            // Clock-condition violations depend on timing too.
            if let Some(Value::Array(d)) = p.get_mut("diagnostics") {
                d.retain(|l| !l.as_str().unwrap_or("").contains("clock condition"));
            }
        }
        v
    };
    let mut diffs = Vec::new();
    differences(&strip(a), &strip(b), "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "{what} differs from the run it is compared with:\n{}",
        diffs.join("\n")
    );
}

/// The wait-state instance counts of every program, by pattern.
pub fn instances(p: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for prog in p["programs"].as_array().unwrap() {
        for (pattern, w) in prog["waits"].as_object().unwrap() {
            out.push((pattern.clone(), w["instances"].clone()));
            out.push((format!("{pattern} by function"), untimed(&w["by_function"])));
        }
    }
    out
}
