//! The one error type of the transport crate.

use std::fmt;

/// What went wrong while setting up a listener.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
}

/// The kind of an [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The address is not `unix:/path` or `tcp:host:port`.
    BadAddress(String),
    /// Binding or listening failed.
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// Another Hark server is already listening on this Unix socket.
    InUse(String),
    /// Waiting for streams took longer than allowed.
    Timeout(String),
    /// A `tls:` address was given to [`Listener::bind`](crate::Listener::bind),
    /// which has no certificate ([`Listener::bind_tls`](crate::Listener::bind_tls) has).
    TlsWithoutCertificate(String),
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
            ErrorKind::BadAddress(a) => write!(
                f,
                "address `{a}` is not understood; write unix:/path/to/socket or tcp:host:port"
            ),
            ErrorKind::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            ErrorKind::InUse(a) => write!(
                f,
                "{a} is in use by a live server; stop it or choose another path"
            ),
            ErrorKind::Timeout(what) => write!(f, "timed out: {what}"),
            ErrorKind::TlsWithoutCertificate(a) => write!(
                f,
                "{a} is a TLS address, and no certificate was given: pass the service's certificate and key (hark serve --tls-cert FILE --tls-key FILE)"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Bind { source, .. } => Some(source),
            _ => None,
        }
    }
}
