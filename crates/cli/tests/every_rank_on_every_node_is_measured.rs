//! `hark run -- mpirun --host n1,n2 ...`: the rank on n2 could not reach
//! hark's Unix socket (n1's `/tmp`) and ran unmeasured, silently, while
//! the launcher's rsh agent was measured as a program. On emulated nodes
//! (`common::cluster`), over Open MPI's `mpirun` (rsh agent), MPICH's
//! Hydra (`mpiexec`, the same agent) and Slurm's `srun` (PMIx for Open
//! MPI, PMI-2 for MPICH), on 2 and 3 nodes: every rank is
//! measured, on its own node, as one program of one job; calls, bytes and
//! matrices equal the independent count and the same job run on one node;
//! no launcher agent appears as a program. Needs root; skips otherwise.
//!
//! Two faults of the MPI libraries themselves, which come without Hark too
//! (docs/cluster.md, "Known problems"), make a job run again on a fresh
//! cluster, twice at most: MPICH's hang in `MPI_Finalize`, and Open MPI's
//! rank that dies in `MPI_Init` under `srun`, told by the line Hark's probe
//! writes for it. Any other failure fails the test.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::cluster::{open_mpi_init_crash, run_again, shared_scratch, Cluster, RUNS};
use common::*;
use independent_count::*;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: &str = "20";
const INTS: &str = "100";

/// The launcher's words to run `np` ranks on `hosts` (round robin)
/// through the cluster's rsh agent.
fn launch(mpi: Mpi, cluster: &Cluster, hosts: &str, np: usize) -> Vec<String> {
    let agent = cluster.rsh_agent().display().to_string();
    let mut c: Vec<String> = Vec::new();
    if mpi.run == OPEN_MPI.run {
        c.extend([OPEN_MPI.run, "--oversubscribe"].map(String::from));
        c.extend(["--host", hosts, "--map-by", "node"].map(String::from));
        // The agent gives a fresh environment, as ssh does: the counter's
        // directory is passed like any variable a program needs.
        c.extend(["-x", "COUNT_DIR", "--mca", "btl", "self,tcp"].map(String::from));
        c.extend(["--mca".into(), "plm_rsh_agent".into(), agent]);
    } else {
        c.push("mpiexec.hydra".into());
        c.extend(["-hosts".into(), hosts.into()]);
        c.extend([
            "-bootstrap".into(),
            "ssh".into(),
            "-bootstrap-exec".into(),
            agent,
        ]);
    }
    c.extend(["-np".into(), np.to_string()]);
    c
}

/// `hark run` on n1 in `dir` with the independent counter preloaded, into
/// `dir/<name>`; returns the profile and the counts.
fn counted_on_n1(
    cluster: &Cluster,
    mpi: Mpi,
    dir: &Path,
    name: &str,
    command: &[String],
    np: usize,
) -> Option<(serde_json::Value, String)> {
    let counts = dir.join(counts_of(name));
    std::fs::create_dir_all(&counts).unwrap();
    let run_dir = dir.join(name);
    let mut line = vec![hark().display().to_string()];
    line.extend(["run", "--lossless", "--no-http", "-o"].map(String::from));
    line.push(run_dir.display().to_string());
    line.push("--".into());
    line.extend(command.iter().cloned());
    let mut cmd = cluster.command("n1", &line);
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir, mpi))
        .env("COUNT_DIR", &counts);
    mpi_env(&mut cmd);
    // Across nodes, not through shared memory only.
    cmd.env("OMPI_MCA_btl", "self,tcp");
    if mpi.run != OPEN_MPI.run {
        // MPICH 4.0 over UCX hangs in MPI_Finalize when a node's ranks
        // enter it apart from another node's (without Hark too); the clock
        // alignment's ping-pong at MPI_Finalize, rank 0 with each rank in
        // turn, sets them apart. Not this test's subject: off here.
        cmd.env("HARK_CLOCK_SYNC", "0");
    }
    let out = match mpi.run == OPEN_MPI.run {
        true => cmd.output_within().expect("cannot run cluster.sh"),
        false => {
            let Some(out) = ended_within(cmd, MPICH_BOUND) else {
                eprintln!("note: {name}: MPICH hung in MPI_Finalize (MPICH 4.0 over UCX/TCP)");
                return None;
            };
            out
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        if let Some(line) = open_mpi_init_crash(&stderr) {
            eprintln!("note: {name}: {line}");
            return None;
        }
    }
    assert_exit(&out, 0);
    assert!(!stderr.contains("cannot reach"), "{name}: {stderr}");
    let profile = profile(&run_dir);
    compare(&profile, &read_counts(&counts, np));
    Some((profile, stderr))
}

