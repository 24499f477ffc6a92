//! A process forked by a rank (C `fork()`, Python `multiprocessing`) is
//! reported as a child process of that rank: its I/O is counted in the
//! program's `children`, the program keeps its rank count, world rank 1
//! stays at index 1, and no second chapter appears (under MPICH too, where
//! the child inherits a job identity of its own). So is a worker that
//! `multiprocessing`'s `spawn` starts, a new `python3` with the rank's
//! variables, which must not be taken for a second claim to the rank. And
//! so is a process that no parent links to its rank any more (reparented
//! before it started), which must not become a rank of a job of its own.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// The one program of the run, after checking there is exactly one.
fn only_program(profile: &Value) -> &Value {
    let programs = profile["programs"].as_array().unwrap();
    let names: Vec<&str> = programs
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(programs.len(), 1, "one chapter expected, got {names:?}");
    &programs[0]
}

fn world_ranks(p: &Value) -> Vec<i64> {
    p["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["world_rank"].as_i64().unwrap())
        .collect()
}

/// Per world rank of the parent: (children, bytes they wrote).
fn children_by_rank(p: &Value) -> Vec<(i64, u64, u64)> {
    let mut by: std::collections::BTreeMap<i64, (u64, u64)> = Default::default();
    for c in p["children"].as_array().unwrap() {
        let e = by.entry(c["world_rank"].as_i64().unwrap()).or_default();
        e.0 += 1;
        e.1 += c["write_bytes"].as_u64().unwrap();
    }
    by.into_iter().map(|(r, (n, b))| (r, n, b)).collect()
}

fn c_fork_in_rank_0(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("fork-{}", mpi.cc));
    let exe = compile(mpi.cc, "fork_in_rank0.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 2);
    command.push(exe.display().to_string());
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let p = only_program(&profile);
    assert_eq!(p["ranks"], 2, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(world_ranks(p), vec![0, 1]);
    assert_eq!(per_rank(&profile, 0, "MPI_Send", "calls"), vec![0, 5]);
    assert_eq!(per_rank(&profile, 0, "MPI_Recv", "calls"), vec![5, 0]);
    assert_eq!(children_by_rank(p), vec![(0, 1, 1000)]);
    let child = &p["children"][0];
    assert_eq!(child["parent_pid"], p["rank_info"][0]["pid"]);
    assert_eq!(child["partial"], false);
    assert_eq!(lost(&profile), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_c_fork_in_rank_0_keeps_world_rank_1_at_index_1_under_open_mpi() {
    c_fork_in_rank_0(OPEN_MPI);
}

#[test]
fn a_c_fork_in_rank_0_keeps_world_rank_1_at_index_1_under_mpich() {
    c_fork_in_rank_0(MPICH);
}

/// Runs the Python program `script` (in `tests/programs/`) with `args` on
/// two ranks under `hark run`, checks that both said "ok" and that the run
/// has one program of ranks 0 and 1, and gives its profile and the scratch
/// directory; `None` (skipped) without the launcher or Python.
fn python_on_two_ranks(mpi: Mpi, script: &str, args: &[&str]) -> Option<(Value, Scratch)> {
    if !have(mpi.run) || !have("/usr/bin/python3") {
        eprintln!("skipped: {} or python3 is not installed", mpi.name);
        return None;
    }
    let dir = scratch(&format!("{script}-{}-{}", mpi.cc, args.join("-")));
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(script);
    let mut command = launcher(mpi, 2);
    command.extend(["/usr/bin/python3".into(), script.display().to_string()]);
    command.extend(args.iter().map(|a| a.to_string()));
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).matches("ok").count(),
        2
    );
    let profile = profile(&run_dir);
    let p = only_program(&profile);
    assert_eq!(p["ranks"], 2);
    assert_eq!(world_ranks(p), vec![0, 1]);
    Some((profile, dir))
}

fn pool_in_each_rank(mpi: Mpi, with_mpi4py: bool, spawn: bool) {
    let args: Vec<&str> = [(with_mpi4py, "mpi"), (spawn, "spawn")]
        .into_iter()
        .filter_map(|(on, a)| on.then_some(a))
        .collect();
    let Some((profile, dir)) = python_on_two_ranks(mpi, "pool_in_each_rank.py", &args) else {
        return;
    };
    let p = only_program(&profile);
    // Two workers per rank; their writes: four task files of 100 bytes per
    // rank, and the results they pickle back to the rank through a pipe
    // (some tens of bytes each). `spawn` also starts a resource tracker
    // per rank, and a spawned worker first reads its settings from the
    // rank through a pipe.
    let children = children_by_rank(p);
    let each = if spawn { 3 } else { 2 };
    assert_eq!(
        children.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
        vec![(0, each), (1, each)],
        "{:#?}",
        p["children"]
    );
    for (rank, _, written) in children {
        assert!(
            (400..1400).contains(&written),
            "rank {rank}'s children wrote {written} bytes"
        );
    }
    for c in p["children"].as_array().unwrap() {
        let holder = p["rank_info"][c["world_rank"].as_u64().unwrap() as usize]["pid"].clone();
        assert_eq!(c["parent_pid"], holder, "{c}");
    }
    for d in p["diagnostics"].as_array().unwrap() {
        assert!(!d.as_str().unwrap().starts_with("refused"), "{d}");
    }
    let files = p["io"]["files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .all(|f| !f["path"].as_str().unwrap().starts_with("task-")),
        "the children's files are not the ranks' files"
    );
    if with_mpi4py {
        assert_eq!(per_rank(&profile, 0, "MPI_Send", "calls"), vec![1, 0]);
    }
    // Lossy by default, a rank's probe may drop events if the server is
    // starved long enough; any loss must be exactly what the probes said
    // they dropped. (Under load a rank used to drop 7 to 22 of its ~424
    // events: each flush and definition held a ring slot while the server's
    // reader was not scheduled; the shipper now gathers them, `docs/probe.md`
    // and `ship::tests::flushes_and_definitions_leave_the_pool_to_the_program_while_the_ring_reader_lags`.)
    let a = &profile["accounting"];
    assert_eq!(lost(&profile), a["events_dropped"].as_u64().unwrap(), "{a}");
    if lost(&profile) > 0 {
        eprintln!("note: the probes dropped {} events: {a}", lost(&profile));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mpi4py_with_a_pool_of_two_in_each_of_two_ranks_is_two_ranks_under_open_mpi() {
    pool_in_each_rank(OPEN_MPI, true, false);
}

#[test]
fn mpi4py_with_a_spawned_pool_in_each_of_two_ranks_is_two_ranks_under_open_mpi() {
    pool_in_each_rank(OPEN_MPI, true, true);
}

/// mpi4py here is built for Open MPI only: under MPICH the ranks are
/// Python processes that Hydra launched (rank from `PMI_RANK`), without MPI
/// calls.
#[test]
fn python_with_a_pool_of_two_in_each_of_two_ranks_is_two_ranks_under_mpich() {
    pool_in_each_rank(MPICH, false, false);
}

#[test]
fn python_with_a_spawned_pool_in_each_of_two_ranks_is_two_ranks_under_mpich() {
    pool_in_each_rank(MPICH, false, true);
}

/// Each rank leaves a process behind (a double fork: reparented before it
/// starts a new `python3`); it finds its rank through `HARK_RANK_HOLDER`.
fn orphan_in_each_rank(mpi: Mpi) {
    let Some((profile, dir)) = python_on_two_ranks(mpi, "orphan_in_each_rank.py", &[]) else {
        return;
    };
    let p = only_program(&profile);
    for d in p["diagnostics"].as_array().unwrap() {
        assert!(!d.as_str().unwrap().starts_with("refused"), "{d}");
    }
    // Each rank's children: the middle process, and the one left behind,
    // which wrote its 100 bytes.
    let children = children_by_rank(p);
    assert_eq!(
        children.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec![0, 1],
        "{:#?}",
        p["children"]
    );
    for (rank, _, written) in children {
        assert!(
            written >= 100,
            "rank {rank}'s children wrote {written} bytes"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_process_a_rank_left_behind_is_its_child_under_open_mpi() {
    orphan_in_each_rank(OPEN_MPI);
}

#[test]
fn a_process_a_rank_left_behind_is_its_child_under_mpich() {
    orphan_in_each_rank(MPICH);
}
