//! A node's forwarder: the node's probe streams in, one connection to
//! `hark` out.
//!
//! [`run`] connects to `hark` (the [`Config::upstream`] addresses, in
//! order), says who it is with a `Node` frame, and only then listens on its
//! node-local Unix socket ([`Config::listen`]): a socket that accepts is one
//! whose forwarder reached `hark`. It accepts probe streams exactly as a
//! server does ([`hark_transport`]: the `Hello`, a shared-memory ring read
//! in place, a stream's end or its death), and writes every frame of every
//! stream upstream as a `Mux` frame, with the stream's number, and each
//! stream's end as a `Gone` frame (`docs/wire.md`, "Forwarded streams").
//! Packs keep the ticks they were recorded with: `hark` converts them with
//! the stream's own `Hello`, as it would a direct stream's. Control frames
//! `hark` writes back (pause, resume, dump, sample) go down to the stream's
//! probe, and a `Gone` from `hark` cuts that probe off.
//!
//! It ends when no stream has been open for [`Config::linger`], or at once
//! when `hark`'s connection ends (every probe then sees its stream end and
//! counts what it could not deliver, as with a dead server).
//! The node's probes align their clocks with it too ([`clock`]): it
//! answers their pings with its own clock, aligned with `hark`'s.
//! `docs/cluster.md`, "The forwarder", says why it exists and how probes
//! start it.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod clock;
mod upstream;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hark_transport::{Back, Closed, ConnId, Listener, Peer, ServeOptions, Sink};
use hark_wire::{Frame, Gone, GoneHow, Hello, Node, HEADER_SIZE, MUX_OVERHEAD, PACK_HEADER_SIZE};
use zerocopy::IntoBytes;

pub use upstream::Upstream;

/// How a forwarder runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the node's probes connect: `unix:/path`.
    pub listen: String,
    /// Where `hark` listens, tried in order (`unix:/path`, `tcp:host:port`,
    /// `tls:host:port`).
    pub upstream: Vec<String>,
    /// The CA (PEM) a `tls:` upstream's certificate must chain to
    /// (`HARK_TLS_CA`, as the probes have it).
    pub tls_ca: Option<std::path::PathBuf>,
    /// How long to stay with no stream open before ending.
    pub linger: Duration,
    /// How long connecting upstream may take, per address.
    pub connect_timeout: Duration,
    /// The lock file the node's probes elect the forwarder's starter with,
    /// removed as the forwarder stops accepting (a probe that holds a
    /// lock on the removed file sees that it is gone, and elects again).
    pub lock_file: Option<std::path::PathBuf>,
}

/// What a forwarder did, for its last words and for benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Streams it carried.
    pub streams: u64,
    /// Events in the packs it forwarded.
    pub events: u64,
    /// Bytes it wrote upstream.
    pub bytes: u64,
    /// Whether it ended because `hark`'s connection did.
    pub upstream_lost: bool,
    /// Connections it made into `hark` to align its clock, which answers
    /// the node's clock pings ([`clock`]).
    pub clock_alignments: u64,
    /// Its CPU time (user and system, every thread), in milliseconds, as
    /// the kernel counts it (`/proc/self/stat`); `None` if unreadable.
    pub cpu_ms: Option<u64>,
}