/// `hark run --no-http -o RUN_DIR -- COMMAND` on n1, in `dir`, with the
/// MPI environment of the tests and Open MPI's TCP between nodes.
fn hark_run_on_n1(
    cluster: &Cluster,
    dir: &Path,
    run_dir: &Path,
    command: impl IntoIterator<Item = String>,
) -> Command {
    let mut line = vec![hark().display().to_string()];
    line.extend(["run", "--no-http", "-o"].map(String::from));
    line.extend([run_dir.display().to_string(), "--".into()]);
    line.extend(command);
    let mut cmd = cluster.command("n1", &line);
    cmd.current_dir(dir);
    mpi_env(&mut cmd);
    cmd.env("OMPI_MCA_btl", "self,tcp");
    cmd
}

/// How long an MPICH job under `hark run` may take before it is taken for
/// MPICH 4.0's hang in `MPI_Finalize` over UCX between nodes, which comes
/// without Hark too (docs/cluster.md, "Known problems").
const MPICH_BOUND: Duration = Duration::from_secs(60);

/// `cmd`'s output if it ends within `bound`; else it is killed (the
/// cluster's teardown takes what it started on the nodes) and `None`.
fn ended_within(mut cmd: Command, bound: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run cluster.sh");
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = pipe.read_to_end(&mut all);
            all
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Some(Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    })
}

/// `srun` of `np` ranks on `nodes` nodes (block distribution), Open MPI
/// over PMIx, MPICH over PMI-2 (what Debian's builds of each speak). A
/// rank that dies ends the job (`--kill-on-bad-exit`): the others would
/// wait for it in their next collective until the test's limit, and the
/// failure would show their stacks, not the dead rank's last words.
fn srun(mpi: Mpi, nodes: usize, np: usize) -> Vec<String> {
    let pmi = if mpi.run == OPEN_MPI.run {
        "--mpi=pmix"
    } else {
        "--mpi=pmi2"
    };
    let n = [
        "-N".to_string(),
        nodes.to_string(),
        "-n".into(),
        np.to_string(),
    ];
    let mut c = vec!["srun".to_string(), "--kill-on-bad-exit=1".into()];
    c.extend(n);
    if nodes == 1 {
        c.extend(["-w".into(), "n1".into()]);
    }
    c.push(pmi.into());
    c
}

fn every_rank_measured(mpi: Mpi, nodes: usize) {
    every_rank_measured_by(mpi, nodes, false)
}

/// Every rank of a job on `nodes` nodes measured, started by the MPI's own
/// launcher, or by `srun` (`slurm`).
fn every_rank_measured_by(mpi: Mpi, nodes: usize, slurm: bool) {
    let launcher = if mpi.run == OPEN_MPI.run {
        OPEN_MPI.run
    } else {
        "mpiexec.hydra"
    };
    if !have(mpi.cc) || !have(launcher) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    // The MPI library's own faults (MPICH's finalize hang, Open MPI's
    // death in MPI_Init under srun): a job that met one is run again, on a
    // fresh cluster, up to RUNS runs in all.
    for _ in 0..RUNS {
        if measured_unless_mpi_failed(mpi, nodes, slurm) {
            return;
        }
        eprintln!(
            "note: {} failed on its own (docs/cluster.md, \"Known problems\"); \
             running the job again on a fresh cluster",
            mpi.name
        );
    }
    // Both come without Hark too: RUNS in a row on a loaded machine say
    // nothing of Hark's, and fail no test.
    eprintln!(
        "note: {}: the MPI library failed on its own {RUNS} times; not checked this run",
        mpi.name
    );
}

