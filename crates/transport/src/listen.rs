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

use hark_tls::rustls::ServerConfig;
use hark_wire::{ClockSource, Frame, FrameReader};

use crate::error::{Error, ErrorKind};
use crate::peer::{self, Peer, ServeOptions};
use crate::shm::{self, FdCatcher, Handover};
use crate::tls;
use crate::{Closed, ConnId, Sink};

enum Socket {
    Unix(UnixListener, PathBuf),
    /// With a configuration, every connection is TLS.
    Tcp(TcpListener, Option<Arc<ServerConfig>>),
}

/// A bound listening socket, not yet accepting.
pub struct Listener {
    socket: Socket,
    addr: String,
    // More sockets served as one with this one (`also`): their connections
    // share the ids, the sink and the shutdown.
    more: Vec<Listener>,
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
                more: Vec::new(),
            })
        } else if let Some(hostport) = addr.strip_prefix("tcp:") {
            let l = TcpListener::bind(hostport).map_err(bind_err)?;
            let local = l.local_addr().map_err(bind_err)?;
            Ok(Listener {
                socket: Socket::Tcp(l, None),
                addr: format!("tcp:{local}"),
                more: Vec::new(),
            })
        } else if addr.starts_with(hark_tls::SCHEME) {
            Err(Error::new(ErrorKind::TlsWithoutCertificate(
                addr.to_string(),
            )))
        } else {
            Err(Error::new(ErrorKind::BadAddress(addr.to_string())))
        }
    }

    /// Binds `tcp:host:port` or `tls:host:port` as [`bind`](Listener::bind)
    /// does, and makes every connection TLS under `config` (the service's
    /// certificate and key, [`hark_tls::server_config`]): a client that
    /// does not open with a TLS handshake is told so and cut. The address
    /// it gives probes is `tls:host:port`.
    pub fn bind_tls(addr: &str, config: Arc<ServerConfig>) -> Result<Listener, Error> {
        let tcp = match addr.strip_prefix(hark_tls::SCHEME) {
            Some(hostport) => format!("tcp:{hostport}"),
            None if addr.starts_with("tcp:") => addr.to_string(),
            None => return Err(Error::new(ErrorKind::BadAddress(addr.to_string()))),
        };
        let mut l = Listener::bind(&tcp)?;
        if let Socket::Tcp(_, tls) = &mut l.socket {
            *tls = Some(config);
        }
        l.addr = format!("{}{}", hark_tls::SCHEME, &l.addr["tcp:".len()..]);
        Ok(l)
    }

    /// The address probes should be given (`HARK_ADDR`), with the actual
    /// port for TCP.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// This listener and `other` served as one: one sink, one count of
    /// connections, one shutdown (a Unix socket on the node and a TCP
    /// socket for ranks on other nodes, say). [`addr`](Listener::addr)
    /// stays this one's; [`Server::addrs`] lists all.
    pub fn also(mut self, other: Listener) -> Listener {
        self.more.push(other);
        self
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
            next: Arc::new(AtomicU64::new(0)),
            sockets: AtomicU64::new(0),
            readers: Mutex::new(0),
            reader_done: Condvar::new(),
            live: Mutex::new(Vec::new()),
            options,
        });
        let mut server = Server {
            addr: self.addr.clone(),
            addrs: Vec::new(),
            paths: Vec::new(),
            accepts: Vec::new(),
            shared,
        };
        let mut more = self.more;
        server.accept_on(self.socket, self.addr, sink.clone());
        while !more.is_empty() {
            let l = more.remove(0);
            more.splice(0..0, l.more);
            server.accept_on(l.socket, l.addr, sink.clone());
        }
        server
    }
}

