//! `hark diff RUN_A RUN_B [-o diff.html]` and
//! `hark diff A1 A2 ... -- B1 B2 ...`: what changed between two runs (or
//! repeated runs of either side), the differences that matter first
//! (`hark_outputs::diff` compares).

use crate::cli::{DiffArgs, ScalingArgs};
use crate::output::print_stdout;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// Runs `hark diff`; returns the process exit status.
pub fn diff(args: &DiffArgs) -> Result<i32> {
    let (before, after): (&[PathBuf], &[PathBuf]) = if args.after.is_empty() {
        match &args.runs[..] {
            [a, b] => (std::slice::from_ref(a), std::slice::from_ref(b)),
            runs => bail!(
                "hark diff: {} run(s) given and none after a `--`: give two runs (RUN_A RUN_B), or repeated runs as `hark diff A1 A2 ... -- B1 B2 ...`",
                runs.len()
            ),
        }
    } else {
        (&args.runs, &args.after)
    };
    let read = |paths: &[PathBuf]| -> Result<Vec<hark_model::Run>> {
        paths
            .iter()
            .map(|p| crate::export::read_run(p).map(|(run, _)| run))
            .collect()
    };
    let (a, b) = (read(before)?, read(after)?);
    let d = hark_outputs::diff::compare_repeated(&a, &b);
    let (na, nb) = (names(before), names(after));
    if let Some(path) = &args.html {
        std::fs::write(path, hark_outputs::diff::html(&d, &na, &nb))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_stdout(&hark_outputs::diff::text(&d, &na, &nb))?;
    Ok(0)
}

/// Runs `hark scaling`: the POP table of a scaling series
/// (`hark_outputs::scaling`); returns the process exit status.
pub fn scaling(args: &ScalingArgs) -> Result<i32> {
    let runs = args
        .runs
        .iter()
        .map(|p| crate::export::read_run(p).map(|(run, _)| (p.display().to_string(), run)))
        .collect::<Result<Vec<_>>>()?;
    print_stdout(&hark_outputs::scaling::text(&runs))?;
    Ok(0)
}

/// The runs of one side, for the header.
fn names(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}
