//! `hark run -v` ends with `hark`'s own CPU time and the events it analysed
//! per CPU-second (`N s CPU for E events: R M events per CPU-second`), and
//! each analyser rank's `-v` line under `--analysers` ends with its own
//! (README, "Verbose output"). The numbers are checked against each other
//! and against the run: E is the run's analysed events, R is E over N.
//! The analysers' run also says no rank missing when every writer's
//! stream arrived (its `missing` counts writers, not the analyser ranks).

mod common;

use common::*;

/// `(cpu_seconds, events, millions_per_cpu_second)` from a line holding
/// `N s CPU for E events: R M events per CPU-second`.
fn rate_of(line: &str) -> (f64, u64, f64) {
    let at = line
        .rfind(" s CPU for ")
        .unwrap_or_else(|| panic!("no ` s CPU for ` in {line}"));
    let cpu = line[..at].split_whitespace().last().unwrap();
    let rest: Vec<&str> = line[at + " s CPU for ".len()..]
        .split_whitespace()
        .collect();
    // `E events: R M events per CPU-second`
    assert_eq!(rest.get(1), Some(&"events:"), "{line}");
    assert_eq!(
        rest.get(3..),
        Some(&["M", "events", "per", "CPU-second"][..]),
        "{line}"
    );
    let number = |w: &str| w.parse::<f64>().unwrap_or_else(|_| panic!("{w} in {line}"));
    (number(cpu), rest[0].parse().unwrap(), number(rest[2]))
}

/// The rate says events over CPU time, to the printed digits.
fn consistent(line: &str) -> (f64, u64) {
    let (cpu, events, rate) = rate_of(line);
    assert!(cpu > 0.0, "no CPU time: {line}");
    // The CPU time is printed to the millisecond: the rate it implies may
    // be off by that rounding, and the rate itself by its own.
    let low = events as f64 / (cpu + 0.0005) / 1e6 - 0.0005;
    let high = events as f64 / (cpu - 0.0005).max(1e-9) / 1e6 + 0.0005;
    assert!(
        (low..=high).contains(&rate),
        "{rate} M/s is not {events} events over {cpu} s: {line}"
    );
    (cpu, events)
}

fn ring(dir: &std::path::Path, np: usize) -> Vec<String> {
    let exe = compile(OPEN_MPI.cc, "ring.c".as_ref(), dir, &[]);
    let mut command = launcher(OPEN_MPI, np);
    command.extend([exe.display().to_string(), "200".into()]);
    command
}

#[test]
fn the_last_verbose_line_is_hark_s_cpu_time_and_events_per_cpu_second() {
    if !have(OPEN_MPI.cc) {
        eprintln!(
            "skipped: needs {} (scripts/deps.sh installs it)",
            OPEN_MPI.name
        );
        return;
    }
    let dir = scratch("cpu-rate");
    let command = ring(&dir, 2);
    let (out, run_dir) = hark_run(&dir, &["-v", "--no-http"], &command);
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    let hark_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("hark: ")).collect();
    let last = hark_lines.last().expect("no -v line");
    assert!(last.contains(" M events per CPU-second"), "{err}");
    let (_, events) = consistent(last);
    let p = profile(&run_dir);
    assert_eq!(
        Some(events),
        p["accounting"]["events_analysed"].as_u64(),
        "{err}"
    );
    assert!(events > 400, "the ring's 2 × 200 sends at least: {err}");
}

#[test]
fn each_analyser_rank_says_its_own_events_per_cpu_second() {
    if !have(OPEN_MPI.cc) {
        eprintln!(
            "skipped: needs {} (scripts/deps.sh installs it)",
            OPEN_MPI.name
        );
        return;
    }
    let dir = scratch("cpu-rate-analysers");
    let command = ring(&dir, 2);
    let (out, run_dir) = hark_run(&dir, &["-v", "--no-http", "--analysers", "2"], &command);
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" events from ") && l.contains("analyser rank"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per analyser rank: {err}");
    let mut total = 0;
    for l in &lines {
        assert!(l.ends_with(" M events per CPU-second"), "{l}");
        let (_, events) = consistent(l);
        // The line's own count, said before the rate, is the same.
        // "hark: analyser rank R: E events from W writer(s), ..."
        let said: u64 = l
            .split(": ")
            .nth(2)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no event count in {l}"));
        assert_eq!(said, events, "{l}");
        total += events;
    }
    let p = profile(&run_dir);
    assert_eq!(
        Some(total),
        p["accounting"]["events_analysed"].as_u64(),
        "{err}"
    );
    // The same run's missing ranks: the analysers fill them from the job's
    // size less their own ranks (a launcher's world of 4 here), so every
    // writer measured leaves none, and the summary names none.
    let missing = p["missing"].as_array().map_or(0, Vec::len);
    assert_eq!(missing, 0, "{}", p["missing"]);
    assert!(!err.contains("ranks measured"), "{err}");
}
