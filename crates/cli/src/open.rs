//! `hark open RUN_DIR`: the live view of finished runs, served until
//! interrupted.

use crate::output::print_stderr;
use anyhow::{anyhow, Context, Result};
use clap::Args;
use hark_live::{Live, Runs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const EXAMPLES: &str = "\
Examples:
  hark open hark-app-20260101-120000
  hark open --http 0.0.0.0:8080 run-a run-b";

/// Options of `hark open`.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// Run directories (or their profile.json), each shown as a run named
    /// after its directory.
    #[arg(value_name = "RUN_DIR", required = true)]
    pub run_dirs: Vec<PathBuf>,

    /// Serve on HOST:PORT (port 0 picks a free one).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    pub http: String,
}

/// Runs `hark open`: never returns unless the address cannot be served or
/// a run cannot be read.
pub fn open(args: &OpenArgs) -> Result<i32> {
    let runs = Arc::new(Runs::default());
    for dir in &args.run_dirs {
        let (id, run) = read_run(dir)?;
        runs.add_finished(&id, run);
    }
    let live = Live::start(&args.http, runs).map_err(|e| anyhow!("{e} (--http)"))?;
    print_stderr(&format!(
        "hark: serving {} run(s) at {} (Ctrl-C to stop)\n",
        args.run_dirs.len(),
        live.url()
    ));
    loop {
        std::thread::park();
    }
}

/// A run directory's id (its name) and model.
pub fn read_run(path: &Path) -> Result<(String, hark_model::Run)> {
    let (profile, dir) = if path.is_dir() {
        (path.join(hark_outputs::json::FILE_NAME), path.to_path_buf())
    } else {
        (
            path.to_path_buf(),
            path.parent()
                .map_or_else(|| PathBuf::from("."), PathBuf::from),
        )
    };
    if !profile.exists() {
        anyhow::bail!(
            "{} is not a Hark run: expected a run directory holding {} (as `hark run` leaves)",
            path.display(),
            hark_outputs::json::FILE_NAME
        );
    }
    let run = hark_outputs::json::read(&profile)
        .with_context(|| format!("cannot read the run {}", path.display()))?;
    let id = std::fs::canonicalize(&dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "run".into());
    Ok((id, run))
}
