//! Under `hark run --analysers`, an analyser rank that dies (SIGKILL) makes
//! the launcher end the job: the programs are not left hanging on their
//! streams, `hark run` ends, says what happened, and writes the run from
//! what every analyser's keeper kept, the dead analyser's included (its
//! keeper outlives it): `docs/analysers.md`, "When a rank dies".

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const N: u64 = 40;
const NP: usize = 3;

/// The analyser ranks of the job writing into `run_dir` (a `hark
/// mpi-analyser` whose parent is not one: the keepers are their children).
fn analyser_ranks(run_dir: &Path) -> Vec<(u32, String)> {
    let cmdline = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    // `hark mpi-analyser ... --output <run_dir>`, not the launcher's line.
    let ours = |line: &str| {
        let words: Vec<&str> = line.split('\0').collect();
        words.get(1) == Some(&"mpi-analyser")
            && words.contains(&run_dir.display().to_string().as_str())
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || !ours(&cmdline(&pid)) {
            continue;
        }
        if !ours(&cmdline(&stat_field(&pid, 1))) {
            out.push((pid.parse().unwrap(), cmdline(&pid)));
        }
    }
    out
}

/// Each analyser rank's keeper is in a process group of its own (out of
/// the launchers' reach) but in its rank's session: a session of its own
/// is a scheduling autogroup of its own where the kernel makes them, and
/// there a keeper was starved under load while its rank waited for it
/// (`docs/analysers.md`, "Writers that give up at `MPI_Finalize`").
fn keepers_keep_their_ranks_session(ranks: &[(u32, String)]) {
    for (rank, _) in ranks {
        let rank = rank.to_string();
        let keepers: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()) && stat_field(p, 1) == rank)
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|b| String::from_utf8_lossy(&b).contains("mpi-analyser"))
            })
            .collect();
        assert_eq!(
            keepers.len(),
            1,
            "analyser rank {rank}'s keeper: {keepers:?}"
        );
        let k = &keepers[0];
        assert_eq!(stat_field(k, 2), *k, "the keeper leads a process group");
        assert_eq!(
            stat_field(k, 3),
            stat_field(&rank, 3),
            "the keeper is in its rank's session"
        );
    }
}

fn analyser_dies(mpi: Mpi, analysers: u32) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    probe();
    let dir = scratch(&format!("dying-analyser-{analysers}-{}", mpi.cc));
    let exe = compile(mpi.cc, "dies_mid_run.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, NP);
    command.extend([exe.display().to_string(), "wait".into(), N.to_string()]);
    let run_dir = dir.join("run");
    let count = analysers.to_string();
    let mut cmd = hark_run_command(
        &dir,
        &run_dir,
        &["--no-http", "--analysers", &count],
        &command,
    );
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let hark = cmd.spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    for r in 0..NP {
        while !dir.join(format!("ready-{r}")).exists() {
            assert!(Instant::now() < until, "rank {r} never got ready");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let ranks = analyser_ranks(&run_dir);
    assert_eq!(ranks.len(), analysers as usize, "{ranks:?}");
    keepers_keep_their_ranks_session(&ranks);
    let (victim, _) = ranks.last().unwrap();
    Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap();
    // Bounded: a hang fails here instead of hanging the suite.
    let out = wait_within(
        hark,
        Duration::from_secs(90),
        "hark run did not end after an analyser rank was killed",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("before the analysers merged"), "{err}");
    assert!(
        err.contains(&format!("{analysers} of {analysers} analyser rank(s)")),
        "the dead analyser's keeper kept its partial too: {err}"
    );
    let profile = profile(&run_dir);
    assert_eq!(
        per_rank(&profile, 0, "MPI_Barrier", "calls"),
        vec![N; NP],
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_analyser_ends_the_job_under_open_mpi_with_one_analyser() {
    analyser_dies(OPEN_MPI, 1);
}

#[test]
fn a_killed_analyser_ends_the_job_under_open_mpi_with_two_analysers() {
    analyser_dies(OPEN_MPI, 2);
}

#[test]
fn a_killed_analyser_ends_the_job_under_mpich_with_one_analyser() {
    analyser_dies(MPICH, 1);
}

#[test]
fn a_killed_analyser_ends_the_job_under_mpich_with_two_analysers() {
    analyser_dies(MPICH, 2);
}
