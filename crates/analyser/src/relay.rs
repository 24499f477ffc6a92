//! The channel from analyser rank 0 back to `hark run` under `--analysers`
//! (`docs/analysers.md`, "The model comes back to `hark run`"): the live
//! snapshots while the job runs, and the merged model at its end, from
//! which `hark run` writes the run directory where it runs, whatever file
//! system the analysers' nodes share.
//!
//! [`Relay`] is `hark run`'s end: a Unix socket in a private directory
//! (analyser rank 0 on `hark run`'s node) and a TCP listener on each
//! address this host's name resolves to that is not a loopback address
//! (rank 0 on another node). [`Relay::addresses`] is the one place these
//! addresses are written down; `hark run` names them on the analysers'
//! command line (`--hark`). [`Link`] is rank 0's end: it tries each address
//! in turn.
//!
//! Anyone who can reach a TCP port could connect, so each connection proves
//! the run's secret (the one the probes prove in their Hello) before it is
//! read: `hark run` sends a fresh 16-byte nonce, rank 0 answers
//! HMAC-SHA-256(secret, `hark-relay` ‖ nonce). Every message then carries
//! its own MAC, over the nonce, its sequence number, its kind and the
//! SHA-256 of its body, so that nothing can be changed or replayed on the
//! way. The bytes are not encrypted (as the probes' events over TCP are
//! not). A message is a kind byte (`S` a snapshot, `M` the final model), a
//! length (`u64`, little-endian), the body (the run's JSON) and the MAC;
//! `hark run` answers the model with one byte, `+` once it holds it.

use crate::error::{bail, Context, ErrorKind, Result};
use hark_model::Run;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The largest message read (a longer length is a broken stream).
const LARGEST: u64 = 1 << 32;
/// Bytes of the nonce `hark run` sends each connection.
const NONCE: usize = 16;
/// What the connection's proof signs before the nonce.
const PROOF_LABEL: &[u8] = b"hark-relay";
/// How long `hark run` waits for a connection's proof, and rank 0 for the
/// nonce: a stray client never holds a connection's thread longer.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Connections that have not proved the secret yet, at most at a time.
const UNPROVED_MAX: usize = 16;
/// How long rank 0 tries each TCP address.
const CONNECT: Duration = Duration::from_secs(3);
/// A live snapshot.
const SNAPSHOT: u8 = b'S';
/// The final model.
const MODEL: u8 = b'M';

/// What arrived on the relay: the latest snapshot and the final model.
#[derive(Default)]
struct Arrived {
    latest: Mutex<Option<Run>>,
    model: Mutex<Option<Run>>,
    model_came: Condvar,
    /// Connections that failed their proof or sent a message whose MAC did
    /// not hold, said once.
    refused: Mutex<Option<String>>,
}

/// `hark run`'s end of the channel: its listeners and what arrived.
pub struct Relay {
    dir: PathBuf,
    tcp: Vec<SocketAddr>,
    unix: bool,
    arrived: Arc<Arrived>,
}

impl Relay {
    /// Listens on a Unix socket in a new private directory and on TCP on
    /// this host's non-loopback addresses, for connections that prove
    /// `secret`; a thread per listener accepts them.
    pub fn start(secret: &str) -> Result<Relay> {
        let tcp_only = test_tcp_only();
        Relay::listen(secret, !tcp_only, tcp_addresses(tcp_only))
    }

