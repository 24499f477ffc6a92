//! A writer that gives up its stream at `MPI_Finalize` (its analyser took no
//! chunk for the drain timeout) tells its analyser so, and the analyser ends
//! that stream there instead of waiting for its end forever
//! (`docs/analysers.md`, "Why nothing waits forever").
//!
//! `HARK_DRAIN_TIMEOUT_MS=0` makes every writer give up at once, with most of
//! its stream still to go. Before the fix the drain also stopped between two
//! of the shipper's chunks and the end was never sent: a run of this program
//! at 40 000 messages hung 3 of 3 times with `main`'s binary, which has no
//! exchange between analysers (every writer in the real `MPI_Finalize`, every
//! analyser waiting for a stream's end). Now `hark run` ends, writes the run,
//! and every rank whose end did not arrive is partial with the reason in the
//! diagnostics.

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn a_writer_that_gives_up_its_stream_at_finalize_leaves_no_hang() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    probe();
    let dir = scratch("gives-up-at-finalize");
    let cross = compile(mpi.cc, "cross.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend([cross.display().to_string(), "20000".into()]);
    let run_dir = dir.join("run");
    let args = [
        "-q",
        "--no-http",
        "--lossless",
        "--pack-size",
        "64K",
        "--analysers",
        "2",
    ];
    let mut cmd = hark_run_command(&dir, &run_dir, &args, &command);
    cmd.env("HARK_DRAIN_TIMEOUT_MS", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let hark = cmd.spawn().unwrap();
    // Bounded: a hang fails here instead of hanging the suite.
    let out = wait_within(
        hark,
        Duration::from_secs(240),
        "hark run did not end after its writers gave up their streams",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    let diagnostics: Vec<&str> = p["programs"][0]["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    // Every rank whose end is missing gave up, and says so.
    for info in p["programs"][0]["rank_info"].as_array().unwrap() {
        if info["partial"].as_bool().unwrap() {
            let rank = info["world_rank"].as_i64().unwrap();
            let said = format!("world rank {rank} gave up its stream at MPI_Finalize");
            assert!(
                diagnostics.iter().any(|d| d.contains(&said)),
                "rank {rank} is partial without a reason: {diagnostics:#?}\n{err}"
            );
        }
    }
    assert_eq!(
        p["accounting"]["partial_ranks"].as_u64().unwrap(),
        p["programs"][0]["rank_info"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["partial"].as_bool().unwrap())
            .count() as u64
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
