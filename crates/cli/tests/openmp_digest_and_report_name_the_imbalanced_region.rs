//! OpenMP in what a reader sees first: the hybrid program with known
//! per-thread imbalance (`tests/programs/omp_imbalance.c`, built with gcc,
//! libgomp), whose threads time their own barrier waits. The digest's
//! first OpenMP finding must be the load imbalance of the program's one
//! parallel region, named as `openmp.regions` names it, with a thread
//! that said it waited least as the slowest and one that waited most as
//! the fastest (within a unit of work: two ranks' threads tie); the summary must print the hybrid efficiency tree; and
//! `report.html` must hold the OpenMP section with a bar for every thread
//! the program printed, and the region in its table. Without MPI (one
//! process, 3 threads) and on Open MPI (2 ranks of 2 threads).

mod common;

use common::*;

/// Long enough that the threads' waits differ by tens of milliseconds,
/// well above a loaded machine's scheduling noise.
const UNIT_MS: &str = "40";
const ROUNDS: &str = "3";

/// "thread 2", or "thread 2 of rank 1" with several ranks, as the digest
/// names a thread.
fn named(np: usize, rank: usize, t: i64) -> String {
    if np > 1 {
        format!("thread {t} of rank {rank}")
    } else {
        format!("thread {t}")
    }
}

fn check(dir: &std::path::Path, command: Vec<String>, np: usize, threads: usize) {
    let n = threads.to_string();
    let (out, run_dir) = hark_run_env(dir, &[], &command, &[("OMP_NUM_THREADS", &n)]);
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    let stdout = String::from_utf8_lossy(&out.stdout);
    let own = omp_imbalance_threads(&stdout);
    assert_eq!(own.len(), np * threads, "the program's output:\n{stdout}");
    let report = format!(
        "{} on {np} rank(s) × {threads} threads\nprogram:\n{stdout}\ndigest: {:#}\nregions: {}",
        command.join(" "),
        p["digest"],
        p["openmp"]["regions"]
    );
    let region = p["openmp"]["regions"][0]["name"].as_str().unwrap();
    // gcc's outlined function, a local symbol `dladdr` cannot see: named
    // by `hark` from the program's symbol table.
    assert_eq!(region, "main._omp_fn.0", "{report}");
    let first = (p["digest"].as_array().unwrap().iter())
        .find(|f| f["title"].as_str().unwrap().starts_with("OpenMP"))
        .unwrap_or_else(|| panic!("no OpenMP finding: {report}"));
    assert_eq!(
        first["title"].as_str().unwrap(),
        format!("OpenMP load imbalance in {region}"),
        "{report}"
    );
    // The slowest thread is one that said it waited least, the fastest one
    // that said it waited most: within a unit, as threads of two ranks
    // doing the same work tie but for noise, while the program's threads
    // of one team differ by 1.5 units over the three rounds.
    let tol = UNIT_MS.parse::<u64>().unwrap() * 1_000_000;
    let least = own.iter().map(|x| x.3).min().unwrap();
    let most = own.iter().map(|x| x.3).max().unwrap();
    let detail = first["detail"].as_str().unwrap();
    let slowest = (own.iter())
        .find(|x| detail.contains(&format!(": {} is the slowest", named(np, x.0, x.1))))
        .unwrap_or_else(|| panic!("no slowest thread named: {report}"));
    let fastest = (own.iter())
        .find(|x| detail.contains(&format!(" and {} the fastest", named(np, x.0, x.1))))
        .unwrap_or_else(|| panic!("no fastest thread named: {report}"));
    assert!(
        slowest.3 <= least + tol && fastest.3 + tol >= most,
        "slowest {slowest:?}, fastest {fastest:?}, waits {least} to {most}: {report}"
    );
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains("Efficiencies, hybrid model") && summary.contains("OpenMP serialisation"),
        "no efficiency tree: {summary}"
    );
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        html.contains("<h3 id=\"p0-openmp\">OpenMP</h3>"),
        "no OpenMP section"
    );
    for &(rank, t, _, _) in &own {
        assert!(
            html.contains(&format!("data-rank=\"{rank}\" data-thread=\"{t}\"")),
            "no bar of rank {rank} thread {t} in report.html: {report}"
        );
    }
    assert!(
        html.contains(&format!("<td class=\"path\">{region}</td>")),
        "region {region} not in the report's table"
    );
}

#[test]
fn gcc_without_mpi_three_threads() {
    let dir = scratch("omp-digest-gcc");
    let exe = compile("gcc", "omp_imbalance.c".as_ref(), &dir, &["-fopenmp"]);
    let command = vec![exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()];
    check(&dir, command, 1, 3);
}

#[test]
fn gcc_open_mpi_two_ranks_two_threads() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: {} is not installed", mpi.name);
        return;
    }
    let dir = scratch("omp-digest-openmpi");
    let exe = compile(
        mpi.cc,
        "omp_imbalance.c".as_ref(),
        &dir,
        &["-fopenmp", "-DWITH_MPI"],
    );
    let mut command = launcher(mpi, 2);
    command.extend(["-x", "OMP_NUM_THREADS", "--bind-to", "none"].map(String::from));
    command.extend([exe.display().to_string(), UNIT_MS.into(), ROUNDS.into()]);
    check(&dir, command, 2, 2);
}
