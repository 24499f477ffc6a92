//! The test suite's cluster (`scripts/cluster.sh`, docs/cluster.md) runs
//! real MPI jobs across emulated nodes, without Hark: Open MPI's `mpirun`
//! and MPICH's Hydra `mpiexec` through the rsh agent, and Slurm's `srun`
//! (PMIx, PMI-2), on 2 and 3 nodes; `srun`, `mpirun` and `mpiexec`
//! inside `salloc`, and `srun` in an `sbatch` job. Every rank reports its host and its
//! CLOCK_MONOTONIC: the ranks sit on distinct nodes, and each reads its
//! node's clock, offset from the host's by what the cluster says. After
//! teardown nothing of a cluster is left. Needs root; skips otherwise.

mod common;

use common::cluster::{run_again, shared_scratch, Cluster};
use common::*;
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One line of `where_and_when`.
#[derive(Debug)]
struct Rank {
    rank: usize,
    size: usize,
    host: String,
    monotonic_ns: i64,
    sum: usize,
}

fn ranks(stdout: &[u8]) -> Vec<Rank> {
    let text = String::from_utf8_lossy(stdout);
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

/// How long a job may go on after its last rank reported, before it is
/// taken for MPICH's finalize hang.
const FINALIZE_GRACE: Duration = Duration::from_secs(30);

/// Runs an MPICH job, bounded like every command, and returns its output
/// and whether it hung in `MPI_Finalize`. MPICH 4.0 over UCX's TCP
/// transport (Debian's build; the only transport between nodes) can hang
/// there when its ranks reach it apart, even by milliseconds, without
/// namespaces too (docs/cluster.md, "Known problems"). So once every rank
/// has printed its line, the job gets [`FINALIZE_GRACE`] to end; past it,
/// its launcher is killed (the cluster's teardown takes the ranks), the
/// test says so in one line, and the ranks' lines are still checked.
fn output_past_a_finalize_hang(mut cmd: Command, np: usize) -> (Output, bool) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run cluster.sh");
    let stdout = collect(child.stdout.take().unwrap());
    let stderr = collect(child.stderr.take().unwrap());
    let started = Instant::now();
    let mut reported: Option<Instant> = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if reported.is_none() && ranks(&stdout.lock().unwrap()).len() == np {
            reported = Some(Instant::now());
        }
        if reported.is_some_and(|t| t.elapsed() > FINALIZE_GRACE) {
            eprintln!(
                "note: every rank reported, then MPICH hung in MPI_Finalize (MPICH 4.0 over \
                 UCX/TCP, docs/cluster.md); killed its launcher"
            );
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        assert!(
            started.elapsed() < limit(),
            "{cmd:?} still running after {:?}: {}",
            limit(),
            String::from_utf8_lossy(&stderr.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The pipes close once the launcher is gone; a rank left holding
    // them must not stall the test.
    std::thread::sleep(Duration::from_millis(100));
    let take = |b: &Arc<Mutex<Vec<u8>>>| b.lock().unwrap().clone();
    let out = Output {
        status: status.unwrap_or_else(|| ExitStatus::from_raw(0)),
        stdout: take(&stdout),
        stderr: take(&stderr),
    };
    (out, status.is_none())
}

/// A buffer that fills with what `pipe` gives, from a thread.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let fill = Arc::clone(&buf);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            fill.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
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
/// A job that Open MPI kills in `MPI_Init` (docs/cluster.md, "Known
/// problems") runs again, up to [`RUNS`](common::cluster::RUNS) in all; with `srun`'s
/// `--kill-on-bad-exit` (`SLURM_KILL_BAD_EXIT`) it ends at once instead
/// of leaving the other ranks in their first collective.
fn run_and_check(cluster: &Cluster, dir: &Path, command: &[String], np: usize) {
    let mut run = 1;
    let (out, hung, before, after) = loop {
        let before = host_monotonic_ns();
        let mut cmd = cluster.command("n1", command);
        cmd.current_dir(dir)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("SLURM_KILL_BAD_EXIT", "1");
        let mpich = command.iter().any(|w| w.contains("mpich"));
        let (out, hung) = if mpich {
            output_past_a_finalize_hang(cmd, np)
        } else {
            (cmd.output_within().expect("cannot run cluster.sh"), false)
        };
        let after = host_monotonic_ns();
        // A batch job's report comes on stdout (its output file's).
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !run_again(&out, &said, run, &format!("{command:?}")) {
            break (out, hung, before, after);
        }
        run += 1;
    };
    let shown = format!(
        "{command:?}\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !hung {
        assert_exit(&out, 0);
    }
    let mut ranks = ranks(&out.stdout);
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

/// Both MPIs' `where_and_when` in a directory every node sees, or None
/// (said why) when one is missing.
fn both_programs(tag: &str) -> Option<(common::Scratch, String, String)> {
    for mpi in [OPEN_MPI, MPICH] {
        if !have(mpi.cc) {
            eprintln!("skipped: {} is not installed", mpi.name);
            return None;
        }
    }
    let dir = shared_scratch(tag);
    let ompi = compile(OPEN_MPI.cc, "where_and_when.c".as_ref(), &dir, &[]);
    let mpich = compile(MPICH.cc, "where_and_when.c".as_ref(), &dir, &[]);
    let (ompi, mpich) = (ompi.display().to_string(), mpich.display().to_string());
    Some((dir, ompi, mpich))
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// `srun` straight from n1, one rank per node: Open MPI over PMIx, MPICH
/// over PMI-2 (what Debian's builds of each speak).
fn srun(nodes: usize) {
    let Some(cluster) = Cluster::up(nodes) else {
        return;
    };
    let Some((dir, ompi, mpich)) = both_programs(&format!("nodes-srun-{nodes}")) else {
        return;
    };
    if !cluster.slurm() {
        return;
    }
    let n = format!("-N{nodes} -n{nodes}");
    run_and_check(
        &cluster,
        &dir,
        &words(&format!("srun {n} --mpi=pmix {ompi}")),
        nodes,
    );
    run_and_check(
        &cluster,
        &dir,
        &words(&format!("srun {n} --mpi=pmi2 {mpich}")),
        nodes,
    );
}

#[test]
fn srun_on_2_nodes() {
    srun(2);
}

#[test]
fn srun_on_3_nodes() {
    srun(3);
}

/// Inside an allocation (`salloc`): `srun`, and each MPI's own launcher,
/// which start their daemons through Slurm; and `srun` in a batch job.
#[test]
fn launchers_inside_an_allocation_on_2_nodes() {
    let Some(cluster) = Cluster::up(2) else {
        return;
    };
    let Some((dir, ompi, mpich)) = both_programs("nodes-salloc") else {
        return;
    };
    if !cluster.slurm() || !have(OPEN_MPI.run) || !have("mpiexec.hydra") {
        return;
    }
    for inner in [
        format!("srun --mpi=pmix {ompi}"),
        format!("{} {ompi}", OPEN_MPI.run),
        format!("mpiexec.hydra {mpich}"),
    ] {
        let command = words(&format!("salloc -N2 -n2 {inner}"));
        run_and_check(&cluster, &dir, &command, 2);
    }
    // The batch script runs on n1 and writes its output where it started;
    // it is shown whether the job passed or failed.
    let batch = format!(
        "sbatch -N2 -n2 --wait -o batch.out --wrap 'srun --mpi=pmix {ompi}'; \
         ended=$?; cat batch.out; exit $ended"
    );
    run_and_check(&cluster, &dir, &["sh".into(), "-c".into(), batch], 2);
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

/// A directory made private on one node (as an output directory on one
/// node only): that node sees an empty directory of its own, the others
/// and the host keep the shared one.
#[test]
fn a_directory_made_private_on_one_node_is_that_node_s_alone() {
    let Some(cluster) = Cluster::up(2) else {
        return;
    };
    let dir = shared_scratch("nodes-private");
    let out_dir = dir.join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("shared"), "host").unwrap();
    cluster.make_private("n2", &out_dir);
    let list = |node: &str| {
        let out = cluster.exec(node, &["ls", "-A", &out_dir.display().to_string()]);
        assert_exit(&out, 0);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(list("n2"), "");
    let mine = out_dir.join("mine").display().to_string();
    assert_exit(&cluster.exec("n2", &["touch", &mine]), 0);
    assert_eq!(list("n2"), "mine");
    assert_eq!(list("n1"), "shared");
    assert!(!out_dir.join("mine").exists(), "n2's file reached the host");
}

/// A cluster whose test was killed before it could tear down (its owner
/// is gone) is removed by the next cluster's start, with what ran on it.
#[test]
fn a_killed_test_s_cluster_is_removed_at_the_next_start() {
    if Cluster::up(1).is_none() {
        return;
    }
    let mut owner = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    let id = format!("t{}_killed", std::process::id());
    let out = std::process::Command::new(common::cluster::script())
        .args(["up", &id, "2", "--owner", &owner.id().to_string()])
        .output_within()
        .expect("cluster.sh up");
    assert_exit(&out, 0);
    let mut on_node = std::process::Command::new(common::cluster::script())
        .args(["exec", &id, "n2", "sleep", "600"])
        .spawn()
        .expect("cluster.sh exec");
    assert!(!traces_of(&id).is_empty());
    owner.kill().unwrap();
    owner.wait().unwrap();
    let next = Cluster::up(1).expect("namespaces worked a moment ago");
    assert_eq!(traces_of(&id), Vec::<String>::new());
    // Killed with its node: it ends without waiting out its 600 s.
    let status = on_node.wait().unwrap();
    assert!(!status.success(), "its node's sleep ended well: {status}");
    drop(next);
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
