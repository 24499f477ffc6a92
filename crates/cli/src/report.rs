//! `hark report RUN_DIR`: render a finished run again from its
//! `profile.json`.

use crate::cli::ReportArgs;
use crate::output::print_stdout;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Runs `hark report`; returns the process exit status.
pub fn report(args: &ReportArgs) -> Result<i32> {
    let (profile, dir) = profile_of(&args.run_dir)?;
    let run = hark_outputs::json::read(&profile)?;
    let out = args.output.clone().unwrap_or(dir);
    hark_outputs::write_all(&run, &out, |name| {
        name != "json" && !(args.no_html && name == "html")
    })
    .with_context(|| format!("cannot write the outputs into {}", out.display()))?;
    if !args.quiet {
        print_stdout(&hark_outputs::summary::render(&run))?;
    }
    Ok(0)
}

/// The `profile.json` of `run_dir` (a run directory, or the file itself)
/// and the directory holding it; an error when there is none.
pub fn profile_of(run_dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let (profile, dir) = if run_dir.is_dir() {
        (
            run_dir.join(hark_outputs::json::FILE_NAME),
            run_dir.to_path_buf(),
        )
    } else {
        let dir = run_dir
            .parent()
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        (run_dir.to_path_buf(), dir)
    };
    if !profile.exists() {
        anyhow::bail!(
            "{} is not a Hark run: expected a run directory holding {} (as `hark run` leaves), or the path of a {} file",
            run_dir.display(),
            hark_outputs::json::FILE_NAME,
            hark_outputs::json::FILE_NAME
        );
    }
    Ok((profile, dir))
}
