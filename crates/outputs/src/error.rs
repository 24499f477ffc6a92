//! The one error type of this crate: what went wrong, and with which file.

use std::fmt;
use std::path::{Path, PathBuf};

/// An output could not be written, or a `profile.json` could not be read.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: PathBuf,
    source: Box<dyn std::error::Error + Send + Sync>,
}

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing a file failed.
    Io,
    /// A `profile.json` is not valid JSON or not a Hark profile.
    Json,
    /// A `profile.json` parses but contradicts itself (per-rank arrays
    /// longer than its rank count, an impossible rank count).
    Inconsistent,
    /// A trace could not be written: the trace library refused it, or this
    /// build has no support for its format.
    Trace,
}

impl Error {
    pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
        Error {
            kind: ErrorKind::Io,
            path: path.to_path_buf(),
            source: Box::new(e),
        }
    }

    pub(crate) fn json(path: &Path, e: serde_json::Error) -> Error {
        // serde_json reports I/O failures through its own type; keep them I/O.
        let kind = if e.is_io() {
            ErrorKind::Io
        } else {
            ErrorKind::Json
        };
        Error {
            kind,
            path: path.to_path_buf(),
            source: Box::new(e),
        }
    }

    pub(crate) fn inconsistent(path: &Path, what: String) -> Error {
        Error {
            kind: ErrorKind::Inconsistent,
            path: path.to_path_buf(),
            source: what.into(),
        }
    }

    pub(crate) fn trace(path: &Path, what: String) -> Error {
        Error {
            kind: ErrorKind::Trace,
            path: path.to_path_buf(),
            source: what.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The file concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Io | ErrorKind::Trace => {
                write!(f, "{}: {}", self.path.display(), self.source)
            }
            ErrorKind::Inconsistent => write!(
                f,
                "{} is not a consistent Hark profile: {}; was it edited by hand?",
                self.path.display(),
                self.source
            ),
            ErrorKind::Json => write!(
                f,
                "{} is not a Hark profile: {} (was it written by `hark run` of this version?)",
                self.path.display(),
                self.source
            ),
        }
    }
}

// The message already includes the cause (a reader needs both in one
// line), so no `source()`: error reporters that walk the chain would print
// the cause twice.
impl std::error::Error for Error {}
