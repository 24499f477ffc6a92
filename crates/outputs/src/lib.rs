//! The outputs of a Hark run: what a person reads once the program ends.
//!
//! Every output is a function of a [`hark_model::Run`] and writes its files
//! into a run directory:
//!
//! | name      | file              | module                    |
//! |-----------|-------------------|---------------------------|
//! | `summary` | `summary.txt`     | [`summary`] (also printed) |
//! | `json`    | `profile.json`    | [`json`] (the model, read back by `hark report`) |
//! | `dot`     | `topology/*.dot`  | [`dot`] (Graphviz, one graph per program) |
//! | `html`    | `report.html`     | [`html`] (self-contained, works offline) |
//!
//! The list lives in one place, [`OUTPUTS`]; [`write_all`] writes them all (or
//! those a filter keeps). `docs/outputs.md` describes what each file holds.
//!
//! ```
//! use hark_model::{Run, Program};
//!
//! let mut run = Run { hark_version: "0.1.0".into(), ..Run::default() };
//! run.programs.push(Program { name: "app".into(), ranks: 1, ..Program::default() });
//!
//! let dir = std::env::temp_dir().join(format!("hark-doc-{}", std::process::id()));
//! hark_outputs::write_all(&run, &dir, |_| true).unwrap();
//! assert!(dir.join("report.html").exists());
//! assert!(hark_outputs::summary::render(&run).contains("== app"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
#![deny(missing_docs)]

pub mod diff;
pub mod dot;
pub mod ending;
mod error;
mod facts;
pub mod hatchet;
pub mod html;
pub mod json;
mod registry;
pub mod roles;
pub mod scaling;
pub mod summary;
pub mod trace;
pub mod units;

pub use error::{Error, ErrorKind};
pub use registry::OUTPUTS;

use hark_model::Run;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// One output: a set of files in a run directory rendered from a [`Run`].
pub trait Output: Sync {
    /// The name that selects this output (`summary`, `json`, `dot`, `html`).
    fn name(&self) -> &'static str;

    /// Writes this output's files for `run` into `dir`, which exists.
    ///
    /// `Ok` means every file is complete. An error names the file that could
    /// not be written; [`write_all`] still writes the other outputs.
    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error>;
}

/// Writes every output whose name `keep` accepts into `dir`, creating it if
/// needed. All outputs are attempted; the first error is returned.
pub fn write_all(run: &Run, dir: &Path, keep: impl Fn(&str) -> bool) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut first = None;
    for out in OUTPUTS.iter().filter(|o| keep(o.name())) {
        if let Err(e) = out.write(run, dir) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Writes `bytes` to `path` whole or not at all (see [`write_with`]),
/// naming the path in any error.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_with(path, |w| w.write_all(bytes).map_err(|e| Error::io(path, e)))
}

/// Writes `path` whole or not at all: `fill` writes into a temporary file
/// beside it, which is synced and then renamed over `path`. If anything
/// fails (a full disk, a quota) the temporary file is removed, so a run
/// directory never holds a truncated `profile.json` that looks complete.
pub(crate) fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let written = File::create(&tmp)
        .map_err(|e| Error::io(&tmp, e))
        .and_then(|file| {
            let mut w = BufWriter::new(file);
            fill(&mut w)?;
            let file = w
                .into_inner()
                .map_err(|e| Error::io(path, e.into_error()))?;
            file.sync_all().map_err(|e| Error::io(path, e))
        })
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