/// One try of [`every_rank_measured_by`]: false when the job met one of
/// the MPI library's own faults ([`open_mpi_init_crash`], MPICH's hang).
fn measured_unless_mpi_failed(mpi: Mpi, nodes: usize, slurm: bool) -> bool {
    let Some(cluster) = Cluster::up(nodes) else {
        return true;
    };
    if slurm && !cluster.slurm() {
        return true;
    }
    probe();
    let dir = shared_scratch(&format!("every-rank-{}-{nodes}", mpi.cc));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let ring = [exe.display().to_string(), ROUNDS.into(), INTS.into()];
    // Open MPI: one node holds two ranks (one more than the nodes, round
    // robin), so that the socket and TCP serve one job. MPICH: one rank a
    // node, since MPICH 4.0 over UCX can hang in MPI_Finalize across nodes
    // (docs/cluster.md, "Known problems"), more often with more ranks.
    let np = match mpi.run == OPEN_MPI.run {
        true => nodes + 1,
        false => nodes,
    };
    let hosts = cluster.hosts().join(",");

    let mut across = match slurm {
        true => srun(mpi, nodes, np),
        false => launch(mpi, &cluster, &hosts, np),
    };
    across.extend(ring.iter().cloned());
    let Some((profile, stderr)) = counted_on_n1(&cluster, mpi, &dir, "across", &across, np) else {
        return false;
    };
    let shown = format!("{}, {nodes} nodes: {stderr}", mpi.name);
    let programs = profile["programs"].as_array().expect("programs");
    let names: Vec<&str> = programs.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names.len(),
        1,
        "one program, no agent, one job: {names:?}: {shown}"
    );
    assert!(names[0].starts_with("ring"), "{names:?}: {shown}");
    let on: BTreeSet<String> = programs[0]["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap_or_default().to_string())
        .collect();
    let want: BTreeSet<String> = cluster.hosts().into_iter().collect();
    assert_eq!(on, want, "every node's ranks measured: {shown}");

    let mut one = match slurm {
        true => srun(mpi, 1, np),
        false => launch(mpi, &cluster, "n1", np),
    };
    one.extend(ring.iter().cloned());
    let Some((alone, _)) = counted_on_n1(&cluster, mpi, &dir, "one-node", &one, np) else {
        return false;
    };
    for field in ["messages", "bytes"] {
        let m = matrix(&profile["programs"][0]["p2p"][field]);
        assert_eq!(m.len(), np, "{field}: {shown}");
        assert_eq!(
            m,
            matrix(&alone["programs"][0]["p2p"][field]),
            "{field}: {shown}"
        );
    }
    for f in [
        "MPI_Isend",
        "MPI_Recv",
        "MPI_Wait",
        "MPI_Allreduce",
        "MPI_Barrier",
    ] {
        for field in ["calls", "bytes"] {
            assert_eq!(
                per_rank(&profile, 0, f, field),
                per_rank(&alone, 0, f, field),
                "{f} {field}: {shown}"
            );
        }
    }
    true
}

