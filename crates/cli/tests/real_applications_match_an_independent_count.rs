//! Programs nobody here wrote — Debian's LAMMPS (the Lennard-Jones melt from
//! `lammps-examples`) and the HPC Challenge benchmark `hpcc` — measured at
//! np 2 through Open MPI's `mpirun`: their output is unchanged, and the
//! calls and bytes in `profile.json` equal an independent count.
//!
//! The independent count comes from `tests/programs/count_mpi.c`, a small
//! PMPI-style library compiled here with `mpicc` and preloaded *before*
//! Hark's probe in the same run: it counts each call of the functions it
//! wraps (and the bytes each send-type call sends, count × type size) before
//! passing it on, and writes its totals per rank at `MPI_Finalize`. It shares
//! no code with Hark.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Functions whose bytes are what the send moves (count × type size), the
/// same definition for Hark and the counter.
const SEND_BYTES: &[&str] = &[
    "MPI_Send",
    "MPI_Isend",
    "MPI_Ssend",
    "MPI_Rsend",
    "MPI_Sendrecv",
];

/// `function -> (calls, bytes)` per rank, from the counter's files.
fn read_counts(dir: &Path, np: usize) -> Vec<BTreeMap<String, (u64, u64)>> {
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
fn compare(profile: &serde_json::Value, counts: &[BTreeMap<String, (u64, u64)>]) -> usize {
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
        if SEND_BYTES.contains(&f.as_str()) {
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

/// Builds the counter with Open MPI's mpicc.
fn counter(dir: &Path) -> std::path::PathBuf {
    let so = dir.join("count_mpi.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/count_mpi.c");
    let out = std::process::Command::new(OPEN_MPI.cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    so
}

/// `hark run --lossless` with the counter preloaded first.
fn counted_run(dir: &Path, command: &[String]) -> (std::process::Output, std::path::PathBuf) {
    let counts = dir.join("counts");
    std::fs::create_dir_all(&counts).unwrap();
    probe();
    let run_dir = dir.join("run");
    let mut cmd = std::process::Command::new(hark());
    cmd.current_dir(dir)
        .env("LD_PRELOAD", counter(dir))
        .env("COUNT_DIR", &counts)
        .args(["run", "--lossless", "-o"])
        .arg(&run_dir)
        .arg("--")
        .args(command);
    mpi_env(&mut cmd);
    (cmd.output().unwrap(), run_dir)
}

/// LAMMPS output without the lines that report timings.
fn without_timings(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| {
            !["time", "CPU", "Performance", "|", "---"]
                .iter()
                .any(|t| l.contains(t))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn lammps_melt_on_two_ranks_matches_an_independent_count() {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.cc) {
        eprintln!(
            "skipped: needs lammps, lammps-examples and Open MPI (scripts/deps.sh installs them)"
        );
        return;
    }
    let dir = scratch("lammps");
    // The example runs 250 steps; 100 keep the test short.
    let text = std::fs::read_to_string(input)
        .unwrap()
        .replace("run\t\t250", "run\t\t100");
    assert!(text.contains("run\t\t100"), "in.melt changed shape");
    std::fs::write(dir.join("in.melt"), text).unwrap();
    let mut command = launcher(OPEN_MPI, 2);
    command.extend([
        "lmp".into(),
        "-in".into(),
        "in.melt".into(),
        "-log".into(),
        "none".into(),
    ]);

    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "LAMMPS fails without hark");
    let (out, run_dir) = counted_run(&dir, &command);
    assert_exit(&out, 0);
    let (with, without) = (without_timings(&out.stdout), without_timings(&bare.stdout));
    assert!(
        with.iter().any(|l| l.contains("Step")),
        "no thermo output: {with:#?}"
    );
    assert_eq!(
        with, without,
        "LAMMPS's output changed (timing lines aside)"
    );

    let profile = profile(&run_dir);
    let n = compare(&profile, &read_counts(&dir.join("counts"), 2));
    eprintln!("LAMMPS: {n} MPI functions agree with the independent count");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hpcc_on_two_ranks_matches_an_independent_count() {
    let example = Path::new("/usr/share/doc/hpcc/examples/_hpccinf.txt");
    if !have("hpcc") || !example.exists() || !have(OPEN_MPI.cc) {
        eprintln!("skipped: needs hpcc and Open MPI (scripts/deps.sh installs them)");
        return;
    }
    let dir = scratch("hpcc");
    // The shipped example on a 1 x 2 grid with N = 200: seconds, not minutes.
    let input = std::fs::read_to_string(example)
        .unwrap()
        .replace("1000         Ns", "200          Ns")
        .replace("80           NBs", "40           NBs")
        .replace("2            Ps", "1            Ps");
    assert!(
        input.contains("200          Ns"),
        "hpccinf.txt changed shape"
    );
    std::fs::write(dir.join("hpccinf.txt"), input).unwrap();
    let command = {
        let mut c = launcher(OPEN_MPI, 2);
        c.push("hpcc".into());
        c
    };
    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "hpcc fails without hark");
    let bare_results = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
    std::fs::remove_file(dir.join("hpccoutf.txt")).unwrap();

    let (out, run_dir) = counted_run(&dir, &command);
    assert_exit(&out, 0);
    assert_eq!(out.stdout, bare.stdout, "hpcc's output changed");
    let results = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
    assert!(
        results.contains("End of HPC Challenge tests."),
        "hpcc did not finish"
    );
    // Both runs pass the same checks (the lines also hold timings).
    let verdicts = |s: &str| (s.matches("PASSED").count(), s.matches("FAILED").count());
    assert_eq!(verdicts(&results), verdicts(&bare_results));
    assert_eq!(verdicts(&results).1, 0, "hpcc reports a failed check");

    let profile = profile(&run_dir);
    let n = compare(&profile, &read_counts(&dir.join("counts"), 2));
    eprintln!("hpcc: {n} MPI functions agree with the independent count");
    std::fs::remove_dir_all(&dir).unwrap();
}
