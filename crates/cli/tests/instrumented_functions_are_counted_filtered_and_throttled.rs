//! A C++ program built with `g++ -finstrument-functions -g`
//! (`tests/programs/instrumented.cpp`) counts its own calls: its
//! functions are regions of the profile with those counts, a filter file
//! leaves out what it names, and the default throttling turns off the hot
//! tiny function after 100,000 calls and says so.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Builds the program into `dir`.
fn program(dir: &Path) -> String {
    compile(
        "g++",
        Path::new("instrumented.cpp"),
        dir,
        &["-finstrument-functions", "-g"],
    )
    .display()
    .to_string()
}

/// The counts the program printed: `calls: outer=1 middle=200 ...`.
fn printed(stdout: &[u8]) -> BTreeMap<String, u64> {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("calls: "))
        .unwrap_or_else(|| panic!("no counts in {text}"));
    line.split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// Calls per function over every call path ending in it (rank 0), by the
/// function's name up to its parameters (`tiny(int)` is `tiny`).
fn calls(profile: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let paths = profile["programs"][0]["regions"]["paths"]
        .as_object()
        .expect("regions in the profile");
    for (path, r) in paths {
        let leaf = path.rsplit('/').next().unwrap();
        let name = leaf.split('(').next().unwrap().to_string();
        *out.entry(name).or_default() += r["calls"][0].as_u64().unwrap();
    }
    out
}

/// `hark run ARGS -- instrumented ITERATIONS`: its output, profile and
/// summary.
fn run(dir: &Path, args: &[&str], iterations: u32) -> (std::process::Output, Value, String) {
    let exe = program(dir);
    let (out, run_dir) = hark_run(dir, args, &[exe, iterations.to_string()]);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    assert_eq!(lost(&p), 0);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    (out, p, summary)
}

#[test]
fn every_call_of_every_instrumented_function_is_a_region_call() {
    if !have("g++") {
        eprintln!("skipped: no g++");
        return;
    }
    let dir = scratch("instrumented-counts");
    let (out, p, _) = run(&dir, &["--throttle", "off"], 150);
    let want = printed(&out.stdout);
    let got = calls(&p);
    for f in ["outer", "middle", "tiny"] {
        assert_eq!(
            got.get(f),
            want.get(f),
            "{f}: profile {got:?}, program {want:?}"
        );
    }
    assert_eq!(
        want["tiny"], 150_000,
        "the hot function passes the throttle's 100,000"
    );
    let paths = p["programs"][0]["regions"]["paths"].as_object().unwrap();
    assert!(
        paths.contains_key("main/outer(int)/middle(int)/tiny(int)"),
        "functions nest as their calls do, named demangled: {:?}",
        paths.keys().collect::<Vec<_>>()
    );
    let diagnostics = p["programs"][0]["diagnostics"].to_string();
    assert!(!diagnostics.contains("throttled"), "{diagnostics}");
}

/// Calls by function name.
type Counts = BTreeMap<String, u64>;

/// The program's own counts and the profile's, run in scratch directory
/// `tag` with the filter file `text` and no throttling; `None` without g++.
fn filtered(tag: &str, text: &str) -> Option<(Scratch, Counts, Counts)> {
    if !have("g++") {
        eprintln!("skipped: no g++");
        return None;
    }
    let dir = scratch(tag);
    let filter = dir.join("filter.txt");
    std::fs::write(&filter, text).unwrap();
    let args = ["--throttle", "off", "--filter", filter.to_str().unwrap()];
    let (out, p, _) = run(&dir, &args, 50);
    Some((dir, printed(&out.stdout), calls(&p)))
}