/// Only Open MPI's own death in `MPI_Init` is run again: Hark's line for
/// it, or without Hark Open MPI's own report (each as a run under `srun`
/// on 3 emulated nodes printed it); not a fault elsewhere, nor a null call
/// from another library.
#[test]
fn only_open_mpi_s_death_in_mpi_init_runs_the_job_again() {
    let report = |frames: &str| {
        format!(
            "[n2:11625] *** Process received signal ***\n\
             [n2:11625] Signal: Segmentation fault (11)\n\
             [n2:11625] Signal code: Address not mapped (1)\n\
             [n2:11625] Failing at address: (nil)\n\
             {frames}\
             [n2:11625] *** End of error message ***\n\
             srun: error: n2: task 1: Segmentation fault\n"
        )
    };
    let signal_frame =
        "[n2:11625] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3c050)[0x7fcc490fb050]\n";
    assert_eq!(
        open_mpi_init_crash(&report(signal_frame)),
        Some("[n2:11625] Failing at address: (nil)")
    );
    // A null pointer read in a function that has a frame of its own.
    let read = format!("{signal_frame}[n2:11625] [ 1] ./ring(main+0x2d)[0x55c2d1a0f1c9]\n");
    assert_eq!(open_mpi_init_crash(&report(&read)), None);
    let elsewhere =
        report(signal_frame).replace("Failing at address: (nil)", "Failing at address: 0x10");
    assert_eq!(open_mpi_init_crash(&elsewhere), None);

    let race = "hark: SIGSEGV (rank 2, pid 16010) at address 0x0: a call through a null \
                function pointer (to 0x0), called from mca_btl_tcp.so+0x9996";
    let stderr = format!("{race}\n[n2:16010] *** Process received signal ***\n");
    assert_eq!(open_mpi_init_crash(&stderr), Some(race));
    for other in [
        "hark: SIGSEGV (rank 1, pid 8692) at address 0x0: in die-x+0x1310",
        "hark: SIGSEGV (rank 1, pid 8990) at address 0x0: a call through a null function \
         pointer (to 0x0), called from libhark.so+0x1234",
        "hark: SIGBUS (rank 0, pid 1) at address 0x10: in mca_btl_tcp.so+0x9996",
        "[n2:11444] Signal: Segmentation fault (11)",
    ] {
        assert_eq!(open_mpi_init_crash(other), None, "{other}");
    }
}

#[test]
fn srun_on_2_nodes() {
    every_rank_measured_by(OPEN_MPI, 2, true);
    every_rank_measured_by(MPICH, 2, true);
}

#[test]
fn srun_on_3_nodes() {
    every_rank_measured_by(OPEN_MPI, 3, true);
    every_rank_measured_by(MPICH, 3, true);
}

#[test]
fn mpirun_on_2_nodes() {
    every_rank_measured(OPEN_MPI, 2);
}

#[test]
fn mpirun_on_3_nodes() {
    every_rank_measured(OPEN_MPI, 3);
}

#[test]
fn hydra_on_2_nodes() {
    every_rank_measured(MPICH, 2);
}

#[test]
fn hydra_on_3_nodes() {
    every_rank_measured(MPICH, 3);
}

/// Open MPI's ring, built in a scratch directory named after `tag`, and 2
/// emulated nodes (running Slurm when `slurm`) with the probe built; `None`
/// (the test skips, and says why) without Open MPI, namespaces or Slurm.
fn open_mpi_ring_on_2_nodes(tag: &str, slurm: bool) -> Option<(Cluster, Scratch, PathBuf)> {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return None;
    }
    let cluster = Cluster::up(2)?;
    if slurm && !cluster.slurm() {
        return None;
    }
    probe();
    let dir = shared_scratch(tag);
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    Some((cluster, dir, exe))
}

/// `hark run -- ./job.sh`, a job script that starts `mpirun` across the
/// nodes: `hark` cannot put the probe on the ranks only, so `mpirun`, its
/// rsh agent and the agent's shell and tools inherit it, and must stay
/// passive. In a batch job (here `PBS_JOBID`, as PBS sets it) `hark`
/// listens on TCP for such a script too. Only the ring is a program (the
/// script itself is left out with `HARK_SKIP=sh`).
#[test]
fn a_launcher_inside_a_script_leaves_its_agents_unmeasured() {
    let Some((cluster, dir, exe)) = open_mpi_ring_on_2_nodes("every-rank-script", false) else {
        return;
    };
    let mut mpirun = launch(OPEN_MPI, &cluster, &cluster.hosts().join(","), 2);
    // What the script's author writes so that ranks on other nodes get the
    // probe: Open MPI passes no other variable through its agent.
    mpirun.extend(["-x", "LD_PRELOAD", "-x", "HARK_ADDR", "-x", "HARK_SKIP"].map(String::from));
    mpirun.extend([exe.display().to_string(), ROUNDS.into(), INTS.into()]);
    let script = dir.join("job.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{}\n", mpirun.join(" "))).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .output_within()
        .unwrap();
    let run_dir = dir.join("run");
    let mut cmd = hark_run_on_n1(&cluster, &dir, &run_dir, [script.display().to_string()]);
    cmd.env("PBS_JOBID", "1.pbs")
        .env("HARK_SKIP", "sh")
        .env("COUNT_DIR", &*dir);
    let out = cmd.output_within().expect("cannot run cluster.sh");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_exit(&out, 0);
    assert!(!stderr.contains("cannot reach"), "{stderr}");
    let profile = profile(&run_dir);
    let names: Vec<&str> = (profile["programs"].as_array().unwrap().iter())
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "only the ring, no agent: {names:?}: {stderr}"
    );
    assert!(names[0].starts_with("ring"), "{names:?}");
    assert_eq!(profile["programs"][0]["ranks"], 2, "{stderr}");
    assert_eq!(per_rank(&profile, 0, "MPI_Isend", "calls"), [20, 20]);
}

