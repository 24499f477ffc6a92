//! Whole streams gathered into owned values: the receiving end for tests
//! (the probe's, the MPI adapter's) and small tools.
//!
//! [`serve_collect`] listens on an address; every connection becomes a
//! [`Stream`] holding its `Hello`, definitions, rank frames, every event in
//! stream order, the `End` totals and how it closed. [`Collector::wait_closed`]
//! waits until a number of streams have closed and returns them all, ordered
//! by connection.
//!
//! ```no_run
//! # use std::time::Duration;
//! let c = hark_transport::collect::serve_collect("unix:/tmp/hark-test.sock").unwrap();
//! // run a program with HARK_ADDR=c.addr() and LD_PRELOAD=libhark.so, then:
//! let streams = c.wait_closed(1, Duration::from_secs(30)).unwrap();
//! let s = &streams[0];
//! assert!(s.is_clean());
//! let writes: u64 = s.events_of(hark_wire::op::io::WRITE).map(|e| e.bytes.get()).sum();
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hark_wire::{ClockSync, Def, End, Event, Frame, Hello, RankInfo};

use crate::error::{Error, ErrorKind};
use crate::{Closed, ConnId, Listener, Server, Sink};

/// One connection's stream, decoded and owned.
#[derive(Clone, Debug)]
pub struct Stream {
    /// Which connection this was.
    pub conn: ConnId,
    /// The handshake.
    pub hello: Hello,
    /// The connection's clock offset (see [`Sink::on_hello`]).
    pub clock_offset_ns: i64,
    /// Every `Rank` frame, in order.
    pub ranks: Vec<RankInfo>,
    /// Every clock alignment (`Clock` frame), in order.
    pub clocks: Vec<ClockSync>,
    /// Every definition, in order.
    pub defs: Vec<Def>,
    /// The sequence number and event count of every pack, in order.
    pub packs: Vec<(u64, usize)>,
    /// Every event of every pack, in stream order.
    pub events: Vec<Event>,
    /// The `End` frame, if it came.
    pub end: Option<End>,
    /// How the connection closed; `None` while it is open.
    pub closed: Option<Closed>,
    /// Whether the stream went on through a shared-memory ring.
    pub shm: bool,
    /// What a probe that died left unshipped in its shared-memory ring:
    /// `(events, buffers)` (see [`Sink::on_lost`]).
    pub lost: Option<(u64, u64)>,
    /// Every `Counts` frame (a sampled-out probe's totals), in order.
    pub counts: Vec<hark_wire::Counts>,
    /// Every refined TSC calibration (`Scale` frame), in order.
    pub scales: Vec<hark_wire::TickScale>,
}

impl Stream {
    /// Ended with an `End` frame and closed cleanly.
    pub fn is_clean(&self) -> bool {
        self.closed == Some(Closed::Clean)
    }

    /// The events of kind `op`, in order.
    pub fn events_of(&self, op: u16) -> impl Iterator<Item = &Event> + '_ {
        self.events.iter().filter(move |e| e.op.get() == op)
    }

    /// The path of file id `id`, from the stream's definitions.
    pub fn file(&self, id: u32) -> Option<&str> {
        self.defs.iter().find_map(|d| match d {
            Def::File { id: i, path } if *i == id => Some(path.as_str()),
            _ => None,
        })
    }

    /// The file id defined for `path`.
    pub fn file_id(&self, path: &str) -> Option<u32> {
        self.defs.iter().find_map(|d| match d {
            Def::File { id, path: p } if p == path => Some(*id),
            _ => None,
        })
    }

    /// The id of the region, counter or mark called `name`.
    pub fn name_id(&self, name: &str) -> Option<u32> {
        self.defs.iter().find_map(|d| match d {
            Def::Name { id, name: n, .. } if n == name => Some(*id),
            _ => None,
        })
    }
}

/// Settings for [`serve_collect_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Sleep this long after every pack: a slow server, for back-pressure
    /// tests.
    pub pack_delay: Duration,
    /// Stop reading for this long once, after this many packs of a stream:
    /// a reader that stops and comes back.
    pub stall: Option<(usize, Duration)>,
}

#[derive(Default)]
struct State {
    streams: BTreeMap<ConnId, Stream>,
    // Connections that closed before their Hello.
    no_hello: Vec<(ConnId, Closed)>,
}

struct Gather {
    state: Mutex<State>,
    changed: Condvar,
    options: Options,
}

