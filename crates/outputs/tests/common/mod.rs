//! A hand-made run shaped like a real one: an MPMD job of two programs,
//! `ocean` on 4 ranks (world ranks 0-3) and `atmos` on 2 (world ranks 4-5),
//! with MPI functions, a halo exchange in a ring, collectives, file I/O,
//! regions, a counter, time slices, wait states with their causes, POP
//! efficiencies and a job digest. Numbers follow simple formulas so that
//! expected outputs can be reasoned about.
#![allow(dead_code)]

pub mod chromium;

use hark_model::*;
use std::collections::BTreeMap;

const MS: u64 = 1_000_000;

fn per_rank(n: usize, f: impl Fn(usize) -> u64) -> Vec<u64> {
    (0..n).map(f).collect()
}

fn function(
    n: usize,
    calls: impl Fn(usize) -> u64,
    bytes: impl Fn(usize) -> u64,
    time: impl Fn(usize) -> u64,
) -> FunctionProfile {
    let time_ns = per_rank(n, &time);
    let calls = per_rank(n, calls);
    let spread = Spread::of(&time_ns.iter().map(|&t| t as f64).collect::<Vec<_>>());
    FunctionProfile {
        min_ns: per_rank(n, |r| time_ns[r].checked_div(calls[r]).unwrap_or(0) / 2),
        max_ns: per_rank(n, |r| (2 * time_ns[r]).checked_div(calls[r]).unwrap_or(0)),
        bytes: per_rank(n, bytes),
        time_ns,
        time_across_ranks: spread,
        calls,
        ..FunctionProfile::default()
    }
}

fn ranks(n: usize, first_world: i32, host: &str, events: u64) -> Vec<RankInfo> {
    (0..n)
        .map(|r| RankInfo {
            world_rank: first_world + r as i32,
            host: host.to_string(),
            pid: 4100 + first_world as u32 + r as u32,
            accounting: Accounting {
                events_written: events + r as u64,
                events_received: events + r as u64,
                events_analysed: events + r as u64,
                events_dropped: 0,
                partial_ranks: 0,
                partial_children: 0,
            },
            partial: false,
            folded: 0,
            ended: Some(hark_model::Ending::Finalize),
            abort_code: None,
        })
        .collect()
}

type Matrix = Vec<Vec<u64>>;

/// A ring: rank r sends `msgs` messages of `size` bytes to r+1 and r-1.
fn ring(n: usize, msgs: u64, size: u64) -> (Matrix, Matrix, Matrix) {
    let mut m = vec![vec![0; n]; n];
    for i in 0..n {
        m[i][(i + 1) % n] += msgs;
        m[i][(i + n - 1) % n] += msgs;
    }
    let b = m
        .iter()
        .map(|row| row.iter().map(|&v| v * size).collect())
        .collect();
    let t = m
        .iter()
        .map(|row| row.iter().map(|&v| v * 2_000).collect())
        .collect();
    (m, b, t)
}

fn timeslices(n: usize, slices: usize, busy: impl Fn(usize, usize) -> u64) -> TimeSlices {
    let slice_ns = 50 * MS;
    let mut metrics = BTreeMap::new();
    metrics.insert(
        "mpi_time_ns".to_string(),
        (0..n)
            .map(|r| (0..slices).map(|k| busy(r, k)).collect())
            .collect(),
    );
    metrics.insert(
        "mpi_calls".to_string(),
        (0..n)
            .map(|r| {
                (0..slices)
                    .map(|k| 100 + (r as u64 * 7 + k as u64 * 13) % 40)
                    .collect()
            })
            .collect(),
    );
    metrics.insert(
        "p2p_bytes".to_string(),
        (0..n)
            .map(|_| {
                (0..slices)
                    .map(|k| if k % 5 == 4 { 0 } else { 64 << 10 })
                    .collect()
            })
            .collect(),
    );
    TimeSlices {
        slice_ns,
        origin_ns: 0,
        metrics,
    }
}

