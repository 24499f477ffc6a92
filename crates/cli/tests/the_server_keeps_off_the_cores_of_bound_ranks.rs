//! `hark run` keeps its analysis server's threads (connection readers and
//! board workers) off the cores the measured ranks are bound to when other
//! cores are free, and leaves them unbound when the program is unbound.
//! Checked from outside, in `/proc/<hark>/task/*/status`, while the rank
//! runs.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Per thread of process `pid` named `hark-conn-*` or `hark-board-*`: its
/// name and the CPUs it may run on.
fn server_threads(pid: u32) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let name = field("Name:");
        if name.starts_with("hark-conn") || name.starts_with("hark-board") {
            out.push((name, hark_board_cpus(&field("Cpus_allowed_list:"))));
        }
    }
    out
}

/// `0-3,8` → the listed numbers.
fn hark_board_cpus(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

fn online() -> Vec<usize> {
    hark_board_cpus(
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .unwrap()
            .trim(),
    )
}

/// Starts `hark run -- <launch> <program> <dir>`, waits for the rank to
/// report its CPUs, calls `check` with hark's pid and those CPUs, then lets
/// the rank finish and checks the run succeeded.
fn while_the_rank_runs(dir: &Path, launch: &[String], check: impl FnOnce(u32, &[usize])) {
    probe();
    let exe = compile(OPEN_MPI.cc, Path::new("bound_rank.c"), dir, &[]);
    let mut cmd = Command::new(hark());
    cmd.current_dir(dir)
        .args(["run", "-o"])
        .arg(dir.join("run"))
        .arg("--")
        .args(launch)
        .arg(&exe)
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    mpi_env(&mut cmd);
    let hark = cmd.spawn().expect("cannot run hark");
    let ready = dir.join("ready");
    let until = Instant::now() + Duration::from_secs(120);
    while !ready.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let rank: Vec<usize> = std::fs::read_to_string(&ready)
        .expect("the rank never reported its CPUs")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let checked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(hark.id(), &rank)));
    std::fs::write(dir.join("done"), "").unwrap();
    let out = hark.wait_with_output().unwrap();
    assert_exit(&out, 0);
    if let Err(p) = checked {
        std::panic::resume_unwind(p);
    }
}

#[test]
fn a_rank_bound_to_a_core_keeps_the_server_off_it() {
    if !have(OPEN_MPI.run) || online().len() < 2 {
        eprintln!("skipped: needs Open MPI and two cores");
        return;
    }
    let dir = scratch("placed");
    let launch: Vec<String> = [OPEN_MPI.run, "--bind-to", "core", "-np", "1"]
        .map(String::from)
        .to_vec();
    while_the_rank_runs(&dir, &launch, |hark, rank| {
        assert_eq!(
            rank.len(),
            1,
            "Open MPI bound the rank to one core: {rank:?}"
        );
        // The server moves when the rank's stream arrives: wait for it.
        let until = Instant::now() + Duration::from_secs(30);
        let mut threads = server_threads(hark);
        while Instant::now() < until
            && (threads.iter().all(|(n, _)| !n.starts_with("hark-conn"))
                || threads.iter().any(|(_, cpus)| cpus.contains(&rank[0])))
        {
            std::thread::sleep(Duration::from_millis(50));
            threads = server_threads(hark);
        }
        assert!(
            threads.iter().any(|(n, _)| n.starts_with("hark-conn")),
            "{threads:?}"
        );
        assert!(
            threads.iter().any(|(n, _)| n.starts_with("hark-board")),
            "{threads:?}"
        );
        let free: Vec<usize> = online().into_iter().filter(|c| *c != rank[0]).collect();
        for (name, cpus) in &threads {
            assert_eq!(
                cpus, &free,
                "{name} may run on {cpus:?}, the rank is bound to {rank:?}"
            );
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unbound_program_leaves_the_server_unbound() {
    if !have(OPEN_MPI.run) || online().len() < 2 {
        eprintln!("skipped: needs Open MPI and two cores");
        return;
    }
    let dir = scratch("unplaced");
    let launch: Vec<String> = [OPEN_MPI.run, "--bind-to", "none", "-np", "1"]
        .map(String::from)
        .to_vec();
    while_the_rank_runs(&dir, &launch, |hark, rank| {
        assert_eq!(rank, online(), "the rank is unbound");
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until
            && server_threads(hark)
                .iter()
                .all(|(n, _)| !n.starts_with("hark-conn"))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // The rank's stream has been read since its MPI_Init; give the
        // server time to move, had it wanted to.
        std::thread::sleep(Duration::from_millis(500));
        let threads = server_threads(hark);
        assert!(
            threads.iter().any(|(n, _)| n.starts_with("hark-conn")),
            "{threads:?}"
        );
        for (name, cpus) in &threads {
            assert_eq!(cpus, &online(), "{name} was bound although the rank is not");
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}
