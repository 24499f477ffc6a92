//! The digest is scaled to the run: `ls` spends a large share of its few
//! microseconds in I/O, and that is no "high" finding. Severity weighs the
//! time per rank as well as the share of rank time.

mod common;

use common::*;

#[test]
fn ls_gets_no_high_or_medium_finding() {
    let dir = scratch("short-ls");
    let index = dir.join("runs.sqlite");
    let (out, run_dir) = hark_run_env(
        &dir,
        &["-q"],
        &["ls".into(), "-la".into(), "/".into()],
        &[("HARK_INDEX", index.to_str().unwrap())],
    );
    assert_exit(&out, 0);
    let profile = profile(&run_dir);
    let digest = profile["programs"][0]["digest"].as_array().unwrap();
    assert!(!digest.is_empty(), "ls does I/O: {profile:#}");
    // Waiting for a CPU is real time lost whatever the run's length (and on
    // a loaded machine `ls` waits): only the other findings are weighed here.
    let cpu = |f: &&serde_json::Value| {
        f["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Waiting for a CPU"))
    };
    // How long `ls` takes depends on the machine's load (its output is
    // piped; 1.1 ms once on a loaded CI machine): the finding's time is
    // checked against the run's own, not against a clock.
    let wall = profile["programs"][0]["wall_ns"].as_u64().unwrap();
    for f in digest.iter().filter(|f| !cpu(f)) {
        let ns = f["time_ns"].as_u64().unwrap();
        assert!(ns <= wall, "a finding of {ns} ns in a run of {wall} ns");
        assert_eq!(f["severity"], "low", "{f:#}");
    }
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let high_other = summary
        .lines()
        .any(|l| l.trim_start().starts_with("high ") && !l.contains("Waiting for a CPU"));
    assert!(!high_other, "{summary}");
}