/// `hark run -- salloc -N2 ...`: the command `salloc` runs (`srun`, or
/// `mpirun`, which starts its daemons through Slurm) inherits the probe,
/// `hark` listens on TCP for the allocation's other node, and only the
/// ring is a program: `salloc`, `srun`, `mpirun`, `orted` stay passive.
#[test]
fn inside_salloc_srun_and_mpirun_reach_hark_from_every_node() {
    let Some((cluster, dir, exe)) = open_mpi_ring_on_2_nodes("every-rank-salloc", true) else {
        return;
    };
    let ring = format!("{} {ROUNDS} {INTS}", exe.display());
    for (name, inner) in [
        (
            "srun",
            format!("srun --mpi=pmix --kill-on-bad-exit=1 {ring}"),
        ),
        ("mpirun", format!("{} {ring}", OPEN_MPI.run)),
    ] {
        let salloc = format!("salloc -N2 -n2 {inner}");
        // Open MPI's own death in MPI_Init is run again, twice at most.
        let mut tries = 0;
        let (out, stderr, run_dir) = loop {
            tries += 1;
            let run_dir = dir.join(format!("{name}-{tries}"));
            let words = salloc.split_whitespace().map(String::from);
            let out = hark_run_on_n1(&cluster, &dir, &run_dir, words)
                .output_within()
                .expect("cannot run cluster.sh");
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if !run_again(&out, &stderr, tries, name) {
                break (out, stderr, run_dir);
            }
        };
        assert_exit(&out, 0);
        assert!(!stderr.contains("cannot reach"), "{name}: {stderr}");
        let profile = profile(&run_dir);
        let programs = profile["programs"].as_array().unwrap();
        let names: Vec<&str> = programs.iter().filter_map(|p| p["name"].as_str()).collect();
        assert_eq!(names.len(), 1, "{name}: only the ring: {names:?}: {stderr}");
        let hosts: BTreeSet<&str> = (programs[0]["rank_info"].as_array().unwrap().iter())
            .filter_map(|r| r["host"].as_str())
            .collect();
        assert_eq!(hosts.len(), 2, "{name}: a rank on each node: {stderr}");
        assert_eq!(
            per_rank(&profile, 0, "MPI_Isend", "calls"),
            [20, 20],
            "{name}"
        );
    }
}

