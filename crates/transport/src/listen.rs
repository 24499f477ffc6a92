//! Listening, accepting, and the per-connection reader loop.

use std::io::{BufReader, Read};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use hark_wire::{ClockSource, Frame, FrameReader};

use crate::error::{Error, ErrorKind};
use crate::peer::{self, Peer, ServeOptions};
use crate::shm::{self, FdCatcher, Handover};
use crate::{Closed, ConnId, Sink};

enum Socket {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

/// A bound listening socket, not yet accepting.
pub struct Listener {
    socket: Socket,
    addr: String,
}

impl Listener {
    /// Binds `unix:/path` or `tcp:host:port` (port 0 picks a free one; see
    /// [`addr`](Listener::addr)). A stale Unix socket file left by a dead
    /// server is replaced; one a live server answers on is an error.
    pub fn bind(addr: &str) -> Result<Listener, Error> {
        let bind_err = |source| {
            Error::new(ErrorKind::Bind {
                addr: addr.to_string(),
                source,
            })
        };
        if let Some(path) = addr.strip_prefix("unix:") {
            let path = PathBuf::from(path);
            if path.exists() {
                if UnixStream::connect(&path).is_ok() {
                    return Err(Error::new(ErrorKind::InUse(addr.to_string())));
                }
                let _ = std::fs::remove_file(&path);
            }
            let l = UnixListener::bind(&path).map_err(bind_err)?;
            Ok(Listener {
                socket: Socket::Unix(l, path),
                addr: addr.to_string(),
            })
        } else if let Some(hostport) = addr.strip_prefix("tcp:") {
            let l = TcpListener::bind(hostport).map_err(bind_err)?;
            let local = l.local_addr().map_err(bind_err)?;
            Ok(Listener {
                socket: Socket::Tcp(l),
                addr: format!("tcp:{local}"),
            })
        } else {
            Err(Error::new(ErrorKind::BadAddress(addr.to_string())))
        }
    }

    /// The address probes should be given (`HARK_ADDR`), with the actual
    /// port for TCP.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Starts accepting on a background thread; each connection gets its own
    /// reader thread feeding `sink`.
    pub fn serve(self, sink: Arc<dyn Sink>) -> Server {
        self.serve_with(sink, ServeOptions::default())
    }

    /// [`serve`](Listener::serve) with options: a deadline for each
    /// connection's `Hello`.
    pub fn serve_with(self, sink: Arc<dyn Sink>, options: ServeOptions) -> Server {
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            next: AtomicU64::new(0),
            readers: Mutex::new(0),
            reader_done: Condvar::new(),
            live: Mutex::new(Vec::new()),
            options,
        });
        let addr = self.addr.clone();
        let (path, listen_fd) = match &self.socket {
            Socket::Unix(l, p) => (Some(p.clone()), l.as_raw_fd()),
            Socket::Tcp(l) => (None, l.as_raw_fd()),
        };
        let sh = shared.clone();
        let accept = std::thread::Builder::new()
            .name("hark-accept".into())
            .spawn(move || accept_loop(self.socket, sh, sink))
            .expect("spawning the accept thread");
        Server {
            addr,
            path,
            listen_fd,
            shared,
            accept: Some(accept),
        }
    }
}

struct Shared {
    stopping: AtomicBool,
    next: AtomicU64,
    // Reader threads still running. They are detached, not joined: a
    // finished thread's stack goes back to the system at once, so a run of
    // 40,000 short processes leaves no 40,000 stacks mapped (the kernel's
    // map-count limit is 65,530). `shutdown` waits on `reader_done` instead.
    readers: Mutex<usize>,
    reader_done: Condvar,
    // Descriptors of open connections, for `Server::abort`.
    live: Mutex<Vec<(u64, i32)>>,
    options: ServeOptions,
}

