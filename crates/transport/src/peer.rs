//! Who is at the other end of a connection, and the way back to it.
//!
//! A long-lived service (`hark serve`) needs both: the kernel's word on the
//! peer's user decides who owns a job and who may see it, and a second
//! descriptor of the same socket lets the service write control frames back
//! to a probe while the reader thread goes on reading.
//!
//! The kernel names the user at the other end in two ways, both here and
//! nowhere else: `SO_PEERCRED` on a Unix socket ([`cred_of`]), and, for a
//! TCP connection between two sockets of this machine, the owner of the
//! client's socket in `/proc/net/tcp` ([`local_tcp_owner`]).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::tls::Session;

/// Options of [`Listener::serve_with`](crate::Listener::serve_with).
#[derive(Clone, Copy, Debug, Default)]
pub struct ServeOptions {
    /// A connection that has not delivered a whole `Hello` this long after
    /// it was accepted is cut off (a client that connects and says nothing,
    /// or trickles its handshake). After the `Hello` a stream may be silent
    /// for as long as it likes: a rank blocked in `MPI_Recv` sends nothing.
    /// `None`: no limit (a `hark run` on its Unix socket alone, whose
    /// clients are its own).
    pub hello_timeout: Option<Duration>,
    /// Packs of TSC streams keep their ticks instead of being turned into
    /// nanoseconds: for a forwarder, which passes them on to a server that
    /// converts them as it would a direct stream's.
    pub keep_ticks: bool,
}

/// The other end of an accepted connection, as [`Sink::on_accept`](crate::Sink::on_accept)
/// sees it.
#[derive(Debug)]
pub struct Peer {
    /// The peer process's user, group and pid as the kernel recorded them
    /// when it connected (`SO_PEERCRED`); `None` on TCP.
    pub cred: Option<Cred>,
    fd: RawFd,
    tls: Option<Arc<Session>>,
    // A stream forwarded on a node's connection: its number there, and
    // where its cuts are noted.
    mux: Option<(u64, Arc<Cuts>)>,
}

/// The streams of a forwarder's connection that the server has cut: its
/// reader closes them at its next frame and ignores the rest of their
/// frames.
#[derive(Debug, Default)]
pub(crate) struct Cuts(Mutex<Vec<u64>>);

impl Cuts {
    fn add(&self, stream: u64) {
        hark_sync::lock(&self.0).push(stream);
    }

    /// The streams cut since the last call.
    pub(crate) fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *hark_sync::lock(&self.0))
    }
}

/// A Unix socket peer's credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cred {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Process id.
    pub pid: u32,
}

impl Peer {
    pub(crate) fn of_unix(fd: RawFd) -> Peer {
        Peer {
            cred: peer_cred(fd),
            fd,
            tls: None,
            mux: None,
        }
    }

    pub(crate) fn of_tcp(fd: RawFd, tls: Option<Arc<Session>>) -> Peer {
        Peer {
            cred: None,
            fd,
            tls,
            mux: None,
        }
    }

    /// Stream `stream` forwarded on the connection `fd` (whose peer's
    /// credentials are `cred`, and whose TLS session is `tls` when the
    /// forwarder reached a `tls:` listener): its way back goes through the
    /// forwarder, inside that session.
    pub(crate) fn forwarded(
        cred: Option<Cred>,
        fd: RawFd,
        tls: Option<Arc<Session>>,
        stream: u64,
        cuts: Arc<Cuts>,
    ) -> Peer {
        Peer {
            cred,
            fd,
            tls,
            mux: Some((stream, cuts)),
        }
    }

    /// Whether the connection is TLS (a `tls:` listener).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether this stream reached the server through a node's forwarder
    /// (`docs/cluster.md`, "The forwarder"), not on a connection of its own.
    pub fn is_forwarded(&self) -> bool {
        self.mux.is_some()
    }

    /// A second descriptor of the connection, for writing back to the peer.
    /// Keep it no longer than the connection lives (drop it at
    /// [`Sink::on_close`](crate::Sink::on_close)).
    pub fn back(&self) -> io::Result<Back> {
        // SAFETY: `fd` is the accepted socket, open while `on_accept` runs;
        // F_DUPFD_CLOEXEC makes a new descriptor that the Back owns.
        let fd = unsafe { libc::fcntl(self.fd, libc::F_DUPFD_CLOEXEC, 3) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Back {
            fd,
            tls: self.tls.clone(),
            mux: self.mux.clone(),
        })
    }
}

/// The way back to a connected peer: writes that never block. On a TLS
/// connection they are encrypted in the connection's session; for a
/// forwarded stream, the way back goes through its forwarder, each frame
/// wrapped with the stream's number (`docs/wire.md`, "Forwarded streams").
pub struct Back {
    fd: OwnedFd,
    tls: Option<Arc<Session>>,
    mux: Option<(u64, Arc<Cuts>)>,
}

impl std::fmt::Debug for Back {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Back")
            .field("fd", &self.fd)
            .field("tls", &self.tls.is_some())
            .field("mux", &self.mux)
            .finish()
    }
}

