//! Every metric family is also kept per time slice, and the slices of a run
//! ten times as long take no more room.
mod common;
use common::*;
use hark_engine::Config;
use hark_model::Program;
use hark_wire::op::{self, io};
use hark_wire::NameKind;
use std::collections::BTreeMap;

const RANKS: i32 = 4;
/// A new checkpoint file every this many iterations: files outgrow the
/// per-family limit, as a long run's would.
const CHECKPOINT_EVERY: u64 = 10;

fn config() -> Config {
    Config {
        slices: 16,
        slice_shift: 4,
        ..Config::default()
    }
}

fn checkpoint(k: u64) -> String {
    format!("/tmp/chk.{k:04}")
}

/// A 4-rank ring: every iteration each rank sends to its right neighbour
/// (blocking, or through a request every third time), receives from its
/// left, reduces on the world, broadcasts on its pair every fifth time,
/// writes a shared file, sets a counter that goes below zero, and runs in a
/// region; every [`CHECKPOINT_EVERY`] iterations it writes a new checkpoint.
fn ring(iterations: u64) -> Vec<Proc> {
    (0..RANKS)
        .map(|r| {
            let right = (r + 1) % RANKS;
            let left = (r + RANKS - 1) % RANKS;
            let mut defs = vec![
                comm(1, &[0, 1, 2, 3]),
                comm(2, &[r & !1, r | 1]),
                file(1, "/tmp/out.dat"),
                name(1, NameKind::Counter, "residual"),
                name(2, NameKind::Region, "step"),
            ];
            defs.extend(
                (0..iterations.div_ceil(CHECKPOINT_EVERY))
                    .map(|k| file(10 + k as u32, &checkpoint(k))),
            );
            let mut events = Vec::new();
            for i in 0..iterations {
                let t = 1000 * i;
                let b = 64 + i % 7;
                events.push(ev(op::REGION_BEGIN, t, t).obj(2));
                if i % 3 == 0 {
                    events.extend([
                        mpi("MPI_Isend", t, t + 5).peer(right).bytes(b).extra(i),
                        mpi("MPI_Wait", t + 5, t + 40).bytes(1),
                        ev(op::COMPLETE_SEND, t + 5, t + 40)
                            .peer(right)
                            .bytes(b)
                            .extra(i),
                    ]);
                } else {
                    events.push(mpi("MPI_Send", t, t + 50).peer(right).bytes(b));
                }
                events.push(mpi("MPI_Recv", t + 50, t + 90).peer(left).bytes(b));
                events.push(mpi("MPI_Allreduce", t + 100, t + 200).obj(1).bytes(8));
                if i % 5 == 0 {
                    events.push(mpi("MPI_Bcast", t + 200, t + 260).obj(2).bytes(16));
                }
                events.push(ev(io::WRITE, t + 300, t + 350).obj(1).peer(5).bytes(100));
                if i % CHECKPOINT_EVERY == 0 {
                    let id = 10 + (i / CHECKPOINT_EVERY) as u32;
                    events.push(ev(io::WRITE, t + 350, t + 400).obj(id).peer(6).bytes(1000));
                    events.push(ev(io::READ, t + 400, t + 420).obj(id).peer(6).bytes(10));
                }
                let residual = (i % 11) as i64 - 5 + r as i64;
                events.push(
                    ev(op::COUNTER, t + 500, t + 500)
                        .obj(1)
                        .bytes(residual as u64),
                );
                // A region that spans a slice edge whatever the width.
                events.push(ev(op::REGION_END, t + 990, t + 990).obj(2));
            }
            Proc::mpi("ring", r, RANKS).defs(defs).pack(events).end()
        })
        .collect()
}

fn sum(row: &[u64]) -> u64 {
    row.iter().sum()
}

/// The metric's slices of rank `r`, summed (0 if the metric is absent).
fn sliced(p: &Program, metric: &str, r: usize) -> u64 {
    p.timeslices
        .metrics
        .get(metric)
        .map_or(0, |rows| sum(&rows[r]))
}

/// The same metric over all ranks whose name starts with `prefix` and ends
/// with `field`.
fn sliced_family(p: &Program, prefix: &str, field: &str) -> u64 {
    p.timeslices
        .metrics
        .iter()
        .filter(|(m, _)| m.starts_with(prefix) && m.ends_with(field))
        .map(|(_, rows)| rows.iter().map(|r| sum(r)).sum::<u64>())
        .sum()
}