    /// Listens on a Unix socket if `unix`, and on TCP on each of `ips`.
    fn listen(secret: &str, unix: bool, ips: Vec<std::net::IpAddr>) -> Result<Relay> {
        let dir = private_dir()?;
        let arrived = Arc::new(Arrived::default());
        let secret: Arc<[u8]> = Arc::from(secret.as_bytes());
        let unproved = Arc::new(AtomicUsize::new(0));
        if unix {
            let listener = UnixListener::bind(dir.join("relay.sock")).context(
                ErrorKind::Io,
                "cannot listen for the analysers' results on a Unix socket",
            )?;
            let (a, s, u) = (arrived.clone(), secret.clone(), unproved.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(c) => serve(Conn::Unix(c), &a, &s, &u),
                        Err(_) => return,
                    }
                }
            });
        }
        let mut tcp = Vec::new();
        for ip in ips {
            // An address that cannot be bound is left out: the others, and
            // the Unix socket, remain.
            let Ok(listener) = TcpListener::bind((ip, 0)) else {
                continue;
            };
            let Ok(at) = listener.local_addr() else {
                continue;
            };
            tcp.push(at);
            let (a, s, u) = (arrived.clone(), secret.clone(), unproved.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(c) => serve(Conn::Tcp(c), &a, &s, &u),
                        Err(_) => return,
                    }
                }
            });
        }
        Ok(Relay {
            dir,
            tcp,
            unix,
            arrived,
        })
    }

    /// Where analyser rank 0 reaches `hark run`, tried in this order:
    /// `unix:PATH` (the same node), then `tcp:ADDRESS:PORT` for each
    /// listening address; comma-separated (`--hark` of `hark
    /// mpi-analyser`).
    pub fn addresses(&self) -> String {
        let mut out = Vec::new();
        if self.unix {
            out.push(format!("unix:{}", self.dir.join("relay.sock").display()));
        }
        out.extend(self.tcp.iter().map(|a| format!("tcp:{a}")));
        out.join(",")
    }

    /// The latest snapshot, `None` before the first.
    pub fn source(&self) -> impl Fn() -> Option<Run> + Send + Sync + 'static {
        let arrived = self.arrived.clone();
        move || hark_sync::lock(&arrived.latest).clone()
    }

    /// The final model, waiting up to `wait` for it; `None` if it did not
    /// come. Analyser rank 0 waits for `hark run` to hold it before the
    /// job ends, so once the job has ended it is here or will not come.
    pub fn take_model(&self, wait: Duration) -> Option<Run> {
        let deadline = std::time::Instant::now() + wait;
        let mut model = hark_sync::lock(&self.arrived.model);
        loop {
            if let Some(run) = model.take() {
                return Some(run);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            model = self
                .arrived
                .model_came
                .wait_timeout(model, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Why connections were refused, if any were (a client that did not
    /// prove the run's secret, or a message whose MAC did not hold).
    pub fn refused(&self) -> Option<String> {
        hark_sync::lock(&self.arrived.refused).clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `HARK_TEST_RELAY=tcp`, **for tests only** (a build with the
/// `test-hooks` feature): no Unix socket, and TCP on the loopback address,
/// so that a test on one host takes the path of a rank 0 on another node.
fn test_tcp_only() -> bool {
    cfg!(feature = "test-hooks") && std::env::var("HARK_TEST_RELAY").as_deref() == Ok("tcp")
}

/// The addresses to listen on: those this host's name resolves to, less
/// the loopback ones (a rank 0 on this node takes the Unix socket; one on
/// another node cannot reach a loopback address). `loopback_only`: the
/// loopback address alone (tests).
fn tcp_addresses(loopback_only: bool) -> Vec<std::net::IpAddr> {
    if loopback_only {
        return vec![std::net::Ipv4Addr::LOCALHOST.into()];
    }
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return Vec::new();
    };
    let mut ips: Vec<std::net::IpAddr> = (name.trim(), 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip()).collect())
        .unwrap_or_default();
    ips.retain(|ip| !ip.is_loopback() && !ip.is_unspecified());
    ips.sort();
    ips.dedup();
    ips
}

/// A new private (0700) directory for the Unix socket.
fn private_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    // Socket paths are limited to about 100 bytes.
    let mut base = std::env::temp_dir();
    if base.as_os_str().len() > 60 {
        base = PathBuf::from("/tmp");
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = base.join(format!("hark-relay-{}-{nanos:x}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(ErrorKind::Io, || {
            format!(
                "cannot create a directory for the analysers' results in {}",
                base.display()
            )
        })?;
    Ok(dir)
}

/// A connection of either kind.
enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.set_read_timeout(t),
            Conn::Tcp(s) => s.set_read_timeout(t),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.flush(),
            Conn::Tcp(s) => s.flush(),
        }
    }
}

/// The MAC of message `seq` of a connection with `nonce`.
fn mac(secret: &[u8], nonce: &[u8], seq: u64, kind: u8, body: &[u8]) -> [u8; 32] {
    let mut m = nonce.to_vec();
    m.extend(seq.to_le_bytes());
    m.push(kind);
    m.extend(hark_wire::sha256(body));
    hark_wire::hmac_sha256(secret, &m)
}

/// The proof of the secret for `nonce`.
fn proof(secret: &[u8], nonce: &[u8]) -> [u8; 32] {
    let mut m = PROOF_LABEL.to_vec();
    m.extend(nonce);
    hark_wire::hmac_sha256(secret, &m)
}

/// Equal in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Takes a new connection on a thread of its own, unless too many have
/// not proved the secret yet.
fn serve(conn: Conn, arrived: &Arc<Arrived>, secret: &Arc<[u8]>, unproved: &Arc<AtomicUsize>) {
    if unproved.fetch_add(1, Ordering::Relaxed) >= UNPROVED_MAX {
        unproved.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let (a, s, u) = (arrived.clone(), secret.clone(), unproved.clone());
    std::thread::spawn(move || {
        let proved = read_connection(conn, &a, &s, &u);
        if let Err(why) = proved {
            let mut r = hark_sync::lock(&a.refused);
            if r.is_none() {
                *r = Some(why);
            }
        }
    });
}

/// Reads one connection until it ends: its proof, then its messages.
/// `Err` says why it was refused.
fn read_connection(
    mut c: Conn,
    arrived: &Arrived,
    secret: &[u8],
    unproved: &AtomicUsize,
) -> std::result::Result<(), String> {
    let mut nonce = [0u8; NONCE];
    let proved = (|| -> std::io::Result<bool> {
        std::fs::File::open("/dev/urandom")?.read_exact(&mut nonce)?;
        c.set_read_timeout(Some(HANDSHAKE))?;
        c.write_all(&nonce)?;
        let mut p = [0u8; 32];
        c.read_exact(&mut p)?;
        Ok(same(&p, &proof(secret, &nonce)))
    })();
    unproved.fetch_sub(1, Ordering::Relaxed);
    match proved {
        Ok(true) => {}
        Ok(false) => return Err("a connection did not prove the run's secret".into()),
        // A client that went away or never spoke: nothing to say.
        Err(_) => return Ok(()),
    }
    if c.set_read_timeout(None).is_err() {
        return Ok(());
    }
    for seq in 0u64.. {
        let mut head = [0u8; 9];
        if c.read_exact(&mut head).is_err() {
            return Ok(());
        }
        let kind = head[0];
        let len = u64::from_le_bytes(head[1..].try_into().unwrap_or([0; 8]));
        if len > LARGEST {
            return Err(format!("a message of {len} bytes is longer than any run"));
        }
        let mut body = vec![0u8; len as usize];
        let mut m = [0u8; 32];
        if c.read_exact(&mut body)
            .and_then(|()| c.read_exact(&mut m))
            .is_err()
        {
            return Ok(());
        }
        if !same(&m, &mac(secret, &nonce, seq, kind, &body)) {
            return Err("a message's MAC did not hold".into());
        }
        let run = serde_json::from_slice::<Run>(&body);
        match (kind, run) {
            (SNAPSHOT, Ok(run)) => *hark_sync::lock(&arrived.latest) = Some(run),
            // A snapshot that does not parse is skipped: the last one stays.
            (SNAPSHOT, Err(_)) => {}
            (MODEL, Ok(run)) => {
                *hark_sync::lock(&arrived.model) = Some(run);
                arrived.model_came.notify_all();
                let _ = c.write_all(b"+");
            }
            (MODEL, Err(e)) => {
                let _ = c.write_all(b"-");
                return Err(format!("the analysers' model does not parse: {e}"));
            }
            _ => return Err(format!("a message of unknown kind {kind}")),
        }
    }
    Ok(())
}

/// Analyser rank 0's end of the channel.
pub(crate) struct Link {
    conn: Conn,
    secret: Vec<u8>,
    nonce: [u8; NONCE],
    seq: u64,
    /// Where it is connected, for messages.
    at: String,
}

impl Link {
    /// Connects to the first of `addresses` ([`Relay::addresses`]) that
    /// answers and proves `secret` there; the error names every address
    /// tried and why each failed.
    pub(crate) fn connect(addresses: &str, secret: &str) -> Result<Link> {
        let mut failed = Vec::new();
        for a in addresses.split(',').filter(|a| !a.is_empty()) {
            match Link::connect_one(a, secret) {
                Ok(link) => return Ok(link),
                Err(e) => failed.push(format!("{a}: {e}")),
            }
        }
        bail!(
            Io,
            "cannot reach hark run at any of its addresses ({})",
            match failed.is_empty() {
                true => "none given".to_string(),
                false => failed.join("; "),
            }
        )
    }

    fn connect_one(address: &str, secret: &str) -> std::io::Result<Link> {
        let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
        let mut conn = if let Some(path) = address.strip_prefix("unix:") {
            Conn::Unix(UnixStream::connect(path)?)
        } else if let Some(at) = address.strip_prefix("tcp:") {
            let at: SocketAddr = at.parse().map_err(|_| bad("not an address and port"))?;
            let s = TcpStream::connect_timeout(&at, CONNECT)?;
            let _ = s.set_nodelay(true);
            Conn::Tcp(s)
        } else {
            return Err(bad("neither unix: nor tcp:"));
        };
        conn.set_read_timeout(Some(HANDSHAKE))?;
        let mut nonce = [0u8; NONCE];
        conn.read_exact(&mut nonce)?;
        conn.write_all(&proof(secret.as_bytes(), &nonce))?;
        Ok(Link {
            conn,
            secret: secret.as_bytes().to_vec(),
            nonce,
            seq: 0,
            at: address.to_string(),
        })
    }

    /// Where the link is connected.
    pub(crate) fn at(&self) -> &str {
        &self.at
    }

    fn send(&mut self, kind: u8, body: &[u8]) -> std::io::Result<()> {
        let m = mac(&self.secret, &self.nonce, self.seq, kind, body);
        self.seq += 1;
        let mut head = vec![kind];
        head.extend((body.len() as u64).to_le_bytes());
        self.conn.write_all(&head)?;
        self.conn.write_all(body)?;
        self.conn.write_all(&m)
    }

    /// Sends a live snapshot (the run's JSON).
    pub(crate) fn snapshot(&mut self, json: &[u8]) -> std::io::Result<()> {
        self.send(SNAPSHOT, json)
    }

    /// Sends the final model and waits, up to `wait`, until `hark run`
    /// says it holds it.
    pub(crate) fn model(&mut self, run: &Run, wait: Duration) -> Result<()> {
        let json =
            serde_json::to_vec(run).context(ErrorKind::Merge, "cannot write the run as JSON")?;
        let sent = self.send(MODEL, &json);
        sent.with_context(ErrorKind::Io, || {
            format!("cannot send the run to hark run at {}", self.at)
        })?;
        self.conn.set_read_timeout(Some(wait)).ok();
        let mut answer = [0u8; 1];
        match self.conn.read_exact(&mut answer) {
            Ok(()) if answer == *b"+" => Ok(()),
            Ok(()) => bail!(Io, "hark run at {} could not read the run", self.at),
            Err(e) => Err(crate::Error::caused_by(
                ErrorKind::Io,
                format!("hark run at {} did not confirm it holds the run", self.at),
                e,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(version: &str) -> Run {
        Run {
            hark_version: version.into(),
            ..Run::default()
        }
    }

    #[test]
    fn snapshots_and_the_model_come_through_and_the_latest_is_served() {
        let relay = Relay::start("s3cret").unwrap();
        let source = relay.source();
        assert!(source().is_none());
        let mut link = Link::connect(&relay.addresses(), "s3cret").unwrap();
        assert!(link.at().starts_with("unix:"));
        for v in ["first", "second"] {
            link.snapshot(&serde_json::to_vec(&run(v)).unwrap())
                .unwrap();
        }
        // A snapshot that does not parse is skipped.
        link.snapshot(b"{{{").unwrap();
        link.model(&run("final"), Duration::from_secs(10)).unwrap();
        // The model was confirmed only once held; the snapshots before it
        // were read first, on the same connection.
        assert_eq!(source().unwrap().hark_version, "second");
        let model = relay.take_model(Duration::ZERO).unwrap();
        assert_eq!(model.hark_version, "final");
        assert!(relay.take_model(Duration::from_millis(10)).is_none());
        assert!(relay.refused().is_none());
        let dir = relay.dir.clone();
        drop(relay);
        assert!(!dir.exists());
    }

    #[test]
    fn a_client_without_the_secret_is_refused_and_never_read() {
        let relay = Relay::start("right").unwrap();
        let mut link = Link::connect(&relay.addresses(), "wrong").unwrap();
        // Its messages go nowhere: the connection is closed.
        let sent = link.model(&run("forged"), Duration::from_secs(10));
        assert!(sent.is_err());
        assert!(relay.take_model(Duration::from_millis(100)).is_none());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while relay.refused().is_none() {
            assert!(std::time::Instant::now() < deadline, "no refusal said");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(relay.refused().unwrap().contains("secret"));
    }

    #[test]
    fn a_changed_message_is_refused() {
        let relay = Relay::start("key").unwrap();
        let mut link = Link::connect(&relay.addresses(), "key").unwrap();
        // The MAC of another body.
        let body = serde_json::to_vec(&run("true")).unwrap();
        let m = mac(b"key", &link.nonce, 0, MODEL, &body);
        let forged = serde_json::to_vec(&run("forged")).unwrap();
        let mut bytes = vec![MODEL];
        bytes.extend((forged.len() as u64).to_le_bytes());
        bytes.extend(&forged);
        bytes.extend(m);
        link.conn.write_all(&bytes).unwrap();
        assert!(relay.take_model(Duration::from_millis(300)).is_none());
        assert!(relay.refused().is_some_and(|r| r.contains("MAC")));
    }

    #[test]
    fn the_model_comes_over_tcp_where_no_unix_socket_is_given() {
        let relay = Relay::listen("k", false, vec![std::net::Ipv4Addr::LOCALHOST.into()]).unwrap();
        let addresses = relay.addresses();
        assert!(addresses.starts_with("tcp:127.0.0.1:"), "{addresses}");
        assert!(!addresses.contains("unix:"), "{addresses}");
        let mut link = Link::connect(&addresses, "k").unwrap();
        link.model(&run("over tcp"), Duration::from_secs(10))
            .unwrap();
        let model = relay.take_model(Duration::ZERO).unwrap();
        assert_eq!(model.hark_version, "over tcp");
    }

    #[test]
    fn unreachable_addresses_are_each_named() {
        let e = Link::connect("unix:/nonexistent/relay.sock,tcp:nonsense", "k")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unix:/nonexistent/relay.sock"), "{e}");
        assert!(e.contains("tcp:nonsense"), "{e}");
        assert!(Link::connect("", "k").is_err());
    }
}
