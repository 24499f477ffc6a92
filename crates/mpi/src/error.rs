//! The one error type of the MPI layer.

use std::fmt;

/// Why an MPI library could not be opened.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
}

/// The kind of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The loader could not open the library; `why` is its message.
    Open {
        /// The library asked for.
        lib: String,
        /// What the loader said.
        why: String,
    },
    /// The library opened but is neither Open MPI nor MPICH.
    NotMpi {
        /// The library asked for.
        lib: String,
    },
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
            ErrorKind::Open { lib, why } => write!(
                f,
                "cannot open the MPI library {lib} ({why}); is the launcher's MPI installed?"
            ),
            ErrorKind::NotMpi { lib } => {
                write!(
                    f,
                    "{lib} is not an MPI library Hark knows (Open MPI or MPICH)"
                )
            }
        }
    }
}

impl std::error::Error for Error {}
