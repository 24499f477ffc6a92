//! The test suite's cluster (`scripts/cluster.sh`, docs/cluster.md) runs
//! real MPI jobs across emulated nodes, without Hark: Open MPI's `mpirun`
//! through the rsh agent and MPICH's Hydra `mpiexec` through the same
//! agent, on 2 and 3 nodes. Every rank reports its host and its
//! CLOCK_MONOTONIC: the ranks sit on distinct nodes, and each reads its
//! node's clock, offset from the host's by what the cluster says. After
//! teardown nothing of a cluster is left. Needs root; skips otherwise.

mod common;

use common::cluster::{shared_scratch, Cluster};
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

/// One line of `where_and_when`.
#[derive(Debug)]
struct Rank {
    rank: usize,
    size: usize,
    host: String,
    monotonic_ns: i64,
    sum: usize,
}

fn ranks(out: &Output) -> Vec<Rank> {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "of", s, "on", h, "monotonic", m, "sum", sum] => Some(Rank {
                    rank: r.parse().ok()?,
                    size: s.parse().ok()?,
                    host: h.to_string(),
                    monotonic_ns: m.parse().ok()?,
                    sum: sum.parse().ok()?,
                }),
                _ => None,
            }
        })
        .collect()
}

/// The host's CLOCK_MONOTONIC in nanoseconds.
fn host_monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; CLOCK_MONOTONIC exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Runs `command` on n1 in `dir` and checks that its `np` ranks ran one
/// per node (round robin), each reading its own node's clock: between
/// the host's clock before and after the job, plus the node's offset.
fn run_and_check(cluster: &Cluster, dir: &Path, command: &[String], np: usize) {
    let before = host_monotonic_ns();
    let out = cluster
        .command("n1", command)
        .current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output_within()
        .expect("cannot run cluster.sh");
    let after = host_monotonic_ns();
    let shown = format!(
        "{command:?}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_exit(&out, 0);
    let mut ranks = ranks(&out);
    ranks.sort_by_key(|r| r.rank);
    let numbers: Vec<usize> = ranks.iter().map(|r| r.rank).collect();
    assert_eq!(numbers, (0..np).collect::<Vec<_>>(), "{shown}");
    let hosts = cluster.hosts();
    let mut offsets = BTreeSet::new();
    for r in &ranks {
        assert_eq!((r.size, r.sum), (np, np * (np - 1) / 2), "{shown}");
        assert!(hosts.contains(&r.host), "rank on {}: {shown}", r.host);
        let offset = cluster.clock_offset_ns(&r.host);
        assert!(
            before + offset <= r.monotonic_ns && r.monotonic_ns <= after + offset,
            "rank {} on {} read {} ns, outside the host's [{before}, {after}] + {offset}: {shown}",
            r.rank,
            r.host,
            r.monotonic_ns
        );
        offsets.insert(offset);
    }
    let used: BTreeSet<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(
        used.len(),
        hosts.len(),
        "not every node ran a rank: {shown}"
    );
    assert_eq!(offsets.len(), hosts.len(), "nodes share a clock: {shown}");
}

fn open_mpi(nodes: usize) {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let Some(cluster) = Cluster::up(nodes) else {
        return;
    };
    let dir = shared_scratch(&format!("nodes-ompi-{nodes}"));
    let exe = compile(OPEN_MPI.cc, "where_and_when.c".as_ref(), &dir, &[]);
    let mut command: Vec<String> = [OPEN_MPI.run, "--host", &cluster.hosts().join(",")]
        .map(String::from)
        .into();
    command.extend([
        "-np".into(),
        nodes.to_string(),
        "--map-by".into(),
        "node".into(),
    ]);
    command.extend(["--mca", "btl", "self,tcp", "--mca", "plm_rsh_agent"].map(String::from));
    command.push(cluster.rsh_agent().display().to_string());
    command.push(exe.display().to_string());
    run_and_check(&cluster, &dir, &command, nodes);
}

fn hydra(nodes: usize) {
    if !have(MPICH.cc) || !have("mpiexec.hydra") {
        eprintln!("skipped: MPICH is not installed");
        return;
    }
    let Some(cluster) = Cluster::up(nodes) else {
        return;
    };
    let dir = shared_scratch(&format!("nodes-hydra-{nodes}"));
    let exe = compile(MPICH.cc, "where_and_when.c".as_ref(), &dir, &[]);
    let mut command: Vec<String> = ["mpiexec.hydra", "-hosts", &cluster.hosts().join(",")]
        .map(String::from)
        .into();
    command.extend([
        "-np".into(),
        nodes.to_string(),
        "-bootstrap".into(),
        "ssh".into(),
    ]);
    command.push("-bootstrap-exec".into());
    command.push(cluster.rsh_agent().display().to_string());
    command.push(exe.display().to_string());
    run_and_check(&cluster, &dir, &command, nodes);
}

#[test]
fn open_mpi_on_2_nodes() {
    open_mpi(2);
}

#[test]
fn open_mpi_on_3_nodes() {
    open_mpi(3);
}

#[test]
fn hydra_on_2_nodes() {
    hydra(2);
}

#[test]
fn hydra_on_3_nodes() {
    hydra(3);
}

/// What of a cluster the host can see: its namespaces, its state
/// directory, its processes and mounts.
fn traces_of(id: &str) -> Vec<String> {
    let mut found = Vec::new();
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output_within()
        .expect("ip netns list");
    let tag = format!("hark-{id}-");
    for line in String::from_utf8_lossy(&netns.stdout).lines() {
        if line.starts_with(&tag) {
            found.push(format!("namespace {line}"));
        }
    }
    let state = Path::new("/run/hark-cluster").join(id);
    if state.exists() {
        found.push(format!("state {}", state.display()));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    found.extend(
        mounts
            .lines()
            .filter(|l| l.contains(&tag) || l.contains(&*state.to_string_lossy()))
            .map(|l| format!("mount {l}")),
    );
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("cluster.sh _hold") && cmd.contains(&format!(" {id} ")) {
            found.push(format!("process {cmd}"));
        }
    }
    found
}

/// The host's addresses in the nodes' range (there must be none).
fn host_addresses_in_cluster_range() -> String {
    let out = std::process::Command::new("ip")
        .args(["-o", "addr"])
        .output_within()
        .expect("ip addr");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(" 10.77.0."))
        .collect()
}