struct Shared {
    stopping: AtomicBool,
    // Connection numbers handed out: one per accepted socket, and one per
    // stream a forwarder carries (`crate::forwarded`).
    next: Arc<AtomicU64>,
    // Sockets accepted.
    sockets: AtomicU64,
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

/// An accepted connection, before its reader starts.
struct Accepted {
    stream: Box<dyn Read + Send>,
    fd: i32,
    handover: Option<Handover>,
    peer: Peer,
    reply: Option<Reply>,
}

fn accept_one(socket: &Socket, timeout: Option<std::time::Duration>) -> std::io::Result<Accepted> {
    match socket {
        Socket::Unix(l, _) => {
            let (s, _) = l.accept()?;
            let fd = s.as_raw_fd();
            let _ = s.set_read_timeout(timeout);
            let (s, handover) = FdCatcher::new(s);
            Ok(Accepted {
                stream: Box::new(s),
                fd,
                handover: Some(handover),
                peer: Peer::of_unix(fd),
                reply: None,
            })
        }
        Socket::Tcp(l, config) => {
            let (s, _) = l.accept()?;
            let _ = s.set_nodelay(true);
            let _ = s.set_read_timeout(timeout);
            let fd = s.as_raw_fd();
            let Some(config) = config else {
                return Ok(Accepted {
                    stream: Box::new(s),
                    fd,
                    handover: None,
                    peer: Peer::of_tcp(fd, None),
                    reply: Some(Reply { fd, tls: None }),
                });
            };
            let session = tls::Session::new(config)?;
            Ok(Accepted {
                stream: Box::new(tls::Reader::new(s, session.clone())),
                fd,
                handover: None,
                peer: Peer::of_tcp(fd, Some(session.clone())),
                reply: Some(Reply {
                    fd,
                    tls: Some(session),
                }),
            })
        }
    }
}

/// How the answer to a control request goes back on a TCP connection.
struct Reply {
    fd: i32,
    tls: Option<Arc<tls::Session>>,
}

impl Reply {
    fn send(&self, bytes: &[u8]) -> std::io::Result<()> {
        match &self.tls {
            Some(s) => s.send_blocking(self.fd, bytes),
            None => {
                // SAFETY: the descriptor is the connection's, open while its
                // reader runs; `dup` makes one the File owns and closes.
                let dup = unsafe { libc::fcntl(self.fd, libc::F_DUPFD_CLOEXEC, 3) };
                if dup < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: `dup` was just made and is owned by nobody else.
                let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(dup) };
                std::io::Write::write_all(&mut f, bytes)
            }
        }
    }
}

fn accept_loop(socket: Socket, shared: Arc<Shared>, sink: Arc<dyn Sink>) {
    loop {
        let timeout = shared.options.hello_timeout;
        let Accepted {
            stream: conn,
            fd,
            handover,
            peer,
            reply,
        } = match accept_one(&socket, timeout) {
            Ok(a) => a,
            Err(e) => {
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                accept_failed(&e);
                continue;
            }
        };
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        shared.sockets.fetch_add(1, Ordering::Relaxed);
        let id = shared.next.fetch_add(1, Ordering::Relaxed);
        if let Err(why) = sink.on_accept(ConnId(id), &peer) {
            drop(conn);
            sink.on_close(ConnId(id), Closed::Broken(why));
            continue;
        }
        let cred = peer.cred;
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
                    ids: sh.next.clone(),
                    keep_ticks: sh.options.keep_ticks,
                    cred,
                    reply,
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
pub(crate) struct Side {
    pub(crate) fd: i32,
    handover: Option<Handover>,
    hello_timeout: Option<std::time::Duration>,
    // Where numbers for the streams a forwarder carries come from.
    pub(crate) ids: Arc<AtomicU64>,
    // Packs keep their ticks (a forwarder's own listener).
    keep_ticks: bool,
    // The peer's credentials, for the streams a forwarder carries.
    pub(crate) cred: Option<crate::Cred>,
    /// On TCP: the way to answer a control request.
    reply: Option<Reply>,
}

impl Side {
    /// The connection's TLS session, on a `tls:` listener.
    pub(crate) fn tls(&self) -> Option<Arc<tls::Session>> {
        self.reply.as_ref().and_then(|r| r.tls.clone())
    }
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
    if let Some(outcome) = outcome {
        sink.on_close(conn, outcome);
    }
}

/// Reads one stream from any byte source exactly as an accepted connection
/// is read — frame caps, order checks, a panicking sink caught — and ends
/// with [`Sink::on_close`]. For tests and fuzzing, which need no socket.
pub fn read_stream_from(conn: ConnId, stream: &mut dyn Read, sink: &dyn Sink) {
    let side = Side {
        fd: -1,
        handover: None,
        hello_timeout: None,
        ids: Arc::new(AtomicU64::new(conn.0 + 1)),
        keep_ticks: false,
        cred: None,
        reply: None,
    };
    if let Some(outcome) = read_caught(conn, stream, side, sink) {
        sink.on_close(conn, outcome);
    }
}

/// How the stream ended, or `None` if the sink has already heard its
/// close (a forwarder's connection).
fn read_caught(conn: ConnId, stream: &mut dyn Read, side: Side, sink: &dyn Sink) -> Option<Closed> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_all(conn, stream, side, sink)
    }))
    .unwrap_or_else(|_| {
        Some(Closed::Broken(
            "the sink panicked while handling this stream".into(),
        ))
    })
}

