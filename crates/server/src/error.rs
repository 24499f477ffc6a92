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
    /// A service has no running job of that id or name (or it has ended).
    NoSuchJob(String),
    /// The job belongs to another user (and the asker is no admin).
    NotYours(String),
    /// A control request could not be carried out; the text says why.
    Control(String),
    /// A parcel from another analyser could not be taken in.
    Exchange(hark_analyses::Error),
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
            ErrorKind::NoSuchJob(id) => write!(
                f,
                "no running job {id:?} (`hark ctl list` shows the running jobs)"
            ),
            ErrorKind::NotYours(id) => write!(
                f,
                "job {id:?} belongs to another user; only its owner and the service's admin group may see or control it"
            ),
            ErrorKind::Control(why) => write!(f, "the control request failed: {why}"),
            ErrorKind::Exchange(e) => write!(f, "exchange between analysers: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Listen(e) => Some(e),
            ErrorKind::Analyses(e) => Some(e),
            ErrorKind::Trace(_) => None,
            _ => None,
        }
    }
}
