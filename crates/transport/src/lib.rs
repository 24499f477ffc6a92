//! The receiving end of probe streams: listeners on Unix and TCP sockets,
//! one reader thread per connection, and a [`Sink`] that gets every decoded
//! frame.
//!
//! A server binds a [`Listener`] to the address the probes are given in
//! `HARK_ADDR`, and [`serve`](Listener::serve)s it with its own [`Sink`]. Each
//! connection is read on its own thread with [`hark_wire::FrameReader`]; the
//! sink hears, in this order and from that thread only:
//! [`on_hello`](Sink::on_hello) once, [`on_frame`](Sink::on_frame) for every
//! later frame (or [`on_pack`](Sink::on_pack) for a pack the sink keeps
//! with its buffer), and [`on_close`](Sink::on_close) once, with how the
//! stream ended. A malformed stream closes only its own connection, with the reason.
//!
//! A probe on the same node may hand over a shared-memory ring after its
//! `Hello` (a `Ring` frame on a Unix socket, see `docs/wire.md`): the rest
//! of its frames are then read in place from the ring, by the same thread,
//! into the same sink. [`hark_ring`] is the ring itself.
//!
//! For tests, [`collect`] gathers whole streams into owned values:
//!
//! ```
//! use hark_transport::collect;
//! use hark_wire::{ClockSource, End, EndReason, Hello};
//! use std::io::Write;
//!
//! let dir = std::env::temp_dir().join(format!("hark-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let addr = format!("unix:{}", dir.join("s").display());
//! let collector = collect::serve_collect(&addr).unwrap();
//!
//! // What a probe would send.
//! let mut bytes = Vec::new();
//! Hello { program: "demo".into(), argv: vec!["demo".into()], host: "h".into(), pid: 1,
//!         rank: -1, size: -1, job: "j".into(), clock: ClockSource::Monotonic,
//!         clock_ns: 0, realtime_ns: 0, pack_size: 1 << 20, secret: String::new(), parent: 0 }.encode(&mut bytes);
//! End { events_written: 0, events_dropped: 0, packs_sent: 0, reason: EndReason::Exit }
//!     .encode(&mut bytes);
//! let mut s = std::os::unix::net::UnixStream::connect(dir.join("s")).unwrap();
//! s.write_all(&bytes).unwrap();
//! drop(s);
//!
//! let streams = collector.wait_closed(1, std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(streams[0].hello.program, "demo");
//! assert!(streams[0].is_clean());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod collect;
mod error;
mod forwarded;
mod listen;
mod peer;
mod shm;
mod tls;

pub use error::{Error, ErrorKind};
pub use listen::{read_stream_from, Listener, Server};
pub use peer::{cred_of, local_tcp_owner, Back, Cred, Peer, ServeOptions};

use hark_wire::{Frame, Hello, PackBytes};

/// Identifies one accepted connection for the life of a [`Server`]
/// (numbered from 0 in order of acceptance).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection {}", self.0)
    }
}

/// How a connection's stream ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The `End` frame arrived (it was passed to [`Sink::on_frame`]), then
    /// the connection closed. The only outcome with complete totals.
    Clean,
    /// The connection closed between frames without an `End` frame: the
    /// process died, was killed, or exited without running its destructors
    /// (`_exit`, a signal), or its probe gave up draining.
    NoEnd,
    /// The stream was unreadable: malformed, truncated inside a frame, out
    /// of order (no `Hello` first, frames after `End`), or a read failed.
    /// The text says what and where; frames before it were delivered.
    Broken(String),
}

/// What a server does with decoded frames.
///
/// Each connection calls its sink from its own reader thread, so calls for
/// one connection are sequential and in stream order, while different
/// connections call concurrently. A sink that blocks slows only its own
/// connection's reader, which is how back-pressure reaches that probe.
pub trait Sink: Send + Sync {
    /// The stream's first frame. `clock_offset_ns` is this server's
    /// `CLOCK_REALTIME` when the frame was read minus the probe's
    /// `hello.realtime_ns`: the one-way delay plus the difference of the two
    /// hosts' clocks. Called at most once per connection,
    /// before any [`on_frame`](Sink::on_frame); a connection that closes
    /// before its `Hello` gets only [`on_close`](Sink::on_close), and so
    /// does a probe's clock connection (`ClockPing` frames, answered by
    /// the reader itself, `docs/wire.md`), with [`Closed::Clean`].
    fn on_hello(&self, conn: ConnId, hello: &Hello, clock_offset_ns: i64);

