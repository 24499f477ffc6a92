//! Performance counters (`perf_event_open`, `docs/probe.md`, "Counters")
//! against what the program measures of itself: `tests/programs/counted_regions.c`
//! touches N fresh pages in region `touch` and sleeps K times in region
//! `sleep`, and reads its own thread's minor faults and voluntary switches
//! (`getrusage(RUSAGE_THREAD)`) around each. The region's `page-faults`
//! must be at least N and at most N + [`FAULT_MARGIN`], its
//! `context-switches` at least K. On a machine without a hardware PMU (a
//! VM, like this one), one line names the hardware counters and why, and
//! the run is otherwise whole. A refused `perf_event_open` (as under a
//! high `perf_event_paranoid`, injected through the test hooks) is said in
//! one line naming the paranoid setting, and the run is whole.

mod common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;

/// Faults a region may count beyond its own pages: the probe's recording
/// of the region's begin and end (a buffer page it first writes), the
/// stack, and the threads the main thread started (Open MPI's), which the
/// main thread's counters include (`inherit`).
const FAULT_MARGIN: u64 = 64;

const PAGES: u64 = 2000;
const SLEEPS: u64 = 20;

fn include() -> String {
    format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"))
}

/// `hark run` of the program on 2 ranks; its output, profile and stdout.
fn run(
    tag: &str,
    hark_args: &[&str],
    env: &[(&str, &str)],
) -> Option<(String, Value, String, String)> {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: Open MPI is not installed");
        return None;
    }
    let dir = scratch(tag);
    let exe = compile(
        OPEN_MPI.cc,
        "counted_regions.c".as_ref(),
        &dir,
        &[&include()],
    );
    let mut command = launcher(OPEN_MPI, 2);
    command.extend([
        exe.display().to_string(),
        PAGES.to_string(),
        SLEEPS.to_string(),
    ]);
    let (out, run_dir): (_, PathBuf) = hark_run_env(&dir, hark_args, &command, env);
    assert_exit(&out, 0);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = std::fs::read_to_string(run_dir.join("report.html")).unwrap_or_default();
    Some((text, profile(&run_dir), stdout, report))
}

/// The program's own counts: `(what, rank) → (asked, measured)`.
fn own(stdout: &str, what: &str) -> Vec<(u64, u64)> {
    let mut rows: Vec<(usize, u64, u64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{what} ")))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (v[0] as usize, v[1], v[2])
        })
        .collect();
    rows.sort_unstable();
    rows.into_iter().map(|(_, a, m)| (a, m)).collect()
}

