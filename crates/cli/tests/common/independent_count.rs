//! The independent count of MPI calls and bytes: `tests/programs/count_mpi.c`,
//! a small PMPI-style library compiled here with `mpicc` and preloaded
//! *before* Hark's probe in the same run, which shares no code with Hark
//! (the tests that use it include it by `#[path]`, beside `common`).
#![allow(dead_code)]

use super::common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Functions whose bytes are what the send moves (count × type size), the
/// same definition for Hark and the counter.
pub const SEND_BYTES: &[&str] = &[
    "MPI_Send",
    "MPI_Isend",
    "MPI_Ssend",
    "MPI_Rsend",
    "MPI_Sendrecv",
    // MPI 4.0: large counts, and a partitioned send (all its partitions,
    // once per `MPI_Start`).
    "MPI_Send_c",
    "MPI_Isend_c",
    "MPI_Sendrecv_c",
    "MPI_Psend_init",
];

/// The one-sided data movement functions the counter counts, with their
/// bytes as `docs/mpi.md` defines them (the same for Hark and the counter).
pub const ONE_SIDED: [&str; 6] = [
    "MPI_Put",
    "MPI_Get",
    "MPI_Accumulate",
    "MPI_Get_accumulate",
    "MPI_Fetch_and_op",
    "MPI_Compare_and_swap",
];

/// `function -> (calls, bytes)` per rank, from the counter's files.
pub fn read_counts(dir: &Path, np: usize) -> Vec<BTreeMap<String, (u64, u64)>> {
    (0..np)
        .map(|r| {
            let path = dir.join(format!("count.{r}"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("the counter wrote no {}: {e}", path.display()));
            text.lines()
                .map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (
                        f[0].to_string(),
                        (f[1].parse().unwrap(), f[2].parse().unwrap()),
                    )
                })
                .collect()
        })
        .collect()
}

/// Compares every counted function with Hark's profile, rank by rank.
pub fn compare(profile: &serde_json::Value, counts: &[BTreeMap<String, (u64, u64)>]) -> usize {
    let np = counts.len();
    let mut functions: Vec<&String> = counts.iter().flat_map(|c| c.keys()).collect();
    functions.sort();
    functions.dedup();
    assert!(
        functions.len() >= 5,
        "the counter saw too little: {functions:?}"
    );
    for f in &functions {
        let want_calls: Vec<u64> = counts
            .iter()
            .map(|c| c.get(*f).map_or(0, |v| v.0))
            .collect();
        assert_eq!(
            per_rank(profile, 0, f, "calls"),
            want_calls,
            "{f} calls per rank"
        );
        if SEND_BYTES.contains(&f.as_str()) || ONE_SIDED.contains(&f.as_str()) {
            let want_bytes: Vec<u64> = counts
                .iter()
                .map(|c| c.get(*f).map_or(0, |v| v.1))
                .collect();
            assert_eq!(
                per_rank(profile, 0, f, "bytes"),
                want_bytes,
                "{f} bytes per rank"
            );
        }
    }
    assert_eq!(profile["programs"][0]["ranks"].as_u64(), Some(np as u64));
    assert_eq!(lost(profile), 0, "events lost");
    functions.len()
}

/// Builds the counter with `mpi`'s mpicc.
pub fn counter(dir: &Path, mpi: Mpi) -> std::path::PathBuf {
    let so = dir.join(format!("count_mpi.{}.so", mpi.cc));
    if so.exists() {
        return so;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/count_mpi.c");
    let out = std::process::Command::new(mpi.cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&src)
        .arg("-ldl")
        .output_within()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// `hark run --lossless <hark_args>` into `<dir>/<name>` with the counter
/// (built for Open MPI) preloaded first, its counts in `<dir>/<name>-counts`
/// ("counts" for the run named "run").
pub fn counted_run_with(
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
) -> (std::process::Output, std::path::PathBuf) {
    counted_run_on(OPEN_MPI, dir, name, hark_args, command)
}

/// [`counted_run_with`] for a program of `mpi`.
pub fn counted_run_on(
    mpi: Mpi,
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
) -> (std::process::Output, std::path::PathBuf) {
    counted_run_env(mpi, dir, name, hark_args, command, &[])
}

/// [`counted_run_on`] with `env` set for `hark run` (and so, `HARK_*`, for
/// the probes).
pub fn counted_run_env(
    mpi: Mpi,
    dir: &Path,
    name: &str,
    hark_args: &[&str],
    command: &[String],
    env: &[(&str, &str)],
) -> (std::process::Output, std::path::PathBuf) {
    let counts = dir.join(counts_of(name));
    std::fs::create_dir_all(&counts).unwrap();
    probe();
    let run_dir = dir.join(name);
    let mut cmd = std::process::Command::new(hark());
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir, mpi))
        .env("COUNT_DIR", &counts)
        .args(["run", "--lossless", "-o"])
        .arg(&run_dir)
        .args(hark_args)
        .arg("--")
        .args(command)
        .envs(env.iter().copied());
    mpi_env(&mut cmd);
    (cmd.output_within().unwrap(), run_dir)
}

/// The counter's directory of the run named `name`.
pub fn counts_of(name: &str) -> String {
    if name == "run" {
        "counts".into()
    } else {
        format!("{name}-counts")
    }
}
