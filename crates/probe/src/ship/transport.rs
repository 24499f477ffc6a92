//! Where the shipper's bytes go.
//!
//! The shipper writes whole frames to a [`Transport`]; sockets implement it
//! today (`unix:/path`, `tcp:host:port`), and streams over MPI itself (a
//! later issue) can plug in behind the same trait.

use std::io;
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::RwLock;
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
}

impl Socket {
    /// The transport over the socket `fd` holds.
    pub(crate) fn new(fd: &'static SharedFd) -> Socket {
        Socket { fd }
    }
}

/// Connects to `addr` (`unix:/path` or `tcp:host:port`) within `timeout`;
/// writes that make no progress for `send_timeout` fail with a timeout.
/// The kernel's send buffer is asked to be `socket_buffer` bytes (by
/// default one pack): room to keep the socket busy between two sends, but
/// no second, hidden pool of packs behind the probe's own (the kernel caps
/// it at `net.core.wmem_max`).
/// Returns the socket's descriptor, close-on-exec, at a high number.
pub(crate) fn connect(
    addr: &str,
    timeout: Duration,
    send_timeout: Duration,
    socket_buffer: usize,
) -> io::Result<RawFd> {
    let fd = if let Some(path) = addr.strip_prefix("unix:") {
        connect_unix(path, timeout)?
    } else if let Some(hostport) = addr.strip_prefix("tcp:") {
        use std::net::ToSocketAddrs;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
        let mut found = None;
        for a in hostport.to_socket_addrs()? {
            match std::net::TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    found = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        found.ok_or(last)?.into_raw_fd()
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} must start with unix: or tcp:", hark_settings::ADDR.name),
        ));
    };
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
    Ok(fd)
}

/// Connects to a Unix socket within `timeout`. A blocking `connect` would
/// wait as long as the server's accept backlog stays full (many processes
/// starting at once); a non-blocking one says `EAGAIN` instead, and is
/// retried every millisecond until the deadline.
fn connect_unix(path: &str, timeout: Duration) -> io::Result<RawFd> {
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

/// Moves the socket to a high descriptor number, so that a program which
/// `dup2`s onto small numbers (3, 4, ...) does not replace it by one of its
/// own files. Keeps `fd` if no high number is free.
pub(crate) fn move_out_of_the_way(fd: RawFd) -> RawFd {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return fd;
    }
    let target = (lim.rlim_cur.min(1024) as RawFd - 64).max(fd);
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
        let _r = hark_sync::read(&self.fd.moving);
        let fd = self.fd.get();
        while !bytes.is_empty() {
            // SAFETY: `bytes` is a valid readable slice; `fd` is our socket,
            // which cannot move or close while the read lock is held.
            let n =
                unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            bytes = &bytes[n as usize..];
        }
        Ok(())
    }

    fn close(&mut self) {
        let _w = hark_sync::write(&self.fd.moving);
        let fd = self.fd.get();
        if fd >= 0 {
            // SAFETY: the socket is ours. shutdown tells the peer we are
            // done even if a forked child still holds a copy; the raw close
            // syscall bypasses the probe's own `close` wrapper.
            unsafe {
                libc::shutdown(fd, libc::SHUT_WR);
                libc::syscall(libc::SYS_close, fd);
            }
            self.fd.set(-1);
        }
    }
}
