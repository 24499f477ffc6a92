//! With several analysers, the two sides of a message (and the members of a
//! collective) often stream to different analysers. They are exchanged
//! while the job runs, routed to the analyser that owns their key
//! (`docs/analysers.md`, "Keys routed between analysers"), so a matcher
//! never holds more than the skew between streams.
//!
//! `cross.c` sends each ring neighbour 40 000 messages (with 2 or 3
//! analysers round-robin, every neighbour is on another analyser) under a
//! matcher bound lowered to 16 384 operations per key
//! (`HARK_TEST_MATCH_BOUND`, a setting for tests only), then makes wait
//! states of known length. With 2 and 3 analysers the run gives the socket
//! run's wait-state instances and matching diagnostics (nothing unmatched,
//! nothing dropped). Left to the end-of-run merge (`HARK_EXCHANGE=0`), the
//! same run holds every remote operation until the end and drops past the
//! bound: the check that the test crosses it.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

const BOUND: &str = "16384";
const MESSAGES: &str = "40000";

fn run(dir: &Path, name: &str, hark_args: &[&str], command: &[String], exchange: bool) -> Value {
    let out_dir = dir.join(name);
    // Lossless: a probe that drops events loses operations, which would
    // show as unmatched for a reason other than the bound.
    let args = ["-q", "--no-http", "--lossless", "--pack-size", "64K"];
    let args: Vec<&str> = args.iter().chain(hark_args).copied().collect();
    let mut cmd = hark_run_command(dir, &out_dir, &args, command);
    cmd.env("HARK_TEST_MATCH_BOUND", BOUND);
    if !exchange {
        cmd.env("HARK_EXCHANGE", "0");
    }
    let out = cmd.output_within().expect("cannot run hark");
    assert_exit(&out, 0);
    profile(&out_dir)
}

/// Per pattern: instances per rank and per function.
fn instances(p: &Value) -> Vec<(String, Value, Value)> {
    let prog = &p["programs"][0];
    prog["waits"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(pattern, w)| {
            let by_function: serde_json::Map<String, Value> = w["by_function"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(f, v)| (f.clone(), v["instances"].clone()))
                        .collect()
                })
                .unwrap_or_default();
            (
                pattern.clone(),
                w["instances"].clone(),
                Value::Object(by_function),
            )
        })
        .collect()
}

fn diagnostics(p: &Value) -> Vec<String> {
    p["programs"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .filter(|d| !d.contains("clock condition"))
        .collect()
}

fn unmatched(p: &Value) -> Option<String> {
    diagnostics(p)
        .into_iter()
        .find(|d| d.contains("found no partner") || d.contains("never completed"))
}

#[test]
fn matches_crossing_analysers_complete_while_the_job_runs() {
    if !test_hooks_or_skip() {
        return;
    }
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("cross-analysers");
    let cross = compile(mpi.cc, "cross.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend([cross.display().to_string(), MESSAGES.into()]);

    let socket = run(&dir, "socket", &[], &command, true);
    assert_eq!(lost(&socket), 0);
    assert_eq!(
        unmatched(&socket),
        None,
        "the socket run matched everything"
    );
    let expected = instances(&socket);
    // The known waits: 4 Late Senders of each pair, 4 barriers with a
    // late rank.
    let late_sender = &expected.iter().find(|e| e.0 == "late_sender").unwrap().1;
    assert_eq!(late_sender, &serde_json::json!([2, 2, 2, 2]));

    for n in ["2", "3"] {
        let over_mpi = run(
            &dir,
            &format!("exchange-{n}"),
            &["--analysers", n],
            &command,
            true,
        );
        assert_eq!(lost(&over_mpi), 0);
        assert_eq!(
            instances(&over_mpi),
            expected,
            "wait-state instances with {n} analysers"
        );
        assert_eq!(
            diagnostics(&over_mpi),
            diagnostics(&socket),
            "matching with {n} analysers"
        );
    }

    // The control: matched only at the end, the same run exceeds the bound.
    let merged = run(&dir, "merge-only-2", &["--analysers", "2"], &command, false);
    assert_eq!(lost(&merged), 0);
    let said = unmatched(&merged).expect("without the exchange, operations are dropped");
    assert!(said.contains("dropped"), "{said}");
}