#[test]
fn a_filter_file_leaves_out_the_functions_it_names() {
    let Some((_dir, want, got)) = filtered(
        "instrumented-filter",
        "# the hot one, by its demangled name, and one more by its mangled one\n\
         SCOREP_REGION_NAMES_BEGIN\n  EXCLUDE tiny*\n  EXCLUDE MANGLED _Z5outeri\nSCOREP_REGION_NAMES_END\n",
    ) else {
        return;
    };
    assert_eq!(got.get("tiny"), None, "{got:?}");
    assert_eq!(got.get("outer"), None, "{got:?}");
    assert_eq!(got.get("middle"), want.get("middle"), "{got:?}");
    assert_eq!(got.get("main"), Some(&1), "{got:?}");
}

/// Score-P's source-file rules: the solver's method comes from
/// `solver.cpp` (a `#line` in the program), and a file rule that excludes
/// that file leaves it out, found by the debug information's file of each
/// function; the functions of `instrumented.cpp` stay, counted in full.
#[test]
fn a_file_rule_leaves_out_the_functions_of_the_file_it_names() {
    let Some((dir, want, got)) = filtered(
        "instrumented-file-filter",
        "SCOREP_FILE_NAMES_BEGIN\n  EXCLUDE */solver.cpp solver.cpp\nSCOREP_FILE_NAMES_END\n",
    ) else {
        return;
    };
    assert!(want["step"] > 0, "{want:?}");
    assert_eq!(got.get("ns::Solver::step"), None, "{got:?}");
    for f in ["outer", "middle", "tiny"] {
        assert_eq!(got.get(f), want.get(f), "{f}: {got:?}");
    }
    assert_eq!(got.get("main"), Some(&1), "{got:?}");
    // Without the filter the solver's method is there: the rule, not its
    // absence, left it out.
    let (_, p, _) = run(&dir, &["--throttle", "off"], 50);
    assert_eq!(calls(&p).get("ns::Solver::step"), want.get("step"));
}

#[test]
fn a_bad_filter_file_is_refused_with_its_line_before_the_program_starts() {
    let dir = scratch("instrumented-bad-filter");
    let filter = dir.join("filter.txt");
    std::fs::write(
        &filter,
        "SCOREP_REGION_NAMES_BEGIN\n  tiny\nSCOREP_REGION_NAMES_END\n",
    )
    .unwrap();
    let marker = dir.join("started");
    let command = vec!["touch".to_string(), marker.display().to_string()];
    let (out, _) = hark_run(&dir, &["--filter", filter.to_str().unwrap()], &command);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:2: pattern `tiny` before any EXCLUDE or INCLUDE",
            filter.display()
        )),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program ran");
}

#[test]
fn the_hot_tiny_function_is_throttled_after_100000_calls_and_named() {
    if !have("g++") {
        eprintln!("skipped: no g++");
        return;
    }
    let dir = scratch("instrumented-throttle");
    let (out, p, summary) = run(&dir, &[], 150);
    let want = printed(&out.stdout);
    let got = calls(&p);
    // The exit that finds 100,001 calls turns it off; it is still recorded.
    assert_eq!(got.get("tiny"), Some(&100_001), "{got:?}");
    assert_eq!(got.get("middle"), want.get("middle"), "{got:?}");
    let diagnostics = p["programs"][0]["diagnostics"].to_string();
    assert!(
        diagnostics.contains("tiny(int) was throttled in 1 process(es) after 100001 calls"),
        "{diagnostics}"
    );
    assert!(
        !diagnostics.contains("middle(int) was throttled"),
        "{diagnostics}"
    );
    assert!(summary.contains("tiny(int) was throttled"), "{summary}");
}

/// The number in column `col` of the line of `hark estimate`'s output
/// that starts with `row`.
fn column(text: &str, row: &str, col: usize) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(row))
        .unwrap_or_else(|| panic!("no `{row}` in {text}"));
    let rest = line.trim_start().strip_prefix(row).unwrap();
    rest.split_whitespace().nth(col).unwrap().parse().unwrap()
}

