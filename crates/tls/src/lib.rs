//! TLS for Hark's TCP links: the service's certificate and key, the CA its
//! probes and clients check it against, and the few rules both ends share.
//!
//! A TCP address that starts `tls:` (`tls:host:port`, see `docs/wire.md`)
//! is reached through TLS 1.2 or 1.3: the client checks the service's
//! certificate against the CA file it is given (`HARK_TLS_CA`), and the
//! service ([`server_config`]) refuses a client that does not open with a
//! TLS handshake. Everything else, frames and control lines, is unchanged
//! inside. The crypto is rustls over ring, chosen per connection
//! ([`provider`]), never installed process-wide: the probe lives inside
//! programs that may use rustls themselves.
//!
//! ```
//! assert_eq!(hark_tls::split_addr("tls:hark.example:7000"), Some(("hark.example", "hark.example:7000")));
//! assert_eq!(hark_tls::split_addr("tcp:hark.example:7000"), None);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

pub use rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ServerConfig};

/// What starts an address reached through TLS.
pub const SCHEME: &str = "tls:";

/// What a TLS service writes to a client that did not open with a TLS
/// handshake before it closes: a fatal `protocol_version` alert record, so
/// that any client, TLS or not, sees at once what happened
/// ([`is_alert`]).
pub const PLAINTEXT_REFUSAL: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 70];

/// Why a certificate, key or CA could not be used, or a handshake failed.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::other(e.0)
    }
}

/// For `tls:host:port`: the host (the name the certificate must carry) and
/// `host:port` to connect to; `None` for any other address.
pub fn split_addr(addr: &str) -> Option<(&str, &str)> {
    let hostport = addr.strip_prefix(SCHEME)?;
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    Some((host.trim_start_matches('[').trim_end_matches(']'), hostport))
}

/// Whether `first` (the first bytes a client read) is a TLS alert record:
/// a TLS service answered a client that spoke plaintext
/// ([`PLAINTEXT_REFUSAL`]).
pub fn is_alert(first: &[u8]) -> bool {
    first.len() >= 2 && first[0] == 0x15 && first[1] == 0x03
}

/// Whether `first` opens a TLS handshake (a `ClientHello` record).
pub fn is_handshake(first: u8) -> bool {
    first == 0x16
}

