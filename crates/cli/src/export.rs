//! `hark export RUN_DIR --format otf2|perfetto|hatchet|parquet [-o DIR]` and
//! `hark run --export FORMAT,...`: a finished run in the formats other tools
//! read. Hatchet/Thicket (`hark-outputs`) and Parquet (`hark-tables`) are
//! functions of the run's `profile.json`; the trace formats (`otf2`,
//! `perfetto`) are written from the run's trace store (`RUN_DIR/trace/`,
//! kept by `hark run --trace`). This file only picks the formats and the
//! directories. `docs/export.md` and `docs/trace.md` describe every file.

use crate::cli::{ExportArgs, Format};
use crate::output::print_stdout;
use anyhow::{bail, Context, Result};
use hark_model::Run;
use std::path::{Path, PathBuf};

/// Refuses formats this run or this build cannot give, before anything is
/// written: the trace formats need the run's trace store, and OTF2 needs a
/// hark built with libotf2.
pub fn check(formats: &[Format], run_dir: &Path) -> Result<()> {
    for f in formats {
        if !matches!(f, Format::Otf2 | Format::Perfetto) {
            continue;
        }
        let store = crate::trace::store_of(run_dir);
        if !store.join(hark_server::trace::INDEX).exists() {
            bail!(
                "cannot export {}: {} holds no trace store; run the program with `hark run --trace` to keep one \
                 (hatchet and parquet are written from profile.json and need none)",
                f.name(),
                run_dir.display()
            );
        }
        if *f == Format::Otf2 && !hark_outputs::trace::OTF2_AVAILABLE {
            bail!("cannot export otf2: {}", hark_outputs::trace::OTF2_MISSING);
        }
    }
    Ok(())
}

/// Refuses, before the program starts, `hark run --export` formats the run
/// will not be able to give: trace formats without `--trace`, OTF2 without
/// libotf2.
pub fn check_before_run(formats: &[Format], tracing: bool) -> Result<()> {
    for f in formats {
        if matches!(f, Format::Otf2 | Format::Perfetto) && !tracing {
            bail!(
                "--export {} needs a trace: add --trace (or --trace=SPEC) to keep the events it is written from",
                f.name()
            );
        }
        if *f == Format::Otf2 && !hark_outputs::trace::OTF2_AVAILABLE {
            bail!("--export otf2: {}", hark_outputs::trace::OTF2_MISSING);
        }
    }
    Ok(())
}

/// Writes `run`, whose run directory is `run_dir`, in each of `formats`
/// into `out` (created if missing); returns the files written.
pub fn write(run: &Run, run_dir: &Path, formats: &[Format], out: &Path) -> Result<Vec<PathBuf>> {
    check(formats, run_dir)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the export directory {}", out.display()))?;
    let mut files = Vec::new();
    for f in formats {
        match f {
            Format::Hatchet => {
                hark_outputs::hatchet::write(run, out)?;
                files.push(out.join(hark_outputs::hatchet::GRAPHFRAME));
                files.push(out.join(hark_outputs::hatchet::METADATA));
            }
            Format::Parquet => files.extend(hark_tables::write(run, out)?),
            Format::Otf2 | Format::Perfetto => {
                files.extend(write_traces(&crate::trace::store_of(run_dir), out, &[*f])?)
            }
        }
    }
    Ok(files)
}

/// Writes the trace formats among `formats` from the store in `store` into
/// `out`; returns the paths written.
pub fn write_traces(store: &Path, out: &Path, formats: &[Format]) -> Result<Vec<PathBuf>> {
    if !store.join(hark_server::trace::INDEX).exists() {
        bail!(
            "{} holds no trace store: run the program with `hark run --trace` to keep one",
            store.parent().unwrap_or(store).display()
        );
    }
    let trace = hark_server::trace::read(store)
        .map_err(|e| anyhow::anyhow!("cannot read the trace store {}: {e}", store.display()))?;
    let sources = sources_of(&trace);
    let mut written = Vec::new();
    for f in formats {
        written.push(match f {
            Format::Otf2 => hark_outputs::trace::write_otf2(&trace, &sources, out)?,
            Format::Perfetto => hark_outputs::trace::write_perfetto(&trace, &sources, out)?,
            Format::Hatchet | Format::Parquet => continue,
        });
    }
    Ok(written)
}

/// The file and line of every call site of `trace` the objects' debug
/// information names, as the profile's call sites are named.
fn sources_of(trace: &hark_engine::trace::Trace) -> hark_outputs::trace::Sources {
    let resolver = hark_server::resolve::Resolver::get();
    hark_outputs::trace::Sources::of(trace, |path, build_id, offset| {
        let place = resolver.place(path, build_id, offset);
        Some(hark_outputs::trace::Source {
            file: place.file?,
            line: place.line?,
        })
    })
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
    // The formats first: a trace format needs the store, whatever the profile.
    let dir = if args.run_dir.is_dir() {
        args.run_dir.clone()
    } else {
        args.run_dir
            .parent()
            .map_or_else(|| PathBuf::from("."), PathBuf::from)
    };
    check(&args.format, &dir)?;
    let (run, dir) = read_run(&args.run_dir)?;
    let out = args.output.clone().unwrap_or_else(|| dir.clone());
    let files = write(&run, &dir, &args.format, &out)?;
    if !args.quiet {
        let mut text = String::new();
        for f in files {
            text.push_str(&format!("{}\n", f.display()));
        }
        print_stdout(&text)?;
    }
    Ok(0)
}