#[test]
fn per_slice_values_sum_to_the_totals_of_every_family() {
    let p = run_with(&ring(200), config()).remove(0);
    let t = &p.timeslices;
    let n = RANKS as usize;
    for rows in t.metrics.values() {
        assert_eq!(rows.len(), n);
        assert!(rows.iter().all(|r| r.len() <= 16));
    }
    for r in 0..n {
        // MPI profile per function.
        for (f, prof) in &p.mpi {
            assert_eq!(sliced(&p, &format!("{f}.calls"), r), prof.calls[r], "{f}");
            assert_eq!(sliced(&p, &format!("{f}.bytes"), r), prof.bytes[r], "{f}");
            assert_eq!(
                sliced(&p, &format!("{f}.time_ns"), r),
                prof.time_ns[r],
                "{f}"
            );
        }
        // Point-to-point: per rank, and per destination.
        assert_eq!(sliced(&p, "p2p_messages", r), sum(&p.p2p.messages[r]));
        assert_eq!(sliced(&p, "p2p_bytes", r), sum(&p.p2p.bytes[r]));
        for to in 0..n {
            let (m, b) = (
                format!("p2p_to:{to}.messages"),
                format!("p2p_to:{to}.bytes"),
            );
            assert_eq!(sliced(&p, &m, r), p.p2p.messages[r][to], "{r} → {to}");
            assert_eq!(sliced(&p, &b, r), p.p2p.bytes[r][to], "{r} → {to}");
        }
        let p2p_time: u64 = ["MPI_Send", "MPI_Isend", "MPI_Recv"]
            .iter()
            .map(|f| p.mpi[*f].time_ns[r])
            .sum();
        assert_eq!(sliced(&p, "p2p_time_ns", r), p2p_time);
        // Regions.
        assert_eq!(
            sliced(&p, "region:step.calls", r),
            p.regions.paths["step"].calls[r]
        );
        assert_eq!(
            sliced(&p, "region:step.inclusive_ns", r),
            p.regions.paths["step"].inclusive_ns[r]
        );
    }
    // Collectives per communicator, numbered as `collectives` lists them.
    assert_eq!(p.collectives.len(), 3, "world and two pairs");
    for (i, c) in p.collectives.iter().enumerate() {
        let total = |f: fn(&hark_model::Totals) -> u64| c.functions.values().map(f).sum::<u64>();
        assert_eq!(
            sliced_family(&p, &format!("comm:{i}."), "calls"),
            total(|t| t.calls)
        );
        assert_eq!(
            sliced_family(&p, &format!("comm:{i}."), "bytes"),
            total(|t| t.bytes)
        );
        assert_eq!(
            sliced_family(&p, &format!("comm:{i}."), "time_ns"),
            total(|t| t.time_ns)
        );
    }
    assert_eq!(
        sliced_family(&p, "", "collective_calls"),
        p.collectives
            .iter()
            .flat_map(|c| c.functions.values())
            .map(|t| t.calls)
            .sum::<u64>()
    );
    // I/O per file: the busiest files by name, the rest together.
    let files: BTreeMap<&str, &hark_model::FileIo> =
        p.io.files.iter().map(|f| (f.path.as_str(), f)).collect();
    assert_eq!(files.len(), 21, "the shared file and 20 checkpoints");
    let ops = |f: &hark_model::FileIo| f.ops.values().map(|t| t.calls).sum::<u64>();
    let shared = files["/tmp/out.dat"];
    for r in 0..n {
        assert_eq!(
            sliced(&p, "file:/tmp/out.dat.write_bytes", r),
            shared.write_bytes[r]
        );
        assert_eq!(sliced(&p, "file:/tmp/out.dat.ops", r), 200);
        let first = files[checkpoint(0).as_str()];
        let name = format!("file:{}.read_bytes", checkpoint(0));
        assert_eq!(sliced(&p, &name, r), first.read_bytes[r]);
    }
    assert!(t.metrics.contains_key("file:<other files>.ops"));
    assert!(!t
        .metrics
        .contains_key(&format!("file:{}.ops", checkpoint(19))));
    let file_metrics = t.metrics.keys().filter(|m| m.ends_with(".ops")).count();
    assert_eq!(
        file_metrics, 17,
        "16 files of their own and the others together"
    );
    assert_eq!(
        sliced_family(&p, "file:", ".ops"),
        files.values().map(|f| ops(f)).sum::<u64>()
    );
    assert_eq!(
        sliced_family(&p, "file:", ".write_bytes"),
        files.values().flat_map(|f| &f.write_bytes).sum::<u64>()
    );
    assert_eq!(
        sliced_family(&p, "file:", ".time_ns"),
        files
            .values()
            .flat_map(|f| f.ops.values())
            .map(|t| t.time_ns)
            .sum::<u64>()
    );
    // Counters: count and sum exactly; min, max and last as values.
    let c = &p.regions.counters["residual"];
    assert_eq!(sliced_family(&p, "counter:residual.", ".count"), c.count);
    let signed = |m: &str, r: usize, i: usize| {
        let v = |m: &str| t.metrics.get(m).map_or(0, |rows| rows[r][i]) as i64;
        v(m) - v(&format!("{m}_negative"))
    };
    let total: i64 = (0..n)
        .map(|r| sliced(&p, "counter:residual.sum", r) as i64)
        .sum::<i64>()
        - (0..n)
            .map(|r| sliced(&p, "counter:residual.sum_negative", r) as i64)
            .sum::<i64>();
    assert_eq!(total as f64, c.mean * c.count as f64);
    let counts = &t.metrics["counter:residual.count"];
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    for (r, row) in counts.iter().enumerate() {
        let busy: Vec<usize> = (0..row.len()).filter(|&i| row[i] > 0).collect();
        for &i in &busy {
            min = min.min(signed("counter:residual.min", r, i));
            max = max.max(signed("counter:residual.max", r, i));
        }
        // Rank r's last value: iteration 199, (199 % 11) - 5 + r.
        let last = *busy.last().unwrap();
        assert_eq!(signed("counter:residual.last", r, last), 1 - 5 + r as i64);
    }
    assert_eq!((min, max), (c.min, c.max));
}

