//! `HARK_ANALYSER_MERGE=tree` (a binomial reduction tree) and `gather`
//! (every analyser to analyser 0) give the same `profile.json` with 3 and 4
//! analyser ranks (with 4 the tree has two levels: analyser 3 merges into
//! 2, which merges into 0): every count, byte, matrix cell and wait-state
//! instance count (times differ between two runs and are not compared;
//! the wait states of `waits.c` with 4 analysers).
//! A shape that is neither is refused before the job starts.

mod common;
#[path = "common/profiles.rs"]
mod profiles;

use common::*;
use profiles::*;

/// Each pattern's instances over all ranks, and per function. Which rank
/// of a barrier arrives last can change between two runs on a loaded
/// machine; how many instances there are does not.
fn totals(p: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    instances(p)
        .into_iter()
        .map(|(k, v)| match v.as_array() {
            Some(per_rank) => (
                k,
                per_rank
                    .iter()
                    .filter_map(|x| x.as_u64())
                    .sum::<u64>()
                    .into(),
            ),
            None => (k, v),
        })
        .collect()
}

#[test]
fn analysers_merge_by_tree_or_by_gather_into_the_same_profile() {
    probe();
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("analysers-merge-shapes");
    let ring = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let waits = compile(mpi.cc, "waits.c".as_ref(), &dir, &[]);
    let mut ring_cmd = launcher(mpi, 4);
    ring_cmd.extend([ring.display().to_string(), "40".into()]);
    // Wait states of known length (100 ms each, so that a loaded machine
    // does not change which happen): the same instances either way.
    let mut waits_cmd = launcher(mpi, 4);
    waits_cmd.extend([
        waits.display().to_string(),
        "reps=2".into(),
        "late_sender=100".into(),
        "wait_nxn=100".into(),
        "wait_barrier=100".into(),
    ]);
    for n in ["3", "4"] {
        let run_shape = |shape: &str, what: &str, command: &[String]| {
            run_env(
                &dir,
                &format!("{what}-{n}-{shape}"),
                // Lossless: the comparison is of merges, and a lossy MPI
                // stream may drop packs on a loaded machine.
                &["--analysers", n, "--lossless"],
                command,
                &[("HARK_ANALYSER_MERGE", shape)],
            )
        };
        let tree = run_shape("tree", "ring", &ring_cmd);
        let gather = run_shape("gather", "ring", &ring_cmd);
        assert_same(
            &gather,
            &tree,
            &[],
            &format!("the ring merged by a tree of {n} analysers"),
        );
        assert_eq!(tree["programs"][0]["ranks"], 4);
        assert_eq!(lost(&tree), 0);
        if n == "3" {
            // Three analysers make the same binomial tree as a gather (0
            // receives from 1 and 2): the waits are compared with four.
            continue;
        }
        let tree = run_shape("tree", "waits", &waits_cmd);
        let gather = run_shape("gather", "waits", &waits_cmd);
        assert_eq!(
            totals(&tree),
            totals(&gather),
            "wait-state instances merged by a tree and by a gather of {n} analysers"
        );
    }

    let out = std::process::Command::new(hark())
        .current_dir(&dir)
        .args(["run", "-q", "--no-http", "--analysers", "2", "--"])
        .args(&ring_cmd)
        .env("HARK_ANALYSER_MERGE", "ring")
        .output_within()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    // Refused by `hark run` before the job starts, as every bad setting is.
    assert!(
        err.contains("`ring` is not a valid HARK_ANALYSER_MERGE")
            && err.contains("tree, gather")
            && err.contains("the command was not started"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
