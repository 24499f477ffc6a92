//! Where the shipper's bytes go.
//!
//! The shipper writes whole frames to a [`Transport`]: a socket
//! (`unix:/path`, `tcp:host:port`, or `tls:host:port`, TCP through TLS), or
//! MPI itself (`adapters::mpi::stream`). TLS costs only on the shipper's
//! thread: the program's threads fill buffers as for any address, and the
//! shipper encrypts each pack as it sends it ([`ClientTls`]).

use std::io;
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// A byte sink for whole frames.
pub(crate) trait Transport: Send {
    /// Writes all of `bytes`, or fails; after a failure the transport is
    /// not used again.
    fn send(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Says nothing more will be sent (the peer then sees end of stream).
    fn close(&mut self);
}

/// The descriptor of a stream's socket, shared by the shipper, which sends
/// on it, and the program's wrappers, which must neither close it nor
/// replace it: `close`, `close_range` and `closefrom` step around it, and a
/// `dup2`/`dup3` onto its number first moves the socket to another one.
pub(crate) struct SharedFd {
    fd: AtomicI32,
    // Read-held across each send, write-held while the socket moves or
    // closes: no send ever goes to a number the program is taking over.
    moving: RwLock<()>,
}

impl SharedFd {
    pub(crate) const fn new() -> SharedFd {
        SharedFd {
            fd: AtomicI32::new(-1),
            moving: RwLock::new(()),
        }
    }

    /// The descriptor, or -1.
    pub(crate) fn get(&self) -> RawFd {
        self.fd.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, fd: RawFd) {
        self.fd.store(fd, Ordering::Relaxed);
    }

    /// If the socket is descriptor `n`, moves it to a higher free number
    /// (waiting for a send in progress), so that `n` can be taken.
    pub(crate) fn move_off(&self, n: RawFd) {
        if n < 0 || self.get() != n {
            return;
        }
        let _w = hark_sync::write(&self.moving);
        if self.get() != n {
            return;
        }
        // SAFETY: duplicates our own socket to the lowest free number above
        // `n`; the old number is left for the program to take over.
        let moved = unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, n + 1) };
        if moved >= 0 {
            self.set(moved);
        }
    }
}

/// A connected stream socket, written with `send(MSG_NOSIGNAL)` so that a
/// dead server raises `EPIPE` instead of killing the program with SIGPIPE.
pub(crate) struct Socket {
    fd: &'static SharedFd,
    tls: Option<Arc<ClientTls>>,
}

impl Socket {
    /// The transport over the socket `fd` holds, through `tls` if given.
    pub(crate) fn new(fd: &'static SharedFd, tls: Option<Arc<ClientTls>>) -> Socket {
        Socket { fd, tls }
    }
}

/// A `tls:` stream's TLS state, used by the shipper alone (it sends, and
/// reads the service's control frames): the lock is never contended.
pub(crate) struct ClientTls(Mutex<hark_tls::rustls::ClientConnection>);

impl ClientTls {
    /// Encrypts `bytes` and sends them on `fd` (blocking, within the
    /// socket's send timeout), a record at a time.
    fn send(&self, fd: &SharedFd, mut bytes: &[u8]) -> io::Result<()> {
        let mut c = hark_sync::lock(&self.0);
        loop {
            while c.wants_write() {
                c.write_tls(&mut Raw(fd))?;
            }
            if bytes.is_empty() {
                return Ok(());
            }
            let n = io::Write::write(&mut c.writer(), bytes)?;
            if n == 0 && !c.wants_write() {
                return Err(io::ErrorKind::WriteZero.into());
            }
            bytes = &bytes[n..];
        }
    }

    /// Appends to `out` what the service sent on `fd` and can be read now
    /// without waiting; false once the connection is closed or broken.
    pub(crate) fn recv_nonblocking(&self, fd: RawFd, out: &mut Vec<u8>) -> bool {
        let mut c = hark_sync::lock(&self.0);
        let mut chunk = [0u8; 4096];
        loop {
            let n = recv_raw(fd, &mut chunk);
            if n <= 0 {
                let open = n < 0;
                let _ = io::Read::read_to_end(&mut c.reader(), out);
                return open;
            }
            let mut rest = &chunk[..n as usize];
            while !rest.is_empty() {
                if c.read_tls(&mut rest).is_err() || c.process_new_packets().is_err() {
                    return false;
                }
                let _ = io::Read::read_to_end(&mut c.reader(), out);
            }
        }
    }
}

