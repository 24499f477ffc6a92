//! `hark export RUN_DIR --format FORMAT,... [-o DIR]`: a finished run in the
//! formats other tools read. The trace formats (`otf2`, `perfetto`) are
//! written from the run's trace store (`RUN_DIR/trace/`, kept by
//! `hark run --trace`).

use crate::cli::ExportArgs;
use crate::output::print_stderr;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// The formats this file knows.
pub const FORMATS: &[&str] = &["otf2", "perfetto"];

/// Runs `hark export`; returns the process exit status.
pub fn export(args: &ExportArgs) -> Result<i32> {
    for f in &args.format {
        if !FORMATS.contains(&f.as_str()) {
            bail!(
                "unknown export format `{f}`: choose among {}",
                FORMATS.join(", ")
            );
        }
    }
    let out = args.output.clone().unwrap_or_else(|| args.run_dir.clone());
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let store = crate::trace::store_of(&args.run_dir);
    for path in write_traces(&store, &out, &args.format)? {
        if !args.quiet {
            print_stderr(&format!("hark: wrote {}\n", path.display()));
        }
    }
    Ok(0)
}

/// Writes the trace formats among `formats` from the store in `store` into
/// `out`; returns the paths written.
pub fn write_traces(
    store: &Path,
    out: &Path,
    formats: &[String],
) -> Result<Vec<std::path::PathBuf>> {
    if !store.join(hark_server::trace::INDEX).exists() {
        bail!(
            "{} holds no trace store: run the program with `hark run --trace` to keep one",
            store.parent().unwrap_or(store).display()
        );
    }
    let trace = hark_server::trace::read(store)
        .map_err(|e| anyhow::anyhow!("cannot read the trace store: {e}"))?;
    let mut written = Vec::new();
    for f in formats {
        written.push(match f.as_str() {
            "otf2" => hark_outputs::trace::write_otf2(&trace, out)?,
            "perfetto" => hark_outputs::trace::write_perfetto(&trace, out)?,
            _ => continue,
        });
    }
    Ok(written)
}
