//! A node's forwarder connection, taken apart into the streams it carries.
//!
//! A forwarder (`hark forward`, `docs/cluster.md`) opens its connection
//! with a `Node` frame; after it come `Mux` frames, each one whole frame of
//! one probe's stream, and `Gone` frames, each the end of one stream
//! (`docs/wire.md`, "Forwarded streams"). Each stream becomes a connection
//! of its own for the [`Sink`]: a number from the same counter as accepted
//! sockets, [`Sink::on_accept`], [`Sink::on_hello`], its frames,
//! [`Sink::on_close`] — the same calls, in the same order and with the same
//! checks, as if the probe had connected directly; so every analysis sees
//! the same thing either way. All of a node's streams are read on this one
//! thread: that is the point (threads in the server grow with nodes, not
//! ranks), and back-pressure from one stream holds the node's others.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hark_wire::{ClockSource, Frame, FrameReader, Gone, GoneHow, Hello, Kind, Node, TickScale};

use crate::listen::{frame_name, realtime_ns, Side};
use crate::peer::{Cuts, Peer};
use crate::{shm, Closed, ConnId, Sink};

/// One stream the forwarder carries.
struct Carried {
    conn: ConnId,
    ticks: Option<TickScale>,
    pack_size: usize,
    ended: bool,
}

/// The node's streams, by their numbers on its connection.
struct Demux<'a> {
    side: &'a Side,
    sink: &'a dyn Sink,
    cuts: Arc<Cuts>,
    open: HashMap<u64, Carried>,
    // Streams closed here (cut, refused, broken) whose `Gone` has not come
    // yet: their frames still on the way are dropped.
    closed: HashSet<u64>,
}

/// Reads a forwarder's connection after its `Node` frame to its end,
/// handing each stream it carries to `sink` as a connection of its own.
/// Streams still open at the end (the forwarder died, or its connection
/// was unreadable) close [`Closed::Broken`], naming the forwarder.
pub(crate) fn read<R: Read>(
    node: &Node,
    reader: &mut FrameReader<R>,
    side: &Side,
    sink: &dyn Sink,
) {
    let mut d = Demux {
        side,
        sink,
        cuts: Arc::new(Cuts::default()),
        open: HashMap::new(),
        closed: HashSet::new(),
    };
    let end = loop {
        for stream in d.cuts.take() {
            d.close(stream, None);
        }
        let at = reader.offset();
        let stream = match reader.next_frame() {
            Ok(None) => break None,
            Ok(Some(Frame::Mux { stream, .. })) => stream,
            Ok(Some(Frame::Gone(g))) => {
                d.gone(g);
                continue;
            }
            Ok(Some(other)) => {
                break Some(format!(
                    "a {} frame at byte {at} of the forwarder's connection",
                    frame_name(&other)
                ))
            }
            Err(e) => break Some(format!("{e} (frame at byte {at})")),
        };
        // The carried frame, to convert in place: past the stream number.
        let payload = reader.payload_mut();
        d.carried(stream, &mut payload[8..]);
    };
    let why = |w: &str| {
        format!(
            "the connection of the forwarder on {} (pid {}) ended: {w}",
            node.host, node.pid
        )
    };
    // A forwarder that ends normally has said every stream's end first:
    // a stream still open here lost its way to the server.
    let end = end.unwrap_or_else(|| {
        "it closed with this stream still open (the forwarder died or was killed)".into()
    });
    let streams: Vec<u64> = d.open.keys().copied().collect();
    for stream in streams {
        d.close(stream, Some(Closed::Broken(why(&end))));
    }
}

