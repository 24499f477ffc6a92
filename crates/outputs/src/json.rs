//! `profile.json`: the whole model, as serde writes it. The schema is the
//! model's (`hark_model`), documented in `docs/profile-json.md`; `hark
//! report` reads it back with [`read`] to render the other outputs again.

use crate::{Error, Output};
use hark_model::Run;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;

/// The file name inside a run directory.
pub const FILE_NAME: &str = "profile.json";

/// `run` as pretty-printed JSON.
pub fn render(run: &Run) -> String {
    // Serialising plain data into memory cannot fail: the model has only
    // string keys and finite numbers.
    serde_json::to_string_pretty(run).expect("the model serialises to JSON")
}

/// Reads a `profile.json` as `hark run` writes it (directly, or a run directory's).
pub fn read(path: &Path) -> Result<Run, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_reader(BufReader::new(file)).map_err(|e| Error::json(path, e))
}

/// Writes `profile.json`.
pub(crate) struct Json;

impl Output for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error> {
        let path = dir.join(FILE_NAME);
        crate::write_with(&path, |w| {
            serde_json::to_writer_pretty(&mut *w, run).map_err(|e| Error::json(&path, e))?;
            w.write_all(b"\n").map_err(|e| Error::io(&path, e))
        })
    }
}
