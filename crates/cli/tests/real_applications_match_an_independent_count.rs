//! Programs nobody here wrote — Debian's LAMMPS (the Lennard-Jones melt from
//! `lammps-examples`), the HPC Challenge benchmark `hpcc`, NWChem (an SCF of
//! water; Global Arrays over MPI-3 one-sided calls) and Quantum ESPRESSO (an
//! SCF of silicon; Fortran through `mpif.h`) through Open MPI's `mpirun`,
//! and ScaLAPACK's LU tests (BLACS over MPI, Fortran and C)
//! through MPICH's — measured at np 2: their output is unchanged, and the
//! calls and bytes in `profile.json` equal an independent count.
//!
//! The independent count comes from `tests/programs/count_mpi.c`, a small
//! PMPI-style library compiled here with `mpicc` and preloaded *before*
//! Hark's probe in the same run: it counts each call of the functions it
//! wraps (and the bytes each send-type call sends, count × type size) before
//! passing it on, and writes its totals per rank at `MPI_Finalize`. It shares
//! no code with Hark.

mod common;
#[path = "common/independent_count.rs"]
mod independent_count;

use common::*;
use independent_count::{compare, counted_run_on, counted_run_with, read_counts, ONE_SIDED};
use std::path::Path;

/// `hark run --lossless` with the counter preloaded first.
fn counted_run(dir: &Path, command: &[String]) -> (std::process::Output, std::path::PathBuf) {
    counted_run_with(dir, "run", &[], command)
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

/// hpcc's shipped example on a 1 x 2 grid with N = 200 (seconds, not
/// minutes) in a scratch directory named `tag`; `None` (and a line saying
/// why) when hpcc or Open MPI is missing.
fn hpcc_input(tag: &str) -> Option<Scratch> {
    let example = Path::new("/usr/share/doc/hpcc/examples/_hpccinf.txt");
    if !have("hpcc") || !example.exists() || !have(OPEN_MPI.cc) {
        eprintln!("skipped: needs hpcc and Open MPI (scripts/deps.sh installs them)");
        return None;
    }
    let dir = scratch(tag);
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
    Some(dir)
}

/// hpcc's verdicts, from the summary lines ("5 tests completed and passed
/// residual checks."): PTRANS prints a CPU row, with its PASSED, only when
/// the CPU time it measured is above zero, so counting PASSED counts
/// timings too.
fn hpcc_verdicts(results: &str) -> Vec<String> {
    results
        .lines()
        .filter(|l| l.contains("tests completed and") || l.contains("tests skipped"))
        .map(|l| l.trim().trim_end_matches(['.', ',']).to_string())
        .collect()
}

/// hpcc finished in `dir` and passed the checks it passed without Hark
/// (`bare`).
fn hpcc_passed(dir: &Path, bare: &str) {
    let results = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
    assert!(
        results.contains("End of HPC Challenge tests."),
        "hpcc did not finish"
    );
    let checks = hpcc_verdicts(&results);
    assert_eq!(checks, hpcc_verdicts(bare));
    assert!(checks.len() >= 4, "hpcc printed no summary of its checks");
    assert!(
        checks
            .iter()
            .all(|l| !l.contains("failed") || l.starts_with("0 ")),
        "hpcc reports a failed check: {checks:?}"
    );
    assert!(!results.contains("FAILED"), "hpcc reports a failed check");
}

#[test]
fn hpcc_on_two_ranks_matches_an_independent_count() {
    let Some(dir) = hpcc_input("hpcc") else {
        return;
    };
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
    hpcc_passed(&dir, &bare_results);

    let profile = profile(&run_dir);
    let n = compare(&profile, &read_counts(&dir.join("counts"), 2));
    eprintln!("hpcc: {n} MPI functions agree with the independent count");
}

/// Where Debian's `libopenblas0-openmp` puts OpenBLAS's OpenMP build
/// (`scripts/deps.sh` keeps it from being the system BLAS).
const OPENBLAS_OPENMP: &str = "/usr/lib/x86_64-linux-gnu/openblas-openmp";

/// hpcc as a hybrid code: its BLAS is OpenBLAS's OpenMP build (gcc's
/// libgomp) with `OMP_NUM_THREADS=2`, at np 2. The BLAS's parallel regions
/// and second threads appear in the profile, MPI calls and bytes still
/// equal the independent count, and hpcc's checks pass as without Hark.
#[test]
fn hpcc_on_openblas_s_openmp_build_shows_its_threads_and_matches_an_independent_count() {
    if !Path::new(OPENBLAS_OPENMP).join("libblas.so.3").exists() {
        eprintln!("skipped: needs libopenblas0-openmp (scripts/deps.sh installs it)");
        return;
    }
    let Some(dir) = hpcc_input("hpcc-openmp") else {
        return;
    };
    let command = {
        let mut c = launcher(OPEN_MPI, 2);
        c.extend(["-x".into(), "OMP_NUM_THREADS=2".into(), "-x".into()]);
        c.push(format!("LD_LIBRARY_PATH={OPENBLAS_OPENMP}"));
        c.push("hpcc".into());
        c
    };
    let bare = bare_run(&dir, &command);
    assert!(
        bare.status.success(),
        "hpcc on OpenBLAS-OpenMP fails without hark"
    );
    let bare_results = std::fs::read_to_string(dir.join("hpccoutf.txt")).unwrap();
    std::fs::remove_file(dir.join("hpccoutf.txt")).unwrap();

    let (out, run_dir) = counted_run(&dir, &command);
    assert_exit(&out, 0);
    hpcc_passed(&dir, &bare_results);
    let profile = profile(&run_dir);
    let n = compare(&profile, &read_counts(&dir.join("counts"), 2));

    let p = &profile["programs"][0];
    let shown = format!("threads: {}\nopenmp: {}", p["threads"], p["openmp"]);
    // The BLAS's parallel regions, in its library, with teams of two.
    let regions = p["openmp"]["regions"].as_array().expect(&shown);
    assert!(
        regions.iter().any(|r| r["kind"] == "parallel"
            && r["threads"] == 2
            && r["calls"].as_u64().unwrap_or(0) > 0
            && r["name"].as_str().unwrap_or("").contains("openblas")),
        "no parallel region of OpenBLAS with 2 threads: {shown}"
    );
    // Every rank has its BLAS thread beside its main one; the main thread
    // holds the MPI time, the BLAS thread none.
    let ranks = p["threads"].as_array().expect(&shown);
    assert_eq!(ranks.len(), 2, "{shown}");
    for threads in ranks {
        let threads = threads.as_array().expect(&shown);
        assert_eq!(threads.len(), 2, "{shown}");
        assert!(threads[0]["mpi_ns"].as_u64().unwrap_or(0) > 0, "{shown}");
        assert_eq!(threads[1]["mpi_ns"], 0, "{shown}");
    }
    eprintln!(
        "hpcc on OpenBLAS-OpenMP: {n} MPI functions agree with the independent count; {shown}"
    );
}

/// NWChem's SCF of water ([`NWCHEM_WATER`]): besides the calls and bytes
/// per function, the one-sided matrices hold in each origin's row what the
/// counter counted there.
#[test]
fn nwchem_scf_on_two_ranks_matches_an_independent_count() {
    if !have("nwchem.openmpi") || !have(OPEN_MPI.cc) {
        eprintln!("skipped: needs nwchem-openmpi and Open MPI (scripts/deps.sh installs them)");
        return;
    }
    let dir = scratch("nwchem");
    std::fs::write(dir.join("h2o.nw"), NWCHEM_WATER).unwrap();
    let mut command = launcher(OPEN_MPI, 2);
    command.extend(["nwchem.openmpi".into(), "h2o.nw".into()]);
    // The energy NWChem prints, to 12 decimals: the same with Hark.
    let energy = |out: &[u8]| -> String {
        String::from_utf8_lossy(out)
            .lines()
            .find(|l| l.contains("Total SCF energy"))
            .unwrap_or_else(|| panic!("no SCF energy in:\n{}", String::from_utf8_lossy(out)))
            .trim()
            .to_string()
    };

    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "NWChem fails without hark");
    let (out, run_dir) = counted_run(&dir, &command);
    assert_exit(&out, 0);
    assert_eq!(energy(&out.stdout), energy(&bare.stdout));

    let counts = read_counts(&dir.join("counts"), 2);
    // The one-sided calls are there to compare, on every rank.
    for f in ["MPI_Get_accumulate", "MPI_Accumulate"] {
        for (rank, c) in counts.iter().enumerate() {
            let (calls, bytes) = c.get(f).copied().unwrap_or_default();
            assert!(calls > 0 && bytes > 0, "rank {rank} made no {f} with data");
        }
    }
    let profile = profile(&run_dir);
    let n = compare(&profile, &counts);
    eprintln!("NWChem: {n} MPI functions agree with the independent count");
    // The one-sided matrices, from origin to target: each rank's row holds
    // what it counted, operations and bytes.
    let counted = |pick: fn(&(u64, u64)) -> u64| -> Vec<u64> {
        (counts.iter())
            .map(|c| ONE_SIDED.iter().filter_map(|f| c.get(*f)).map(pick).sum())
            .collect()
    };
    let rows = |m: &serde_json::Value| -> Vec<u64> {
        (m.as_array().expect("a matrix").iter())
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .sum()
            })
            .collect()
    };
    let o = &profile["programs"][0]["p2p"]["one_sided"];
    assert_eq!(
        rows(&o["messages"]),
        counted(|c| c.0),
        "one-sided operations per origin"
    );
    assert_eq!(
        rows(&o["bytes"]),
        counted(|c| c.1),
        "one-sided bytes per origin"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Quantum ESPRESSO's SCF of silicon ([`QE_SILICON`]): Fortran calling MPI
/// through `mpif.h`, which Open MPI forwards to `PMPI_*` directly, so both
/// Hark and the counter count it at the Fortran entry points.
#[test]
fn quantum_espresso_scf_on_two_ranks_matches_an_independent_count() {
    if !have("pw.x") || !Path::new(QE_PSEUDO).exists() || !have(OPEN_MPI.cc) {
        eprintln!("skipped: needs quantum-espresso and Open MPI (scripts/deps.sh installs them)");
        return;
    }
    let dir = scratch("qe");
    std::fs::write(dir.join("si.in"), QE_SILICON).unwrap();
    let mut command = launcher(OPEN_MPI, 2);
    command.extend(["pw.x", "-in", "si.in"].map(String::from));
    // The total energy pw.x prints (the line marked `!`): the same with Hark.
    let energy = |out: &[u8]| -> String {
        String::from_utf8_lossy(out)
            .lines()
            .find(|l| l.starts_with('!') && l.contains("total energy"))
            .unwrap_or_else(|| panic!("no total energy in:\n{}", String::from_utf8_lossy(out)))
            .to_string()
    };

    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "pw.x fails without hark");
    let (out, run_dir) = counted_run(&dir, &command);
    assert_exit(&out, 0);
    assert_eq!(energy(&out.stdout), energy(&bare.stdout));

    let counts = read_counts(&dir.join("counts"), 2);
    // The Fortran calls are there to compare, on every rank.
    for f in ["MPI_Bcast", "MPI_Alltoall", "MPI_Comm_split"] {
        for (rank, c) in counts.iter().enumerate() {
            assert!(c.get(f).is_some_and(|c| c.0 > 0), "rank {rank} made no {f}");
        }
    }
    let n = compare(&profile(&run_dir), &counts);
    eprintln!("Quantum ESPRESSO: {n} MPI functions agree with the independent count");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn scalapack_lu_tests_on_two_mpich_ranks_match_an_independent_count() {
    let tests = Path::new("/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests");
    if !tests.join("xdlu").exists() || !have(MPICH.cc) {
        eprintln!("skipped: needs scalapack-mpi-test and MPICH (scripts/deps.sh installs them)");
        return;
    }
    let dir = scratch("scalapack");
    // The shipped input on the two grids two ranks make, 1 x 2 and 2 x 1.
    let input = std::fs::read_to_string(tests.join("LU.dat")).unwrap();
    let mut lines: Vec<&str> = input.lines().collect();
    assert!(
        lines.len() > 15 && lines[13].contains("number of process grids"),
        "LU.dat changed shape"
    );
    lines[13] = "2 number of process grids (ordered pairs of P & Q)";
    lines[14] = "1 2 values of P";
    lines[15] = "2 1 values of Q";
    std::fs::write(dir.join("LU.dat"), lines.join("\n") + "\n").unwrap();
    let mut command = launcher(MPICH, 2);
    command.push(tests.join("xdlu").display().to_string());
    // The tests' verdicts: one line per test, and the totals.
    let verdicts = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| l.contains("PASSED") || l.contains("FAILED") || l.contains("tests "))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
            .collect()
    };

    let bare = bare_run(&dir, &command);
    assert!(bare.status.success(), "xdlu fails without hark");
    let (out, run_dir) = counted_run_on(MPICH, &dir, "run", &[], &command);
    assert_exit(&out, 0);
    let (with, without) = (verdicts(&out.stdout), verdicts(&bare.stdout));
    assert_eq!(with, without, "xdlu's verdicts changed");
    let passed = with.iter().filter(|v| *v == "PASSED").count();
    assert!(passed >= 50, "only {passed} LU tests passed:\n{with:?}");
    assert!(!with.iter().any(|v| v == "FAILED"), "an LU test failed");

    let profile = profile(&run_dir);
    let n = compare(&profile, &read_counts(&dir.join("counts"), 2));
    eprintln!("ScaLAPACK LU: {n} MPI functions agree with the independent count");
    std::fs::remove_dir_all(&dir).unwrap();
}
