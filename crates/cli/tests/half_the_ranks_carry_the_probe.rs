//! A job in which only some ranks carry the probe (a site module that sets
//! `LD_PRELOAD` on one node only), or some cannot reach hark, runs to its
//! end as without Hark: nothing the probe does over a socket waits for
//! another rank (the clock alignment pings hark itself, `docs/mpi.md`).
//! Before, the alignment's `MPI_Comm_dup` of the world left rank 0 waiting
//! in `MPI_Init` for ever. The ranks that never connected are named in the
//! summary's first line and in `profile.json`, from the world size the
//! launcher gave the handshakes; a probe that cannot connect names its rank
//! and host. Real `mpirun`, Open MPI and MPICH, bounded like every
//! end-to-end test (`common::limit`).

mod common;

use common::*;

/// How world rank 1 is kept out: `unset` (no probe at all) or a server
/// address nobody listens on.
fn run(mpi: Mpi, keep_out: &str) -> Option<(std::process::Output, std::path::PathBuf, Scratch)> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    let dir = scratch(&format!("half-{}-{}", mpi.cc, keep_out.len()));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    // A shell picks world rank 1 from the launcher's rank variable, keeps
    // it out, then becomes the program (and is not measured itself).
    let script = format!(
        "r=${{OMPI_COMM_WORLD_RANK:-$PMI_RANK}}; [ \"$r\" = 1 ] && {keep_out}; exec {} 50 100",
        exe.display()
    );
    let mut command = launcher(mpi, 2);
    command.extend(["sh".into(), "-c".into(), script]);
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &[("HARK_SKIP", "sh")]);
    Some((out, run_dir, dir))
}

/// Runs the job with rank 1 kept out and checks it: the summary's first
/// line ends with `said`; hark's output and the profile.
fn check(
    mpi: Mpi,
    keep_out: &str,
    said: &str,
) -> Option<(std::process::Output, serde_json::Value)> {
    let (out, run_dir, _dir) = run(mpi, keep_out)?;
    // As without Hark: the ring ran to its end on both ranks.
    assert_exit(&out, 0);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let first = summary.lines().next().unwrap_or_default();
    assert!(first.ends_with(said), "first line: {first}\n{summary}");
    let profile = profile(&run_dir);
    let missing = &profile["missing"];
    assert_eq!(missing.as_array().map(Vec::len), Some(1), "{missing}");
    assert_eq!(missing[0]["world_size"].as_u64(), Some(2), "{missing}");
    assert_eq!(missing[0]["measured"].as_u64(), Some(1), "{missing}");
    assert_eq!(missing[0]["ranks"], serde_json::json!([1]), "{missing}");
    // Rank 0 is measured, and aligned with hark's clock on its own.
    let clock = &profile["programs"][0]["clock"]["ranks"][0];
    assert_eq!(clock["method"].as_str(), Some("ping-pong"), "{clock}");
    assert_eq!(clock["reference"].as_str(), Some("hark"), "{clock}");
    Some((out, profile))
}

/// The summary's line for rank 1 without a probe, which says nothing.
const SILENT: &str = "1 of 2 ranks measured: rank 1 never reached hark";

/// Rank 1 has no probe at all.
const NO_PROBE: &str = "unset LD_PRELOAD";
/// Rank 1's probe cannot reach hark.
const UNREACHABLE: &str = "export HARK_ADDR=unix:/nonexistent/hark.sock";

#[test]
fn open_mpi_rank_1_without_the_probe() {
    check(OPEN_MPI, NO_PROBE, SILENT);
}

#[test]
fn mpich_rank_1_without_the_probe() {
    check(MPICH, NO_PROBE, SILENT);
}

/// The probe that cannot connect says which rank on which host it is, and
/// why; hark passes that on and names both in the summary and the profile.
fn check_unreachable(mpi: Mpi) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let reason = "No such file or directory (os error 2)";
    let line = format!("1 of 2 ranks measured: rank 1 on {host} could not reach hark: {reason}");
    let Some((out, profile)) = check(mpi, UNREACHABLE, &line) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = format!("rank 1 on {host} cannot reach the Hark server at");
    assert!(stderr.contains(&said), "no {said:?} in:\n{stderr}");
    let unreached = &profile["missing"][0]["unreached"];
    assert_eq!(
        unreached,
        &serde_json::json!([{"rank": 1, "host": host, "reason": reason}]),
        "{unreached}"
    );
}

#[test]
fn open_mpi_rank_1_cannot_reach_hark() {
    check_unreachable(OPEN_MPI);
}

#[test]
fn mpich_rank_1_cannot_reach_hark() {
    check_unreachable(MPICH);
}
