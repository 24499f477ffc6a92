//! `hark run --trace`: where the trace store lives while the program runs,
//! and what becomes of it when the run directory is written.
//!
//! The run directory is named only at the end (after the program), so the
//! server writes the store into a hidden directory beside it, which is
//! then renamed to `RUN_DIR/trace/` (one rename: same file system), and
//! both trace formats are written from it.

use crate::cli::Format;
use crate::output::print_stderr;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The store's directory inside a run directory.
pub fn store_of(run_dir: &Path) -> PathBuf {
    run_dir.join("trace")
}

/// Where the server keeps the store during the run: a new hidden
/// directory in `parent`.
pub fn staging(parent: &Path) -> PathBuf {
    parent.join(format!(".hark-trace-{}", std::process::id()))
}

/// Moves the store from `staging` into `run_dir` and writes both trace
/// formats next to it (OTF2 only if this hark was built with it).
pub fn finish(staging: &Path, run_dir: &Path, quiet: bool) -> Result<()> {
    let store = store_of(run_dir);
    if store.exists() {
        std::fs::remove_dir_all(&store)
            .with_context(|| format!("cannot replace the earlier {}", store.display()))?;
    }
    std::fs::rename(staging, &store).with_context(|| {
        format!(
            "cannot move the trace store {} into the run directory",
            staging.display()
        )
    })?;
    let mut formats = vec![Format::Perfetto];
    if hark_outputs::trace::OTF2_AVAILABLE {
        formats.push(Format::Otf2);
    } else if !quiet {
        print_stderr(&format!(
            "hark: no OTF2 trace: {}\n",
            hark_outputs::trace::OTF2_MISSING
        ));
    }
    let written = crate::export::write_traces(&store, run_dir, &formats)?;
    if !quiet {
        for p in written {
            print_stderr(&format!("hark: trace written: {}\n", p.display()));
        }
    }
    Ok(())
}