#[test]
fn hark_estimate_of_a_run_predicts_a_four_times_longer_one_and_suggests_a_filter() {
    if !have("g++") {
        eprintln!("skipped: no g++");
        return;
    }
    let dir = scratch("instrumented-estimate");
    let exe = program(&dir);
    let mut runs = Vec::new();
    for (name, iterations) in [("short", 100), ("long", 400)] {
        let out_dir = dir.join(name);
        let out = hark_run_command(
            &dir,
            &out_dir,
            &["--throttle", "off"],
            &[exe.clone(), iterations.to_string()],
        )
        .output()
        .unwrap();
        assert_exit(&out, 0);
        runs.push(out_dir);
    }
    let short = profile(&runs[0]);
    let long = profile(&runs[1]);
    let seconds = short["programs"][0]["wall_ns"].as_u64().unwrap() as f64 / 1e9;
    let out = std::process::Command::new(hark())
        .arg("estimate")
        .arg(&runs[0])
        .args(["--seconds", &(4.0 * seconds).to_string()])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let predicted = column(&text, "as measured", 0);
    let measured = long["accounting"]["events_written"].as_u64().unwrap() as f64;
    let error = (predicted - measured).abs() / measured;
    assert!(
        error < 0.2,
        "predicted {predicted} events, the 4x run wrote {measured} ({:.1} % off)\n{text}",
        100.0 * error
    );
    // The hot tiny function is nearly all of the events: the filter takes them.
    let filtered = column(&text, "with the filter", 0);
    assert!(filtered < 0.05 * predicted, "{text}");
    assert!(text.contains("tiny(int)"), "{text}");

    // The filter it wrote leaves out the tiny function in a run.
    let filter = runs[0].join("filter.txt");
    let again = dir.join("filtered");
    let out = hark_run_command(
        &dir,
        &again,
        &["--throttle", "off", "--filter", filter.to_str().unwrap()],
        &[exe, "100".to_string()],
    )
    .output()
    .unwrap();
    assert_exit(&out, 0);
    let got = calls(&profile(&again));
    assert_eq!(got.get("tiny"), None, "{got:?}");
    assert_eq!(got.get("middle"), Some(&100), "{got:?}");
    let events = profile(&again)["accounting"]["events_written"]
        .as_u64()
        .unwrap() as f64;
    let short_filtered = column(&text, "with the filter", 0) / 4.0;
    assert!(
        (events - short_filtered).abs() / events < 0.2,
        "the filtered run wrote {events} events, the estimate said {short_filtered} at its length\n{text}"
    );
}

#[test]
fn an_instrumented_mpi_program_s_main_ends_at_finalize_and_holds_its_mpi_calls() {
    if !have(OPEN_MPI.cc) || !have(OPEN_MPI.run) {
        eprintln!("skipped: no Open MPI");
        return;
    }
    let dir = scratch("instrumented-mpi");
    let exe = compile(
        OPEN_MPI.cc,
        Path::new("ring.c"),
        &dir,
        &["-finstrument-functions", "-g"],
    );
    let mut command = launcher(OPEN_MPI, 2);
    command.push(exe.display().to_string());
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let p = profile(&run_dir);
    let program = &p["programs"][0];
    let main = &program["regions"]["paths"]["main"];
    assert_eq!(main["calls"], serde_json::json!([1, 1]), "{program:#}");
    // Still open when MPI_Finalize ended the stream: ended there, timed.
    for r in 0..2 {
        assert!(main["inclusive_ns"][r].as_u64().unwrap() > 0, "{main}");
    }
    let sends = &program["regions"]["mpi"]["main"]["MPI_Isend"]["calls"];
    assert_eq!(sends, &serde_json::json!([100, 100]), "{program:#}");
    assert_eq!(sends, &program["mpi"]["MPI_Isend"]["calls"], "{program:#}");
    let diagnostics = program["diagnostics"].to_string();
    assert!(!diagnostics.contains("still open"), "{diagnostics}");
}
