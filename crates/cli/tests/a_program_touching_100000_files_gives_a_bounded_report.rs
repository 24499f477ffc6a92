//! A program touching 100,000 files gives a bounded report: distinct files
//! (and communicators, regions, counters) are capped per program, the rest
//! counted as one "other" entry, and the diagnostics say so; unbounded,
//! such a run would give a 27 MB `report.html` with 100,014 table rows, a
//! 62 MB `profile.json` and 168 MB of server memory.

mod common;

use common::*;

/// The largest resident set of any child process waited for so far, in
/// KiB (`hark` here: the shell it measured stays far smaller).
fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage fills the plain struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    usage.ru_maxrss
}

#[test]
fn report_profile_and_memory_stay_bounded() {
    let dir = scratch("many-files");
    std::fs::create_dir_all(dir.join("d")).unwrap();
    let (out, run_dir) = hark_run(
        &dir,
        &["-q"],
        &[
            "bash".into(),
            "-c".into(),
            "for i in $(seq 100000); do : > d/f$i; done".into(),
        ],
    );
    assert_exit(&out, 0);
    let rss = children_max_rss_kib();
    let html = std::fs::metadata(run_dir.join("report.html"))
        .unwrap()
        .len();
    let json = std::fs::metadata(run_dir.join("profile.json"))
        .unwrap()
        .len();
    eprintln!("report.html {html} B, profile.json {json} B, hark's peak RSS {rss} KiB");
    assert!(html < 2 << 20, "report.html is {html} bytes");
    assert!(json < 4 << 20, "profile.json is {json} bytes");
    assert!(rss < 100 << 10, "hark's memory reached {rss} KiB");
    let profile = profile(&run_dir);
    let bash = &profile["programs"][0];
    let files = bash["io"]["files"].as_array().unwrap();
    assert!(files.len() <= 1010, "{} files listed", files.len());
    assert!(files.iter().any(|f| f["path"] == "<other files>"));
    let said = bash["diagnostics"].to_string();
    assert!(said.contains("more than 1000 distinct files"), "{said}");
    std::fs::remove_dir_all(&dir).unwrap();
}