fn ocean() -> Program {
    let n = 4;
    let mpi = ocean_mpi(n);
    let mpi_time_ns = per_rank(n, |r| {
        mpi.values().map(|f: &FunctionProfile| f.time_ns[r]).sum()
    });
    Program {
        name: "ocean".into(),
        command: vec!["./ocean".into(), "-n".into(), "1000".into()],
        ranks: n,
        rank_info: ranks(n, 0, "node01", 41_000),
        wall_ns: 2_450 * MS,
        rank_wall_ns: per_rank(n, |r| 2_440 * MS - r as u64 * 3 * MS),
        mpi_time_ns,
        mpi,
        p2p: ocean_p2p(n),
        collectives: vec![CommCollectives {
            members: vec![0, 1, 2, 3],
            functions: ocean_collectives(),
        }],
        io: Io {
            files: ocean_files(n),
            per_rank: ocean_io_per_rank(n),
        },
        regions: ocean_regions(n),
        timeslices: timeslices(n, 48, |r, k| (10 + (r * 5 + k * 3) % 25) as u64 * MS),
        density: BTreeMap::new(),
        diagnostics: vec![],
        clock: aligned_clock(n),
        ..Program::default()
    }
}

/// The ocean's MPI functions on `n` ranks.
fn ocean_mpi(n: usize) -> BTreeMap<String, FunctionProfile> {
    let mut mpi = BTreeMap::new();
    mpi.insert(
        "MPI_Init".into(),
        function(n, |_| 1, |_| 0, |r| 120 * MS + r as u64 * MS),
    );
    mpi.insert(
        "MPI_Isend".into(),
        function(
            n,
            |_| 2000,
            |_| 2000 * 8192,
            |r| 40 * MS + r as u64 * 2 * MS,
        ),
    );
    mpi.insert(
        "MPI_Irecv".into(),
        function(n, |_| 2000, |_| 2000 * 8192, |_| 12 * MS),
    );
    mpi.insert(
        "MPI_Waitall".into(),
        function(n, |_| 1000, |_| 0, |r| [310, 180, 205, 260][r] * MS),
    );
    mpi.insert(
        "MPI_Allreduce".into(),
        function(n, |_| 1000, |_| 8000, |r| [95, 150, 140, 110][r] * MS),
    );
    mpi.insert(
        "MPI_Bcast".into(),
        function(n, |_| 10, |_| 10 * 4096, |r| 2 * MS + r as u64 * MS),
    );
    mpi.insert(
        "MPI_Barrier".into(),
        function(n, |_| 3, |_| 0, |r| [9, 1, 4, 6][r] * MS),
    );
    mpi.insert("MPI_Finalize".into(), function(n, |_| 1, |_| 0, |_| 3 * MS));
    mpi
}

/// A ring of 1000 messages of 8 KiB a rank, all sent by `MPI_Isend`.
fn ocean_p2p(n: usize) -> P2p {
    let (messages, bytes, time_ns) = ring(n, 1000, 8192);
    let mut by_function = BTreeMap::new();
    by_function.insert(
        "MPI_Isend".to_string(),
        Matrices {
            messages: messages.clone(),
            bytes: bytes.clone(),
            time_ns: time_ns.clone(),
        },
    );
    P2p {
        messages,
        bytes,
        time_ns,
        by_function,
        one_sided: Matrices::default(),
    }
}

/// The ocean's collectives, all on the world.
fn ocean_collectives() -> BTreeMap<String, Totals> {
    let mut world = BTreeMap::new();
    world.insert(
        "MPI_Allreduce".to_string(),
        Totals {
            calls: 4000,
            bytes: 32000,
            time_ns: 495 * MS,
        },
    );
    world.insert(
        "MPI_Bcast".to_string(),
        Totals {
            calls: 40,
            bytes: 163_840,
            time_ns: 14 * MS,
        },
    );
    world.insert(
        "MPI_Barrier".to_string(),
        Totals {
            calls: 12,
            bytes: 0,
            time_ns: 20 * MS,
        },
    );
    world
}