fn accept_loop(socket: Socket, shared: Arc<Shared>, sink: Arc<dyn Sink>) {
    loop {
        let timeout = shared.options.hello_timeout;
        let (conn, fd, handover, peer): (Box<dyn Read + Send>, i32, Option<Handover>, Peer) =
            match &socket {
                Socket::Unix(l, _) => match l.accept() {
                    Ok((s, _)) => {
                        let fd = s.as_raw_fd();
                        let _ = s.set_read_timeout(timeout);
                        let (s, handover) = FdCatcher::new(s);
                        (Box::new(s), fd, Some(handover), Peer::of_unix(fd))
                    }
                    Err(e) => {
                        if shared.stopping.load(Ordering::Acquire) {
                            return;
                        }
                        accept_failed(&e);
                        continue;
                    }
                },
                Socket::Tcp(l) => match l.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        let _ = s.set_read_timeout(timeout);
                        let fd = s.as_raw_fd();
                        (Box::new(s), fd, None, Peer::of_tcp(fd))
                    }
                    Err(e) => {
                        if shared.stopping.load(Ordering::Acquire) {
                            return;
                        }
                        accept_failed(&e);
                        continue;
                    }
                },
            };
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let id = shared.next.fetch_add(1, Ordering::Relaxed);
        if let Err(why) = sink.on_accept(ConnId(id), &peer) {
            drop(conn);
            sink.on_close(ConnId(id), Closed::Broken(why));
            continue;
        }
        hark_sync::lock(&shared.live).push((id, fd));
        *hark_sync::lock(&shared.readers) += 1;
        let for_reader = sink.clone();
        let sh = shared.clone();
        let reader = std::thread::Builder::new()
            .name(format!("hark-conn-{id}"))
            .spawn(move || {
                let side = Side {
                    fd,
                    handover,
                    hello_timeout: timeout,
                };
                read_stream(ConnId(id), conn, side, &*for_reader, &sh);
                sh.reader_finished();
            });
        if let Err(e) = reader {
            // The closure, and with it the connection, was dropped unread.
            eprintln!("hark: cannot start a reader thread for connection {id}: {e}");
            hark_sync::lock(&shared.live).retain(|(c, _)| *c != id);
            sink_closed_unread(&*sink, ConnId(id), &e);
            shared.reader_finished();
        }
    }
}

fn sink_closed_unread(sink: &dyn Sink, conn: ConnId, e: &std::io::Error) {
    sink.on_close(
        conn,
        Closed::Broken(format!(
            "the server could not start a thread to read it ({e}); its data is lost"
        )),
    );
}

impl Shared {
    fn reader_finished(&self) {
        *hark_sync::lock(&self.readers) -= 1;
        self.reader_done.notify_all();
    }

    /// Waits until no reader runs, or until `deadline`; true if none runs.
    fn wait_readers(&self, deadline: Option<Instant>) -> bool {
        let mut n = hark_sync::lock(&self.readers);
        while *n > 0 {
            n = match deadline {
                None => self.reader_done.wait(n).unwrap(),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.reader_done.wait_timeout(n, left).unwrap().0
                }
            };
        }
        true
    }

    fn abort_live(&self) {
        for (_, fd) in hark_sync::lock(&self.live).iter() {
            // SAFETY: shutdown on a descriptor the reader still owns only
            // ends its traffic; the reader closes it, after removing it from
            // `live` under this lock, so the descriptor is not yet reused.
            unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
        }
    }
}

/// A failed `accept` (out of descriptors, say) is retried after a pause,
/// so that a persistent failure does not spin a core.
fn accept_failed(e: &std::io::Error) {
    if e.kind() != std::io::ErrorKind::Interrupted {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A connection's descriptor, where a handed-over ring arrives (Unix
/// sockets only), and the deadline of its `Hello`.
struct Side {
    fd: i32,
    handover: Option<Handover>,
    hello_timeout: Option<std::time::Duration>,
}

fn read_stream(
    conn: ConnId,
    mut stream: Box<dyn Read + Send>,
    side: Side,
    sink: &dyn Sink,
    shared: &Shared,
) {
    let outcome = read_caught(conn, &mut *stream, side, sink);
    // Unregister before the stream (and its descriptor) is dropped, so that
    // `abort_live` never touches a reused descriptor.
    hark_sync::lock(&shared.live).retain(|(c, _)| *c != conn.0);
    drop(stream);
    sink.on_close(conn, outcome);
}

/// Reads one stream from any byte source exactly as an accepted connection
/// is read — frame caps, order checks, a panicking sink caught — and ends
/// with [`Sink::on_close`]. For tests and fuzzing, which need no socket.
pub fn read_stream_from(conn: ConnId, stream: &mut dyn Read, sink: &dyn Sink) {
    let side = Side {
        fd: -1,
        handover: None,
        hello_timeout: None,
    };
    let outcome = read_caught(conn, stream, side, sink);
    sink.on_close(conn, outcome);
}

fn read_caught(conn: ConnId, stream: &mut dyn Read, side: Side, sink: &dyn Sink) -> Closed {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_all(conn, stream, side, sink)
    }))
    .unwrap_or_else(|_| Closed::Broken("the sink panicked while handling this stream".into()))
}

