//! The one error type of the analyses crate. Analyses themselves never fail
//! (they report diagnostics); only configuring them can.

use std::fmt;

/// What went wrong.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
}

/// The kind of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A selection named an analysis that does not exist; the text lists those that do.
    UnknownAnalysis(String),
    /// The board refused an entry or a knowledge source (shutting down, level retired).
    Board(String),
    /// A partial result could not be read or merged; the text says why.
    Partial(String),
}

impl Error {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind) -> Error {
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
            ErrorKind::UnknownAnalysis(what) => f.write_str(what),
            ErrorKind::Board(what) => write!(f, "the analysis board refused: {what}"),
            ErrorKind::Partial(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {}