/// The ocean's files: a NetCDF output rank 0 writes, a namelist every rank
/// reads.
fn ocean_files(n: usize) -> Vec<FileIo> {
    let mut out = FileIo {
        path: "/scratch/run42/ocean_0001.nc".into(),
        read_bytes: vec![0; n],
        write_bytes: vec![48 << 20, 0, 0, 0],
        ..FileIo::default()
    };
    out.ops.insert(
        "open".into(),
        Totals {
            calls: 1,
            bytes: 0,
            time_ns: MS / 10,
        },
    );
    out.ops.insert(
        "write".into(),
        Totals {
            calls: 48,
            bytes: 48 << 20,
            time_ns: 85 * MS,
        },
    );
    out.ops.insert(
        "close".into(),
        Totals {
            calls: 1,
            bytes: 0,
            time_ns: MS / 20,
        },
    );
    let mut input = FileIo {
        path: "namelist.ocean".into(),
        read_bytes: vec![2300; n],
        write_bytes: vec![0; n],
        ..FileIo::default()
    };
    input.ops.insert(
        "fopen".into(),
        Totals {
            calls: 4,
            bytes: 0,
            time_ns: MS / 5,
        },
    );
    input.ops.insert(
        "fread".into(),
        Totals {
            calls: 8,
            bytes: 4 * 2300,
            time_ns: MS / 2,
        },
    );
    input.ops.insert(
        "fclose".into(),
        Totals {
            calls: 4,
            bytes: 0,
            time_ns: MS / 10,
        },
    );
    vec![out, input]
}

/// The ocean's I/O calls per rank.
fn ocean_io_per_rank(n: usize) -> Vec<BTreeMap<String, Totals>> {
    let mut per_rank_io = vec![BTreeMap::new(); n];
    per_rank_io[0].insert(
        "write".to_string(),
        Totals {
            calls: 48,
            bytes: 48 << 20,
            time_ns: 85 * MS,
        },
    );
    for io in per_rank_io.iter_mut() {
        io.insert(
            "fread".to_string(),
            Totals {
                calls: 2,
                bytes: 2300,
                time_ns: MS / 8,
            },
        );
    }
    per_rank_io
}

/// The ocean's regions (a time step with its halo exchange and solve) and
/// its counter.
fn ocean_regions(n: usize) -> Regions {
    let mut paths = BTreeMap::new();
    paths.insert(
        "timestep".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| 1900 * MS - r as u64 * 20 * MS),
            exclusive_ns: per_rank(n, |_| 40 * MS),
            counters: BTreeMap::new(),
        },
    );
    paths.insert(
        "timestep/halo".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| [362, 232, 257, 312][r] * MS),
            exclusive_ns: per_rank(n, |r| [362, 232, 257, 312][r] * MS),
            counters: BTreeMap::new(),
        },
    );
    paths.insert(
        "timestep/solve".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| 1498 * MS - r as u64 * 20 * MS),
            exclusive_ns: per_rank(n, |r| 1498 * MS - r as u64 * 20 * MS),
            counters: BTreeMap::new(),
        },
    );
    let mut counters = BTreeMap::new();
    counters.insert(
        "cg_iterations".to_string(),
        CounterStats {
            count: 4000,
            min: 12,
            max: 31,
            mean: 18.25,
        },
    );
    Regions {
        paths,
        counters,
        ..Regions::default()
    }
}

/// One wait-state pattern: per-rank times in ms and instances, all of it
/// in `function` at `callpath`, caused by late ranks in `cause`.
fn pattern(
    time_ms: &[u64],
    instances: &[u64],
    function: &str,
    callpath: &str,
    cause: &str,
) -> WaitPattern {
    let total = WaitCell {
        time_ns: time_ms.iter().sum::<u64>() * MS,
        instances: instances.iter().sum(),
    };
    let one = |key: &str| {
        let mut m = BTreeMap::new();
        if total.instances > 0 {
            m.insert(key.to_string(), total);
        }
        m
    };
    WaitPattern {
        late: Vec::new(),
        time_ns: time_ms.iter().map(|t| t * MS).collect(),
        instances: instances.to_vec(),
        by_function: one(function),
        by_callpath: one(callpath),
        slices: vec![],
        cause_callpaths: one(cause),
    }
}

/// Every pattern of the catalogue, those not listed being zero on `n` ranks.
fn waits(n: usize, listed: Vec<(&str, WaitPattern)>) -> BTreeMap<String, WaitPattern> {
    let mut all: BTreeMap<String, WaitPattern> = [
        "late_sender",
        "late_sender_wrong_order",
        "late_receiver",
        "wait_nxn",
        "wait_barrier",
        "late_broadcast",
        "early_reduce",
    ]
    .into_iter()
    .map(|name| {
        let zero = WaitPattern {
            time_ns: vec![0; n],
            instances: vec![0; n],
            ..WaitPattern::default()
        };
        (name.to_string(), zero)
    })
    .collect();
    for (name, p) in listed {
        all.insert(name.to_string(), p);
    }
    all
}