/// Why a forwarder could not run.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Forwards the node's streams until none has been open for the linger
/// time, or until `hark`'s connection ends.
pub fn run(config: &Config) -> Result<Report, Error> {
    let (up, down) = Upstream::connect(
        &config.upstream,
        config.connect_timeout,
        config.tls_ca.as_deref(),
    )
    .map_err(|e| Error(format!("cannot reach hark: {e}")))?;
    let clock = clock::NodeClock::new(up.at(), config.connect_timeout);
    let forward = Arc::new(Forward::new(up, clock));
    let node = Node {
        host: host_name(),
        pid: std::process::id(),
    };
    let mut hello = Vec::new();
    node.encode(&mut hello);
    forward.write_raw(&[&hello]);
    let listener = Listener::bind(&config.listen).map_err(|e| {
        Error(format!(
            "cannot listen for the node's probes on {}: {e}",
            config.listen
        ))
    })?;
    let f = forward.clone();
    std::thread::Builder::new()
        .name("hark-fwd-down".into())
        .spawn(move || f.read_downward(down))
        .map_err(|e| Error(format!("cannot start the thread that reads from hark: {e}")))?;
    let server = listener.serve_with(
        forward.clone(),
        ServeOptions {
            hello_timeout: Some(Duration::from_secs(30)),
            keep_ticks: true,
        },
    );
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if forward.dead.load(Ordering::Relaxed) {
            break;
        }
        let idle = server.open() == 0 && forward.open_streams() == 0;
        if idle && forward.quiet_for() >= config.linger {
            break;
        }
    }
    // Stop accepting (the socket file goes), then let what is open finish:
    // at once if hark is gone (the probes then see their streams end).
    let lost = forward.dead.load(Ordering::Relaxed);
    let grace = if lost {
        Duration::ZERO
    } else {
        Duration::from_secs(10)
    };
    server.shutdown_by(Instant::now() + grace);
    if let Some(lock) = &config.lock_file {
        let _ = std::fs::remove_file(lock);
    }
    forward.finish();
    Ok(Report {
        streams: forward.streams.load(Ordering::Relaxed),
        events: forward.events.load(Ordering::Relaxed),
        bytes: forward.bytes.load(Ordering::Relaxed),
        upstream_lost: lost,
        clock_alignments: forward.clock.alignments(),
        cpu_ms: cpu_ms(),
    })
}

/// The forwarder's sink: every stream's frames go upstream.
struct Forward {
    up: Mutex<Upstream>,
    // Answers the node's clock pings.
    clock: clock::NodeClock,
    // Hark's connection failed or ended.
    dead: AtomicBool,
    // Each stream's way back to its probe, for control frames and cuts.
    backs: Mutex<HashMap<u64, Back>>,
    // Streams that said hello, with their pids; a new stream of a pid
    // still open waits for the old one (below).
    hellos: Mutex<HashMap<u64, u32>>,
    pid_closed: Condvar,
    lost: Mutex<HashMap<u64, (u64, u64)>>,
    changed: Mutex<Instant>,
    streams: AtomicU64,
    events: AtomicU64,
    bytes: AtomicU64,
}

/// How long a stream naming the pid of an open one waits for that one to
/// end: the same process after `exec` connects anew while the forwarder
/// has not yet seen its old stream's end. Hark would refuse it otherwise,
/// as a second stream of a live process.
const EXEC_GRACE: Duration = Duration::from_secs(2);

