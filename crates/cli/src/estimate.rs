//! `hark estimate RUN_DIR [--ranks N] [--seconds S]`: what measuring the
//! same program at another scale will cost, from a short run's profile,
//! with and without a suggested filter of instrumented functions, which it
//! writes (as `scorep-score -g` proposes one).
//!
//! The model (`docs/analyses.md`, "Estimating a run"): every process
//! records events at the rate it did in the run (events written ÷
//! processes ÷ the program's wall time), so a run of N processes for S
//! seconds records `rate × N × S` events, each a 48-byte record on the
//! wire, and each costs its process about `--event-ns` of added time. A
//! region (an instrumented function) is two events per call; the filter
//! suggested leaves out the functions with at least 1 % of the run's
//! events whose calls took under 10 µs each (TAU's throttling bound), never
//! `main`, and its events are taken off at the same rate.

use crate::cli::EstimateArgs;
use crate::output::print_stdout;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Bytes per event on the wire.
const EVENT_BYTES: f64 = 48.0;
/// A suggested function holds at least this share of the run's events...
const MIN_SHARE: f64 = 0.01;
/// ...and its calls took less than this each, inclusive.
const MAX_NS_PER_CALL: f64 = 10_000.0;

/// One function's calls and inclusive time over every rank and call path.
#[derive(Default)]
struct Function {
    calls: u64,
    inclusive_ns: u64,
}

/// Runs `hark estimate`; returns the process exit status.
pub fn estimate(args: &EstimateArgs) -> Result<i32> {
    let (profile, dir) = crate::report::profile_of(&args.run_dir)?;
    let run = hark_outputs::json::read(&profile)?;
    let processes: usize = run.programs.iter().map(|p| p.ranks).sum();
    let wall_ns = run.programs.iter().map(|p| p.wall_ns).max().unwrap_or(0);
    if processes == 0 || wall_ns == 0 {
        anyhow::bail!(
            "{} has no measured process with a wall time: nothing to scale from; measure a run first",
            profile.display()
        );
    }
    let events = run.accounting.events_written as f64;
    let seconds = wall_ns as f64 / 1e9;
    let rate = events / processes as f64 / seconds;
    let target_n = args.ranks.unwrap_or(processes as u64) as f64;
    let target_s = args.seconds.unwrap_or(seconds);

    let mut functions: BTreeMap<String, Function> = BTreeMap::new();
    for p in &run.programs {
        for (path, r) in &p.regions.paths {
            let leaf = path.rsplit('/').next().unwrap_or(path);
            let f = functions.entry(leaf.to_string()).or_default();
            f.calls += r.calls.iter().sum::<u64>();
            f.inclusive_ns += r.inclusive_ns.iter().sum::<u64>();
        }
    }
    let mut suggested: Vec<(&String, &Function)> = functions
        .iter()
        .filter(|(name, f)| {
            let per_call = f.inclusive_ns as f64 / f.calls.max(1) as f64;
            name.as_str() != "main"
                && 2.0 * f.calls as f64 >= MIN_SHARE * events
                && per_call < MAX_NS_PER_CALL
        })
        .collect();
    suggested.sort_by_key(|(_, f)| std::cmp::Reverse(f.calls));
    let removed: f64 = suggested.iter().map(|(_, f)| 2.0 * f.calls as f64).sum();
    let filtered_rate = (events - removed).max(0.0) / processes as f64 / seconds;

    let filter_path = args
        .filter_out
        .clone()
        .unwrap_or_else(|| dir.join("filter.txt"));
    std::fs::write(&filter_path, filter_text(&suggested)).with_context(|| {
        format!(
            "cannot write the suggested filter to {}; give another path with --filter-out",
            filter_path.display()
        )
    })?;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured: {processes} process(es) for {seconds:.3} s, {} events ({:.0} events/s per process)",
        run.accounting.events_written, rate
    );
    let _ = writeln!(
        out,
        "Target:   {} process(es) for {target_s:.3} s, at {} ns added per event",
        target_n, args.event_ns
    );
    let _ = writeln!(
        out,
        "  {:<14} {:>14} {:>18} {:>22}",
        "", "events", "MB/s per process", "added s per process"
    );
    for (what, r) in [("as measured", rate), ("with the filter", filtered_rate)] {
        let _ = writeln!(
            out,
            "  {what:<14} {:>14.0} {:>18.3} {:>22.3}",
            r * target_n * target_s,
            r * EVENT_BYTES / 1e6,
            r * target_s * args.event_ns / 1e9
        );
    }
    if suggested.is_empty() {
        let _ = writeln!(
            out,
            "No function has 1 % of the events at under 10 µs per call: {} holds an empty filter.",
            filter_path.display()
        );
    } else {
        let names: Vec<String> = suggested
            .iter()
            .map(|(name, f)| {
                format!(
                    "{name} ({:.1} % of the events, {:.2} µs per call)",
                    200.0 * f.calls as f64 / events,
                    f.inclusive_ns as f64 / f.calls.max(1) as f64 / 1000.0
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "Suggested filter ({}, for hark run --filter) leaves out {} function(s): {}",
            filter_path.display(),
            suggested.len(),
            names.join(", ")
        );
    }
    print_stdout(&out)?;
    Ok(0)
}

/// A Score-P filter file excluding `functions`; characters a glob or the
/// file's syntax reads (space, `*`, `?`, `[`, `]`, `#`) match as `?`.
fn filter_text(functions: &[(&String, &Function)]) -> String {
    let mut s = String::from(
        "# Suggested by hark estimate: functions with many calls and short time per call.\n\
         SCOREP_REGION_NAMES_BEGIN\n",
    );
    for (name, _) in functions {
        let pattern: String = name
            .chars()
            .map(|c| {
                if c.is_whitespace() || matches!(c, '*' | '?' | '[' | ']' | '#') {
                    '?'
                } else {
                    c
                }
            })
            .collect();
        let _ = writeln!(s, "  EXCLUDE {pattern}");
    }
    s.push_str("SCOREP_REGION_NAMES_END\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggested_filter_reads_back_and_excludes_what_it_names() {
        let f = Function::default();
        let (a, b) = (
            "tiny(int)".to_string(),
            "ns::f<int*>(int, double)".to_string(),
        );
        let text = filter_text(&[(&a, &f), (&b, &f)]);
        let filter = hark_settings::Filter::parse(&text).unwrap();
        assert!(filter.excludes(&a, ""));
        assert!(filter.excludes(&b, ""));
        assert!(!filter.excludes("main", ""));
    }
}
