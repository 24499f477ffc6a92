//! Call sites: a C and a Fortran program (`tests/programs/callsites.c`,
//! `callsites.f90`) send from two `MPI_Send` call sites on different lines,
//! three times each, while the receiver sleeps 100 ms before each receive
//! of the first and 250 ms before each of the second: Late Receiver at
//! each send line. Measured through `hark run` and a real `mpirun` with
//! Open MPI and MPICH:
//!
//! - built with `-g`: `programs[0].callsites` has each send line (read from
//!   the `SEND_A`/`SEND_B` markers of the source) with its 3 calls and 12 MiB,
//!   and its Late Receiver waiting near what was injected (the second more
//!   than the first); the receive lines carry that waiting as what they
//!   caused; the digest's Late Receiver finding names the second send's line
//!   and the late receive's line;
//! - built without `-g`: no call site has a file or line (never a wrong
//!   one), and the two C sends still tell apart by their functions'
//!   symbols (`send_a`, `send_b`).

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

const REPS: u64 = 3;
const MS: u64 = 1_000_000;
/// What each site's calls wait in all, injected: 3 × 100 ms and 3 × 250 ms.
const A_NS: u64 = REPS * 100 * MS;
const B_NS: u64 = REPS * 250 * MS;

/// The line of the MPI call marked `marker` in the test program `source`.
fn line_of(source: &str, marker: &str) -> u64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(source);
    let text = std::fs::read_to_string(&path).unwrap();
    let i = text
        .lines()
        .position(|l| l.contains("MPI_") && l.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in {source}"));
    i as u64 + 1
}

/// The call sites of `function` at `line`.
fn sites_at<'a>(sites: &'a [Value], function: &str, line: u64) -> Vec<&'a Value> {
    sites
        .iter()
        .filter(|s| s["function"] == function && s["line"].as_u64() == Some(line))
        .collect()
}

fn late_receiver(site: &Value, side: &str) -> u64 {
    site[side]["late_receiver"]["time_ns"].as_u64().unwrap_or(0)
}

/// Runs `source` built by `mpi`'s compiler (with `-g` if `debug`) on 2
/// ranks under `hark run`; its profile.
fn run(mpi: Mpi, source: &str, debug: bool) -> Option<Value> {
    let compiler = if source.ends_with(".c") {
        mpi.cc
    } else {
        mpi.fc
    };
    if !have(compiler) || !have(mpi.run) {
        eprintln!("skipped: {} ({compiler}) is not installed", mpi.name);
        return None;
    }
    let dir = scratch(&format!("callsites-{}-{source}-{debug}", mpi.run));
    let flags: &[&str] = if debug { &["-g"] } else { &[] };
    let exe = compile(compiler, Path::new(source), &dir, flags);
    let mut command = launcher(mpi, 2);
    command.push(exe.to_string_lossy().into_owned());
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    std::fs::remove_dir_all(&dir).unwrap();
    Some(p)
}

fn check_with_lines(mpi: Mpi, source: &str) {
    let Some(p) = run(mpi, source, true) else {
        return;
    };
    let sites = p["programs"][0]["callsites"].as_array().unwrap().clone();
    let what = format!("{source} on {}: {sites:#?}", mpi.name);
    let (a, b) = (line_of(source, "SEND_A"), line_of(source, "SEND_B"));
    let (ra, rb) = (line_of(source, "RECV_A"), line_of(source, "RECV_B"));
    let mut waited = Vec::new();
    for (line, recv, injected) in [(a, ra, A_NS), (b, rb, B_NS)] {
        let send = sites_at(&sites, "MPI_Send", line);
        assert_eq!(send.len(), 1, "one MPI_Send site at line {line}: {what}");
        let s = send[0];
        assert_eq!(s["calls"], REPS, "{what}");
        assert_eq!(s["bytes"], REPS * (4 << 20), "{what}");
        assert!(
            s["file"].as_str().unwrap().ends_with(source),
            "file of line {line}: {what}"
        );
        // Injected by sleeping: a sleeper on a loaded machine wakes late,
        // never early.
        let w = late_receiver(s, "waits");
        assert!(
            w >= injected / 2 && w <= injected * 3,
            "Late Receiver at line {line}: {w} ns, {injected} ns injected: {what}"
        );
        let r = sites_at(&sites, "MPI_Recv", recv);
        assert_eq!(r.len(), 1, "one MPI_Recv site at line {recv}: {what}");
        assert_eq!(late_receiver(r[0], "caused"), w, "{what}");
        waited.push(w);
    }
    assert!(waited[1] > waited[0], "{what}");
    let name = source.rsplit('/').next().unwrap();
    let digest = p["programs"][0]["digest"].as_array().unwrap();
    let finding = digest
        .iter()
        .find(|f| f["title"].as_str().unwrap().starts_with("Late Receiver"))
        .unwrap_or_else(|| panic!("no Late Receiver finding: {digest:#?}"));
    let (title, detail) = (
        finding["title"].as_str().unwrap(),
        finding["detail"].as_str().unwrap(),
    );
    assert!(
        title.contains(&format!("`{name}:{b}`")),
        "the finding names the costlier send's line {b}: {title}"
    );
    assert!(
        detail.contains(&format!("late from `{name}:{rb}` (MPI_Recv)")),
        "the finding names the late receive's line {rb}: {detail}"
    );
}

