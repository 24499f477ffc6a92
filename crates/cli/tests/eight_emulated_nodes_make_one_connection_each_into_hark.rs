//! `hark run -- mpirun` over 8 emulated nodes (`common::cluster`) of 2 ranks
//! each: the ranks of every node but hark's go through their node's
//! forwarder (`docs/cluster.md`, "The forwarder"), so hark accepts one
//! connection per other node and one per rank of its own node (those use
//! its Unix socket and shared memory), where without forwarders it takes
//! one per rank; calls and bytes equal the independent count either way.
//! Needs root; skips otherwise.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::cluster::{shared_scratch, Cluster};
use common::*;
use independent_count::*;
use std::path::Path;

const NODES: usize = 8;
const PER_NODE: usize = 2;

/// `hark run -v` on n1 over `mpirun` across the nodes (rsh agent), with the
/// counter preloaded and `HARK_FORWARD=<forward>`; the profile and the
/// connections hark accepted.
fn run_on_n1(
    cluster: &Cluster,
    dir: &Path,
    name: &str,
    forward: &str,
    ring: &[String],
) -> (serde_json::Value, u64) {
    let np = NODES * PER_NODE;
    let counts = dir.join(counts_of(name));
    std::fs::create_dir_all(&counts).unwrap();
    let run_dir = dir.join(name);
    let mut line = vec![hark().display().to_string()];
    line.extend(["run", "-v", "--lossless", "--no-http", "-o"].map(String::from));
    line.push(run_dir.display().to_string());
    line.push("--".into());
    line.extend([OPEN_MPI.run, "--oversubscribe", "--host"].map(String::from));
    line.push(
        cluster
            .hosts()
            .iter()
            .map(|h| format!("{h}:{PER_NODE}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    line.extend(
        [
            "--map-by",
            "node",
            "-x",
            "COUNT_DIR",
            "--mca",
            "btl",
            "self,tcp",
        ]
        .map(String::from),
    );
    line.extend([
        "--mca".into(),
        "plm_rsh_agent".into(),
        cluster.rsh_agent().display().to_string(),
    ]);
    line.extend(["-np".into(), np.to_string()]);
    line.extend(ring.iter().cloned());
    let mut cmd = cluster.command("n1", &line);
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir, OPEN_MPI))
        .env("COUNT_DIR", &counts)
        .env("HARK_FORWARD", forward)
        .env("HARK_FORWARD_STATS", dir.join(format!("{name}-forwarders")));
    mpi_env(&mut cmd);
    cmd.env("OMPI_MCA_btl", "self,tcp");
    let out = cmd.output_within().expect("cannot run cluster.sh");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_exit(&out, 0);
    assert!(!stderr.contains("cannot reach"), "{name}: {stderr}");
    assert!(!stderr.contains("forwarder"), "{name}: {stderr}");
    let connections = stderr
        .lines()
        .find(|l| l.starts_with("hark: report ready "))
        .and_then(|l| {
            l.split("; ")
                .find(|p| p.ends_with(" connection(s) into hark"))
        })
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection count: {stderr}"));
    let profile = profile(&run_dir);
    compare(&profile, &read_counts(&counts, np));
    (profile, connections)
}

#[test]
fn eight_nodes_of_two_ranks_make_one_connection_per_node() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let Some(cluster) = Cluster::up(NODES) else {
        return;
    };
    probe();
    let dir = shared_scratch("eight-nodes");
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let ring = [exe.display().to_string(), "20".into(), "100".into()];

    let (forwarded, through) = run_on_n1(&cluster, &dir, "forwarded", "auto", &ring);
    let (direct, alone) = run_on_n1(&cluster, &dir, "direct", "never", &ring);
    // Besides the streams, a rank that streams to hark itself opens two
    // short connections of its own for its clock ping-pongs with hark (at
    // MPI_Init and MPI_Finalize, `docs/analyses.md`, "Time"); the other
    // nodes' ranks ping their forwarder, which aligns with hark on
    // connections of its own (`docs/cluster.md`, "Clocks through the
    // forwarder"), counted in its statistics.
    let stats = forwarder_stats(&dir.join("forwarded-forwarders"), NODES - 1);
    eprintln!(
        "{NODES} nodes × {PER_NODE} ranks: {through} connections into hark through the \
         forwarders ({} of them the forwarders' clock alignments), {alone} without",
        clock_alignments(&stats)
    );
    assert_eq!(
        through,
        ((NODES - 1) + PER_NODE + 2 * PER_NODE) as u64 + clock_alignments(&stats),
        "a forwarder per other node, n1's ranks direct with their pings, \
         and the forwarders' clock alignments"
    );
    assert_eq!(
        alone as usize,
        NODES * PER_NODE + 2 * NODES * PER_NODE,
        "one connection per rank, and the clock pings"
    );
    let hosts = |p: &serde_json::Value| {
        let mut h: Vec<String> = p["programs"][0]["rank_info"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap_or_default().to_string())
            .collect();
        h.sort();
        h.dedup();
        h
    };
    assert_eq!(hosts(&forwarded).len(), NODES);
    for field in ["messages", "bytes"] {
        assert_eq!(
            matrix(&forwarded["programs"][0]["p2p"][field]),
            matrix(&direct["programs"][0]["p2p"][field]),
            "{field}"
        );
    }
    assert_eq!(forwarded["accounting"]["partial_ranks"], 0);
}