fn read_all(conn: ConnId, stream: &mut dyn Read, side: Side, sink: &dyn Sink) -> Option<Closed> {
    let mut buffered = BufReader::with_capacity(1 << 13, stream);
    if let Some(reply) = &side.reply {
        if let Some(outcome) = answer_request(conn, &mut buffered, reply, sink) {
            return Some(outcome);
        }
    }
    let mut reader = FrameReader::new(buffered);
    if side.keep_ticks {
        reader = reader.keep_ticks();
    }
    let began = Instant::now();
    let first = match reader.next_frame() {
        Ok(Some(Frame::Hello(h))) => First::Hello(h),
        Ok(Some(Frame::Node(n))) => First::Node(n),
        Ok(Some(Frame::ClockPing)) => First::ClockPing,
        Ok(Some(other)) => First::Other(frame_name(&other)),
        Ok(None) => First::Nothing,
        Err(e) => First::Failed(e),
    };
    match first {
        First::Node(node) => {
            if side.hello_timeout.is_some() {
                peer::set_read_timeout(side.fd, None);
            }
            // The node's connection holds no stream of its own: it is
            // closed for the sink at once, its streams one by one.
            sink.on_close(conn, Closed::Clean);
            crate::forwarded::read(&node, &mut reader, &side, sink);
            None
        }
        first => Some(read_direct(conn, first, began, &mut reader, side, sink)),
    }
}

