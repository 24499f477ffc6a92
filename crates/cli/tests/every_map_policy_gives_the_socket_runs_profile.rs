//! `hark run --analysers 2 --map round-robin|blocks|same-node`: each policy
//! maps the writers as documented (`hark_wire::partition`), and the profile
//! is the socket run's under every one, on Open MPI and on MPICH.
//!
//! This machine is one node. To exercise same-node-first, the tests set the
//! test-only `HARK_TEST_NODES` override (world rank r claims the r-th node
//! of the list): writers 0 and 1 on node 0, writers 2 and 3 on node 1, and
//! the analysers, world ranks 4 and 5, on nodes 1 and 0. Then the three
//! policies give three different maps:
//!
//! | policy | analyser 4 | analyser 5 |
//! |---|---|---|
//! | round-robin | 0, 2 | 1, 3 |
//! | blocks | 0, 1 | 2, 3 |
//! | same-node | 2, 3 | 0, 1 |

mod common;
#[path = "common/profiles.rs"]
mod profiles;

use common::*;
use profiles::assert_same;
use std::path::Path;

const NODES: &str = "0,0,1,1,1,0";

/// Runs `hark run -v` with `hark_args`; returns the profile and the
/// analysers' `rank -> writers` lines.
fn run(
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
) -> (serde_json::Value, Vec<String>) {
    let out_dir = dir.join(name);
    let mut cmd = std::process::Command::new(hark());
    cmd.current_dir(dir)
        .args(["run", "-v", "--no-http", "-o"])
        .arg(&out_dir)
        .args(hark_args)
        .arg("--")
        .args(command)
        .env("HARK_TEST_NODES", NODES);
    mpi_env(&mut cmd);
    let out = cmd.output_within().expect("cannot run hark");
    assert_exit(&out, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if hark_args.is_empty() {
        // The socket run's last -v line: when the report was ready, and
        // hark's own peak memory (a server of some MiB).
        let peak = stderr
            .lines()
            .find(|l| l.starts_with("hark: report ready "))
            .and_then(|l| l.split("hark's peak memory ").nth(1))
            .and_then(|m| m.trim_end_matches(" MiB").parse::<f64>().ok());
        assert!(peak.is_some_and(|m| m > 1.0 && m < 4096.0), "{stderr}");
    }
    let mut lines: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains("receives writers"))
        .map(|l| {
            // "hark: analyser rank 4 (node 00000001) receives writers 2,3 (same-node map)"
            let w: Vec<&str> = l.split_whitespace().collect();
            format!("{} <- {} {}", w[3], w[8], w[9])
        })
        .collect();
    lines.sort();
    (profile(&out_dir), lines)
}

fn every_policy(mpi: Mpi) {
    if !test_hooks_or_skip() {
        return;
    }
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("map-policies-{}", mpi.cc));
    let ring = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend([ring.display().to_string(), "40".into()]);
    let (socket, none) = run(&dir, "socket", &[], &command);
    assert!(none.is_empty());
    let cases: [(&[&str], [&str; 2]); 4] = [
        (
            &["--map", "round-robin"],
            ["4 <- 0,2 (round-robin", "5 <- 1,3 (round-robin"],
        ),
        (
            &["--map", "blocks"],
            ["4 <- 0,1 (blocks", "5 <- 2,3 (blocks"],
        ),
        (
            &["--map", "same-node"],
            ["4 <- 2,3 (same-node", "5 <- 0,1 (same-node"],
        ),
        // Same-node-first is the default.
        (&[], ["4 <- 2,3 (same-node", "5 <- 0,1 (same-node"]),
    ];
    for (i, (map, want)) in cases.iter().enumerate() {
        let mut args = vec!["--analysers", "2"];
        args.extend_from_slice(map);
        let (over_mpi, got) = run(&dir, &format!("mpi-{i}"), &args, &command);
        assert_eq!(got, want, "{}: the map of {map:?}", mpi.name);
        assert_same(
            &socket,
            &over_mpi,
            &[],
            &format!("{}: the ring under {map:?}", mpi.name),
        );
        assert_eq!(lost(&over_mpi), 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_map_policy_gives_the_socket_runs_profile_on_open_mpi() {
    every_policy(OPEN_MPI);
}

#[test]
fn every_map_policy_gives_the_socket_runs_profile_on_mpich() {
    every_policy(MPICH);
}
