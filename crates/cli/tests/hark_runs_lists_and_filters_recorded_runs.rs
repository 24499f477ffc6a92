//! Every `hark run` is recorded in the run index (`HARK_INDEX` here, a file
//! in the test's directory); `hark runs` lists the runs and filters them by
//! program, host and date, and `hark runs --add` records a run directory
//! made elsewhere. Two real runs: an MPI program and a serial one.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn runs(index: &Path, args: &[&str]) -> String {
    let out = Command::new(hark())
        .arg("runs")
        .args(args)
        .env("HARK_INDEX", index)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run directories listed, by the last column.
fn dirs(listing: &str) -> Vec<String> {
    listing
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last().map(String::from))
        .collect()
}

fn today(offset_days: i64) -> String {
    let out = Command::new("date")
        .args(["-u", "+%F", "-d", &format!("{offset_days} days")])
        .output_within()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn runs_are_recorded_listed_and_filtered() {
    if !have(OPEN_MPI.cc) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("runs");
    let index = dir.join("index/runs.sqlite");
    let env = [("HARK_INDEX", index.to_str().unwrap())];
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), &dir, &[]);
    let mut command = launcher(OPEN_MPI, 2);
    command.push(exe.display().to_string());
    let mpi_dir = dir.join("mpi");
    std::fs::create_dir_all(&mpi_dir).unwrap();
    let (out, mpi_run) = hark_run_env(&mpi_dir, &["-q"], &command, &env);
    assert_exit(&out, 0);
    let serial_dir = dir.join("serial");
    std::fs::create_dir_all(&serial_dir).unwrap();
    let (out, serial_run) = hark_run_env(
        &serial_dir,
        &["-q"],
        &["cat".into(), "/dev/null".into()],
        &env,
    );
    assert_exit(&out, 0);

    let all = runs(&index, &[]);
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
    assert_eq!(dirs(&all), [canon(&mpi_run), canon(&serial_run)], "{all}");
    let ring = exe.file_name().unwrap().to_str().unwrap();
    assert!(all.contains(ring) && all.contains("cat"), "{all}");

    assert_eq!(dirs(&runs(&index, &["--program", ring])), [canon(&mpi_run)]);
    assert_eq!(
        dirs(&runs(&index, &["--program", "cat"])),
        [canon(&serial_run)]
    );
    assert!(dirs(&runs(&index, &["--program", "lmp"])).is_empty());

    let host = profile(&mpi_run)["programs"][0]["rank_info"][0]["host"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(dirs(&runs(&index, &["--host", &host])).len(), 2);
    assert!(dirs(&runs(&index, &["--host", "no-such-host"])).is_empty());

    assert_eq!(dirs(&runs(&index, &["--since", &today(0)])).len(), 2);
    assert_eq!(dirs(&runs(&index, &["--until", &today(0)])).len(), 2);
    assert!(dirs(&runs(&index, &["--since", &today(1)])).is_empty());
    assert!(dirs(&runs(&index, &["--until", &today(-1)])).is_empty());
    let both = ["--program", ring, "--host", &host, "--since", &today(-1)];
    assert_eq!(dirs(&runs(&index, &both)), [canon(&mpi_run)]);

    // A run directory made elsewhere (here: a copy) is added, once.
    let copy = dir.join("copied");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(mpi_run.join("profile.json"), copy.join("profile.json")).unwrap();
    let copy_arg = copy.to_str().unwrap();
    runs(&index, &["--add", copy_arg]);
    let listed = runs(&index, &["--add", copy_arg, "--program", ring]);
    // Both ended within the same second, which orders them by path.
    let mut want = [canon(&mpi_run), canon(&copy)];
    want.sort();
    let mut got = dirs(&listed);
    got.sort();
    assert_eq!(got, want, "{listed}");

    // A bad date says how to write one.
    let out = Command::new(hark())
        .args(["runs", "--since", "last tuesday"])
        .env("HARK_INDEX", &index)
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("YYYY-MM-DD"));
    std::fs::remove_dir_all(&dir).unwrap();
}