/// What a connection's first frame was.
enum First {
    Hello(hark_wire::Hello),
    Node(hark_wire::Node),
    ClockPing,
    Other(&'static str),
    Nothing,
    Failed(hark_wire::Error),
}

/// A probe's own stream, whose first frame was `first`.
fn read_direct<R: Read>(
    conn: ConnId,
    first: First,
    began: Instant,
    reader: &mut FrameReader<R>,
    side: Side,
    sink: &dyn Sink,
) -> Closed {
    // 8 KiB, not 64: the buffer is zero-filled at the first read (a boxed
    // reader has no uninitialised reads), so its size is resident for every
    // idle connection a service holds (BENCHMARKS.md, "hark serve"). Packs
    // are larger and are read past it, straight into the frame's buffer.
    let ticks = match first {
        First::Hello(hello) => {
            // From here on a stream may be silent as long as it likes.
            if side.hello_timeout.is_some() {
                peer::set_read_timeout(side.fd, None);
            }
            // Saturating: a Hello's clock fields are whatever was sent.
            let offset = (realtime_ns() as i64).saturating_sub(hello.realtime_ns as i64);
            sink.on_hello(conn, &hello, offset);
            // Packs follow: read the first into a pack buffer the sink has
            // ready too, as the later ones are.
            if let Some(buf) = sink.pack_buffer(conn) {
                reader.use_buffer(buf);
            }
            match hello.clock {
                ClockSource::Tsc(t) => Some(t),
                ClockSource::Monotonic => None,
            }
        }
        First::ClockPing => return answer_clock_pings(reader, side.fd, sink),
        First::Other(name) => {
            return Closed::Broken(format!(
                "the stream starts with a {name} frame instead of Hello"
            ))
        }
        First::Node(_) | First::Nothing => return Closed::NoEnd,
        First::Failed(_) if side.hello_timeout.is_some_and(|t| began.elapsed() >= t) => {
            return Closed::Broken(format!(
                "no complete Hello within {:?} of connecting (a silent or trickling client)",
                side.hello_timeout.unwrap_or_default()
            ))
        }
        First::Failed(e) => return Closed::Broken(e.to_string()),
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
                        shm::read_ring(conn, ring, side.fd, ticks, !side.keep_ticks, sink)
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

/// A TCP connection whose first byte is `{` asks one control request (a
/// JSON line, at most 64 KiB) instead of streaming: the sink answers it,
/// the answer goes back, and the connection ends. `None` for a stream.
fn answer_request(
    conn: ConnId,
    buffered: &mut BufReader<&mut dyn Read>,
    reply: &Reply,
    sink: &dyn Sink,
) -> Option<Closed> {
    use std::io::BufRead;
    match buffered.fill_buf() {
        Ok(b) if b.first() == Some(&b'{') => {}
        _ => return None,
    }
    let mut line = Vec::new();
    let read = (&mut *buffered).take(64 << 10).read_until(b'\n', &mut line);
    if let Err(e) = read {
        return Some(Closed::Broken(format!(
            "a control request could not be read ({e})"
        )));
    }
    let text = String::from_utf8_lossy(&line);
    let answer = sink.on_request(conn, text.trim(), reply.tls.is_some());
    let mut out = answer.into_bytes();
    out.push(b'\n');
    Some(match reply.send(&out) {
        Ok(()) => Closed::Clean,
        Err(e) => Closed::Broken(format!(
            "the answer to a control request could not be sent ({e})"
        )),
    })
}

/// Most pings one clock connection is answered: a probe's alignment takes
/// a few rounds; a client that keeps asking is cut off.
const MAX_CLOCK_PINGS: usize = 256;

/// A connection that opened with a `ClockPing` (a probe aligning its clock
/// with this server's, `docs/wire.md`): every ping is answered at once, on
/// the socket, with the sink's clock ([`Sink::clock_pong`]: this server's
/// `CLOCK_REALTIME`, read as late as possible before the answer is
/// written). Nothing else reaches the sink but the close ([`Closed::Clean`]
/// when the probe hung up after its pings).
fn answer_clock_pings<R: Read>(reader: &mut FrameReader<R>, fd: i32, sink: &dyn Sink) -> Closed {
    if fd < 0 {
        return Closed::Broken("a clock ping where no answer can be written".into());
    }
    let mut answered = 0;
    loop {
        let Some(answer) = sink.clock_pong() else {
            return Closed::Broken("this server has no clock to answer pings with".into());
        };
        let mut pong = Vec::with_capacity(24);
        hark_wire::encode_clock_pong(answer, &mut pong);
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

pub(crate) fn frame_name(f: &Frame<'_>) -> &'static str {
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
        Frame::Node(_) => "Node",
        Frame::Mux { .. } => "Mux",
        Frame::Gone(_) => "Gone",
        Frame::ClockPing => "ClockPing",
        Frame::ClockPong(_) => "ClockPong",
    }
}

pub(crate) fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A listener being served. Dropping it stops accepting (open connections
/// are read to their end) and removes the Unix socket file.
pub struct Server {
    addr: String,
    addrs: Vec<String>,
    paths: Vec<PathBuf>,
    // Each accept thread with its listening socket, which the thread owns
    // and closes; kept here only to wake the thread by shutting it down.
    accepts: Vec<(i32, JoinHandle<()>)>,
    shared: Arc<Shared>,
}

impl Server {
    /// The address probes should be given (`HARK_ADDR`): the first
    /// listener's.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Every address served ([`Listener::also`]), the first listener's
    /// first.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// Starts the accept thread of one listening socket.
    fn accept_on(&mut self, socket: Socket, addr: String, sink: Arc<dyn Sink>) {
        let listen_fd = match &socket {
            Socket::Unix(l, p) => {
                self.paths.push(p.clone());
                l.as_raw_fd()
            }
            Socket::Tcp(l, _) => l.as_raw_fd(),
        };
        let sh = self.shared.clone();
        let accept = std::thread::Builder::new()
            .name("hark-accept".into())
            .spawn(move || accept_loop(socket, sh, sink))
            .expect("spawning the accept thread");
        self.addrs.push(addr);
        self.accepts.push((listen_fd, accept));
    }

    /// Streams seen so far: every connection accepted, and every stream a
    /// node's forwarder carried on one (`docs/cluster.md`, "The
    /// forwarder").
    pub fn connections(&self) -> u64 {
        self.shared.next.load(Ordering::Relaxed)
    }

    /// Sockets accepted so far: a forwarder's connection counts once,
    /// however many streams it carries.
    pub fn sockets(&self) -> u64 {
        self.shared.sockets.load(Ordering::Relaxed)
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
        if self.accepts.is_empty() {
            return;
        }
        self.shared.stopping.store(true, Ordering::Release);
        for (listen_fd, accept) in self.accepts.drain(..) {
            // Wake the accept thread: shutting a listening socket down makes a
            // blocked accept() fail at once on Linux. A connection of our own
            // would need the socket file, which someone may have removed.
            // SAFETY: the descriptor stays open until the accept thread, which
            // owns it, returns; it is joined just below.
            unsafe { libc::shutdown(listen_fd, libc::SHUT_RDWR) };
            let _ = accept.join();
        }
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}