impl Demux<'_> {
    /// One whole frame of stream `stream`.
    fn carried(&mut self, stream: u64, bytes: &mut [u8]) {
        if self.closed.contains(&stream) {
            return;
        }
        let Some(c) = self.open.get_mut(&stream) else {
            self.open_stream(stream, bytes);
            return;
        };
        if c.ended {
            self.broken(stream, "a frame follows the End frame".into());
            return;
        }
        if let Some(why) = oversized(bytes, c.pack_size) {
            self.broken(stream, why);
            return;
        }
        let (conn, sink) = (c.conn, self.sink);
        let mut ticks = c.ticks;
        let delivered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shm::deliver(conn, bytes, &mut ticks, true, sink)
        }));
        match delivered {
            Ok(Ok(ended)) => {
                c.ticks = ticks;
                c.ended = ended;
            }
            Ok(Err(why)) => self.broken(stream, why),
            Err(_) => self.broken(
                stream,
                "the sink panicked while handling this stream".into(),
            ),
        }
    }

    /// The first frame of a stream, which must be its `Hello`.
    fn open_stream(&mut self, stream: u64, bytes: &mut [u8]) {
        let hello = match decode_hello(bytes) {
            Ok(h) => h,
            Err(why) => {
                // Never a connection for the sink: it is refused as one
                // that started wrong would be.
                let conn = self.next_conn();
                self.sink.on_close(conn, Closed::Broken(why));
                self.refuse_downward(stream);
                return;
            }
        };
        let conn = self.next_conn();
        let peer = Peer::forwarded(
            self.side.cred,
            self.side.fd,
            self.side.tls(),
            stream,
            self.cuts.clone(),
        );
        if let Err(why) = self.sink.on_accept(conn, &peer) {
            self.sink.on_close(conn, Closed::Broken(why));
            self.refuse_downward(stream);
            return;
        }
        let offset = (realtime_ns() as i64).saturating_sub(hello.realtime_ns as i64);
        self.open.insert(
            stream,
            Carried {
                conn,
                ticks: match hello.clock {
                    ClockSource::Tsc(t) => Some(t),
                    ClockSource::Monotonic => None,
                },
                pack_size: hello.pack_size as usize,
                ended: false,
            },
        );
        let sink = self.sink;
        let heard = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sink.on_hello(conn, &hello, offset)
        }));
        if heard.is_err() {
            self.broken(
                stream,
                "the sink panicked while handling this stream".into(),
            );
        }
    }

    /// The forwarder says stream `g.stream` ended.
    fn gone(&mut self, g: Gone) {
        if self.closed.remove(&g.stream) {
            return;
        }
        let Some(c) = self.open.get(&g.stream) else {
            return;
        };
        if g.lost_events > 0 {
            self.sink.on_lost(c.conn, g.lost_events, g.lost_packs);
        }
        let outcome = match g.how {
            GoneHow::Broken => Closed::Broken(g.reason),
            GoneHow::Closed if c.ended => Closed::Clean,
            GoneHow::Closed => Closed::NoEnd,
        };
        self.close(g.stream, Some(outcome));
        // Nothing of it follows its Gone.
        self.closed.remove(&g.stream);
    }

    /// Stream `stream` is unreadable: closed with `why`, and the forwarder
    /// asked to cut its probe off.
    fn broken(&mut self, stream: u64, why: String) {
        self.close(stream, Some(Closed::Broken(why)));
        self.refuse_downward(stream);
    }

    /// Closes `stream` for the sink with `outcome` (by default as its
    /// connection's end would: clean after its `End`, else without one).
    fn close(&mut self, stream: u64, outcome: Option<Closed>) {
        let Some(c) = self.open.remove(&stream) else {
            return;
        };
        self.closed.insert(stream);
        let outcome = outcome.unwrap_or(if c.ended {
            Closed::Clean
        } else {
            Closed::NoEnd
        });
        let sink = self.sink;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sink.on_close(c.conn, outcome)
        }));
    }

    /// Asks the forwarder to cut `stream`'s probe off; its frames on the
    /// way are dropped until its `Gone`.
    fn refuse_downward(&mut self, stream: u64) {
        self.closed.insert(stream);
        let peer = Peer::forwarded(
            None,
            self.side.fd,
            self.side.tls(),
            stream,
            self.cuts.clone(),
        );
        if let Ok(back) = peer.back() {
            back.cut();
        }
    }

    fn next_conn(&self) -> ConnId {
        ConnId(self.side.ids.fetch_add(1, Ordering::Relaxed))
    }
}

/// The `Hello` that must open a carried stream, or why not.
fn decode_hello(bytes: &[u8]) -> Result<Hello, String> {
    let mut r = FrameReader::new(bytes);
    match r.next_frame() {
        Ok(Some(Frame::Hello(h))) => match r.next_frame() {
            Ok(None) => Ok(h),
            _ => Err("bytes follow the Hello in its forwarded frame".into()),
        },
        Ok(Some(other)) => Err(format!(
            "the stream starts with a {} frame instead of Hello",
            frame_name(&other)
        )),
        Ok(None) => Err("an empty forwarded frame".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Why a carried pack is larger than its stream's `Hello` allows, if it is.
fn oversized(bytes: &[u8], pack_size: usize) -> Option<String> {
    let kind = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?);
    let len = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
    (kind == Kind::Pack as u32 && len > pack_size).then(|| {
        format!(
            "Pack frame claims {len} bytes, above its limit of {pack_size} bytes \
             (the pack size its stream's Hello declared)"
        )
    })
}