/// One non-blocking `recv`: bytes read, 0 at the end of the stream, -1 when
/// nothing is there (or on an error).
pub(crate) fn recv_raw(fd: RawFd, into: &mut [u8]) -> isize {
    // SAFETY: `into` is writable for its length; MSG_DONTWAIT keeps the
    // shipper from ever blocking here.
    unsafe { libc::recv(fd, into.as_mut_ptr().cast(), into.len(), libc::MSG_DONTWAIT) }
}

/// Blocking writes on the shared socket, for rustls.
struct Raw<'a>(&'a SharedFd);

impl io::Write for Raw<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        send_some(self.0, bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One `send` on the shared socket (which cannot move meanwhile), retried
/// when interrupted.
fn send_some(fd: &SharedFd, bytes: &[u8]) -> io::Result<usize> {
    let _r = hark_sync::read(&fd.moving);
    loop {
        // SAFETY: `bytes` is a valid readable slice; the descriptor is our
        // socket, which cannot move or close while the read lock is held.
        let n = unsafe {
            libc::send(
                fd.get(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL,
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

/// Connects to `addr` (`unix:/path`, `tcp:host:port`, or `tls:host:port`
/// with the CA file `tls_ca`) within `timeout` (the TLS handshake
/// included);
/// writes that make no progress for `send_timeout` fail with a timeout.
/// The kernel's send buffer is asked to be `socket_buffer` bytes (by
/// default one pack): room to keep the socket busy between two sends, but
/// no second, hidden pool of packs behind the probe's own (the kernel caps
/// it at `net.core.wmem_max`).
/// Returns the socket's descriptor, close-on-exec, at a high number, and
/// for `tls:` its TLS state.
pub(crate) fn connect(
    addr: &str,
    tls_ca: Option<&str>,
    timeout: Duration,
    send_timeout: Duration,
    socket_buffer: usize,
) -> io::Result<(RawFd, Option<Arc<ClientTls>>)> {
    let mut tls = None;
    let fd = if let Some(path) = addr.strip_prefix("unix:") {
        connect_unix(path, timeout)?
    } else if let Some(hostport) = addr.strip_prefix("tcp:") {
        connect_tcp(hostport, timeout)?.into_raw_fd()
    } else if let Some((host, hostport)) = hark_tls::split_addr(addr) {
        let (s, t) = connect_tls(host, hostport, tls_ca, timeout)?;
        tls = Some(t);
        s.into_raw_fd()
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} must start with unix:, tcp: or tls:",
                hark_settings::ADDR.name
            ),
        ));
    };
    Ok((tune(fd, send_timeout, socket_buffer), tls))
}

/// Moves a connected socket out of the program's way and sets its send
/// timeout and buffer (see [`connect`]); returns its new descriptor.
pub(crate) fn tune(fd: RawFd, send_timeout: Duration, socket_buffer: usize) -> RawFd {
    let fd = move_out_of_the_way(fd);
    let tv = libc::timeval {
        tv_sec: send_timeout.as_secs() as libc::time_t,
        tv_usec: send_timeout.subsec_micros() as libc::suseconds_t,
    };
    let sndbuf = socket_buffer.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: `fd` is a socket we own; the option values are valid for
    // their sizes. Failures only lose a tuning, so they are ignored.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&sndbuf as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    fd
}

fn connect_tcp(hostport: &str, timeout: Duration) -> io::Result<std::net::TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
    for a in hostport.to_socket_addrs()? {
        match std::net::TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Connects and completes the TLS handshake (bounded by `timeout`), the
/// service's certificate checked against the CA file `ca`.
fn connect_tls(
    host: &str,
    hostport: &str,
    ca: Option<&str>,
    timeout: Duration,
) -> io::Result<(std::net::TcpStream, Arc<ClientTls>)> {
    let Some(ca) = ca else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a tls: address needs the CA that signed the service's certificate: set {}=FILE",
                hark_settings::TLS_CA.name
            ),
        ));
    };
    let config = hark_tls::client_config(std::path::Path::new(ca))?;
    let mut conn = hark_tls::client(&config, host)?;
    let mut s = connect_tcp(hostport, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    hark_tls::handshake(&mut conn, &mut s)?;
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    Ok((s, Arc::new(ClientTls(Mutex::new(conn)))))
}

