//! The service's end of a TLS connection (`tls:host:port`).
//!
//! One [`Session`] per accepted connection holds its rustls state. Two
//! threads use it: the connection's reader ([`Reader`], which does the
//! handshake and decrypts the stream) and whoever writes control frames
//! back ([`Back`](crate::Back)). The lock is held only to move bytes in and
//! out of rustls, never across a blocking read, so a control frame never
//! waits for the probe to send something. A client whose first byte is not
//! a TLS handshake is answered [`hark_tls::PLAINTEXT_REFUSAL`] and cut.

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};

use hark_tls::rustls::{ServerConfig, ServerConnection};

/// A TLS connection's state, shared by its reader and its writers back.
pub(crate) struct Session {
    conn: Mutex<ServerConnection>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session")
    }
}

impl Session {
    pub(crate) fn new(config: &Arc<ServerConfig>) -> io::Result<Arc<Session>> {
        let conn = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(Arc::new(Session {
            conn: Mutex::new(conn),
        }))
    }

    /// Encrypts `bytes` and sends them on `fd` without blocking: all or
    /// nothing as far as the caller sees (rustls keeps what the socket could
    /// not take yet, and it goes first at the next send or read).
    /// `WouldBlock` if earlier bytes are still waiting.
    pub(crate) fn send_nonblocking(&self, fd: RawFd, bytes: &[u8]) -> io::Result<()> {
        let mut c = hark_sync::lock(&self.conn);
        if !flush(&mut c, fd, libc::MSG_DONTWAIT)? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        io::Write::write_all(&mut c.writer(), bytes)?;
        flush(&mut c, fd, libc::MSG_DONTWAIT).map(|_| ())
    }

    /// Encrypts `bytes` and sends them on `fd`, waiting for the socket.
    pub(crate) fn send_blocking(&self, fd: RawFd, bytes: &[u8]) -> io::Result<()> {
        let mut c = hark_sync::lock(&self.conn);
        io::Write::write_all(&mut c.writer(), bytes)?;
        flush(&mut c, fd, 0).map(|_| ())
    }
}

/// Writes what rustls has to send; false if the socket would block first.
fn flush(c: &mut ServerConnection, fd: RawFd, flags: libc::c_int) -> io::Result<bool> {
    while c.wants_write() {
        match c.write_tls(&mut FdOut { fd, flags }) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Raw writes on a socket, never raising SIGPIPE.
struct FdOut {
    fd: RawFd,
    flags: libc::c_int,
}

impl io::Write for FdOut {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `bytes` is valid for its length; the descriptor is the
            // connection's, open while its session is used.
            let n = unsafe {
                libc::send(
                    self.fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    self.flags | libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The plaintext of a TLS connection, read by its reader thread.
pub(crate) struct Reader {
    tcp: TcpStream,
    session: Arc<Session>,
    /// Bytes read from the socket that rustls has not taken yet.
    pending: Vec<u8>,
    started: bool,
    eof: bool,
    /// A plaintext client, told so: every later read fails the same way.
    refused: bool,
}

impl Reader {
    pub(crate) fn new(tcp: TcpStream, session: Arc<Session>) -> Reader {
        Reader {
            tcp,
            session,
            pending: Vec::new(),
            started: false,
            eof: false,
            refused: false,
        }
    }

    /// Reads more from the socket into `pending`; a plaintext client is
    /// answered and refused here.
    fn fill(&mut self) -> io::Result<()> {
        if self.refused {
            return Err(plaintext_error());
        }
        let mut raw = [0u8; 16 << 10];
        let n = self.tcp.read(&mut raw)?;
        if n == 0 {
            self.eof = true;
            return Ok(());
        }
        if !self.started {
            self.started = true;
            if !hark_tls::is_handshake(raw[0]) {
                self.refuse_plaintext();
                return Err(plaintext_error());
            }
        }
        self.pending.extend_from_slice(&raw[..n]);
        Ok(())
    }

    /// Tells a client that spoke plaintext, in a TLS alert it can
    /// recognise, and lets it read that before the connection goes: its
    /// bytes are drained (for a second at most) so that closing does not
    /// reset the connection under the alert.
    fn refuse_plaintext(&mut self) {
        self.refused = true;
        let fd = self.tcp.as_raw_fd();
        let _ = io::Write::write_all(&mut FdOut { fd, flags: 0 }, &hark_tls::PLAINTEXT_REFUSAL);
        let _ = self.tcp.shutdown(std::net::Shutdown::Write);
        let _ = self
            .tcp
            .set_read_timeout(Some(std::time::Duration::from_millis(200)));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut sink = [0u8; 4096];
        while std::time::Instant::now() < until {
            match self.tcp.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
}

fn plaintext_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "a client spoke plaintext to a TLS service: it was told so and cut \
         (give it tls:HOST:PORT and HARK_TLS_CA)",
    )
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.tcp.as_raw_fd();
        loop {
            {
                let mut c = hark_sync::lock(&self.session.conn);
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                // Handshake flights, and anything a writer left behind.
                flush(&mut c, fd, 0)?;
                if !self.pending.is_empty() {
                    let mut rest = &self.pending[..];
                    let took = c.read_tls(&mut rest)?;
                    self.pending.drain(..took);
                    c.process_new_packets().map_err(|e| {
                        let _ = flush(&mut c, fd, libc::MSG_DONTWAIT);
                        io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
                    })?;
                    continue;
                }
                if self.eof {
                    // Closed without close_notify: the stream's own End
                    // frame says whether anything is missing.
                    let _ = c.read_tls(&mut &[][..]);
                    let _ = c.process_new_packets();
                    return match c.reader().read(buf) {
                        Ok(n) => Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                        Err(e) => Err(e),
                    };
                }
            }
            // The only blocking read, outside the lock.
            self.fill()?;
        }
    }
}