/// The model's time slices: metric names, and values stored.
fn shape(p: &Program) -> (Vec<String>, usize, usize) {
    let t = &p.timeslices;
    let values: usize = t.metrics.values().flatten().map(Vec::len).sum();
    let rows: usize = t.metrics.values().map(Vec::len).sum();
    (t.metrics.keys().cloned().collect(), rows, values)
}

#[test]
fn ten_times_the_events_store_no_more_values() {
    let short = run_with(&ring(200), config()).remove(0);
    let long = run_with(&ring(2000), config()).remove(0);
    let (names, rows, values) = shape(&short);
    let (long_names, long_rows, long_values) = shape(&long);
    assert_eq!(names, long_names, "the same metrics");
    assert_eq!(rows, long_rows, "the same rows");
    // Each row holds at most `slices` values, so both runs are held in
    // the same bound; the slices of the long run are wider, not more.
    let bound = rows * 16;
    assert!(
        values <= bound && long_values <= bound,
        "{values} {long_values} ≤ {bound}"
    );
    assert_eq!(long_values, bound, "the long run fills every slice");
    assert!(long.timeslices.slice_ns > short.timeslices.slice_ns);
    // 10× the events, 10× the checkpoint files: the JSON of the slices grows
    // only by the digits of larger values.
    let size = |p: &Program| serde_json::to_string(&p.timeslices).unwrap().len();
    assert!(
        size(&long) < size(&short) * 3 / 2,
        "{} bytes for 10× the events, against {}",
        size(&long),
        size(&short)
    );
    for p in [&short, &long] {
        assert!(
            p.diagnostics
                .iter()
                .any(|d| d.contains("files beyond the 16 busiest")),
            "{:?}",
            p.diagnostics
        );
    }
}

#[test]
fn above_64_ranks_destinations_are_not_sliced_and_the_model_says_so() {
    let n = 65;
    let procs: Vec<Proc> = (0..n)
        .map(|r| {
            Proc::mpi("wide", r, n)
                .pack(vec![mpi("MPI_Send", 10, 20).peer((r + 1) % n).bytes(8)])
                .end()
        })
        .collect();
    let p = run_with(&procs, config()).remove(0);
    assert!(!p
        .timeslices
        .metrics
        .keys()
        .any(|m| m.starts_with("p2p_to:")));
    assert_eq!(sliced_family(&p, "", "p2p_messages"), 65);
    assert!(
        p.diagnostics
            .iter()
            .any(|d| d.contains("omitted above 64 ranks")),
        "{:?}",
        p.diagnostics
    );
}
