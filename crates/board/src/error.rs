//! The board's one error type: opaque, with a kind to match on and a message
//! that says what went wrong and what to do.

use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The level was never created on this board.
    UnknownLevel,
    /// The level was retired: it takes no more entries or knowledge sources.
    LevelRetired,
    /// The board is shutting down or shut down.
    ShutDown,
    /// A knowledge source was described wrongly (for example, no sensitivity).
    InvalidKnowledgeSource,
    /// A plugin library could not be opened or has no entry symbol.
    PluginLoad,
    /// A plugin was built for another version of the plugin ABI.
    PluginAbi,
    /// A plugin's descriptor is malformed (null pointer, bad name).
    PluginInvalid,
}

/// An error from the board.
#[derive(Clone, Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
