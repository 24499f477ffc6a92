//! Node sensors (`crates/probe/src/core/sensors.rs`): one process per node
//! reads the node's figures. Four busy ranks on this node
//! (`tests/programs/cpu_busy.c`) give one sampler at a time, as many
//! readings as the run's length allows and no more, the node's `MemTotal`
//! as the test reads it, a busy CPU when the test's own `/proc/stat`
//! readings around the run say the node was busy, and a runnable count
//! of at least the spinning ranks. `--sensors-ms 0` reads nothing. A
//! sampler that exits hands over: two processes of one program without
//! MPI (`tests/programs/spin_for.c`), the first ending while the second
//! runs on, sample one after the other and the readings go on to the end;
//! so do they when the first forks a child that outlives it (a child never
//! samples, and must not keep the name through the socket it inherited).
//! On two emulated nodes (`common::cluster`, root only) with two ranks
//! each, each node has its own series from its own ranks' sampler, and
//! the node that streams to `hark` on the other sent bytes over its
//! network while the other received them.

mod common;

use common::cluster::{shared_scratch, Cluster};
use common::*;
use serde_json::Value;

/// The node's `MemTotal` and `MemTotal - MemAvailable`, in bytes.
fn meminfo() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib = |key: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    let total = kib("MemTotal:");
    (total, total - kib("MemAvailable:"))
}

/// `/proc/stat`'s `cpu` line: (busy, all) ticks, busy being all but idle
/// and iowait.
fn cpu_ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap();
    let v: Vec<u64> = text.lines().next().unwrap()[4..]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    // guest and guest_nice are in user and nice already.
    let all: u64 = v.iter().take(8).sum();
    (all - v[3] - v[4], all)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// The samplers' spans must follow one another: one process at a time.
fn one_at_a_time(node: &Value) -> Vec<(u64, u64, u64, u64)> {
    let samplers: Vec<(u64, u64, u64, u64)> = node["samplers"]
        .as_array()
        .unwrap_or_else(|| panic!("no samplers: {node}"))
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_u64().unwrap();
            (f("rank"), f("readings"), f("first_ns"), f("last_ns"))
        })
        .collect();
    for w in samplers.windows(2) {
        assert!(
            w[0].3 <= w[1].2,
            "two processes sampled the node at once: {node}"
        );
    }
    samplers
}