/// The crypto every Hark connection uses: ring, with its default suites.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client's configuration: the service's certificate must chain to a
/// certificate of the PEM file `ca`.
pub fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(ca, "CA")? {
        roots.add(cert).map_err(|e| {
            Error(format!(
                "the CA file {} holds a certificate rustls cannot use ({e})",
                ca.display()
            ))
        })?;
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error(format!("no TLS version is available ({e})")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The service's configuration: its certificate chain (PEM, the service's
/// own certificate first) and its private key (PEM: PKCS#8, PKCS#1 or
/// SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, Error> {
    let chain = read_certs(cert, "certificate")?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        Error(format!(
            "cannot read a private key from {} ({e}): give the certificate's key in PEM",
            key.display()
        ))
    })?;
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error(format!("no TLS version is available ({e})")))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            Error(format!(
                "the key {} does not go with the certificate {} ({e})",
                key.display(),
                cert.display()
            ))
        })?;
    Ok(Arc::new(config))
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect())
        .map_err(|e| {
            Error(format!(
                "cannot read the {what} file {} ({e})",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(Error(format!(
            "the {what} file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

/// A client connection to `host` (the name the service's certificate must
/// carry: a DNS name or an IP address).
pub fn client(config: &Arc<ClientConfig>, host: &str) -> Result<ClientConnection, Error> {
    let name = ServerName::try_from(host.to_string()).map_err(|e| {
        Error(format!(
            "{host:?} is not a host name or address TLS can check ({e})"
        ))
    })?;
    ClientConnection::new(config.clone(), name)
        .map_err(|e| Error(format!("cannot start TLS ({e})")))
}

/// Completes `conn`'s handshake over `io` (blocking; bound it with the
/// socket's timeouts). The error says in words what went wrong, the
/// certificate's fault named as such.
pub fn handshake<C, D, S>(conn: &mut C, io: &mut S) -> Result<(), Error>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
    S: Read + Write,
{
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(io) {
            return Err(Error(describe(&e)));
        }
    }
    // A TLS 1.3 client's last flight may still wait to be written.
    while conn.wants_write() {
        conn.write_tls(io).map_err(|e| Error(describe(&e)))?;
    }
    Ok(())
}

/// A TLS failure in words: what a user can act on first, rustls's own
/// words after.
pub fn describe(e: &io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => format!(
            "the service's certificate is not one the CA (HARK_TLS_CA) vouches for: {c:?}"
        ),
        Some(rustls::Error::AlertReceived(a)) => format!("the other end refused the TLS handshake ({a:?})"),
        Some(rustls::Error::InvalidMessage(m)) => format!(
            "the other end does not speak TLS ({m:?}): is it a plain tcp: service?"
        ),
        Some(other) => format!("TLS failed: {other}"),
        None if e.kind() == io::ErrorKind::UnexpectedEof => {
            "the other end closed the connection during the TLS handshake (a plain tcp: service, or a refusal)".into()
        }
        None if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            "the TLS handshake did not finish in time".into()
        }
        None => format!("TLS failed: {e}"),
    }
}

/// A blocking TLS client stream over a TCP connection, for Hark's own
/// clients (`hark ctl`, `hark run --server`).
pub type ClientStream = rustls::StreamOwned<ClientConnection, std::net::TcpStream>;

/// Connects to `tls:host:port` within `timeout` (for the connection, the
/// handshake and each later read or write) and completes the handshake.
pub fn connect(addr: &str, ca: &Path, timeout: std::time::Duration) -> Result<ClientStream, Error> {
    use std::net::ToSocketAddrs;
    let Some((host, hostport)) = split_addr(addr) else {
        return Err(Error(format!("{addr} is not a tls:HOST:PORT address")));
    };
    let config = client_config(ca)?;
    let mut last = format!("{hostport} resolves to no address");
    let addrs = hostport
        .to_socket_addrs()
        .map_err(|e| Error(format!("cannot resolve {hostport} ({e})")))?;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, timeout) {
            Ok(mut tcp) => {
                let _ = tcp.set_read_timeout(Some(timeout));
                let _ = tcp.set_write_timeout(Some(timeout));
                let _ = tcp.set_nodelay(true);
                let mut conn = client(&config, host)?;
                handshake(&mut conn, &mut tcp)?;
                return Ok(rustls::StreamOwned::new(conn, tcp));
            }
            Err(e) => last = format!("cannot connect to {a} ({e})"),
        }
    }
    Err(Error(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        dir: std::path::PathBuf,
    }

    impl Pki {
        /// A CA and a certificate it signs for `localhost` and 127.0.0.1,
        /// with another CA beside them that signs nothing used here.
        fn new(tag: &str) -> Pki {
            let dir = std::env::temp_dir().join(format!("hark-tls-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let ca = ca.self_signed(&ca_key).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap()
                .signed_by(&key, &ca, &ca_key)
                .unwrap();
            let other_key = rcgen::KeyPair::generate().unwrap();
            let mut other = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let other = other.self_signed(&other_key).unwrap();
            std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
            std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
            std::fs::write(dir.join("cert.pem"), leaf.pem()).unwrap();
            std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
            Pki { dir }
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// A one-connection TLS echo of one line on a free port.
    fn echo_once(pki: &Pki) -> (String, std::thread::JoinHandle<Result<(), String>>) {
        let config = server_config(&pki.dir.join("cert.pem"), &pki.dir.join("key.pem")).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("tls:localhost:{}", l.local_addr().unwrap().port());
        let t = std::thread::spawn(move || {
            let (mut tcp, _) = l.accept().unwrap();
            let mut conn = rustls::ServerConnection::new(config).unwrap();
            handshake(&mut conn, &mut tcp).map_err(|e| e.to_string())?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            let mut line = [0u8; 5];
            s.read_exact(&mut line).map_err(|e| e.to_string())?;
            s.write_all(&line).map_err(|e| e.to_string())?;
            s.flush().map_err(|e| e.to_string())
        });
        (addr, t)
    }

    #[test]
    fn a_client_with_the_ca_talks_and_one_with_another_ca_is_refused() {
        let pki = Pki::new("ca");
        let (addr, server) = echo_once(&pki);
        let mut s = connect(
            &addr,
            &pki.dir.join("ca.pem"),
            std::time::Duration::from_secs(10),
        )
        .unwrap();
        s.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        s.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"hello");
        server.join().unwrap().unwrap();

        let (addr, server) = echo_once(&pki);
        let Err(e) = connect(
            &addr,
            &pki.dir.join("other-ca.pem"),
            std::time::Duration::from_secs(10),
        ) else {
            panic!("a certificate of another CA is accepted");
        };
        assert!(
            e.to_string()
                .contains("not one the CA (HARK_TLS_CA) vouches for"),
            "{e}"
        );
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn files_that_are_not_pem_are_named_in_the_error() {
        let pki = Pki::new("files");
        let bad = pki.dir.join("bad.pem");
        std::fs::write(&bad, "not a certificate\n").unwrap();
        let e = client_config(&bad).err().unwrap().to_string();
        assert!(
            e.contains("holds no PEM certificate") && e.contains("bad.pem"),
            "{e}"
        );
        let e = server_config(&pki.dir.join("cert.pem"), &bad)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("cannot read a private key") && e.contains("bad.pem"),
            "{e}"
        );
        let e = client_config(&pki.dir.join("missing.pem"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("missing.pem"), "{e}");
    }

    #[test]
    fn addresses_and_first_bytes_are_told_apart() {
        assert_eq!(split_addr("tls:[::1]:7000"), Some(("::1", "[::1]:7000")));
        assert_eq!(split_addr("unix:/tmp/s"), None);
        assert!(is_alert(&PLAINTEXT_REFUSAL));
        assert!(!is_alert(b"{\"ok\""));
        assert!(is_handshake(0x16) && !is_handshake(b'{'));
    }
}