/// Connects to a Unix socket within `timeout`. A blocking `connect` would
/// wait as long as the server's accept backlog stays full (many processes
/// starting at once); a non-blocking one says `EAGAIN` instead, and is
/// retried every millisecond until the deadline.
pub(crate) fn connect_unix(path: &str, timeout: Duration) -> io::Result<RawFd> {
    let mut sa: libc::sockaddr_un = zeroed_sockaddr_un();
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_bytes();
    if bytes.len() >= sa.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("socket path longer than {} bytes", sa.sun_path.len() - 1),
        ));
    }
    for (d, s) in sa.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain socket creation.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let close = |fd: RawFd| {
        // SAFETY: our own descriptor; the raw syscall bypasses the probe's
        // `close` wrapper.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        // SAFETY: `sa` is a valid sockaddr_un of the given length.
        let r = unsafe {
            libc::connect(
                fd,
                (&sa as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        let again = matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR));
        if !again || std::time::Instant::now() >= deadline {
            close(fd);
            return Err(if again {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the server accepted no connection in time",
                )
            } else {
                e
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Back to blocking: sends wait (up to the send timeout) for the server.
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    Ok(fd)
}

fn zeroed_sockaddr_un() -> libc::sockaddr_un {
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// The lowest descriptor number [`move_out_of_the_way`] moves to: 64
/// below the descriptor limit, or below 1024 when the limit is higher;
/// 0 when the limit cannot be read.
pub(crate) fn high_floor() -> RawFd {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    (lim.rlim_cur.min(1024) as RawFd - 64).max(0)
}

/// Moves the socket to a high descriptor number, so that a program which
/// `dup2`s onto small numbers (3, 4, ...) does not replace it by one of its
/// own files. Keeps `fd` if no high number is free.
pub(crate) fn move_out_of_the_way(fd: RawFd) -> RawFd {
    let target = high_floor().max(fd);
    if target <= fd {
        return fd;
    }
    // SAFETY: F_DUPFD_CLOEXEC duplicates `fd`, which we own, to the lowest
    // free number at or above `target`.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, target) };
    if high < 0 {
        return fd;
    }
    // SAFETY: `fd` is ours and now duplicated; closing the raw descriptor
    // bypasses the probe's own `close` wrapper.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    high
}

impl Transport for Socket {
    fn send(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if let Some(tls) = &self.tls {
            return tls.send(self.fd, bytes);
        }
        while !bytes.is_empty() {
            let n = send_some(self.fd, bytes)?;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn close(&mut self) {
        let _w = hark_sync::write(&self.fd.moving);
        let fd = self.fd.get();
        if fd >= 0 {
            // SAFETY: the socket is ours. shutdown tells the peer we are
            // done even if a forked child still holds a copy.
            unsafe {
                libc::shutdown(fd, libc::SHUT_WR);
            }
            // Bytes the service sent that nobody read (a TLS session
            // ticket, a control frame after the last poll) would make the
            // kernel answer the close with a reset, and the service's
            // kernel would then drop what it had not yet read of ours: the
            // last packs and the `End`. Read them away first.
            let mut sink = [0u8; 4096];
            while recv_raw(fd, &mut sink) > 0 {}
            // SAFETY: the socket is ours; the raw close syscall bypasses
            // the probe's own `close` wrapper.
            unsafe {
                libc::syscall(libc::SYS_close, fd);
            }
            self.fd.set(-1);
        }
    }
}