fn read_all(conn: ConnId, stream: &mut dyn Read, side: Side, sink: &dyn Sink) -> Closed {
    // 8 KiB, not 64: the buffer is zero-filled at the first read (a boxed
    // reader has no uninitialised reads), so its size is resident for every
    // idle connection a service holds (BENCHMARKS.md, "hark serve"). Packs
    // are larger and are read past it, straight into the frame's buffer.
    let mut reader = FrameReader::new(BufReader::with_capacity(1 << 13, stream));
    let began = Instant::now();
    let ticks = match reader.next_frame() {
        Ok(Some(Frame::Hello(hello))) => {
            // From here on a stream may be silent as long as it likes.
            if side.hello_timeout.is_some() {
                peer::set_read_timeout(side.fd, None);
            }
            // Saturating: a Hello's clock fields are whatever was sent.
            let offset = (realtime_ns() as i64).saturating_sub(hello.realtime_ns as i64);
            sink.on_hello(conn, &hello, offset);
            match hello.clock {
                ClockSource::Tsc(t) => Some(t),
                ClockSource::Monotonic => None,
            }
        }
        Ok(Some(Frame::ClockPing)) => return answer_clock_pings(&mut reader, side.fd),
        Ok(Some(other)) => {
            return Closed::Broken(format!(
                "the stream starts with a {} frame instead of Hello",
                frame_name(&other)
            ))
        }
        Ok(None) => return Closed::NoEnd,
        Err(_) if side.hello_timeout.is_some_and(|t| began.elapsed() >= t) => {
            return Closed::Broken(format!(
                "no complete Hello within {:?} of connecting (a silent or trickling client)",
                side.hello_timeout.unwrap_or_default()
            ))
        }
        Err(e) => return Closed::Broken(e.to_string()),
    };
    let mut ended = false;
    loop {
        let at = reader.offset();
        match reader.next_frame() {
            Ok(None) if ended => return Closed::Clean,
            Ok(None) => return Closed::NoEnd,
            Ok(Some(f)) if ended => {
                return Closed::Broken(format!(
                    "a {} frame at byte {at} follows the End frame",
                    frame_name(&f)
                ))
            }
            Ok(Some(Frame::Hello(_))) => {
                return Closed::Broken(format!("a second Hello frame at byte {at}"))
            }
            Ok(Some(Frame::ClockPing | Frame::ClockPong(_))) => {
                return Closed::Broken(format!(
                    "a clock ping at byte {at} inside a stream (it has a connection of its own)"
                ))
            }
            Ok(Some(Frame::Ring)) => {
                return match side.handover.as_ref().and_then(Handover::take) {
                    Some(ring) => {
                        sink.on_frame(conn, Frame::Ring);
                        shm::read_ring(conn, ring, side.fd, ticks, sink)
                    }
                    None => Closed::Broken(format!(
                        "a Ring frame at byte {at} came without a descriptor \
                         (only a Unix socket can hand one over)"
                    )),
                }
            }
            Ok(Some(f)) => {
                ended = matches!(f, Frame::End(_));
                // A pack the sink keeps whole leaves with the buffer it was
                // read into, the sink's buffer taking its place.
                let spare = match f {
                    Frame::Pack { .. } => sink.pack_buffer(conn),
                    _ => None,
                };
                match spare {
                    Some(spare) => sink.on_pack(conn, reader.take_pack(spare)),
                    None => sink.on_frame(conn, f),
                }
            }
            Err(e) => return Closed::Broken(format!("{e} (frame at byte {at})")),
        }
    }
}

/// Most pings one clock connection is answered: a probe's alignment takes
/// a few rounds; a client that keeps asking is cut off.
const MAX_CLOCK_PINGS: usize = 256;

