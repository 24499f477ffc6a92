//! Ranks on one host read one clock (`HARK_CLOCK=monotonic`), so the true
//! offset from each of them to hark's clock is one and the same, and each
//! rank's ping-pong estimate lies within its half round trip (plus the
//! first one's) of the first rank's: every rank of the host is given that
//! one offset (`docs/analyses.md`, "Time"). No receive then completes
//! before its send began. Without the rule the estimates' noise
//! (microseconds with 4 ranks on 2 cores) gave every rank an offset of its
//! own and made a share of the receives complete before their sends. The
//! residual alignment error is a bound (half a round trip and more), no
//! longer 0, but small: the round trips of a Unix socket.
//! Real `mpirun`, Open MPI and MPICH: the ring, many small messages.

mod common;

use common::*;

fn check(mpi: Mpi) {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch(&format!("one-clock-{}", mpi.cc));
    let exe = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(mpi, 4);
    command.extend([exe.display().to_string(), "3000".into(), "1".into()]);
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &[("HARK_CLOCK", "monotonic")]);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    let clock = &profile["programs"][0]["clock"];
    let ranks = clock["ranks"].as_array().expect("clock.ranks");
    assert_eq!(ranks.len(), 4, "{clock}");
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(
            rank["method"].as_str(),
            Some("ping-pong"),
            "rank {r}: {clock}"
        );
        for phase in ["init", "finalize"] {
            assert_eq!(
                rank[phase]["applied_ns"], ranks[0][phase]["applied_ns"],
                "rank {r}, {phase}: one host, one offset: {clock}"
            );
        }
    }
    // None, Open MPI and MPICH. (MPICH showed a few under load while each
    // rank interpolated the host's two offsets over its own measurement
    // moments: docs/analyses.md, "Time".)
    let violations = clock["violations"].as_u64().unwrap_or(u64::MAX);
    assert_eq!(violations, 0, "{clock}");
    // A bound of round trips over a Unix socket: microseconds when quiet,
    // at most milliseconds on a machine as loaded as this suite's.
    let residual = clock["residual_ns"].as_u64().unwrap();
    assert!(residual > 0 && residual < 10_000_000, "{clock}");
    // The ring's messages were all matched: the check had receives to judge.
    let late = &profile["programs"][0]["waits"]["late_sender"]["instances"];
    assert!(late.as_array().is_some_and(|v| !v.is_empty()), "{late}");
}

#[test]
fn open_mpi() {
    check(OPEN_MPI);
}

#[test]
fn mpich() {
    check(MPICH);
}
