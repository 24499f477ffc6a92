//! The forwarder's one connection to `hark`: a Unix socket, TCP, or TLS
//! over TCP (`tls:`, checked against `HARK_TLS_CA`).

use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hark_tls::rustls::ClientConnection;

/// The writing half of the connection to `hark`, buffered so that a small
/// frame and its `Mux` header leave in one write.
pub struct Upstream {
    out: BufWriter<Stream>,
    at: String,
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
    Tls(Arc<Tls>),
}

impl Upstream {
    /// Connects to the first of `addrs` (`unix:/path`, `tcp:host:port`,
    /// `tls:host:port` whose certificate chains to the PEM file `tls_ca`)
    /// that answers, within a second each but the last, which gets
    /// `timeout`; returns the writing half and a
    /// reading half for what `hark` writes back.
    pub fn connect(
        addrs: &[String],
        timeout: Duration,
        tls_ca: Option<&Path>,
    ) -> io::Result<(Upstream, Box<dyn Read + Send>)> {
        let mut why = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            // One the node cannot route to must not hold up the next: all
            // but the last get a second at most.
            let timeout = match i + 1 == addrs.len() {
                true => timeout,
                false => timeout.min(Duration::from_secs(1)),
            };
            match Stream::connect(addr, timeout, tls_ca) {
                Ok((s, down)) => {
                    return Ok((
                        Upstream {
                            out: BufWriter::with_capacity(64 << 10, s),
                            at: addr.clone(),
                        },
                        down,
                    ))
                }
                Err(e) => why.push(format!("{addr}: {e}")),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotConnected,
            if why.is_empty() {
                "no address to connect to".to_string()
            } else {
                why.join("; ")
            },
        ))
    }

    /// The address this connection reached.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// Writes `parts` back to back and flushes; returns the bytes written.
    pub fn write_frame(&mut self, parts: &[&[u8]]) -> io::Result<usize> {
        let mut n = 0;
        for p in parts {
            self.out.write_all(p)?;
            n += p.len();
        }
        self.out.flush()?;
        Ok(n)
    }

    /// Flushes and says nothing more will come (hark then sees the end).
    pub fn close(&mut self) {
        let _ = self.out.flush();
        match self.out.get_ref() {
            Stream::Unix(s) => drop(s.shutdown(Shutdown::Write)),
            Stream::Tcp(s) => drop(s.shutdown(Shutdown::Write)),
            Stream::Tls(t) => t.close(),
        }
    }
}

impl Stream {
    fn connect(
        addr: &str,
        timeout: Duration,
        tls_ca: Option<&Path>,
    ) -> io::Result<(Stream, Box<dyn Read + Send>)> {
        if addr.starts_with(hark_tls::SCHEME) {
            let Some(ca) = tls_ca else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a tls: address needs the CA to check it against: set HARK_TLS_CA",
                ));
            };
            let tls = Arc::new(Tls::connect(addr, ca, timeout)?);
            let down = TlsDown {
                tls: tls.clone(),
                tcp: tls.tcp.try_clone()?,
            };
            return Ok((Stream::Tls(tls), Box::new(down)));
        }
        if let Some(path) = addr.strip_prefix("unix:") {
            let s = UnixStream::connect(path)?;
            let down = s.try_clone()?;
            Ok((Stream::Unix(s), Box::new(down)))
        } else if let Some(hostport) = addr.strip_prefix("tcp:") {
            let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
            for a in hostport.to_socket_addrs()? {
                match TcpStream::connect_timeout(&a, timeout) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        let down = s.try_clone()?;
                        return Ok((Stream::Tcp(s), Box::new(down)));
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{addr}` is not unix:/path, tcp:host:port or tls:host:port"),
            ))
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS session with `hark`, written by the forwarder's threads (frames
/// going up) and read by its downward thread (control frames coming
/// back): the session is locked for each, never while waiting for bytes.
struct Tls {
    conn: Mutex<ClientConnection>,
    tcp: TcpStream,
}

impl Tls {
    fn connect(addr: &str, ca: &Path, timeout: Duration) -> io::Result<Tls> {
        let stream = hark_tls::connect(addr, ca, timeout)?;
        let (conn, tcp) = (stream.conn, stream.sock);
        // Connected: from now on a read waits as long as hark is silent,
        // and a write as long as hark does not read, as on plain TCP.
        tcp.set_read_timeout(None)?;
        tcp.set_write_timeout(None)?;
        Ok(Tls {
            conn: Mutex::new(conn),
            tcp,
        })
    }

    /// Encrypts `buf` and sends it; returns how much of it was taken.
    fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let mut conn = hark_sync::lock(&self.conn);
        let n = conn.writer().write(buf)?;
        send_records(&mut conn, &self.tcp)?;
        Ok(n)
    }

    /// Says the session's end (`close_notify`) and ends the sending side.
    fn close(&self) {
        let mut conn = hark_sync::lock(&self.conn);
        conn.send_close_notify();
        let _ = send_records(&mut conn, &self.tcp);
        let _ = self.tcp.shutdown(Shutdown::Write);
    }
}

/// Sends every TLS record `conn` has ready.
fn send_records(conn: &mut ClientConnection, mut tcp: &TcpStream) -> io::Result<()> {
    while conn.wants_write() {
        conn.write_tls(&mut tcp)?;
    }
    Ok(())
}

/// The reading half of a TLS session with `hark`.
struct TlsDown {
    tls: Arc<Tls>,
    // A second descriptor of the session's socket, to wait on.
    tcp: TcpStream,
}

impl Read for TlsDown {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut conn = hark_sync::lock(&self.tls.conn);
                match conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    done => return done,
                }
            }
            // Wait for bytes without the session locked: writers go on.
            if self.tcp.peek(&mut [0u8; 1])? == 0 {
                return Ok(0);
            }
            let mut conn = hark_sync::lock(&self.tls.conn);
            conn.read_tls(&mut &self.tcp)?;
            conn.process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            send_records(&mut conn, &self.tls.tcp)?;
        }
    }
}