fn check_without_lines(mpi: Mpi, source: &str) {
    let Some(p) = run(mpi, source, false) else {
        return;
    };
    let sites = p["programs"][0]["callsites"].as_array().unwrap();
    let what = format!("{source} on {} without -g: {sites:#?}", mpi.name);
    assert!(!sites.is_empty(), "{what}");
    for s in sites {
        assert!(s["file"].is_null() && s["line"].is_null(), "{what}");
        assert!(s["symbol"].is_string(), "{what}");
    }
    let sends: Vec<&Value> = sites
        .iter()
        .filter(|s| s["function"] == "MPI_Send")
        .collect();
    assert_eq!(sends.len(), 2, "{what}");
    if source.ends_with(".c") {
        for f in ["send_a", "send_b"] {
            assert!(
                sends.iter().any(|s| s["symbol"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{f}+0x"))),
                "{f}: {what}"
            );
        }
    }
}

#[test]
fn c_sends_are_named_by_line_with_open_mpi() {
    check_with_lines(OPEN_MPI, "callsites.c");
}

#[test]
fn c_sends_are_named_by_line_with_mpich() {
    check_with_lines(MPICH, "callsites.c");
}

#[test]
fn fortran_sends_are_named_by_line_with_open_mpi() {
    check_with_lines(OPEN_MPI, "callsites.f90");
}

#[test]
fn fortran_sends_are_named_by_line_with_mpich() {
    check_with_lines(MPICH, "callsites.f90");
}

#[test]
fn without_debug_information_no_line_is_given() {
    check_without_lines(OPEN_MPI, "callsites.c");
    check_without_lines(MPICH, "callsites.f90");
}

/// An NPB-style kernel (`tests/programs/cg_style.f90`: CG with its halo
/// exchange and dot products in subroutines of a module), built as such
/// codes are, `-g -O2`: every `MPI_Irecv`, `MPI_Isend` and `MPI_Allreduce`
/// call site is on a line of the source that calls that function, and the
/// sites of each function add up to its calls. (`MPI_Waitall`, the last
/// statement of its subroutine, gets whatever line gfortran's `-O2` line
/// table gives that call: the `subroutine` line here.)
#[test]
fn an_npb_style_fortran_kernel_at_o2_names_the_lines_that_call() {
    let mpi = OPEN_MPI;
    if !have(mpi.fc) || !have(mpi.run) {
        eprintln!("skipped: {} ({}) is not installed", mpi.name, mpi.fc);
        return;
    }
    let dir = scratch("callsites-cg-style");
    let exe = compile(mpi.fc, Path::new("cg_style.f90"), &dir, &["-g", "-O2"]);
    let iterations = 200;
    let mut command = launcher(mpi, 2);
    command.extend([
        exe.display().to_string(),
        "500".into(),
        iterations.to_string(),
    ]);
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/cg_style.f90"),
    )
    .unwrap();
    let sites = p["programs"][0]["callsites"].as_array().expect("callsites");
    for function in ["MPI_Irecv", "MPI_Isend", "MPI_Allreduce"] {
        let calling: Vec<u64> = source
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(&format!("call {function}(")))
            .map(|(i, _)| i as u64 + 1)
            .collect();
        let of: Vec<&Value> = sites.iter().filter(|s| s["function"] == function).collect();
        assert!(!of.is_empty(), "no call site of {function}: {sites:?}");
        for s in &of {
            let line = s["line"].as_u64().unwrap_or(0);
            assert!(
                calling.contains(&line),
                "{function} at line {line}, which does not call it (lines {calling:?}): {s}"
            );
        }
        let calls: u64 = of.iter().map(|s| s["calls"].as_u64().unwrap()).sum();
        let profiled: u64 = p["programs"][0]["mpi"][function]["calls"]
            .as_array()
            .map_or(0, |c| c.iter().filter_map(Value::as_u64).sum());
        assert_eq!(
            calls, profiled,
            "{function}: call sites against the profile"
        );
    }
    // Each rank sends one halo value a neighbour per iteration.
    let isends: u64 = sites
        .iter()
        .filter(|s| s["function"] == "MPI_Isend")
        .map(|s| s["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(isends, 2 * iterations);
}
