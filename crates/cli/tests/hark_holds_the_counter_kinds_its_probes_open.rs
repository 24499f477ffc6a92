//! `hark run` holds one disabled event of each software counter kind its
//! probes will open, for as long as the command runs: the first event of a
//! kind opened on a node makes the kernel patch its text on every CPU (tens
//! of milliseconds of a probe's start when the CPUs are busy;
//! `BENCHMARKS.md`, "Opening the counters"). The command lists its parent's
//! (`hark`'s) descriptors: one `perf_event` per software kind chosen
//! (`--counters`, else `HARK_COUNTERS`, else the default list's five, the
//! clocks excepted), none with `--counters none`. A node's forwarder, which
//! serves the nodes `hark` is not on, holds them too.

mod common;

use common::*;

/// `hark`'s `perf_event` descriptors while it runs the command, seen by the
/// command.
fn held(hark_args: &[&str], env: &[(&str, &str)]) -> usize {
    let dir = scratch("held-counters");
    let command = ["sh", "-c", "ls -l /proc/$PPID/fd; cat /proc/$PPID/comm"].map(String::from);
    let (out, _) = hark_run_env(&dir, hark_args, &command, env);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.trim() == "hark"),
        "the command's parent is not hark:\n{stdout}"
    );
    stdout.matches("anon_inode:[perf_event]").count()
}

#[test]
fn hark_holds_each_chosen_software_kind_and_nothing_with_no_counters() {
    if hark_os::hold_software_events(&[2]).is_empty() {
        eprintln!("skipped: this kernel refuses perf_event_open here");
        return;
    }
    assert_eq!(held(&[], &[]), 5, "the default list's software kinds");
    assert_eq!(held(&["--counters", "page-faults,task-clock"], &[]), 1);
    assert_eq!(
        held(&[], &[("HARK_COUNTERS", "context-switches,page-faults")]),
        2
    );
    assert_eq!(held(&["--counters", "none"], &[]), 0);
}

#[test]
fn a_node_s_forwarder_holds_the_kinds_too() {
    if hark_os::hold_software_events(&[2]).is_empty() {
        eprintln!("skipped: this kernel refuses perf_event_open here");
        return;
    }
    let dir = scratch("held-by-forwarder");
    // `[h]`: the pattern does not match the shell's own command line.
    let list = "sleep 0.2; for p in $(pgrep -f '[h]ark forward --listen'); do \
                echo \"forwarder $(ls -l /proc/$p/fd | grep -c 'perf_event')\"; done";
    let command = ["sh", "-c", list].map(String::from);
    // Three kinds: a forwarder of another run (lingering a second after
    // its last stream) holds the default five.
    let env = [
        ("HARK_FORWARD", "always"),
        ("HARK_COUNTERS", "context-switches,page-faults,major-faults"),
    ];
    let (out, _) = hark_run_env(&dir, &[], &command, &env);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.trim() == "forwarder 3"),
        "no forwarder holding the three kinds:\n{stdout}"
    );
}
