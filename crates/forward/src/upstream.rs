//! The forwarder's one connection to `hark`.

use std::io::{self, BufWriter, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The writing half of the connection to `hark`, buffered so that a small
/// frame and its `Mux` header leave in one write.
pub struct Upstream {
    out: BufWriter<Stream>,
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Upstream {
    /// Connects to the first of `addrs` (`unix:/path`, `tcp:host:port`)
    /// that answers, within a second each but the last, which gets
    /// `timeout`; returns the writing half and a
    /// reading half for what `hark` writes back.
    pub fn connect(
        addrs: &[String],
        timeout: Duration,
    ) -> io::Result<(Upstream, Box<dyn Read + Send>)> {
        let mut why = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            // One the node cannot route to must not hold up the next: all
            // but the last get a second at most.
            let timeout = match i + 1 == addrs.len() {
                true => timeout,
                false => timeout.min(Duration::from_secs(1)),
            };
            match Stream::connect(addr, timeout) {
                Ok((s, down)) => {
                    return Ok((
                        Upstream {
                            out: BufWriter::with_capacity(64 << 10, s),
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
        }
    }
}

impl Stream {
    fn connect(addr: &str, timeout: Duration) -> io::Result<(Stream, Box<dyn Read + Send>)> {
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
                format!("`{addr}` is not unix:/path or tcp:host:port"),
            ))
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
