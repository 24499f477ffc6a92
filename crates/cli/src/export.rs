//! `hark export RUN_DIR --format hatchet,parquet [-o DIR]` and `hark run
//! --export FORMAT,...`: a finished run in the formats other tools read.
//! The files are functions of the run's `profile.json` (`hark-outputs`
//! for Hatchet/Thicket, `hark-tables` for Parquet); this file only picks
//! the formats and the directory. `docs/export.md` describes every file.

use crate::cli::{ExportArgs, Format};
use crate::output::print_stdout;
use anyhow::{bail, Context, Result};
use hark_model::Run;
use std::path::{Path, PathBuf};

/// Refuses formats this build cannot write, before anything runs.
pub fn check(formats: &[Format], run_dir: Option<&Path>) -> Result<()> {
    for f in formats {
        if matches!(f, Format::Otf2 | Format::Perfetto) {
            let name = f.name();
            let which = run_dir.map_or(String::new(), |d| format!(" ({} holds none)", d.display()));
            bail!(
                "cannot export {name}: it is written from a run's trace store, and this Hark has no trace store{which}; \
                 selective traces (`hark run --trace`) are not part of this version. \
                 The formats written from profile.json are: hatchet, parquet"
            );
        }
    }
    Ok(())
}

/// Writes `run` in each of `formats` into `dir` (created if missing);
/// returns the files written.
pub fn write(run: &Run, formats: &[Format], dir: &Path) -> Result<Vec<PathBuf>> {
    check(formats, None)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the export directory {}", dir.display()))?;
    let mut files = Vec::new();
    for f in formats {
        match f {
            Format::Hatchet => {
                hark_outputs::hatchet::write(run, dir)?;
                files.push(dir.join(hark_outputs::hatchet::LITERAL));
                files.push(dir.join(hark_outputs::hatchet::METADATA));
            }
            Format::Parquet => files.extend(hark_tables::write(run, dir)?),
            Format::Otf2 | Format::Perfetto => unreachable!("refused by check"),
        }
    }
    Ok(files)
}

/// Reads the `profile.json` of a run directory (or the file itself).
pub fn read_run(path: &Path) -> Result<(Run, PathBuf)> {
    let (profile, dir) = if path.is_dir() {
        (path.join(hark_outputs::json::FILE_NAME), path.to_path_buf())
    } else {
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        (path.to_path_buf(), dir)
    };
    if !profile.exists() {
        bail!(
            "{} is not a Hark run: expected a run directory holding {} (as `hark run` leaves), or the path of such a file",
            path.display(),
            hark_outputs::json::FILE_NAME
        );
    }
    Ok((hark_outputs::json::read(&profile)?, dir))
}

/// Runs `hark export`; returns the process exit status.
pub fn export(args: &ExportArgs) -> Result<i32> {
    check(&args.format, Some(&args.run_dir))?;
    let (run, dir) = read_run(&args.run_dir)?;
    let out = args.output.clone().unwrap_or(dir);
    let files = write(&run, &args.format, &out)?;
    let mut text = String::new();
    for f in files {
        text.push_str(&format!("{}\n", f.display()));
    }
    print_stdout(&text)?;
    Ok(0)
}
