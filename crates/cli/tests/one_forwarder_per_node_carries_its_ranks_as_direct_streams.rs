//! A node's forwarder (`HARK_FORWARD=always` makes this one host a node
//! whose ranks go through it, `docs/cluster.md`, "The forwarder"): hark
//! accepts one connection for the node instead of one per rank, and the
//! run is the same as the direct one — calls, bytes and matrices, equal to
//! the independent count — under Open MPI and MPICH. Pause and resume from
//! a service reach every rank through it, and a forwarder killed mid-run
//! costs what it carried, said in the summary, while the job ends as
//! without Hark.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;
mod served;

use common::*;
use independent_count::{compare, counter, read_counts, SEND_BYTES};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `hark run -v --lossless` into `<dir>/<name>` with the counter preloaded
/// first and `HARK_FORWARD=<forward>`; forwarders append their statistics
/// to `<dir>/<name>-forwarders`.
fn counted(
    mpi: Mpi,
    dir: &Path,
    name: &str,
    forward: &str,
    command: &[String],
) -> (Output, PathBuf) {
    let counts = dir.join(format!("{name}-counts"));
    std::fs::create_dir_all(&counts).unwrap();
    probe();
    let run_dir = dir.join(name);
    let mut cmd = Command::new(hark());
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir, mpi))
        .env("COUNT_DIR", &counts)
        .env("HARK_FORWARD", forward)
        .env("HARK_FORWARD_STATS", dir.join(format!("{name}-forwarders")))
        .args(["run", "-v", "--lossless", "--pack-size", "16K", "-o"])
        .arg(&run_dir)
        .arg("--")
        .args(command);
    mpi_env(&mut cmd);
    (cmd.output_within().unwrap(), run_dir)
}

/// Each rank that streams to hark directly pings hark's clock at
/// `MPI_Init` and at `MPI_Finalize`, on a short connection of its own
/// each; a rank that streams through its node's forwarder pings the
/// forwarder instead, which aligns with hark on connections of its own
/// (`docs/cluster.md`, "Clocks through the forwarder"), counted by
/// [`clock_alignments`].
const PINGS_PER_RANK: u64 = 2;

fn connections(out: &Output) -> u64 {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr
        .lines()
        .find(|l| l.starts_with("hark: report ready "))
        .and_then(|l| {
            l.split("; ")
                .find(|p| p.ends_with(" connection(s) into hark"))
        })
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection count in hark's -v output:\n{stderr}"))
}

/// Forwarders whose `HARK_ADDR` holds `mine` (a run's socket directory,
/// a service's socket), with the socket each listens on.
fn forwarders_of(mine: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let read = |f: &str| std::fs::read(format!("/proc/{pid}/{f}")).unwrap_or_default();
        let cmdline = read("cmdline");
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) != Some(&&b"forward"[..]) || args.contains(&&b"--detach"[..]) {
            continue;
        }
        let env = read("environ");
        let ours = env
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(b"HARK_ADDR=") && String::from_utf8_lossy(kv).contains(mine));
        let listen = args
            .windows(2)
            .find(|w| w[0] == b"--listen")
            .map(|w| String::from_utf8_lossy(w[1]).into_owned());
        if let (true, Some(listen)) = (ours, listen) {
            found.push((pid, listen));
        }
    }
    found
}

/// Every MPI function's calls and bytes per rank, but for the polling
/// ones, whose counts depend on timing.
fn steady_functions(profile: &serde_json::Value) -> Vec<(String, Vec<u64>, Vec<u64>)> {
    let polling = [
        "MPI_Test",
        "MPI_Testsome",
        "MPI_Testany",
        "MPI_Testall",
        "MPI_Iprobe",
    ];
    let mpi = profile["programs"][0]["mpi"].as_object().unwrap();
    mpi.keys()
        .filter(|f| !polling.contains(&f.as_str()))
        .map(|f| {
            (
                f.clone(),
                per_rank(profile, 0, f, "calls"),
                per_rank(profile, 0, f, "bytes"),
            )
        })
        .collect()
}

