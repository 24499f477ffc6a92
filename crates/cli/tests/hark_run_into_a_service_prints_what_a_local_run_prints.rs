//! `hark run --server unix:...` prints what a local `hark run` prints: the
//! job's number and its live view as it starts, the summary and the run
//! directory when it ends.

mod common;
mod served;

use common::*;
use served::*;

#[test]
fn hark_run_into_a_service_says_its_job_its_live_view_its_summary_and_its_run() {
    let dir = scratch("run-into-service");
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let url = served.url();
    // Long enough for the service to register the job while it runs.
    let cmd = ["sh", "-c", "sleep 1; ls / > /dev/null"].map(String::from);
    let child = served.run(None, &cmd);
    let out = wait_within(child, limit(), "hark run --server");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let job = served.jobs(None);
    let id = job[0]["id"].as_str().unwrap();
    assert!(
        err.contains(&format!(
            "hark: job {id} in the service at {}; live view at {url}#run={id}",
            served.addr
        )),
        "{err}"
    );
    assert!(
        err.contains("== sh") && err.contains("== ls"),
        "no summary: {err}"
    );
    let dir_line = err
        .lines()
        .find_map(|l| l.strip_prefix("Run directory: "))
        .unwrap_or_else(|| panic!("no run directory: {err}"));
    let run_dir = dir_line.split(' ').next().unwrap();
    assert!(
        std::path::Path::new(run_dir).join("summary.txt").is_file(),
        "{err}"
    );
    // The summary printed is the run directory's.
    let summary =
        std::fs::read_to_string(std::path::Path::new(run_dir).join("summary.txt")).unwrap();
    assert!(err.contains(summary.trim_end()), "{err}\n---\n{summary}");
    served.stop();
}
