//! Events lost to a crash or a kill are never reported as "0 lost". The
//! probe flushes on SIGSEGV, SIGTERM (and SIGINT, SIGBUS, SIGFPE, SIGABRT)
//! before the signal takes its course, and in `MPI_Abort`; a rank that still
//! ends without its end record (SIGKILL) makes the loss "unknown". A rank
//! that faults says where, even through a null function pointer (which
//! leaves an MPI library's own crash report without a frame).
//!
//! Launchers differ in how they end the other ranks: Open MPI's sends them
//! SIGTERM (which the probe flushes on), MPICH's Hydra SIGKILL as soon as
//! one rank has died (which no process can act on): under MPICH those ranks
//! are partial and the summary says their loss is unknown.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const N: u64 = 100;

fn summary(run_dir: &Path) -> String {
    std::fs::read_to_string(run_dir.join("summary.txt")).unwrap()
}

fn partial(p: &Value) -> Vec<bool> {
    p["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partial"].as_bool().unwrap())
        .collect()
}

/// The summary never says "0 lost" while a rank is partial; it says how
/// many ranks' loss is unknown.
fn assert_loss_line(profile: &Value, text: &str) {
    let partial = profile["accounting"]["partial_ranks"].as_u64().unwrap();
    let last = text.lines().rev().find(|l| l.contains(" events")).unwrap();
    if partial == 0 {
        assert!(last.ends_with(" 0 lost"), "{text}");
    } else {
        let ranks = if partial == 1 { "rank" } else { "ranks" };
        assert!(
            last.ends_with(&format!("loss unknown for {partial} {ranks}")),
            "{text}"
        );
        assert!(!text.contains(" 0 lost"), "{text}");
    }
}

fn build(mpi: Mpi, tag: &str) -> Option<(Scratch, String)> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    let dir = scratch(&format!("{tag}-{}", mpi.cc));
    let exe = compile(mpi.cc, "die.c".as_ref(), &dir, &[]);
    Some((dir, exe.display().to_string()))
}

