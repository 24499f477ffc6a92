//! Clock alignment (issue 8, "One timeline across ranks"): rank 1's probe
//! clock is skewed by +50 ms (`HARK_TEST_CLOCK_SKEW_NS`, which also skews
//! its handshake's realtime reading), rank 0 sleeps 200 ms, then both call
//! `MPI_Barrier`, which they leave at the same instant. On the aligned
//! timeline the two ranks' barrier leave times agree to a few ms, and the
//! ping-pong measured the skew to within its round trip. The same run with
//! the alignment off (`HARK_CLOCK_SYNC=0`, the server keeps the handshake)
//! puts rank 1's leave tens of ms late: the check would fail without the
//! alignment.
//! Real `mpirun`, Open MPI and MPICH.

mod common;

use common::*;
use serde_json::Value;

const SKEW_NS: i64 = 50_000_000;

/// Where each rank left the barrier, in ns on the common timeline, read from
/// the time slices of `MPI_Barrier.time_ns`: the end of the last slice with
/// barrier time, less the part of that slice after the call (exact for a
/// rank that waited since before that slice; for a rank that arrived inside
/// it, off by at most one slice).
fn barrier_leaves(p: &Value) -> (Vec<f64>, f64) {
    let ts = &p["timeslices"];
    let width = ts["slice_ns"].as_u64().unwrap() as f64;
    let per_rank = ts["metrics"]["MPI_Barrier.time_ns"]
        .as_array()
        .expect("MPI_Barrier.time_ns slices");
    let leaves = per_rank
        .iter()
        .map(|slices| {
            let slices: Vec<u64> = slices
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            let last = slices.iter().rposition(|&t| t > 0).expect("a barrier");
            let waited_before = last > 0 && slices[last - 1] > 0;
            let start = last as f64 * width;
            if waited_before {
                start + slices[last] as f64
            } else {
                // A short call inside one slice: its end is somewhere in
                // [start + duration, start + width]; take the middle.
                start + (slices[last] as f64 + width) / 2.0
            }
        })
        .collect();
    (leaves, width)
}

/// Runs the program with rank 1 skewed; `align`: leave the alignment on.
fn run(mpi: Mpi, align: bool) -> Option<Value> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    let tag = format!("skew-{}-{align}", mpi.cc);
    let dir = scratch(&tag);
    let exe = compile(mpi.cc, "barrier_skew.c".as_ref(), &dir, &[]);
    // Only world rank 1 gets the skew: a shell sets it from the launcher's
    // rank variable, then becomes the program (and is not measured).
    let script = format!(
        "r=${{OMPI_COMM_WORLD_RANK:-$PMI_RANK}}; [ \"$r\" = 1 ] && export HARK_TEST_CLOCK_SKEW_NS={SKEW_NS}; exec {}",
        exe.display()
    );
    let mut command = launcher(mpi, 2);
    command.extend(["sh".into(), "-c".into(), script]);
    let env = [
        ("HARK_SKIP", "sh"),
        ("HARK_CLOCK_SYNC", if align { "1" } else { "0" }),
    ];
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &env);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    assert_eq!(lost(&profile), 0, "events lost");
    Some(profile["programs"][0].clone())
}

fn check(mpi: Mpi) {
    let Some(aligned) = run(mpi, true) else {
        return;
    };
    assert_eq!(aligned["ranks"].as_u64(), Some(2));
    let clock = &aligned["clock"];
    let methods: Vec<&str> = (0..2)
        .map(|r| clock["ranks"][r]["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["ping-pong", "ping-pong"], "{clock}");
    assert_eq!(clock["ranks"][0]["init"]["offset_ns"].as_i64(), Some(0));
    // Rank 1 reads 50 ms late: rank 0's clock is 50 ms behind it.
    for phase in ["init", "finalize"] {
        let m = &clock["ranks"][1][phase];
        let offset = m["offset_ns"].as_i64().unwrap();
        let round_trip = m["round_trip_ns"].as_i64().unwrap();
        assert!(
            (offset + SKEW_NS).abs() <= round_trip / 2 + 1_000_000,
            "{phase}: offset {offset} ns, round trip {round_trip} ns"
        );
    }

    let (leaves, width) = barrier_leaves(&aligned);
    let gap = (leaves[1] - leaves[0]).abs();
    assert!(
        gap < tolerance(width),
        "aligned: barrier leave times {leaves:?} differ by {gap} ns (slices of {width} ns)"
    );

    // The control: without the alignment the same check fails.
    let unaligned = run(mpi, false).unwrap();
    let clock = &unaligned["clock"];
    assert_eq!(clock["ranks"][1]["method"].as_str(), Some("handshake"));
    let (leaves, width) = barrier_leaves(&unaligned);
    let late = leaves[1] - leaves[0];
    // Rank 1 leaves tens of ms late: the 50 ms skew, less or more the
    // handshakes' own errors (the time between a probe's realtime reading
    // and the server's, several ms on a loaded machine). Far outside what
    // the aligned check accepts.
    assert!(
        late > 2.0 * tolerance(width),
        "unaligned: rank 1 should leave tens of ms late, leaves {leaves:?}"
    );
}

/// How far apart the leave times may be on the aligned timeline: 3 ms, or
/// a slice if slices are wider (the short barrier's end is known to a
/// slice).
fn tolerance(slice_ns: f64) -> f64 {
    3_000_000f64.max(slice_ns)
}

#[test]
fn open_mpi() {
    check(OPEN_MPI);
}

#[test]
fn mpich() {
    check(MPICH);
}
