//! The one error type of the analyser runtime.
//!
//! An error says what failed, in a sentence for the user, and keeps the
//! error beneath it as its source; `hark`'s binary prints the chain. The
//! kind tells a caller which part of the runtime failed.

use std::fmt;

/// Why an analyser rank, its keeper, or `hark run`'s end of them failed.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    what: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The kind of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The MPI library could not be opened (the source says why).
    Library,
    /// An MPI call an analyser rank makes failed.
    Mpi,
    /// The job does not have the shape the analysers need (their ranks
    /// first, or fewer ranks than analysers).
    Job,
    /// A setting is not one the runtime knows.
    Setting,
    /// The keeper (the process holding the rank's analysis server) failed
    /// or did not answer.
    Keeper,
    /// A message between Hark's own processes was malformed or truncated.
    Message,
    /// Partial results could not be merged or folded into a run.
    Merge,
    /// A file, directory or socket could not be made, read or written.
    Io,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, what: impl Into<String>) -> Error {
        Error {
            kind,
            what: what.into(),
            source: None,
        }
    }

    pub(crate) fn caused_by(
        kind: ErrorKind,
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error {
            kind,
            what: what.into(),
            source: Some(Box::new(source)),
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The runtime's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns an [`Error`] of kind `$kind` with a formatted message.
macro_rules! bail {
    ($kind:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new(
            $crate::error::ErrorKind::$kind,
            format!($($arg)*),
        ))
    };
}
pub(crate) use bail;

/// Says what was being done when a call failed: the failure becomes the
/// source of an [`Error`] of the given kind.
pub(crate) trait Context<T> {
    /// `what` as the error's message.
    fn context(self, kind: ErrorKind, what: &str) -> Result<T>;
    /// The message `what` makes, only on failure.
    fn with_context(self, kind: ErrorKind, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, kind: ErrorKind, what: &str) -> Result<T> {
        self.map_err(|e| Error::caused_by(kind, what, e))
    }
    fn with_context(self, kind: ErrorKind, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::caused_by(kind, what(), e))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, kind: ErrorKind, what: &str) -> Result<T> {
        self.ok_or_else(|| Error::new(kind, what))
    }
    fn with_context(self, kind: ErrorKind, what: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::new(kind, what()))
    }
}

/// A fixed-size field cut from a message that was too short for it.
impl From<std::array::TryFromSliceError> for Error {
    fn from(e: std::array::TryFromSliceError) -> Error {
        Error::caused_by(
            ErrorKind::Message,
            "a message between Hark's processes is shorter than its fields",
            e,
        )
    }
}
