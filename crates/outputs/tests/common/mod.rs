//! A hand-made run shaped like a real one: an MPMD job of two programs,
//! `ocean` on 4 ranks (world ranks 0-3) and `atmos` on 2 (world ranks 4-5),
//! with MPI functions, a halo exchange in a ring, collectives, file I/O,
//! regions, a counter and time slices. Numbers follow simple formulas so
//! that expected outputs can be reasoned about.
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
    let mpi_time_ns = per_rank(n, |r| {
        mpi.values().map(|f: &FunctionProfile| f.time_ns[r]).sum()
    });
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
    let mut paths = BTreeMap::new();
    paths.insert(
        "timestep".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| 1900 * MS - r as u64 * 20 * MS),
            exclusive_ns: per_rank(n, |_| 40 * MS),
        },
    );
    paths.insert(
        "timestep/halo".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| [362, 232, 257, 312][r] * MS),
            exclusive_ns: per_rank(n, |r| [362, 232, 257, 312][r] * MS),
        },
    );
    paths.insert(
        "timestep/solve".to_string(),
        RegionProfile {
            calls: vec![1000; n],
            inclusive_ns: per_rank(n, |r| 1498 * MS - r as u64 * 20 * MS),
            exclusive_ns: per_rank(n, |r| 1498 * MS - r as u64 * 20 * MS),
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
    Program {
        name: "ocean".into(),
        command: vec!["./ocean".into(), "-n".into(), "1000".into()],
        ranks: n,
        rank_info: ranks(n, 0, "node01", 41_000),
        wall_ns: 2_450 * MS,
        rank_wall_ns: per_rank(n, |r| 2_440 * MS - r as u64 * 3 * MS),
        mpi_time_ns,
        mpi,
        p2p: P2p {
            messages,
            bytes,
            time_ns,
            by_function,
        },
        collectives: vec![CommCollectives {
            members: vec![0, 1, 2, 3],
            functions: world,
        }],
        io: Io {
            files: vec![out, input],
            per_rank: per_rank_io,
        },
        regions: Regions { paths, counters },
        timeslices: timeslices(n, 48, |r, k| (10 + (r * 5 + k * 3) % 25) as u64 * MS),
        density: BTreeMap::new(),
        diagnostics: vec![],
        children: vec![],
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
    let mpi_time_ns = per_rank(n, |r| {
        mpi.values().map(|f: &FunctionProfile| f.time_ns[r]).sum()
    });
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
        children: vec![],
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
    let programs = vec![with_density(ocean()), with_density(atmos())];
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
    }
}
