//! `hark run --export hatchet,parquet` and `hark export`, read back by the
//! real readers (`tests/python/check_exports.py`, in the `.venv/` that
//! `scripts/deps.sh` creates): Hatchet loads the graphframe, indexed by
//! node and rank, and its per-rank values equal `profile.json`'s (wall time
//! at the root, regions' inclusive time and calls, every MPI function's calls
//! and time summed over its call paths, every I/O operation's calls, bytes
//! and time), and `drop_index_levels` folds the ranks; Thicket takes a 2-rank
//! and a 4-rank run together, with their metadata, and its per-rank
//! statistics equal `profile.json`'s; pyarrow reads every Parquet table back equal to
//! `profile.json`. The program is `tests/programs/phases.c`: nested regions,
//! MPI inside a region and outside any; and, for the one-sided table,
//! `tests/programs/mpi/rma_io_and_more.c`.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python with Hatchet, Thicket and pyarrow: `$HARK_PYTHON`, else the
/// checkout's `.venv/` (`scripts/venv.sh`).
fn python() -> Option<PathBuf> {
    let py = std::env::var_os("HARK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"));
    py.exists().then_some(py)
}

fn include() -> String {
    format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"))
}

fn check(py: &Path, runs: &[&Path]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/check_exports.py");
    let out = Command::new(py)
        .arg(script)
        .args(runs)
        .output_within()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK"),
        "the readers disagree with profile.json:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn hatchet_thicket_and_pyarrow_read_what_profile_json_says() {
    // The set-up script always makes the readers' environment: a missing
    // one is a broken set-up, not a reason to pass.
    let py = python().expect(
        "no .venv/bin/python with hatchet, thicket and pyarrow: run scripts/deps.sh (or set HARK_PYTHON)",
    );
    if !have(OPEN_MPI.cc) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("exports");
    let exe = compile(OPEN_MPI.cc, "phases.c".as_ref(), &dir, &[&include()]);
    let index = dir.join("runs.sqlite");
    let index = index.to_str().unwrap();
    let mut runs = Vec::new();
    for np in [2, 4] {
        let at = dir.join(format!("np{np}"));
        std::fs::create_dir_all(&at).unwrap();
        let mut command = launcher(OPEN_MPI, np);
        command.extend([exe.display().to_string(), "5".into(), "2000".into()]);
        let (out, run_dir) = hark_run_env(
            &at,
            &["-q", "--export", "hatchet,parquet"],
            &command,
            &[("HARK_INDEX", index)],
        );
        assert_exit(&out, 0);
        for f in [
            "hatchet.json",
            "thicket-metadata.json",
            "functions.parquet",
            "messages.parquet",
            "one_sided.parquet",
            "regions.parquet",
            "timeslices.parquet",
            "counters.parquet",
        ] {
            assert!(run_dir.join(f).exists(), "--export wrote no {f}");
        }
        check(&py, &[&run_dir]);
        runs.push(run_dir);
    }
    check(&py, &[&runs[0], &runs[1]]);

    // `hark export` writes the same files from profile.json alone.
    let again = dir.join("again");
    let out = Command::new(hark())
        .args(["export", "--format", "hatchet,parquet", "-o"])
        .arg(&again)
        .arg(&runs[1])
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    for f in ["hatchet.json", "thicket-metadata.json"] {
        assert_eq!(
            std::fs::read(again.join(f)).unwrap(),
            std::fs::read(runs[1].join(f)).unwrap(),
            "hark export and hark run --export differ in {f}"
        );
    }
    std::fs::copy(runs[1].join("profile.json"), again.join("profile.json")).unwrap();
    check(&py, &[&again]);

    // One-sided operations: `one_sided.parquet` holds them, origin to target.
    let rma =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/mpi/rma_io_and_more.c");
    let exe = compile(OPEN_MPI.cc, &rma, &dir, &[]);
    let at = dir.join("rma");
    std::fs::create_dir_all(&at).unwrap();
    let mut command = launcher(OPEN_MPI, 4);
    command.push(exe.display().to_string());
    let (out, run_dir) = hark_run_env(
        &at,
        &["-q", "--export", "hatchet,parquet"],
        &command,
        &[
            ("HARK_INDEX", index),
            ("HARK_TEST_DIR", at.to_str().unwrap()),
        ],
    );
    assert_exit(&out, 0);
    let ops = &profile(&run_dir)["programs"][0]["p2p"]["one_sided"]["messages"];
    assert!(
        ops.as_array().is_some_and(|m| !m.is_empty()),
        "no one-sided matrix: {ops}"
    );
    // Its I/O is in the profile, so the check finds I/O nodes to compare.
    let io = &profile(&run_dir)["programs"][0]["io"]["per_rank"];
    assert!(
        io.as_array().is_some_and(|r| r
            .iter()
            .any(|m| m.as_object().is_some_and(|m| !m.is_empty()))),
        "no I/O in the profile: {io}"
    );
    check(&py, &[&run_dir]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_formats_are_refused_with_the_reason_not_faked() {
    let dir = scratch("export-otf2");
    std::fs::write(dir.join("profile.json"), r#"{"hark_version":"0","accounting":{"events_written":0,"events_received":0,"events_analysed":0,"events_dropped":0},"programs":[]}"#).unwrap();
    for format in ["otf2", "perfetto", "hatchet,otf2"] {
        let out = Command::new(hark())
            .args(["export", "--format", format])
            .arg(&dir)
            .output_within()
            .unwrap();
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no trace store"), "{format}: {err}");
        assert!(
            !dir.join("hatchet.json").exists(),
            "{format}: wrote something anyway"
        );
    }
    // `hark run --export otf2` is refused before the program starts.
    let out = Command::new(hark())
        .args(["run", "--export", "perfetto", "--", "touch"])
        .arg(dir.join("ran"))
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        !dir.join("ran").exists(),
        "the program ran although its export was refused"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