#[test]
fn four_ranks_on_one_node_give_one_sampler_and_the_node_s_figures() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch("sensors-np4");
    let exe = compile(mpi.cc, "cpu_busy.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend(["--bind-to".into(), "none".into()]);
    command.extend([exe.display().to_string(), "3000".to_string()]);
    let (total, used_before) = meminfo();
    let (busy0, all0) = cpu_ticks();
    let (out, run_dir) = hark_run(&dir, &["--sensors-ms", "200"], &command);
    let (busy1, all1) = cpu_ticks();
    let (_, used_after) = meminfo();
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    let nodes = p["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes: {p}"));
    assert_eq!(nodes.len(), 1, "{}", p["nodes"]);
    let node = &nodes[0];
    let shown = serde_json::to_string_pretty(node).unwrap();
    assert_eq!(node["host"], hostname(), "{shown}");
    let samplers = one_at_a_time(node);
    // Every rank lives for the whole run: one sampler throughout.
    assert_eq!(samplers.len(), 1, "{shown}");
    let readings = node["readings"].as_u64().unwrap();
    let span_ns = samplers[0].3 - samplers[0].2;
    // A reading every 200 ms of the sampler's span: four samplers would
    // give four times as many.
    let expected = span_ns / 200_000_000;
    assert!(
        readings <= expected + 1 && readings * 2 >= expected && readings >= 5,
        "{readings} readings over {span_ns} ns at 200 ms: {shown}"
    );
    let wall = p["wall_ns"].as_u64().unwrap();
    assert!(span_ns <= wall + 300_000_000, "{shown}\nwall {wall}");

    let m = &node["memory"];
    assert_eq!(m["total_bytes"].as_u64(), Some(total), "{shown}");
    let mean = m["used_bytes_mean"].as_f64().unwrap();
    let (lo, hi) = (
        used_before.min(used_after) as f64,
        used_before.max(used_after) as f64,
    );
    assert!(
        mean >= lo - 0.25 * total as f64 && mean <= hi + 0.25 * total as f64,
        "used {mean} against {used_before} before and {used_after} after: {shown}"
    );
    assert!(m["used_bytes_max"].as_u64().unwrap() <= total, "{shown}");

    // The test's own share over the whole run (start-up included) is a
    // floor for the sampler's, taken while the ranks spun.
    let around = (busy1 - busy0) as f64 / (all1 - all0) as f64;
    let cpu = &node["cpu"];
    let busy = 1.0 - cpu["idle"].as_f64().unwrap() - cpu["iowait"].as_f64().unwrap();
    assert!(
        busy >= around - 0.1 && busy >= 0.7,
        "busy {busy}, the test read {around} around the run: {shown}"
    );
    let shares: f64 = ["user", "system", "idle", "iowait", "steal"]
        .iter()
        .map(|k| cpu[k].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-6, "{shown}");
    assert!(
        node["load"]["runnable_max"].as_u64().unwrap() >= 2,
        "four spinning ranks, but never two runnable: {shown}"
    );

    // The readings are in the time slices too, on the sampler's row only.
    let rows = p["timeslices"]["metrics"]["node.readings"]
        .as_array()
        .unwrap_or_else(|| panic!("no node.readings in timeslices"));
    let per_row: Vec<u64> = rows
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .sum()
        })
        .collect();
    assert_eq!(per_row.iter().sum::<u64>(), readings, "{per_row:?}");
    assert_eq!(per_row[samplers[0].0 as usize], readings, "{per_row:?}");

    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap_or_default();
    let line = format!("Node {} ({readings} readings): CPU ", hostname());
    assert!(
        stdout.contains(&line) || summary.contains(&line),
        "no node line `{line}`:\n{stdout}\n{summary}"
    );
    // The report shows the node's line and its panels over time.
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("<p>{line}")),
        "no node line in the report"
    );
    assert!(
        html.contains(&format!("aria-label=\"node {}\"", hostname())),
        "no node panels in the report"
    );
}

#[test]
fn sensors_off_read_nothing() {
    let dir = scratch("sensors-off");
    let exe = compile("cc", "spin_for.c".as_ref(), &dir, &[]);
    let command = [exe.display().to_string(), "600".to_string()];
    let (out, run_dir) = hark_run(&dir, &["--sensors-ms", "0"], &command);
    assert_exit(&out, 0);
    let off = profile(&run_dir);
    let p = &off["programs"][0];
    assert!(
        p["cpu"]["ranks"].as_array().is_some_and(|r| !r.is_empty()),
        "the run measured nothing: {p}"
    );
    assert!(p.get("nodes").is_none(), "{}", p["nodes"]);
    assert!(p["timeslices"]["metrics"].get("node.readings").is_none());
    // And on, the same run reads the node.
    let (out, run_dir) = hark_run(&dir, &["--sensors-ms", "100"], &command);
    assert_exit(&out, 0);
    let on = profile(&run_dir);
    assert!(on["programs"][0]["nodes"][0]["readings"].as_u64() >= Some(1));
}

/// `sh -c SCRIPT` in scratch directory `tag` under `hark run` with
/// sensors every 200 ms, `script` given the path of `spin_for`; the shell
/// and `sleep` are left unmeasured, so that they cannot take the sampler's
/// name themselves. The profile.
fn spin_script(tag: &str, script: impl Fn(&str) -> String) -> serde_json::Value {
    let dir = scratch(tag);
    let exe = compile("cc", "spin_for.c".as_ref(), &dir, &[]);
    let command = [
        "sh".to_string(),
        "-c".to_string(),
        script(&exe.display().to_string()),
    ];
    let (out, run_dir) = hark_run_env(
        &dir,
        &["--sensors-ms", "200"],
        &command,
        &[("HARK_SKIP", "sh,dash,bash,sleep")],
    );
    assert_exit(&out, 0);
    profile(&run_dir)
}