/// Efficiencies from their four times (in ns), so the identities hold.
pub fn efficiency(mean_useful: u64, max_useful: u64, runtime: u64, ideal: u64) -> Efficiency {
    let f = |a: u64, b: u64| a as f64 / b as f64;
    Efficiency {
        parallel: f(mean_useful, runtime),
        load_balance: f(mean_useful, max_useful),
        communication: f(max_useful, runtime),
        serialisation: f(max_useful, ideal),
        transfer: f(ideal, runtime),
        runtime_ns: runtime,
        mean_useful_ns: mean_useful,
        max_useful_ns: max_useful,
        ideal_runtime_ns: ideal,
        ..Efficiency::default()
    }
}

fn finding(severity: &str, title: &str, detail: &str, time_ms: u64) -> Finding {
    Finding {
        severity: severity.into(),
        title: title.into(),
        detail: detail.into(),
        time_ns: time_ms * MS,
    }
}

/// `ocean` waits in its halo exchange for neighbours still solving, and in
/// its Allreduce for rank 0, which also writes the output file.
fn ocean_why(mut p: Program) -> Program {
    let n = p.ranks;
    p.waits = waits(
        n,
        vec![
            (
                "late_sender",
                pattern(
                    &[150, 30, 60, 110],
                    &[400, 90, 150, 300],
                    "MPI_Waitall",
                    "timestep/halo",
                    "timestep/solve",
                ),
            ),
            (
                "late_receiver",
                pattern(
                    &[4, 2, 3, 1],
                    &[16, 8, 10, 6],
                    "MPI_Waitall",
                    "timestep/halo",
                    "timestep/solve",
                ),
            ),
            (
                "wait_nxn",
                pattern(
                    &[20, 75, 65, 35],
                    &[300, 900, 800, 500],
                    "MPI_Allreduce",
                    "timestep/solve",
                    "timestep/solve",
                ),
            ),
            (
                "wait_barrier",
                pattern(&[8, 0, 3, 5], &[3, 0, 2, 3], "MPI_Barrier", "", ""),
            ),
            (
                "late_broadcast",
                pattern(&[0, 1, 2, 3], &[0, 3, 5, 8], "MPI_Bcast", "", ""),
            ),
        ],
    );
    // time_ns[late][waiting]; each column adds up to that rank's waiting.
    p.wait_causes = WaitCauses {
        time_ns: [
            [0, 100, 70, 120],
            [90, 0, 33, 0],
            [0, 8, 0, 34],
            [92, 0, 30, 0],
        ]
        .iter()
        .map(|row| row.iter().map(|t| t * MS).collect())
        .collect(),
        late_instances: vec![1900, 700, 400, 504],
    };
    // Useful time per rank is wall − MPI: 1849, 1925, 1900, 1866 ms.
    p.efficiency = Some(efficiency(1885 * MS, 1925 * MS, 2440 * MS, 2100 * MS));
    p.efficiency_by_region.insert(
        "timestep".into(),
        efficiency(1500 * MS, 1560 * MS, 1900 * MS, 1700 * MS),
    );
    // 50 ms slices: rank 0 writes its output in slices 20 to 27 and the
    // others wait for it; after slice 46 the program has ended.
    p.efficiency_slices = (0..48u64)
        .map(|k| match k {
            47 => Efficiency::default(),
            20..=27 => efficiency(30 * MS, 44 * MS, 50 * MS, 47 * MS),
            _ => efficiency((38 + k % 3) * MS, (41 + k % 2) * MS, 50 * MS, 45 * MS),
        })
        .collect();
    p.digest = vec![
        finding(
            "medium",
            "Late Sender in MPI_Waitall",
            "Late Sender in MPI_Waitall costs 3.6 % of rank time; ranks 0 and 3 wait longest, \
             for neighbours still in region `timestep/solve`: look at the balance of `timestep/solve`.",
            350,
        ),
        finding(
            "low",
            "Wait at N×N in MPI_Allreduce",
            "Wait at N×N in MPI_Allreduce costs 2.0 % of rank time; rank 0 arrives last in 76 % \
             of the instances, after region `timestep/solve`: look at the balance of `timestep/solve`.",
            195,
        ),
        finding(
            "low",
            "Load imbalance",
            "Load balance is 97.9 %: rank 1 computes 1.925 s, the mean rank 1.885 s.",
            160,
        ),
    ];
    p
}