/// A connection that opened with a `ClockPing` (a probe aligning its clock
/// with this server's, `docs/wire.md`): every ping is answered at once, on
/// the socket, with this server's `CLOCK_REALTIME`, read as late as
/// possible before the answer is written. Nothing reaches the sink but the
/// close ([`Closed::Clean`] when the probe hung up after its pings).
fn answer_clock_pings<R: Read>(reader: &mut FrameReader<R>, fd: i32) -> Closed {
    if fd < 0 {
        return Closed::Broken("a clock ping where no answer can be written".into());
    }
    let mut answered = 0;
    loop {
        let mut pong = Vec::with_capacity(16);
        hark_wire::encode_clock_pong(realtime_ns(), &mut pong);
        // SAFETY: `fd` is this connection's socket, open while its reader
        // runs; `pong` is valid for its length. MSG_NOSIGNAL: a probe gone
        // is EPIPE, not SIGPIPE.
        let n = unsafe { libc::send(fd, pong.as_ptr().cast(), pong.len(), libc::MSG_NOSIGNAL) };
        if n != pong.len() as isize {
            return Closed::Broken("the clock ping's answer could not be written".into());
        }
        answered += 1;
        let at = reader.offset();
        match reader.next_frame() {
            Ok(None) => return Closed::Clean,
            Ok(Some(Frame::ClockPing)) if answered < MAX_CLOCK_PINGS => {}
            Ok(Some(Frame::ClockPing)) => {
                return Closed::Broken(format!(
                    "more than {MAX_CLOCK_PINGS} clock pings on one connection"
                ))
            }
            Ok(Some(f)) => {
                return Closed::Broken(format!(
                    "a {} frame at byte {at} on a clock connection (pings only)",
                    frame_name(&f)
                ))
            }
            Err(e) => return Closed::Broken(format!("{e} (frame at byte {at})")),
        }
    }
}

fn frame_name(f: &Frame<'_>) -> &'static str {
    match f {
        Frame::Hello(_) => "Hello",
        Frame::Rank(_) => "Rank",
        Frame::Clock(_) => "Clock",
        Frame::Defs(_) => "Defs",
        Frame::Pack { .. } => "Pack",
        Frame::End(_) => "End",
        Frame::Ring => "Ring",
        Frame::Cpus(_) => "Cpus",
        Frame::Control(_) => "Control",
        Frame::Counts(_) => "Counts",
        Frame::Scale(_) => "Scale",
        Frame::ClockPing => "ClockPing",
        Frame::ClockPong(_) => "ClockPong",
    }
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A listener being served. Dropping it stops accepting (open connections
/// are read to their end) and removes the Unix socket file.
pub struct Server {
    addr: String,
    path: Option<PathBuf>,
    // The accept thread's listening socket, which it owns and closes; kept
    // here only to wake that thread by shutting the socket down.
    listen_fd: i32,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// The address probes should be given (`HARK_ADDR`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.next.load(Ordering::Relaxed)
    }

    /// Stops accepting and waits until every open connection has closed
    /// and its sink has heard `on_close`.
    pub fn shutdown(mut self) {
        self.stop_accepting();
        self.shared.wait_readers(None);
    }

    /// Stops accepting new connections, gives the open ones until
    /// `deadline` to end, cuts those still open then (their sinks hear
    /// [`Closed::NoEnd`] or [`Closed::Broken`]), and waits for their readers
    /// to hand their last frames to the sink. Returns how many connections
    /// were cut. A client that keeps connecting cannot hold this up: new
    /// connections are refused from the first moment.
    pub fn shutdown_by(mut self, deadline: Instant) -> usize {
        self.stop_accepting();
        if self.shared.wait_readers(Some(deadline)) {
            return 0;
        }
        let cut = hark_sync::lock(&self.shared.live).len();
        self.shared.abort_live();
        self.shared.wait_readers(None);
        cut
    }

    /// Cuts every open connection at once, as a crashing server would; their
    /// probes see their next write fail. Keeps accepting.
    pub fn abort_connections(&self) {
        self.shared.abort_live();
    }

    /// Readers still running (connections accepted and not yet closed and
    /// handed to the sink).
    pub fn open(&self) -> usize {
        *hark_sync::lock(&self.shared.readers)
    }

    fn stop_accepting(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::Release);
        // Wake the accept thread: shutting a listening socket down makes a
        // blocked accept() fail at once on Linux. A connection of our own
        // would need the socket file, which someone may have removed.
        // SAFETY: the descriptor stays open until the accept thread, which
        // owns it, returns; it is joined just below.
        unsafe { libc::shutdown(self.listen_fd, libc::SHUT_RDWR) };
        let _ = accept.join();
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}
