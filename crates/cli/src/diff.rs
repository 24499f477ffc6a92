//! `hark diff RUN_A RUN_B [-o diff.html]`: what changed between two runs,
//! the differences that matter first (`hark_outputs::diff` compares).

use crate::cli::DiffArgs;
use crate::output::print_stdout;
use anyhow::{Context, Result};

/// Runs `hark diff`; returns the process exit status.
pub fn diff(args: &DiffArgs) -> Result<i32> {
    let (a, _) = crate::export::read_run(&args.run_a)?;
    let (b, _) = crate::export::read_run(&args.run_b)?;
    let d = hark_outputs::diff::compare(&a, &b);
    let (na, nb) = (
        args.run_a.display().to_string(),
        args.run_b.display().to_string(),
    );
    if let Some(path) = &args.html {
        std::fs::write(path, hark_outputs::diff::html(&d, &na, &nb))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_stdout(&hark_outputs::diff::text(&d, &na, &nb))?;
    Ok(0)
}