/// `atmos` ping-pongs: rank 1 waits for rank 0's sends, rank 0 a little
/// for rank 1's receives.
fn atmos_why(mut p: Program) -> Program {
    p.waits = waits(
        2,
        vec![
            (
                "late_sender",
                pattern(&[0, 90], &[0, 400], "MPI_Recv", "", ""),
            ),
            (
                "late_receiver",
                pattern(&[20, 0], &[100, 0], "MPI_Send", "", ""),
            ),
        ],
    );
    p.wait_causes = WaitCauses {
        time_ns: vec![vec![0, 90 * MS], vec![20 * MS, 0]],
        late_instances: vec![400, 100],
    };
    // Useful time per rank: 2135 and 2040 ms.
    p.efficiency = Some(efficiency(2_087_500_000, 2135 * MS, 2376 * MS, 2300 * MS));
    p.digest = vec![finding(
        "low",
        "Late Sender in MPI_Recv",
        "Late Sender in MPI_Recv costs 1.9 % of rank time; rank 1 waits for rank 0 in all 400 instances, at `atmos.f90:120`.",
        90,
    )];
    p.callsites = vec![
        callsite("MPI_Recv", "src/atmos.f90", 120, 1000, 170, Some(90)),
        callsite("write", "src/io.f90", 57, 40, 12, None),
        callsite("MPI_Send", "src/atmos.f90", 98, 1000, 134, None),
    ];
    p
}

/// A call site of the atmosphere at `file:line`; `waited_ms` of Late
/// Sender in its calls.
fn callsite(
    function: &str,
    file: &str,
    line: u32,
    calls: u64,
    time_ms: u64,
    waited_ms: Option<u64>,
) -> Callsite {
    let mut waits = BTreeMap::new();
    if let Some(ms) = waited_ms {
        waits.insert(
            "late_sender".to_string(),
            WaitCell {
                time_ns: ms * MS,
                instances: calls,
            },
        );
    }
    Callsite {
        function: function.into(),
        file: Some(file.into()),
        line: Some(line),
        symbol: Some("atmos_step".into()),
        object: "/scratch/run42/atmos".into(),
        calls,
        bytes: calls * 64,
        time_ns: time_ms * MS,
        waits,
        ..Callsite::default()
    }
}

fn atmos() -> Program {
    let n = 2;
    let mut mpi = BTreeMap::new();
    mpi.insert("MPI_Init".into(), function(n, |_| 1, |_| 0, |_| 118 * MS));
    mpi.insert(
        "MPI_Send".into(),
        function(n, |_| 500, |_| 500 * 65536, |r| [70, 64][r] * MS),
    );
    mpi.insert(
        "MPI_Recv".into(),
        function(n, |_| 500, |_| 500 * 65536, |r| [40, 130][r] * MS),
    );
    mpi.insert(
        "MPI_Reduce".into(),
        function(n, |_| 100, |_| 800, |r| [5, 22][r] * MS),
    );
    mpi.insert("MPI_Finalize".into(), function(n, |_| 1, |_| 0, |_| 2 * MS));
    // Rank 0 also puts 4 KiB into rank 1's window 300 times.
    mpi.insert(
        "MPI_Put".into(),
        function(
            n,
            |r| [300, 0][r],
            |r| [300 * 4096, 0][r],
            |r| [9, 0][r] * MS,
        ),
    );
    let mpi_time_ns = per_rank(n, |r| {
        mpi.values().map(|f: &FunctionProfile| f.time_ns[r]).sum()
    });
    let put = Matrices {
        messages: vec![vec![0, 300], vec![0, 0]],
        bytes: vec![vec![0, 300 * 4096], vec![0, 0]],
        time_ns: vec![vec![0, 9 * MS], vec![0, 0]],
    };
    let messages = vec![vec![0, 500], vec![500, 0]];
    let bytes = vec![vec![0, 500 * 65536], vec![500 * 65536, 0]];
    let time_ns = vec![vec![0, 70 * MS], vec![64 * MS, 0]];
    let mut by_function = BTreeMap::new();
    by_function.insert(
        "MPI_Send".to_string(),
        Matrices {
            messages: messages.clone(),
            bytes: bytes.clone(),
            time_ns: time_ns.clone(),
        },
    );
    by_function.insert("MPI_Put".to_string(), put.clone());
    let mut coll = BTreeMap::new();
    coll.insert(
        "MPI_Reduce".to_string(),
        Totals {
            calls: 200,
            bytes: 1600,
            time_ns: 27 * MS,
        },
    );
    Program {
        name: "atmos".into(),
        command: vec!["./atmos".into(), "--grid".into(), "C48".into()],
        ranks: n,
        rank_info: ranks(n, 4, "node02", 2_200),
        wall_ns: 2_380 * MS,
        rank_wall_ns: vec![2_370 * MS, 2_376 * MS],
        mpi_time_ns,
        mpi,
        p2p: P2p {
            messages,
            bytes,
            time_ns,
            by_function,
            one_sided: put,
        },
        collectives: vec![CommCollectives {
            members: vec![0, 1],
            functions: coll,
        }],
        io: Io {
            files: vec![],
            per_rank: vec![BTreeMap::new(); n],
        },
        regions: Regions::default(),
        timeslices: timeslices(n, 48, |r, k| (4 + (r * 11 + k) % 9) as u64 * MS),
        density: BTreeMap::new(),
        diagnostics: vec![
            "Rank 1 left region \"solve\" it never entered; the exit was ignored.".into(),
        ],
        ..Program::default()
    }
}