impl Sink for Gather {
    fn on_hello(&self, conn: ConnId, hello: &Hello, clock_offset_ns: i64) {
        hark_sync::lock(&self.state).streams.insert(
            conn,
            Stream {
                conn,
                hello: hello.clone(),
                clock_offset_ns,
                ranks: Vec::new(),
                clocks: Vec::new(),
                defs: Vec::new(),
                packs: Vec::new(),
                events: Vec::new(),
                end: None,
                closed: None,
                shm: false,
                lost: None,
                counts: Vec::new(),
                scales: Vec::new(),
            },
        );
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        let is_pack = matches!(frame, Frame::Pack { .. });
        let mut stall = None;
        {
            let mut st = hark_sync::lock(&self.state);
            let Some(s) = st.streams.get_mut(&conn) else {
                return;
            };
            match frame {
                Frame::Hello(_) | Frame::Cpus(_) | Frame::ClockPing | Frame::ClockPong(_) => {}
                Frame::Node(_) | Frame::Mux { .. } | Frame::Gone(_) => {}
                Frame::Scale(t) => s.scales.push(t),
                Frame::Ring => s.shm = true,
                Frame::Control(_) => {}
                Frame::Counts(c) => s.counts.push(c),
                Frame::Rank(r) => s.ranks.push(r),
                Frame::Clock(c) => s.clocks.push(c),
                Frame::Defs(d) => s.defs.extend(d),
                Frame::Pack { seq, events } => {
                    s.packs.push((seq, events.len()));
                    stall = self
                        .options
                        .stall
                        .filter(|(after, _)| s.packs.len() == *after)
                        .map(|(_, pause)| pause);
                    s.events.extend_from_slice(events);
                }
                Frame::End(e) => s.end = Some(e),
            }
        }
        if let Some(pause) = stall {
            std::thread::sleep(pause);
        }
        if is_pack && !self.options.pack_delay.is_zero() {
            std::thread::sleep(self.options.pack_delay);
        }
    }

    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        if let Some(s) = hark_sync::lock(&self.state).streams.get_mut(&conn) {
            s.lost = Some((events, packs));
        }
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        let mut st = hark_sync::lock(&self.state);
        match st.streams.get_mut(&conn) {
            Some(s) => s.closed = Some(outcome),
            None => st.no_hello.push((conn, outcome)),
        }
        drop(st);
        self.changed.notify_all();
    }
}

/// A running collector; dropping it stops listening.
pub struct Collector {
    server: Server,
    gather: Arc<Gather>,
}

/// Listens on `addr` and gathers every stream.
pub fn serve_collect(addr: &str) -> Result<Collector, Error> {
    serve_collect_with(addr, Options::default())
}

/// [`serve_collect`] with [`Options`].
pub fn serve_collect_with(addr: &str, options: Options) -> Result<Collector, Error> {
    serve_on(Listener::bind(addr)?, options)
}

/// [`serve_collect`] in TLS ([`Listener::bind_tls`]): `addr` is
/// `tls:host:port`.
pub fn serve_collect_tls(
    addr: &str,
    config: Arc<hark_tls::rustls::ServerConfig>,
) -> Result<Collector, Error> {
    serve_on(Listener::bind_tls(addr, config)?, Options::default())
}

fn serve_on(listener: Listener, options: Options) -> Result<Collector, Error> {
    let gather = Arc::new(Gather {
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
        options,
    });
    let server = listener.serve(gather.clone());
    Ok(Collector { server, gather })
}

impl Collector {
    /// The address to give probes in `HARK_ADDR`.
    pub fn addr(&self) -> &str {
        self.server.addr()
    }

    /// The streams so far, open or closed, by connection.
    pub fn streams(&self) -> Vec<Stream> {
        self.gather
            .state
            .lock()
            .unwrap()
            .streams
            .values()
            .cloned()
            .collect()
    }

    /// Connections that closed before sending a `Hello`, with how.
    pub fn rejected(&self) -> Vec<(ConnId, Closed)> {
        hark_sync::lock(&self.gather.state).no_hello.clone()
    }

    /// Waits until at least `n` streams have closed, then returns every
    /// stream (closed or not) by connection. Fails after `timeout`.
    pub fn wait_closed(&self, n: usize, timeout: Duration) -> Result<Vec<Stream>, Error> {
        let deadline = Instant::now() + timeout;
        let mut st = hark_sync::lock(&self.gather.state);
        loop {
            let closed = st.streams.values().filter(|s| s.closed.is_some()).count();
            if closed >= n {
                return Ok(st.streams.values().cloned().collect());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::new(ErrorKind::Timeout(format!(
                    "{closed} of {n} streams closed on {} within {timeout:?}",
                    self.server.addr()
                ))));
            }
            st = self.gather.changed.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Cuts every open connection, as a crashing server would.
    pub fn abort_connections(&self) {
        self.server.abort_connections()
    }
}