impl Forward {
    fn new(up: Upstream, clock: clock::NodeClock) -> Forward {
        Forward {
            up: Mutex::new(up),
            clock,
            dead: AtomicBool::new(false),
            backs: Mutex::new(HashMap::new()),
            hellos: Mutex::new(HashMap::new()),
            pid_closed: Condvar::new(),
            lost: Mutex::new(HashMap::new()),
            changed: Mutex::new(Instant::now()),
            streams: AtomicU64::new(0),
            events: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    fn open_streams(&self) -> usize {
        hark_sync::lock(&self.hellos).len()
    }

    fn quiet_for(&self) -> Duration {
        hark_sync::lock(&self.changed).elapsed()
    }

    fn touch(&self) {
        *hark_sync::lock(&self.changed) = Instant::now();
    }

    /// Writes `parts` upstream as one frame's bytes; after a failure,
    /// nothing more is written and the forwarder ends.
    fn write_raw(&self, parts: &[&[u8]]) {
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut up = hark_sync::lock(&self.up);
        match up.write_frame(parts) {
            Ok(n) => {
                self.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => {
                drop(up);
                self.lose_upstream(&format!("writing to hark failed: {e}"));
            }
        }
    }

    /// Writes one whole frame (`frame`, header included, or a pack given
    /// as its header and events) of stream `stream` upstream.
    fn write_mux(&self, stream: u64, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut header = [0u8; MUX_OVERHEAD];
        hark_wire::write_mux_header(&mut header, stream, len);
        let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
        all.push(&header);
        all.extend_from_slice(parts);
        self.write_raw(&all);
    }

    fn lose_upstream(&self, why: &str) {
        // Said only when it costs streams: hark ending after the job's
        // last stream is the normal end.
        if !self.dead.swap(true, Ordering::Relaxed) && self.open_streams() > 0 {
            eprintln!(
                "hark forward: {why}; the node's {} stream(s) are cut off, \
                 and their probes count what they could not deliver",
                self.open_streams()
            );
            for back in hark_sync::lock(&self.backs).values() {
                back.cut();
            }
        }
    }

    /// Reads what hark writes back until its connection ends: control
    /// frames for a stream's probe, and cuts.
    fn read_downward(&self, down: impl std::io::Read) {
        let mut reader = hark_wire::FrameReader::new(std::io::BufReader::new(down));
        loop {
            match reader.next_frame() {
                Ok(Some(Frame::Mux { stream, frame })) => {
                    if let Some(back) = hark_sync::lock(&self.backs).get(&stream) {
                        let _ = back.send(frame);
                    }
                }
                Ok(Some(Frame::Gone(g))) => {
                    if let Some(back) = hark_sync::lock(&self.backs).get(&g.stream) {
                        back.cut();
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.lose_upstream("hark closed the connection");
                    return;
                }
                Err(e) => {
                    self.lose_upstream(&format!("reading from hark failed: {e}"));
                    return;
                }
            }
        }
    }

    /// Waits, up to [`EXEC_GRACE`], until no open stream has `pid`.
    fn wait_for_pid(&self, pid: u32) {
        let deadline = Instant::now() + EXEC_GRACE;
        let mut hellos = hark_sync::lock(&self.hellos);
        while hellos.values().any(|&p| p == pid) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            hellos = self
                .pid_closed
                .wait_timeout(hellos, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn finish(&self) {
        let mut up = hark_sync::lock(&self.up);
        up.close();
    }
}

impl Sink for Forward {
    fn on_accept(&self, conn: ConnId, peer: &Peer) -> Result<(), String> {
        self.touch();
        if self.dead.load(Ordering::Relaxed) {
            return Err("the forwarder lost its connection to hark".into());
        }
        if let Ok(back) = peer.back() {
            hark_sync::lock(&self.backs).insert(conn.0, back);
        }
        Ok(())
    }

    fn on_hello(&self, conn: ConnId, hello: &Hello, _clock_offset_ns: i64) {
        self.wait_for_pid(hello.pid);
        hark_sync::lock(&self.hellos).insert(conn.0, hello.pid);
        self.streams.fetch_add(1, Ordering::Relaxed);
        let mut bytes = Vec::new();
        hello.encode(&mut bytes);
        self.write_mux(conn.0, &[&bytes]);
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        match frame {
            // The ring is this forwarder's business, not hark's.
            Frame::Ring => {}
            Frame::Pack { seq, events } => {
                let mut header = [0u8; HEADER_SIZE + PACK_HEADER_SIZE];
                hark_wire::write_pack_header(&mut header, seq, events.len());
                self.events
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                self.write_mux(conn.0, &[&header, events.as_bytes()]);
            }
            other => {
                let mut bytes = Vec::new();
                other.encode(&mut bytes);
                self.write_mux(conn.0, &[&bytes]);
            }
        }
    }

    fn clock_pong(&self) -> Option<hark_wire::Pong> {
        self.clock.answer()
    }

    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        hark_sync::lock(&self.lost).insert(conn.0, (events, packs));
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        self.touch();
        hark_sync::lock(&self.backs).remove(&conn.0);
        let said_hello = hark_sync::lock(&self.hellos).remove(&conn.0).is_some();
        self.pid_closed.notify_all();
        let (lost_events, lost_packs) = hark_sync::lock(&self.lost)
            .remove(&conn.0)
            .unwrap_or((0, 0));
        if !said_hello {
            // Hark never heard of it.
            return;
        }
        let (how, reason) = match outcome {
            Closed::Broken(why) => (GoneHow::Broken, why),
            Closed::Clean | Closed::NoEnd => (GoneHow::Closed, String::new()),
        };
        let mut bytes = Vec::new();
        Gone {
            stream: conn.0,
            how,
            lost_events,
            lost_packs,
            reason,
        }
        .encode(&mut bytes);
        self.write_raw(&[&bytes]);
    }
}

/// This host's name, as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// User and system CPU time of this process, every thread, in ms
/// (`/proc/self/stat` fields 14 and 15, in clock ticks of 10 ms: Linux's
/// `USER_HZ` is 100 on every architecture it runs on).
fn cpu_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10)
}