impl Back {
    /// Sends `bytes` whole, or nothing: fails with `WouldBlock` if the
    /// socket's buffer cannot take them now (a peer that does not read),
    /// and with the socket's error if it is gone. A partial write (a buffer
    /// with room for part of a frame) is reported as `WriteZero`; the
    /// stream back is then unusable, and the caller should stop using it.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        match &self.mux {
            None => self.send_raw(bytes),
            Some((stream, _)) => {
                let mut wrapped = Vec::with_capacity(hark_wire::MUX_OVERHEAD + bytes.len());
                hark_wire::encode_mux(*stream, bytes, &mut wrapped);
                self.send_raw(&wrapped)
            }
        }
    }

    fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        if let Some(tls) = &self.tls {
            return tls.send_nonblocking(self.fd.as_raw_fd(), bytes);
        }
        // SAFETY: the descriptor is owned and open; the buffer is valid for
        // its length. MSG_DONTWAIT keeps the caller from blocking,
        // MSG_NOSIGNAL turns a closed peer into EPIPE instead of SIGPIPE.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("only {n} of {} bytes could be sent", bytes.len()),
            ));
        }
        Ok(())
    }
}

impl Back {
    /// Ends the connection both ways: the reader sees its end at once (and
    /// closes the stream as the peer left it), the peer's next write fails.
    /// A forwarded stream is cut alone: its reader closes it at the
    /// forwarder connection's next frame, and the forwarder is asked to
    /// close the probe's end.
    pub fn cut(&self) {
        match &self.mux {
            None => {
                // SAFETY: shutdown on an owned, open descriptor only ends traffic.
                unsafe { libc::shutdown(self.fd.as_raw_fd(), libc::SHUT_RDWR) };
            }
            Some((stream, cuts)) => {
                cuts.add(*stream);
                let mut bytes = Vec::new();
                hark_wire::Gone {
                    stream: *stream,
                    how: hark_wire::GoneHow::Broken,
                    lost_events: 0,
                    lost_packs: 0,
                    reason: "cut off by the server".into(),
                }
                .encode(&mut bytes);
                // Best effort: a forwarder that does not read learns it
                // when the stream's frames are refused.
                let _ = self.send_raw(&bytes);
            }
        }
    }
}

/// The credentials the kernel recorded for the peer of a connected Unix
/// socket when it connected (`SO_PEERCRED`); `None` for another socket.
pub fn cred_of(socket: &impl AsFd) -> Option<Cred> {
    peer_cred(socket.as_fd().as_raw_fd())
}

fn peer_cred(fd: RawFd) -> Option<Cred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing and sized for
    // SO_PEERCRED's answer.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(Cred {
        uid: cred.uid,
        gid: cred.gid,
        pid: cred.pid as u32,
    })
}

/// The uid owning the client end of a TCP connection from `peer` to
/// `local`, both on this machine's loopback, read from `/proc/net/tcp` (or
/// `tcp6`): the line whose local address is the peer's, whose remote
/// address is ours, and whose state is `ESTABLISHED`. `None` for a peer
/// elsewhere, or one that is closing or gone: a socket its owner closed
/// lingers in the table (`FIN_WAIT`, `TIME_WAIT`) with uid 0, and taking
/// that row would make any user root. Ask while the connection is fresh
/// (at accept) and refuse the client on `None`.
pub fn local_tcp_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !peer.ip().is_loopback() {
        return None;
    }
    let (file, want_local, want_remote) = match (peer, local) {
        (SocketAddr::V4(p), SocketAddr::V4(l)) => (
            "/proc/net/tcp",
            hex4(p.ip().octets(), p.port()),
            hex4(l.ip().octets(), l.port()),
        ),
        (SocketAddr::V6(p), SocketAddr::V6(l)) => (
            "/proc/net/tcp6",
            hex6(p.ip().octets(), p.port()),
            hex6(l.ip().octets(), l.port()),
        ),
        _ => return None,
    };
    let table = std::fs::read_to_string(file).ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1] == want_local && f[2] == want_remote && f[3] == ESTABLISHED)
            .then(|| f[7].parse().ok())
            .flatten()
    })
}

/// The `st` column of a connected socket in `/proc/net/tcp`
/// (`TCP_ESTABLISHED` in the kernel's `enum tcp_state`).
const ESTABLISHED: &str = "01";

/// An IPv4 address and port as `/proc/net/tcp` writes them: the address
/// as one host-order 32-bit word in hex, the port in hex.
fn hex4(octets: [u8; 4], port: u16) -> String {
    format!("{:08X}:{port:04X}", u32::from_ne_bytes(octets))
}

fn hex6(octets: [u8; 16], port: u16) -> String {
    let words: String = octets
        .chunks(4)
        .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    format!("{words}:{port:04X}")
}

/// Sets (or with `None`, clears) the socket's receive timeout.
pub(crate) fn set_read_timeout(fd: RawFd, timeout: Option<Duration>) {
    if fd < 0 {
        return;
    }
    let t = timeout.unwrap_or(Duration::ZERO);
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval for SO_RCVTIMEO; a failure leaves the
    // socket as it was, which only loses the timeout.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_localhost_clients_owner_is_read_from_the_kernels_table() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = server.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        // Kept open: a connection the server closed is no longer named.
        let (_accepted, peer) = server.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert_eq!(local_tcp_owner(peer, local), Some(me));
        let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(local_tcp_owner(elsewhere, local), None);
    }

    #[test]
    fn a_localhost_client_that_closed_its_socket_is_nobody() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = server.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let (_accepted, peer) = server.accept().unwrap();
        drop(client);
        // The client's end is now FIN_WAIT2 (the server has not closed),
        // a row whose uid the kernel writes as 0.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while local_tcp_owner(peer, local).is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "a closed client is still named"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_unix_peer_is_named_by_the_kernel() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = cred_of(&a).unwrap();
        // SAFETY: getuid, getgid and getpid have no preconditions.
        let me = unsafe { (libc::getuid(), libc::getgid(), libc::getpid() as u32) };
        assert_eq!((cred.uid, cred.gid, cred.pid), me);
    }
}
