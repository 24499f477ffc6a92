//! The one error type of the wire crate.

use std::fmt;

/// What went wrong while reading a stream.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
}

/// The kind of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The bytes do not follow the format; the text says where and how.
    Malformed(String),
    /// The peer speaks a version this build does not read.
    Version {
        /// The version the peer announced.
        found: u16,
    },
    /// The stream ended inside a frame.
    Truncated,
    /// Reading from the underlying stream failed.
    Io(std::io::Error),
    /// A setting or option cannot be used (`partition`); the text says
    /// which, and what is expected.
    Invalid(String),
}

impl Error {
    pub(crate) fn malformed(what: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Malformed(what.into()),
        }
    }
    /// What kind of error this is.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error { kind }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Malformed(what) => write!(f, "malformed Hark stream: {what}"),
            ErrorKind::Version { found } => write!(
                f,
                "Hark stream version {found} is not readable by this build (it reads version {}); use a probe and server from the same release",
                crate::VERSION
            ),
            ErrorKind::Truncated => write!(f, "Hark stream ended in the middle of a frame"),
            ErrorKind::Io(e) => write!(f, "reading Hark stream: {e}"),
            ErrorKind::Invalid(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