#[test]
fn another_process_samples_when_the_sampler_exits() {
    // The first process starts 1 s before the second and ends 1 s into it.
    let profile = spin_script("sensors-takeover", |e| {
        format!("{e} 2000 & sleep 1; {e} 3000; wait")
    });
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"], 2, "{}", p["rank_info"]);
    let node = &p["nodes"][0];
    let shown = serde_json::to_string_pretty(node).unwrap();
    let samplers = one_at_a_time(node);
    assert_eq!(samplers.len(), 2, "{shown}");
    let (first, second) = (samplers[0], samplers[1]);
    assert_ne!(first.0, second.0, "{shown}");
    // The series goes on a second past the first sampler's end.
    assert!(
        second.3 >= first.3 + 1_000_000_000,
        "the readings stopped with the first sampler: {shown}"
    );
    assert!(second.1 >= 5, "{shown}");
}

#[test]
fn each_of_two_emulated_nodes_has_its_own_sampler_and_series() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let Some(cluster) = Cluster::up(2) else {
        return;
    };
    probe();
    let dir = shared_scratch("sensors-nodes");
    let exe = compile(OPEN_MPI.cc, "cpu_busy.c".as_ref(), &dir, &[]);
    let run_dir = dir.join("run");
    let mut line = vec![hark().display().to_string()];
    line.extend(["run", "--no-http", "--sensors-ms", "200", "-o"].map(String::from));
    line.extend([run_dir.display().to_string(), "--".into()]);
    line.extend([OPEN_MPI.run, "--oversubscribe", "--host", "n1:2,n2:2"].map(String::from));
    line.extend(["--map-by", "node", "--mca", "btl", "self,tcp", "--mca"].map(String::from));
    line.extend([
        "plm_rsh_agent".into(),
        cluster.rsh_agent().display().to_string(),
    ]);
    line.extend(["-np", "4"].map(String::from));
    line.extend([exe.display().to_string(), "2000".into()]);
    let mut cmd = cluster.command("n1", &line);
    cmd.current_dir(&*dir);
    mpi_env(&mut cmd);
    cmd.env("OMPI_MCA_btl", "self,tcp");
    let out = cmd.output_within().expect("cannot run cluster.sh");
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    let hosts: Vec<&str> = p["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap())
        .collect();
    let nodes = p["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes: {p}"));
    let shown = serde_json::to_string_pretty(&p["nodes"]).unwrap();
    let mut names: Vec<&str> = nodes.iter().map(|n| n["host"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["n1", "n2"], "{shown}");
    for node in nodes {
        let host = node["host"].as_str().unwrap();
        let samplers = one_at_a_time(node);
        assert!(!samplers.is_empty(), "{shown}");
        for s in &samplers {
            assert_eq!(
                hosts[s.0 as usize], host,
                "a rank of another node sampled: {shown}"
            );
        }
        let span = samplers.last().unwrap().3 - samplers[0].2;
        let readings = node["readings"].as_u64().unwrap();
        assert!(
            readings >= 3 && readings <= span / 200_000_000 + samplers.len() as u64,
            "{host}: {readings} readings over {span} ns: {shown}"
        );
        assert!(node["memory"]["total_bytes"].as_u64() > Some(0), "{shown}");
    }
    // n2's ranks stream to hark on n1 over TCP: n2 sends, n1 receives.
    let on = |h: &str| nodes.iter().find(|n| n["host"] == h).unwrap();
    assert!(
        on("n2")["network"]["out_bytes"].as_u64() > Some(0),
        "{shown}"
    );
    assert!(
        on("n1")["network"]["in_bytes"].as_u64() > Some(0),
        "{shown}"
    );
}

#[test]
fn a_sampler_that_forks_and_exits_leaves_the_name_to_the_next_process() {
    // The first process samples, forks a child that runs on 2.5 s and
    // exits at 1 s; the second, started at 0.5 s, must take over then:
    // the child, which never samples, must not keep the name through the
    // socket it inherited.
    let profile = spin_script("sensors-fork", |e| {
        format!("{e} 1000 fork 2500 & sleep 0.5; {e} 3000; wait")
    });
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"], 2, "{}", p["rank_info"]);
    assert_eq!(
        p["children"].as_array().map(Vec::len),
        Some(1),
        "{}",
        p["children"]
    );
    let node = &p["nodes"][0];
    let shown = serde_json::to_string_pretty(node).unwrap();
    let samplers = one_at_a_time(node);
    assert_eq!(samplers.len(), 2, "{shown}");
    assert!(
        samplers[1].3 >= samplers[0].3 + 1_500_000_000,
        "the readings stopped with the first sampler: {shown}"
    );
}