/// Every rank aligned with rank 0 at init and finalize, drifting 1 µs per rank.
fn aligned_clock(n: usize) -> Clock {
    let ranks: Vec<RankClock> = (0..n as i64)
        .map(|r| RankClock {
            method: "ping-pong".into(),
            init: Some(ClockMeasurement {
                offset_ns: -r * 1000,
                round_trip_ns: 2_000 * r as u64,
                ..Default::default()
            }),
            finalize: Some(ClockMeasurement {
                offset_ns: -r * 2000,
                round_trip_ns: 2_000 * r as u64,
                ..Default::default()
            }),
            residual_ns: 1000 * r as u64,
            reference: "world rank 0".into(),
        })
        .collect();
    Clock {
        residual_ns: ranks.iter().map(|r| r.residual_ns).max().unwrap_or(0),
        ranks,
        violations: 0,
    }
}

/// Density maps of a few per-rank metrics, as the server lays them out.
fn density(metrics: &[(&str, Vec<u64>)]) -> BTreeMap<String, DensityMap> {
    metrics
        .iter()
        .map(|(name, values)| {
            let spread = Spread::of(&values.iter().map(|&v| v as f64).collect::<Vec<_>>());
            let imbalance = if spread.mean > 0.0 {
                spread.max / spread.mean
            } else {
                0.0
            };
            let columns = (values.len() as f64).sqrt().ceil() as usize;
            (
                name.to_string(),
                DensityMap {
                    columns,
                    values: values.clone(),
                    spread,
                    imbalance,
                },
            )
        })
        .collect()
}

fn with_density(mut p: Program) -> Program {
    let mut named: Vec<(String, Vec<u64>)> = vec![("mpi_time_ns".into(), p.mpi_time_ns.clone())];
    for (name, f) in &p.mpi {
        named.push((format!("{name}.time_ns"), f.time_ns.clone()));
        named.push((format!("{name}.calls"), f.calls.clone()));
    }
    let refs: Vec<(&str, Vec<u64>)> = named.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    p.density = density(&refs);
    p
}

/// The fixture run.
pub fn two_programs() -> Run {
    let programs = vec![
        ocean_why(with_density(ocean())),
        atmos_why(with_density(atmos())),
    ];
    let mut accounting = Accounting::default();
    for p in &programs {
        for r in &p.rank_info {
            accounting.events_written += r.accounting.events_written;
            accounting.events_received += r.accounting.events_received;
            accounting.events_analysed += r.accounting.events_analysed;
        }
    }
    Run {
        hark_version: "0.1.0".into(),
        accounting,
        programs,
        missing: Vec::new(),
        exit: None,
        command_pid: None,
    }
}
