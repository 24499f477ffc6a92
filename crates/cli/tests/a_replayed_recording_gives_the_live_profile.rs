//! `hark replay` (the benchmarks' real-stream driver, `docs/replay.md`) is a
//! faithful input: a run recorded with `hark run --trace` and replayed at
//! full speed gives the profile the live server wrote for that run, equal
//! to the byte once the fields the trace store cannot hold are left out
//! (`docs/replay.md`, "What differs"). Both an NPB-style CG kernel and
//! LAMMPS's Lennard-Jones melt. With `--copies K`, every copy is a job of
//! its own with that same profile. With `--pack-events N`, the packs merged
//! as a probe under load ships them, the profile is the same again: no
//! analysis depends on where the probe ended its packs. With
//! `--without-samples` the program's own events all arrive.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Fields of `profile.json` that the trace store does not carry: the
/// command's exit and pid (the replay runs no command), hark's own CPU and
/// memory, and what the probes send in frames the store leaves out (CPU
/// binding, performance counters, node sensors).
const NOT_IN_THE_STORE: &[&str] = &["exit", "command_pid", "hark", "cpu", "counters", "nodes"];

/// The time-slice series of performance counter and CPU samples
/// (`timeslices.metrics["counters.…"]`, `["cpu.…"]`): they differ between
/// the live run and its replay (`docs/replay.md`, "What differs").
fn sampled(key: &str) -> bool {
    key.starts_with("counters.") || key.starts_with("cpu.")
}

/// `v` without the fields `keys` name, nor the trace store's own
/// diagnostic (the live run kept a store, the replay keeps none).
fn without(v: &Value, keys: &[&str]) -> Value {
    match v {
        Value::Array(a)
            if a.iter()
                .any(|d| d.as_str().is_some_and(|d| d.starts_with("trace store"))) =>
        {
            Value::Array(
                a.iter()
                    .filter(|d| !d.as_str().is_some_and(|d| d.starts_with("trace store")))
                    .cloned()
                    .collect(),
            )
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()) && !sampled(k))
                .map(|(k, v)| (k.clone(), without(v, keys)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| without(v, keys)).collect()),
        other => other.clone(),
    }
}

/// `hark replay RUN -o OUT <args>`; the replay's profile.
fn replay(run: &Path, out: &Path, args: &[&str]) -> Value {
    let done = Command::new(hark())
        .arg("replay")
        .arg(run)
        .arg("-o")
        .arg(out)
        .args(args)
        .output_within()
        .expect("cannot run hark replay");
    assert_exit(&done, 0);
    let said = String::from_utf8_lossy(&done.stderr);
    assert!(said.contains("dropped 0 ("), "{said}");
    profile(out)
}

/// The live and the replayed profile, each without `NOT_IN_THE_STORE`,
/// serialised as `profile.json` is: equal, or the first differing lines.
fn assert_same(live: &Value, replayed: &Value) {
    let a = serde_json::to_string_pretty(&without(live, NOT_IN_THE_STORE)).unwrap();
    let b = serde_json::to_string_pretty(&without(replayed, NOT_IN_THE_STORE)).unwrap();
    if a != b {
        let diff: Vec<String> = a
            .lines()
            .zip(b.lines())
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .take(20)
            .map(|(i, (x, y))| format!("line {i}: live {x} | replay {y}"))
            .collect();
        panic!(
            "the replay's profile differs from the live one ({} and {} bytes):\n{}",
            a.len(),
            b.len(),
            diff.join("\n")
        );
    }
}

fn record_and_replay(dir: &Path, command: &[String]) {
    let (out, run) = hark_run(dir, &["--trace"], command);
    assert_exit(&out, 0);
    let live = profile(&run);
    assert!(
        live["programs"][0]["mpi"]
            .as_object()
            .is_some_and(|m| !m.is_empty()),
        "the live run measured no MPI call"
    );
    assert_same(&live, &replay(&run, &dir.join("replay"), &[]));
    assert_same(
        &live,
        &replay(&run, &dir.join("merged"), &["--pack-events", "100000"]),
    );
    // Without the probes' samples: the program's events are all there.
    let bare = replay(&run, &dir.join("bare"), &["--without-samples"]);
    let program = |v: &Value| {
        let p = &v["programs"][0];
        let a = &v["accounting"];
        let events = (a["events_received"].clone(), a["events_analysed"].clone());
        (
            p["mpi"].clone(),
            p["p2p"].clone(),
            p["collectives"].clone(),
            events,
        )
    };
    assert_eq!(program(&bare), program(&live));
    // Two copies: two jobs, each with the live run's program.
    let copies = replay(&run, &dir.join("copies"), &["--copies", "2"]);
    let programs = copies["programs"].as_array().unwrap();
    assert_eq!(
        programs.len(),
        2 * live["programs"].as_array().unwrap().len()
    );
    let strip = |p: &Value| without(p, &["job", "cpu", "counters", "nodes", "hark"]);
    assert_eq!(strip(&programs[0]), strip(&live["programs"][0]));
    assert_eq!(strip(&programs[1]), strip(&live["programs"][0]));
}

#[test]
fn an_npb_style_cg_kernel_replays_to_its_live_profile() {
    let mpi = OPEN_MPI;
    if !have(mpi.fc) || !have(mpi.run) {
        panic!("{} ({}) is needed: run scripts/deps.sh", mpi.name, mpi.fc);
    }
    let dir = scratch("replay-cg-style");
    let exe = compile(mpi.fc, Path::new("cg_style.f90"), &dir, &["-g", "-O2"]);
    let mut command = launcher(mpi, 4);
    command.extend([exe.display().to_string(), "500".into(), "200".into()]);
    record_and_replay(&dir, &command);
}

#[test]
fn lammps_replays_to_its_live_profile() {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.run) {
        panic!("LAMMPS (lmp, lammps-examples) and Open MPI are needed: run scripts/deps.sh");
    }
    let dir = scratch("replay-lammps");
    std::fs::copy(input, dir.join("in.melt")).unwrap();
    let mut command = launcher(OPEN_MPI, 4);
    command.extend(["lmp", "-in", "in.melt", "-log", "none"].map(String::from));
    record_and_replay(&dir, &command);
}