    /// Every frame after the `Hello`: definitions, rank, packs (whose events
    /// borrow the reader's buffer: copy what you keep) and the final `End`.
    /// A `Ring` frame says that the frames after it come through shared
    /// memory; packs then borrow the ring's slot, which is reused as soon as
    /// this returns.
    fn on_frame(&self, conn: ConnId, frame: Frame<'_>);

    /// A buffer to read the next pack of `conn` into, if this sink keeps
    /// packs whole: a pack read from a socket then comes to
    /// [`on_pack`](Sink::on_pack) with its buffer, instead of to
    /// [`on_frame`](Sink::on_frame) borrowed, and nothing is copied. Best a
    /// buffer a pack came in before (the reader zeroes only what it grows
    /// by). Asked after each pack is read, for the next; packs from
    /// shared memory are always borrowed. The default, `None`, borrows.
    fn pack_buffer(&self, conn: ConnId) -> Option<Vec<u8>> {
        let _ = conn;
        None
    }

    /// A pack read from a socket, with the buffer it was read into, when
    /// [`pack_buffer`](Sink::pack_buffer) gave one in its place. In the
    /// stream's order with every other frame. The default hands it to
    /// [`on_frame`](Sink::on_frame).
    fn on_pack(&self, conn: ConnId, pack: PackBytes) {
        self.on_frame(conn, pack.frame());
    }

    /// Called exactly once per accepted connection, last, with how it ended.
    fn on_close(&self, conn: ConnId, outcome: Closed);

    /// A probe that streamed through shared memory died, or its stream was
    /// cut from this side (it closes [`Closed::NoEnd`] next), holding
    /// `events` recorded events in `packs` buffers it had not yet
    /// published: they are lost, and counted here.
    /// Called at most once per connection, just before
    /// [`on_close`](Sink::on_close). The default ignores it.
    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        let _ = (conn, events, packs);
    }

    /// A connection was accepted, before anything is read from it: who is
    /// at the other end ([`Peer`]). `Err(why)` cuts it off at once: no
    /// reader starts, and [`on_close`](Sink::on_close) follows with
    /// [`Closed::Broken`]`(why)`. Called from the accepting thread, so it
    /// must be quick. The default accepts every connection.
    fn on_accept(&self, conn: ConnId, peer: &Peer) -> Result<(), String> {
        let _ = (conn, peer);
        Ok(())
    }

    /// A control request: a TCP connection whose first byte is `{` sends
    /// one line (a JSON request, `docs/api.md`, "Control over TCP") instead
    /// of a stream. The returned line is its answer, written back before
    /// the connection closes ([`on_close`](Sink::on_close) follows,
    /// [`Closed::Clean`]). `secure`: it came over TLS, so that a bearer
    /// token in it was not readable on the way. Called on the connection's
    /// reader thread. The default refuses every request.
    fn on_request(&self, conn: ConnId, line: &str, secure: bool) -> String {
        let _ = (conn, line, secure);
        r#"{"ok": false, "error": "this server takes no control requests"}"#.into()
    }

    /// The answer to one clock ping (a connection that opened with a
    /// `ClockPing`, `docs/wire.md`), read as late as possible before it is
    /// written; `None` closes that connection unanswered. Called on the
    /// connection's reader thread, before every answer. The default is this
    /// server's `CLOCK_REALTIME`, exact by definition: the common timeline
    /// is the server's clock. A node's forwarder answers with its own
    /// clock aligned to `hark`'s, and that alignment's bound.
    fn clock_pong(&self) -> Option<hark_wire::Pong> {
        Some(hark_wire::Pong {
            reference_ns: listen::realtime_ns(),
            bound_ns: 0,
        })
    }
}
