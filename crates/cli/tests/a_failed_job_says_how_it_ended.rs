//! A job that fails never reads like a normal run: when a rank calls
//! `MPI_Abort` (as LAMMPS does for an input file it cannot open), the
//! summary's first line, the report, `profile.json` and `hark runs` say
//! which rank aborted with which code, and how the command ended. A job
//! that ends well says nothing of the kind and is `ok` in `hark runs`.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn runs(index: &Path) -> String {
    let out = Command::new(hark())
        .arg("runs")
        .env("HARK_INDEX", index)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_aborted_job_names_the_rank_its_code_and_the_exit_status() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("failed-job");
    let index = dir.join("runs.sqlite");
    let env = [("HARK_INDEX", index.to_str().unwrap())];
    let exe = compile(OPEN_MPI.cc, "die.c".as_ref(), &dir, &[]);
    let mut command = launcher(OPEN_MPI, 2);
    command.extend([exe.display().to_string(), "abort".into(), "5".into()]);
    let (out, run_dir) = hark_run_env(&dir, &[], &command, &env);
    let code = out.status.code().unwrap();
    assert_ne!(code, 0, "MPI_Abort(…, 3) fails the job");
    let stderr = String::from_utf8_lossy(&out.stderr);

    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let first = summary.lines().next().unwrap();
    assert!(
        first.contains("the job failed: rank 0 called MPI_Abort with code 3"),
        "{summary}"
    );
    assert!(first.contains(&format!("exit status {code}")), "{summary}");
    assert!(stderr.contains(first), "hark run prints it: {stderr}");

    let profile = profile(&run_dir);
    assert_eq!(profile["exit"]["code"], code, "{profile:#}");
    let rank0 = &profile["programs"][0]["rank_info"][0];
    assert_eq!(rank0["ended"], "abort", "{rank0:#}");
    assert_eq!(rank0["abort_code"], 3, "{rank0:#}");

    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(
        report.contains("The job failed: rank 0 called MPI_Abort with code 3"),
        "the report says it at the top"
    );

    // A job that ends well: no failure, and `ok` beside the failed one.
    let ok_dir = dir.join("ok");
    std::fs::create_dir_all(&ok_dir).unwrap();
    let (out, ok_run) = hark_run_env(&ok_dir, &["-q"], &["true".into()], &env);
    assert_exit(&out, 0);
    let ok_summary = std::fs::read_to_string(ok_run.join("summary.txt")).unwrap();
    assert!(!ok_summary.contains("failed"), "{ok_summary}");

    let listing = runs(&index);
    let mut lines = listing.lines();
    assert!(lines.next().unwrap().contains("status"), "{listing}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{listing}");
    // Both ended within a second: listed by date, then directory.
    let row = |dir: &Path| {
        let dir = std::fs::canonicalize(dir).unwrap().display().to_string();
        rows.iter()
            .find(|r| r.ends_with(&dir))
            .unwrap_or_else(|| panic!("{dir} listed: {listing}"))
            .to_string()
    };
    assert!(row(&run_dir).contains("MPI_Abort 3"), "{listing}");
    assert!(row(&ok_run).contains(" ok "), "{listing}");
}