/// `die MODE`: rank 1 faults (`segv`: writes through a null pointer;
/// `call`: calls through one) after N barriers.
fn segv(mpi: Mpi, mode: &str) {
    let Some((dir, exe)) = build(mpi, mode) else {
        return;
    };
    let mut command = launcher(mpi, 2);
    command.extend([exe, mode.into(), N.to_string()]);
    let (out, run_dir) = hark_run(&dir, &[], &command);
    // Where rank 1 died: in the program's own code, or called from it.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = match mode {
        "segv" => "at address 0x0: in die-",
        _ => "at address 0x0: a call through a null function pointer (to 0x0), called from die-",
    };
    assert!(
        stderr.contains("hark: SIGSEGV (rank 1, pid ") && stderr.contains(said),
        "no line saying {said:?}: {stderr}"
    );
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    // Rank 1 died of SIGSEGV and flushed first: all its barriers are there.
    assert!(!partial(p)[1], "{}", summary(&run_dir));
    assert_eq!(per_rank(&profile, 0, "MPI_Barrier", "calls")[1], N);
    assert_loss_line(&profile, &summary(&run_dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rank_killed_by_sigsegv_flushes_its_events_under_open_mpi() {
    segv(OPEN_MPI, "segv");
}

#[test]
fn a_rank_killed_by_sigsegv_flushes_its_events_under_mpich() {
    segv(MPICH, "segv");
}

#[test]
fn a_rank_that_calls_a_null_pointer_says_from_where_under_open_mpi() {
    segv(OPEN_MPI, "call");
}

#[test]
fn a_rank_that_calls_a_null_pointer_says_from_where_under_mpich() {
    segv(MPICH, "call");
}

/// The case: rank 0 aborts; rank 1 had recorded 101 events.
fn abort(mpi: Mpi) -> (Value, String) {
    let Some((dir, exe)) = build(mpi, "abort") else {
        return (Value::Null, String::new());
    };
    let mut command = launcher(mpi, 2);
    command.extend([exe, "abort".into(), N.to_string()]);
    let (_, run_dir) = hark_run(&dir, &[], &command);
    let profile = profile(&run_dir);
    let text = summary(&run_dir);
    let p = &profile["programs"][0];
    assert!(!partial(p)[0], "MPI_Abort flushes: {text}");
    assert_eq!(per_rank(&profile, 0, "MPI_Abort", "calls"), vec![1, 0]);
    assert_loss_line(&profile, &text);
    std::fs::remove_dir_all(&dir).unwrap();
    (profile, text)
}

#[test]
fn after_mpi_abort_the_other_ranks_events_arrive_under_open_mpi() {
    let (profile, text) = abort(OPEN_MPI);
    if profile.is_null() {
        return;
    }
    // Open MPI ends rank 1 with SIGTERM: it flushes its 101 barriers.
    assert_eq!(
        partial(&profile["programs"][0]),
        vec![false, false],
        "{text}"
    );
    assert_eq!(
        per_rank(&profile, 0, "MPI_Barrier", "calls"),
        vec![N, N + 1]
    );
}

#[test]
fn after_mpi_abort_the_other_ranks_loss_is_unknown_under_mpich() {
    let (profile, text) = abort(MPICH);
    if profile.is_null() {
        return;
    }
    // Hydra ends rank 1 with SIGKILL: nothing can be flushed, and the
    // summary says so instead of "0 lost".
    assert_eq!(
        partial(&profile["programs"][0]),
        vec![false, true],
        "{text}"
    );
    assert!(text.contains("loss unknown for 1 rank"), "{text}");
}

/// Runs `die loop N` under `hark run` until every rank has called
/// MPI_Barrier N times, then sends `signal` to each rank, or to the
/// launcher (`to_launcher`), as a batch system's time limit does; returns
/// the profile and the summary.
fn kill_running_job(mpi: Mpi, signal: &str, to_launcher: bool) -> Option<(Value, String)> {
    let to = if to_launcher { "launcher" } else { "ranks" };
    let (dir, exe) = build(mpi, &format!("kill{signal}-{to}"))?;
    probe();
    let mut command = launcher(mpi, 2);
    command.extend([exe, "loop".into(), N.to_string()]);
    let run_dir = dir.join("run");
    let mut cmd = Command::new(hark());
    cmd.current_dir(&dir)
        .arg("run")
        .arg("-o")
        .arg(&run_dir)
        .arg("--")
        .args(&command)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    mpi_env(&mut cmd);
    let mut hark = cmd.spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    let pids: Vec<String> = (0..2)
        .map(|r| loop {
            if let Ok(pid) = std::fs::read_to_string(dir.join(format!("ready-{r}"))) {
                break pid.trim().to_string();
            }
            assert!(Instant::now() < until, "rank {r} never got ready");
            std::thread::sleep(Duration::from_millis(10));
        })
        .collect();
    let targets = if to_launcher {
        // The launcher is hark's only child.
        let out = Command::new("pgrep")
            .args(["-P", &hark.id().to_string()])
            .output_within()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    } else {
        pids
    };
    assert!(!targets.is_empty());
    // A target that has died meanwhile (the launcher ending the job after
    // the first rank) makes `kill` complain, and is no failure.
    Command::new("kill")
        .arg(format!("-{signal}"))
        .args(&targets)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while hark.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < until,
            "hark did not end after the ranks were killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let profile = profile(&run_dir);
    let text = summary(&run_dir);
    assert_loss_line(&profile, &text);
    std::fs::remove_dir_all(&dir).unwrap();
    Some((profile, text))
}

/// SIGTERM to both ranks under Open MPI: both flush, none is partial,
/// nothing is lost, and every barrier up to the kill is there (the last
/// second included).
#[test]
fn sigterm_to_the_ranks_of_a_running_job_flushes_every_rank_under_open_mpi() {
    let Some((profile, text)) = kill_running_job(OPEN_MPI, "TERM", false) else {
        return;
    };
    assert_eq!(
        partial(&profile["programs"][0]),
        vec![false, false],
        "{text}"
    );
    assert_eq!(lost(&profile), 0, "{text}");
    for calls in per_rank(&profile, 0, "MPI_Barrier", "calls") {
        assert!(calls >= N, "{calls} barriers: {text}");
    }
}

/// SIGTERM to the launcher, which passes it on to the ranks; or, under
/// MPICH, to the ranks themselves. One rank flushes and dies first, and
/// the launcher may then SIGKILL the other (Hydra at once, Open MPI's
/// mpirun after a moment), done flushing or not: at least one rank is
/// whole, and a rank that is not makes the loss unknown, never 0.
fn sigterm(mpi: Mpi, to_launcher: bool) {
    let Some((profile, text)) = kill_running_job(mpi, "TERM", to_launcher) else {
        return;
    };
    let partial = partial(&profile["programs"][0]);
    let barriers = per_rank(&profile, 0, "MPI_Barrier", "calls");
    let whole: Vec<u64> = (0..2)
        .filter(|&r| !partial[r])
        .map(|r| barriers[r])
        .collect();
    assert!(!whole.is_empty(), "no rank flushed on SIGTERM: {text}");
    for calls in whole {
        assert!(calls >= N, "{calls} barriers: {text}");
    }
}

#[test]
fn sigterm_to_the_launcher_of_a_running_job_flushes_under_open_mpi() {
    sigterm(OPEN_MPI, true);
}

#[test]
fn sigterm_to_the_launcher_of_a_running_job_flushes_under_mpich() {
    sigterm(MPICH, true);
}

#[test]
fn sigterm_to_the_ranks_of_a_running_job_flushes_under_mpich() {
    sigterm(MPICH, false);
}

fn sigkill(mpi: Mpi) {
    let Some((profile, text)) = kill_running_job(mpi, "KILL", false) else {
        return;
    };
    assert_eq!(partial(&profile["programs"][0]), vec![true, true], "{text}");
    assert!(text.contains("loss unknown for 2 ranks"), "{text}");
}

#[test]
fn sigkill_of_a_running_job_makes_the_loss_unknown_under_open_mpi() {
    sigkill(OPEN_MPI);
}

#[test]
fn sigkill_of_a_running_job_makes_the_loss_unknown_under_mpich() {
    sigkill(MPICH);
}