/// A rank on n2 whose probe cannot reach hark (here, an address nobody
/// listens on) is named in the summary's first line with its host and what
/// its connection met: its warning crossed the launcher's stderr to `hark`
/// on n1. The job ends as without Hark.
#[test]
fn a_rank_on_another_node_that_cannot_reach_hark_is_named_with_its_host() {
    let Some((cluster, dir, exe)) = open_mpi_ring_on_2_nodes("every-rank-unreached", false) else {
        return;
    };
    let script = format!(
        // No `$(hostname)`: a process of its own, it would be measured.
        "read h < /proc/sys/kernel/hostname; \
         [ \"$h\" = n2 ] && export HARK_ADDR=unix:/nonexistent/hark.sock; exec {} {ROUNDS} {INTS}",
        exe.display()
    );
    let mut command = launch(OPEN_MPI, &cluster, "n1,n2", 2);
    command.extend([
        "-x".into(),
        "HARK_SKIP".into(),
        "sh".into(),
        "-c".into(),
        script,
    ]);
    let run_dir = dir.join("run");
    let mut cmd = hark_run_on_n1(&cluster, &dir, &run_dir, command);
    cmd.env("HARK_SKIP", "sh").env("COUNT_DIR", &*dir);
    let out = cmd.output_within().expect("cannot run cluster.sh");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_exit(&out, 0);
    let reason = "No such file or directory (os error 2)";
    let said = format!("1 of 2 ranks measured: rank 1 on n2 could not reach hark: {reason}");
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let first = summary.lines().next().unwrap_or_default();
    assert!(first.ends_with(&said), "first line: {first}\n{stderr}");
    let profile = profile(&run_dir);
    assert_eq!(
        profile["missing"][0]["unreached"],
        serde_json::json!([{"rank": 1, "host": "n2", "reason": reason}]),
        "{stderr}"
    );
    assert_eq!(per_rank(&profile, 0, "MPI_Isend", "calls"), [20]);
}

/// `hark run -- srun --multi-prog FILE` on 2 nodes: every task is
/// measured, as one program of one job, and its calls and bytes equal the
/// independent count (Open MPI over PMIx).
#[test]
fn srun_multi_prog_is_measured() {
    let multi = |conf: &Path, _ring: &str| -> Vec<String> {
        let conf = conf.display().to_string();
        [
            "srun",
            "-N",
            "2",
            "-n",
            "2",
            "--mpi=pmix",
            "--multi-prog",
            &conf,
        ]
        .map(String::from)
        .into()
    };
    srun_step_is_measured("multi-prog", multi);
}

/// A heterogeneous step (`srun ... : ...`) on 2 nodes, checked as
/// [`srun_multi_prog_is_measured`]. Ignored: in 1 of 4 clean-clone runs
/// the step hung after both tasks had entered `MPI_Finalize` (the
/// independent counter had written both counts), with `srun` waiting for
/// them; cause not found (docs/cluster.md, Known problems).
#[test]
#[ignore = "hung once in 4 clean-clone runs after both tasks entered MPI_Finalize; cause not found (docs/cluster.md)"]
fn srun_heterogeneous_step_is_measured() {
    let het = |_conf: &Path, ring: &str| -> Vec<String> {
        let mut het: Vec<String> = vec!["srun".into()];
        for (i, node) in ["n1", "n2"].into_iter().enumerate() {
            if i > 0 {
                het.push(":".into());
            }
            het.extend(["-N", "1", "-n", "1", "-w", node, "--mpi=pmix"].map(String::from));
            het.extend(ring.split(' ').map(String::from));
        }
        het
    };
    srun_step_is_measured("het", het);
}

/// Runs the ring as the srun step `step` makes of the `--multi-prog` file
/// and the ring's command line, under `hark run` on n1 of 2 Slurm nodes.
fn srun_step_is_measured(name: &str, step: impl Fn(&Path, &str) -> Vec<String>) {
    let Some((cluster, dir, exe)) = open_mpi_ring_on_2_nodes(&format!("every-rank-{name}"), true)
    else {
        return;
    };
    let ring = format!("{} {ROUNDS} {INTS}", exe.display());
    let conf = dir.join("multi.conf");
    std::fs::write(&conf, format!("0 {ring}\n1 {ring}\n")).unwrap();
    let command = step(&conf, &ring);
    let Some((profile, stderr)) = counted_on_n1(&cluster, OPEN_MPI, &dir, name, &command, 2) else {
        return;
    };
    let programs = profile["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 1, "{name}: one program: {stderr}");
    let on: BTreeSet<&str> = (programs[0]["rank_info"].as_array().unwrap().iter())
        .filter_map(|r| r["host"].as_str())
        .collect();
    assert_eq!(on, BTreeSet::from(["n1", "n2"]), "{name}: {stderr}");
}