fn through_one_forwarder(mpi: Mpi) {
    if !have(mpi.cc) {
        eprintln!("skipped: needs {} (scripts/deps.sh installs it)", mpi.name);
        return;
    }
    let dir = scratch(&format!("forward-{}", mpi.cc.replace('.', "-")));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    // Several packs per rank (16 KiB packs), few rounds: MPICH spins on
    // oversubscribed cores.
    command.extend([exe.display().to_string(), "300".into(), "100".into()]);

    let (direct_out, direct_dir) = counted(mpi, &dir, "direct", "never", &command);
    assert_exit(&direct_out, 0);
    let (fwd_out, fwd_dir) = counted(mpi, &dir, "forwarded", "always", &command);
    assert_exit(&fwd_out, 0);

    assert_eq!(
        connections(&direct_out),
        4 + 4 * PINGS_PER_RANK,
        "one connection per rank, direct, and the clock pings"
    );
    let stats = forwarder_stats(&dir.join("forwarded-forwarders"), 1);
    assert_eq!(
        connections(&fwd_out),
        1 + clock_alignments(&stats),
        "one connection for the node, and the forwarder's clock alignments, none per rank"
    );
    assert!(
        !dir.join("direct-forwarders").exists(),
        "a forwarder under HARK_FORWARD=never"
    );
    // Through the forwarder, every rank's clock is aligned by ping-pong,
    // and each bound holds the forwarder's own on top of a round trip: a
    // rank given its host's offset is bounded by the host's best
    // measurement, so the smallest half round trip of the phase is the floor.
    let forwarded_clocks = profile(&fwd_dir);
    let ranks = (forwarded_clocks["programs"][0]["clock"]["ranks"].as_array())
        .expect("clock.ranks")
        .clone();
    for phase in ["init", "finalize"] {
        let best_half = (ranks.iter())
            .map(|c| c[phase]["round_trip_ns"].as_u64().expect("round_trip_ns") / 2)
            .min()
            .expect("ranks");
        for (r, c) in ranks.iter().enumerate() {
            assert_eq!(c["method"], "ping-pong", "rank {r}: {c}");
            let bound = c[phase]["bound_ns"].as_u64().expect("bound_ns");
            assert!(
                bound > best_half,
                "rank {r} {phase}: no forwarder bound in {c}"
            );
        }
    }
    let direct = profile(&direct_dir);
    let forwarded = profile(&fwd_dir);
    let n = compare(&forwarded, &read_counts(&dir.join("forwarded-counts"), 4));
    compare(&direct, &read_counts(&dir.join("direct-counts"), 4));
    assert_eq!(steady_functions(&forwarded), steady_functions(&direct));
    for m in ["messages", "bytes"] {
        let p2p = |p: &serde_json::Value| matrix(&p["programs"][0]["p2p"][m]);
        assert_eq!(p2p(&forwarded), p2p(&direct), "the {m} matrix");
        assert!(
            p2p(&forwarded).iter().flatten().any(|&x| x > 0),
            "empty {m} matrix"
        );
    }
    for f in SEND_BYTES {
        assert_eq!(
            per_rank(&forwarded, 0, f, "bytes"),
            per_rank(&direct, 0, f, "bytes"),
            "{f}"
        );
    }
    assert_eq!(forwarded["accounting"]["partial_ranks"], 0);
    eprintln!(
        "{}: {n} MPI functions agree with the independent count through one forwarder",
        mpi.name
    );
}

#[test]
fn four_open_mpi_ranks_through_one_forwarder_are_counted_as_directly() {
    through_one_forwarder(OPEN_MPI);
}

#[test]
fn four_mpich_ranks_through_one_forwarder_are_counted_as_directly() {
    through_one_forwarder(MPICH);
}

#[test]
fn a_forwarder_killed_mid_run_costs_its_streams_and_the_job_ends_normally() {
    let dir = scratch("forward-killed");
    let exe = compile("mpicc.openmpi", "stuck_recv.c".as_ref(), &dir, &[]);
    let stop = dir.join("stop");
    let mut command = launcher(OPEN_MPI, 4);
    command.extend([exe.display().to_string(), stop.display().to_string()]);
    probe();
    let mut cmd = hark_run_command(&dir, &dir.join("run"), &["-v"], &command);
    cmd.env("HARK_FORWARD", "always")
        .env("HARK_FLUSH_MS", "100")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let job = cmd.spawn().unwrap();
    let hark_pid = job.id();
    // The forwarder comes up with the first rank; let events flow a while.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (pid, listen) = loop {
        if let Some(f) = forwarders_of(&format!("/tmp/hark-{hark_pid}-")).pop() {
            break f;
        }
        assert!(Instant::now() < deadline, "no forwarder came up");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill has no memory preconditions; the pid is the forwarder
    // of this test's own run.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "hark run with a killed forwarder");
    // Killed, it removed nothing.
    let base = listen.trim_start_matches("unix:").trim_end_matches(".sock");
    let _ = std::fs::remove_file(format!("{base}.sock"));
    let _ = std::fs::remove_file(format!("{base}.lock"));
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("barriers"),
        "the job did not run to its end: {stdout}"
    );
    let summary = std::fs::read_to_string(dir.join("run/summary.txt")).unwrap();
    let p = profile(&dir.join("run"));
    assert_eq!(p["accounting"]["partial_ranks"], 4, "{summary}");
    let notes = p["programs"][0]["diagnostics"].to_string();
    assert!(
        notes.contains("the forwarder died or was killed"),
        "the loss is not said: {notes}"
    );
    // Under load a rank may not have shipped anything by the kill: the
    // run as a whole has.
    assert!(
        per_rank(&p, 0, "MPI_Barrier", "calls").iter().sum::<u64>() > 0,
        "what arrived before the kill is kept: {summary}"
    );
}