fn region_counts(p: &Value, region: &str, counter: &str) -> Vec<u64> {
    p["regions"]["paths"][region]["counters"][counter]
        .as_array()
        .unwrap_or_else(|| {
            panic!(
                "no counts of {counter} in region {region}: {}",
                p["regions"]
            )
        })
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[test]
fn region_page_faults_and_switches_match_the_program_s_own_counts() {
    let Some((text, profile, stdout, report)) = run("counters-regions", &[], &[]) else {
        return;
    };
    let p = &profile["programs"][0];
    let shown = format!(
        "{text}\ncounters: {}\ninfo: {}",
        p["counters"], p["counter_info"]
    );
    let faults = region_counts(p, "touch", "page-faults");
    let switches = region_counts(p, "sleep", "context-switches");
    let touched = own(&stdout, "touch");
    let slept = own(&stdout, "sleep");
    assert_eq!((touched.len(), slept.len()), (2, 2), "{shown}");
    for r in 0..2 {
        assert!(
            (PAGES..=PAGES + FAULT_MARGIN).contains(&faults[r]),
            "rank {r}: {} page faults in `touch`, not within [{PAGES}, {PAGES} + {FAULT_MARGIN}]\n{shown}",
            faults[r]
        );
        // The program's own count is of its thread and includes the
        // probe's recording of the region's begin and end (Hark reads
        // after it); Hark's includes the threads it started.
        assert!(
            faults[r].abs_diff(touched[r].1) <= FAULT_MARGIN,
            "rank {r}: Hark {} against the program's {}\n{shown}",
            faults[r],
            touched[r].1
        );
        // The program reads its own count after Hark's region-end reading:
        // a preemption between the two (a loaded machine) is in its count
        // only, one or two at most.
        assert!(
            switches[r] >= SLEEPS && switches[r] + 2 >= slept[r].1,
            "rank {r}: {} context switches in `sleep`, the program slept {SLEEPS} times and counted {}\n{shown}",
            switches[r],
            slept[r].1
        );
        // The whole rank counted at least what its regions did.
        let total = p["counters"][r]["page-faults"].as_u64().unwrap_or(0);
        assert!(total >= faults[r], "rank {r}: total {total}\n{shown}");
        assert!(
            p["counters"][r]["task-clock"].as_u64().unwrap_or(0) > 0,
            "{shown}"
        );
    }
    let slices = &p["timeslices"]["metrics"]["counters.page-faults"];
    let in_slices: u64 = slices
        .as_array()
        .unwrap_or_else(|| panic!("no counters.page-faults time slices\n{shown}"))
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()))
        .sum();
    let totals: u64 = (0..2)
        .map(|r| p["counters"][r]["page-faults"].as_u64().unwrap())
        .sum();
    assert_eq!(in_slices, totals, "the slices hold every fault\n{shown}");

    // The report has the table.
    assert!(
        report.contains("<th>Counter</th>") && report.contains("<td>page-faults</td>"),
        "no counters table in report.html"
    );

    // Here or not, hardware counters: counted, or refused in one line.
    let refused = &p["counter_info"]["refused"];
    match refused.get("instructions") {
        Some(why) => {
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("counters unavailable"))
                .collect();
            assert_eq!(lines.len(), 1, "one line says so\n{shown}");
            for name in ["cycles", "instructions", "cache-misses"] {
                assert!(lines[0].contains(name), "{shown}");
            }
            assert!(why.as_str().unwrap().starts_with("ENOENT"), "{shown}");
        }
        None => {
            assert!(
                p["counters"][0]["instructions"].as_u64().unwrap_or(0) > 0,
                "{shown}"
            );
        }
    }
}

#[test]
fn a_refused_perf_event_open_is_said_in_one_line_and_the_run_is_whole() {
    if !test_hooks_or_skip() {
        return;
    }
    let Some((text, profile, _, _)) = run(
        "counters-refused",
        &[],
        &[("HARK_TEST_COUNTERS_ERRNO", "13")],
    ) else {
        return;
    };
    let p = &profile["programs"][0];
    let shown = format!("{text}\ninfo: {}", p["counter_info"]);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("counters unavailable"))
        .collect();
    assert_eq!(lines.len(), 1, "one line says so\n{shown}");
    assert!(
        lines[0].contains("page-faults") && lines[0].contains("perf_event_paranoid"),
        "{shown}"
    );
    assert!(p.get("counters").is_none(), "no counts\n{shown}");
    // The rest of the run is whole: regions, MPI.
    assert_eq!(
        p["regions"]["paths"]["touch"]["calls"],
        serde_json::json!([1, 1])
    );
    assert!(p["mpi"]["MPI_Barrier"].is_object(), "{shown}");
}

#[test]
fn a_chosen_list_is_read_and_an_unknown_name_is_refused_before_the_run() {
    let Some((text, profile, _, _)) = run("counters-chosen", &["--counters", "page-faults"], &[])
    else {
        return;
    };
    let p = &profile["programs"][0];
    let names: Vec<&String> = p["counters"][0].as_object().unwrap().keys().collect();
    assert_eq!(names, ["page-faults"], "{text}");
    assert!(!text.contains("counters unavailable"), "{text}");

    let out = std::process::Command::new(hark())
        .args(["run", "--counters", "page-faults,frobs", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("unknown counter frobs") && err.contains("instructions"),
        "{err}"
    );
}
