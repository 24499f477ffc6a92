//! Clock alignment (`docs/analyses.md`, "Time"): rank 1's probe clock is
//! skewed by +50 ms (`HARK_TEST_CLOCK_SKEW_NS`, which also skews its
//! handshake's realtime reading); a few times, rank 0 sleeps 100 ms, then
//! both call `MPI_Barrier`, which they leave at the same instant. Each rank
//! aligns its clock with hark's by a ping-pong with the server. On the
//! aligned timeline the two ranks' barrier leave times agree to a few ms,
//! and the offsets applied put rank 1 50 ms behind rank 0 to within the
//! bounds profile.json states for them, and twice the residual alignment
//! error the summary states: the bound holds, also with both cores kept
//! busy by two more processes (round trips of milliseconds). The same run
//! with the alignment off (`HARK_CLOCK_SYNC=0`, the server keeps the
//! handshake) puts rank 1's leave tens of ms late: the check would fail
//! without the alignment.
//! Real `mpirun`, Open MPI and MPICH.

mod common;

use common::*;
use serde_json::Value;

const SKEW_NS: i64 = 50_000_000;

/// Barriers the program runs.
const ROUNDS: usize = 4;

/// Where each rank left each barrier, in ns on the common timeline, read
/// from the time slices of `MPI_Barrier.time_ns`, where each barrier is a
/// run of slices: the start of its last slice plus the barrier time in it
/// (exact for a rank that waited since before that slice; for a short call
/// inside one slice, the middle of where it can have ended, off by at most
/// half a slice). Also the slice width.
fn barrier_leaves(p: &Value) -> (Vec<Vec<f64>>, f64) {
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
            let mut leaves = Vec::new();
            for (i, &t) in slices.iter().enumerate() {
                let last_of_run = t > 0 && slices.get(i + 1).is_none_or(|&n| n == 0);
                if !last_of_run {
                    continue;
                }
                let start = i as f64 * width;
                let waited_before = i > 0 && slices[i - 1] > 0;
                leaves.push(if waited_before {
                    start + t as f64
                } else {
                    start + (t as f64 + width) / 2.0
                });
            }
            assert_eq!(
                leaves.len(),
                ROUNDS,
                "one run of slices per barrier: {slices:?}"
            );
            leaves
        })
        .collect();
    (leaves, width)
}

/// Rank 1's leave minus rank 0's, per barrier.
fn gaps(leaves: &[Vec<f64>]) -> Vec<f64> {
    leaves[1]
        .iter()
        .zip(&leaves[0])
        .map(|(a, b)| a - b)
        .collect()
}

/// Two processes that keep both cores busy while alive (killed on drop).
struct Load(Vec<std::process::Child>);

impl Load {
    fn start() -> Load {
        Load(
            (0..2)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs the program with rank 1 skewed; `align`: leave the alignment on.
fn run(mpi: Mpi, align: bool) -> Option<Value> {
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return None;
    }
    // Tests run two at a time: each run its own directory (a loaded and an
    // unloaded run of one MPI would otherwise share one, and one's cleanup
    // would remove the other's working directory).
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tag = format!("skew-{}-{align}-{n}", mpi.cc);
    let dir = scratch(&tag);
    let exe = compile(mpi.cc, "barrier_skew.c".as_ref(), &dir, &[]);
    // Only world rank 1 gets the skew: a shell sets it from the launcher's
    // rank variable, then becomes the program (and is not measured).
    let script = format!(
        "r=${{OMPI_COMM_WORLD_RANK:-$PMI_RANK}}; [ \"$r\" = 1 ] && export HARK_TEST_CLOCK_SKEW_NS={SKEW_NS}; exec {} \"$1\"",
        exe.display()
    );
    let mut command = launcher(mpi, 2);
    command.extend([
        "sh".into(),
        "-c".into(),
        script,
        "sh".into(),
        ROUNDS.to_string(),
    ]);
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
    if !test_hooks_or_skip() {
        return;
    }
    let Some(aligned) = run(mpi, true) else {
        return;
    };
    assert_eq!(aligned["ranks"].as_u64(), Some(2));
    let clock = &aligned["clock"];
    let methods: Vec<&str> = (0..2)
        .map(|r| clock["ranks"][r]["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["ping-pong", "ping-pong"], "{clock}");
    assert_eq!(clock["ranks"][1]["reference"].as_str(), Some("hark"));
    bounds_hold(&aligned);

    // A rank that waits may notice the barrier's end late when it does not
    // have a core (4 ranks' worth of work and the server on 2 cores): that
    // only adds, and not every time, so the best of the rounds is checked.
    let (leaves, width) = barrier_leaves(&aligned);
    let best = gaps(&leaves)
        .into_iter()
        .map(f64::abs)
        .fold(f64::MAX, f64::min);
    assert!(
        best < tolerance(width),
        "aligned: barrier leave times {leaves:?} differ by {best} ns at best (slices of {width} ns)"
    );

    // The control: without the alignment the same check fails.
    let unaligned = run(mpi, false).unwrap();
    let clock = &unaligned["clock"];
    assert_eq!(clock["ranks"][1]["method"].as_str(), Some("handshake"));
    let (leaves, width) = barrier_leaves(&unaligned);
    // Rank 1 leaves tens of ms late every time: the 50 ms skew, less or
    // more the handshakes' own errors (the time between a probe's realtime
    // reading and the server's, several ms on a loaded machine). Far
    // outside what the aligned check accepts.
    let best = gaps(&leaves).into_iter().fold(f64::MAX, f64::min);
    assert!(
        best > 2.0 * tolerance(width),
        "unaligned: rank 1 should leave tens of ms late, leaves {leaves:?}"
    );
}

/// Rank 1 reads 50 ms late, so the offset applied to it is 50 ms less
/// than rank 0's: the actual error of the two offsets together is within
/// the sum of the bounds profile.json states for them, in each phase, and
/// within twice the largest residual alignment error (each rank's bound
/// against hark's clock, as the summary states it).
fn bounds_hold(p: &Value) {
    let clock = &p["clock"];
    let residual = clock["residual_ns"].as_u64().unwrap();
    for phase in ["init", "finalize"] {
        let m = |r: usize| &clock["ranks"][r][phase];
        let applied = |r: usize| m(r)["applied_ns"].as_i64().unwrap();
        let bound = |r: usize| m(r)["bound_ns"].as_u64().unwrap();
        let actual = (applied(1) - applied(0) + SKEW_NS).unsigned_abs();
        assert!(
            actual <= bound(0) + bound(1),
            "{phase}: error {actual} ns beyond the bounds {} + {} ns: {clock}",
            bound(0),
            bound(1)
        );
        assert!(
            actual <= 2 * residual,
            "{phase}: error {actual} ns beyond twice the stated residual {residual} ns: {clock}"
        );
    }
    assert!(residual > 0, "{clock}");
}

/// Under load (both cores kept busy): the bounds still hold.
fn check_loaded(mpi: Mpi) {
    if !test_hooks_or_skip() {
        return;
    }
    let load = Load::start();
    let Some(aligned) = run(mpi, true) else {
        return;
    };
    drop(load);
    let clock = &aligned["clock"];
    eprintln!(
        "loaded: residual {} ns, round trips {}/{} ns",
        clock["residual_ns"],
        clock["ranks"][1]["init"]["round_trip_ns"],
        clock["ranks"][1]["finalize"]["round_trip_ns"]
    );
    bounds_hold(&aligned);
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

#[test]
fn open_mpi_loaded() {
    check_loaded(OPEN_MPI);
}

#[test]
fn mpich_loaded() {
    check_loaded(MPICH);
}