#[test]
fn pause_and_resume_reach_every_rank_through_the_forwarder() {
    let dir = scratch("forward-pause");
    let exe = compile("mpicc.openmpi", "stuck_recv.c".as_ref(), &dir, &[]);
    let served = served::Served::start(&dir, &[]);
    let stop = dir.join("stop");
    let mut cmd = launcher(OPEN_MPI, 2);
    cmd.extend([exe.display().to_string(), stop.display().to_string()]);
    let job = served.run_env(None, &cmd, &[("HARK_FORWARD", "always")]);
    let jobs = served.wait_jobs("two ranks connected", |j| j.len() == 1 && j[0]["open"] == 2);
    let id = jobs[0]["id"].as_str().unwrap().to_string();
    let sock = dir.join("hark.sock").display().to_string();
    assert_eq!(
        forwarders_of(&sock).len(),
        1,
        "the job's ranks have no forwarder"
    );
    let barriers = |d: &serde_json::Value| {
        per_rank(
            &profile(d.as_str().unwrap().as_ref()),
            0,
            "MPI_Barrier",
            "calls",
        )
    };
    std::thread::sleep(Duration::from_millis(800));
    served.ask(None, &[&id, "pause"]);
    std::thread::sleep(Duration::from_millis(500));
    let a = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    std::thread::sleep(Duration::from_millis(1000));
    let b = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    assert!(a.len() == 2 && a[0] > 0, "{a:?}");
    assert_eq!(a, b, "events arrived while paused");
    served.ask(None, &[&id, "resume"]);
    std::thread::sleep(Duration::from_millis(1000));
    let c = barriers(&served.ask(None, &[&id, "dump"])["dir"]);
    assert!(
        c[0] > b[0] && c[1] > b[1],
        "nothing arrived after resume: {b:?} then {c:?}"
    );
    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "the served job");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = served.wait_jobs("the job folded", |j| j[0]["state"] != "running");
    assert_eq!(jobs[0]["state"], "finished", "{jobs:?}");
}

#[test]
fn eight_ranks_on_four_emulated_nodes_make_four_connections_into_hark() {
    // Nodes are emulated (`HARK_TEST_NODES`) only by a probe built with
    // the test hooks: each claims a forwarder of its node's own.
    if !test_hooks_or_skip() {
        return;
    }
    let dir = scratch("forward-nodes");
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(OPEN_MPI, 8);
    command.extend([exe.display().to_string(), "100".into(), "100".into()]);
    let stats = dir.join("forwarders");
    let stats_arg = stats.display().to_string();
    let (out, run_dir) = hark_run_env(
        &dir,
        &["-v"],
        &command,
        &[
            ("HARK_FORWARD", "always"),
            ("HARK_TEST_NODES", "0,0,1,1,2,2,3,3"),
            ("HARK_FORWARD_STATS", &stats_arg),
            // CPU readings travel in packs of their own that count in no
            // event total; the forwarders' counts would include them.
            ("HARK_CPU_MS", "0"),
            // Node-sensor readings travel the same way.
            ("HARK_SENSORS_MS", "0"),
        ],
    );
    assert_exit(&out, 0);
    let lines = forwarder_stats(&stats, 4);
    assert_eq!(
        connections(&out),
        4 + clock_alignments(&lines),
        "one connection per emulated node, and the forwarders' clock alignments"
    );
    let p = profile(&run_dir);
    assert_eq!(p["programs"][0]["ranks"], 8);
    assert_eq!(lost(&p), 0);
    assert_eq!(per_rank(&p, 0, "MPI_Isend", "calls"), vec![100; 8]);
    // Each forwarder says what it carried as it ends (when hark's
    // connection does): two streams each, every event written.
    assert!(
        lines.iter().all(|l| forwarder_field(l, "streams") == 2),
        "{lines:?}"
    );
    let events: u64 = lines.iter().map(|l| forwarder_field(l, "events")).sum();
    assert_eq!(Some(events), p["accounting"]["events_written"].as_u64());
}
