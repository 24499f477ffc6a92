//! The one error type of the server crate.

use std::fmt;

/// Why the server could not start.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
}

/// The kind of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The listening address could not be bound (bad form, in use, no permission).
    Listen(hark_transport::Error),
    /// The analyses asked for do not exist.
    Analyses(hark_analyses::Error),
    /// The trace store could not be created or read back.
    Trace(String),
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Error {
        Error { kind }
    }
    /// What kind of error this is.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Listen(e) => write!(f, "the Hark server cannot listen: {e}"),
            ErrorKind::Analyses(e) => write!(f, "bad analysis selection: {e}"),
            ErrorKind::Trace(what) => write!(f, "trace store: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Listen(e) => Some(e),
            ErrorKind::Analyses(e) => Some(e),
            ErrorKind::Trace(_) => None,
        }
    }
}