#[test]
fn a_cluster_leaves_nothing_behind() {
    let Some(cluster) = Cluster::up(2) else {
        return;
    };
    let id = cluster.id().to_string();
    // A process left running on a node goes too.
    let mut sleeper = cluster.spawn("n2", &["sleep", "600"]);
    let holders: Vec<String> = cluster
        .hosts()
        .iter()
        .map(|n| {
            let pid = format!("/run/hark-cluster/{id}/{n}/holder.pid");
            std::fs::read_to_string(&pid).unwrap_or_else(|e| panic!("{pid}: {e}"))
        })
        .collect();
    let up = traces_of(&id);
    assert!(up.iter().any(|t| t.starts_with("namespace")), "{up:?}");
    assert!(up.iter().any(|t| t.starts_with("process")), "{up:?}");
    assert_eq!(
        host_addresses_in_cluster_range(),
        "",
        "the host got an address"
    );
    drop(cluster);
    assert_eq!(traces_of(&id), Vec::<String>::new());
    for pid in holders {
        // A zombie holds nothing; init reaps it when it gets to it.
        let state = stat_field(pid.trim(), 0);
        assert!(
            state.is_empty() || state == "Z",
            "a node's holder {} outlived it (state {state})",
            pid.trim()
        );
    }
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "the node's sleep outlived its cluster");
}

/// The first check of Hark itself on a cluster: `hark run` on n1 over
/// `mpirun` across two nodes must measure both ranks (the rank on n2
/// reaches hark over TCP; `every_rank_on_every_node_is_measured.rs` has
/// the full checks).
#[test]
fn hark_run_over_mpirun_on_2_nodes_measures_both_ranks() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let Some(cluster) = Cluster::up(2) else {
        return;
    };
    probe();
    let dir = shared_scratch("nodes-hark-ompi");
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let agent = cluster.rsh_agent().display().to_string();
    let run_dir = dir.join("run");
    let mut command: Vec<String> = vec![hark().display().to_string(), "run".into(), "-o".into()];
    command.push(run_dir.display().to_string());
    command.extend(["--", OPEN_MPI.run, "--host", "n1,n2", "-np", "2"].map(String::from));
    command.extend(["--mca", "btl", "self,tcp", "--mca", "plm_rsh_agent"].map(String::from));
    command.extend([agent, exe.display().to_string(), "20".into(), "10".into()]);
    let out = cluster
        .command("n1", &command)
        .current_dir(&dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output_within()
        .expect("cannot run cluster.sh");
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let programs = profile["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 1, "only the ring is a program: {profile}");
    assert_eq!(
        programs[0]["ranks"],
        2,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(per_rank(&profile, 0, "MPI_Isend", "calls"), vec![20, 20]);
}
