//! Cross-rank analyses between analysers, while the job runs
//! (`hark run --analysers`, `docs/analysers.md`, "Keys routed between
//! analysers").
//!
//! With several analysers the two ranks of a message, or the members of a
//! collective, often stream to different analysers. Each key of the keyed
//! cross-rank entry types has one **owner**, the analyser whose board
//! matches it:
//!
//! - `p2p-ops` (keyed by the receiving world rank): the analyser that
//!   receives that rank's stream;
//! - `arrivals` (keyed by communicator and sequence number): the analyser
//!   that receives the stream of the communicator's lowest world rank (it
//!   holds the program, and the choice needs nothing but the communicator's
//!   members, which every analyser learns from its own members' definitions);
//! - `waits` (keyed by the rank that waited): the analyser of that rank.
//!
//! A level linked to an [`Exchange`] publishes locally what it owns and
//! puts the rest, serialised, in the exchange's outbox for the owner: a
//! byte stream per destination of length-prefixed [`Parcel`]s. Communicator,
//! region and call-path ids are the sender's; each parcel carries the
//! entries of the sender's tables that it has not sent to that destination
//! before, so the receiver translates them into its own ids (the same
//! unification as a partial's merge, done incrementally). Whoever owns the
//! I/O (the server, driven by an analyser rank's MPI loop) takes the
//! outbox's bytes, delivers them to the destination in order, and injects
//! each parcel there ([`crate::OnBoard::inject`]); the analyses do no I/O.

use crate::unpack::{Arrival, P2pOp, Wait};
use hark_analyses::{CommDef, IdMap};
use hark_analyses::{Error, ErrorKind};
use hark_sync::lock;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One analyser's end of the exchange: who owns which world rank, and the
/// outgoing bytes per destination analyser.
#[derive(Debug)]
pub struct Exchange {
    me: u32,
    owners: Vec<u32>,
    outbox: Vec<Mutex<Vec<u8>>>,
    sent: Vec<TrafficCounters>,
    received: TrafficCounters,
}

/// What crossed between analysers, counted.
#[derive(Debug, Default)]
struct TrafficCounters {
    parcels: AtomicU64,
    bytes: AtomicU64,
    ops: AtomicU64,
    arrivals: AtomicU64,
    waits: AtomicU64,
}

impl TrafficCounters {
    fn add(&self, p: &Parcel, bytes: usize) {
        self.parcels.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        self.ops.fetch_add(p.ops.len() as u64, Ordering::Relaxed);
        self.arrivals
            .fetch_add(p.arrivals.len() as u64, Ordering::Relaxed);
        self.waits
            .fetch_add(p.waits.len() as u64, Ordering::Relaxed);
    }

    fn get(&self) -> Traffic {
        Traffic {
            parcels: self.parcels.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            ops: self.ops.load(Ordering::Relaxed),
            arrivals: self.arrivals.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
        }
    }
}

/// Parcels, their bytes (length prefixes included) and the items they
/// carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Parcels.
    pub parcels: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Point-to-point operations.
    pub ops: u64,
    /// Arrivals at collectives.
    pub arrivals: u64,
    /// Wait states.
    pub waits: u64,
}

impl Exchange {
    /// Analyser `me` of `analysers`; `owners[r]` is the analyser that
    /// receives world rank `r`'s stream (ranks beyond it are `me`'s).
    pub fn new(me: u32, analysers: u32, owners: Vec<u32>) -> Exchange {
        Exchange {
            me,
            owners,
            outbox: (0..analysers).map(|_| Mutex::default()).collect(),
            sent: (0..analysers).map(|_| TrafficCounters::default()).collect(),
            received: TrafficCounters::default(),
        }
    }

    /// This analyser.
    pub fn me(&self) -> u32 {
        self.me
    }

    /// How many analysers there are.
    pub fn analysers(&self) -> u32 {
        self.outbox.len() as u32
    }

    /// The analyser that owns world rank `rank`'s keys.
    #[inline]
    pub fn owner_of(&self, rank: i32) -> u32 {
        usize::try_from(rank)
            .ok()
            .and_then(|r| self.owners.get(r))
            .copied()
            .filter(|&o| (o as usize) < self.outbox.len())
            .unwrap_or(self.me)
    }

    /// The owner of a collective instance on a communicator with these
    /// members: the owner of its lowest world rank.
    pub(crate) fn owner_of_comm(&self, comm: &CommDef) -> u32 {
        comm.members
            .iter()
            .chain(&comm.remote)
            .min()
            .map_or(self.me, |&r| self.owner_of(r))
    }

    /// Takes the bytes queued for analyser `to`: whole parcels, each after
    /// its length (`u32`, little-endian). Delivered in order, they go to
    /// [`Parcel::read`] there.
    pub fn take(&self, to: u32) -> Vec<u8> {
        self.outbox
            .get(to as usize)
            .map(|o| std::mem::take(&mut *lock(o)))
            .unwrap_or_default()
    }

    /// Whether bytes are queued for any destination.
    pub fn queued(&self) -> bool {
        self.outbox.iter().any(|o| !lock(o).is_empty())
    }

    /// What was sent to analyser `to` so far.
    pub fn sent_to(&self, to: u32) -> Traffic {
        self.sent
            .get(to as usize)
            .map(TrafficCounters::get)
            .unwrap_or_default()
    }

    /// What was received (injected) so far.
    pub fn received(&self) -> Traffic {
        self.received.get()
    }

    /// Queues `parcel` for `to`; `fill` is called under the destination's
    /// lock, so that parcels enter its stream in the order their table
    /// entries were taken.
    pub(crate) fn send(&self, to: u32, fill: impl FnOnce(&mut Parcel)) {
        let Some(out) = self.outbox.get(to as usize) else {
            return;
        };
        let mut out = lock(out);
        let mut parcel = Parcel::default();
        fill(&mut parcel);
        let Ok(bytes) = postcard::to_allocvec(&parcel) else {
            return;
        };
        out.extend((bytes.len() as u32).to_le_bytes());
        out.extend(&bytes);
        self.sent[to as usize].add(&parcel, bytes.len() + 4);
    }

    pub(crate) fn count_received(&self, p: &Parcel, bytes: usize) {
        self.received.add(p, bytes + 4);
    }
}

/// Bytes of one stream's packs an exchanging board holds waiting for
/// analysis before the server stops reading that stream (the server's
/// readers check it with [`crate::StreamInfo::in_flight`]).
///
/// The two sides of a message meet at the matcher of the receiving rank,
/// often on two analysers, each of which lags its own streams by its own
/// backlog. The matcher holds whichever side arrives first until the other
/// comes, so the two backlogs may differ by much less than what one key
/// holds ([`crate::matching::held_bound`]). Without a bound per stream the
/// lag of one analyser's board (more streams, or less CPU, than its peer)
/// reached the whole `max_in_flight` of the server (16 MiB of packs, some
/// 350 000 events) while its peer kept up, and the matchers dropped. A
/// quarter of the bound, at about one operation per event, leaves the rest
/// to the probes' buffers, the messages in flight and the exchange.
pub fn stream_backlog() -> u64 {
    (crate::matching::held_bound() / 4 * hark_wire::EVENT_SIZE) as u64
}

/// Bytes taken from the outbox that an analyser lets wait to reach their
/// peer before it stops taking in its own streams: about a quarter of
/// [`crate::matching::held_bound`] operations, parcels costing some 37
/// bytes an operation (`BENCHMARKS.md`). Operations that wait on their way
/// arrive late at their owner, whose own streams meanwhile go on and fill
/// its matchers with the other side.
pub fn outbound_backlog() -> u64 {
    (crate::matching::held_bound() / 4 * 40) as u64
}

/// One batch of cross-rank entries from one analyser's level to another's:
/// the program it belongs to, the sender's table entries not sent to this
/// destination before, and the items, in the sender's ids.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Parcel {
    /// The program's key (job and name, see [`program_key`]).
    pub(crate) program: String,
    /// Where the sender's new entries start (names, communicators, paths):
    /// a check that none was missed.
    pub(crate) from: [u32; 3],
    pub(crate) names: Vec<(u8, String)>,
    pub(crate) comms: Vec<(CommDef, u32)>,
    pub(crate) paths: Vec<String>,
    pub(crate) ops: Vec<P2pOp>,
    pub(crate) arrivals: Vec<Arrival>,
    pub(crate) waits: Vec<Wait>,
    /// Its encoded size, once read.
    #[serde(skip)]
    pub(crate) size: usize,
}

impl Parcel {
    /// Decodes one parcel (the bytes after its length prefix).
    pub fn read(bytes: &[u8]) -> Result<Parcel, Error> {
        let mut p: Parcel = postcard::from_bytes(bytes).map_err(|e| {
            Error::new(ErrorKind::Partial(format!(
                "a parcel from another analyser does not decode ({e}); was it made by another version of Hark?"
            )))
        })?;
        p.size = bytes.len();
        Ok(p)
    }

    /// The key of the program it belongs to.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Whether it carries nothing to analyse.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.arrivals.is_empty() && self.waits.is_empty()
    }
}

/// The key naming a program across analysers: its job and name.
pub fn program_key(job: &str, name: &str) -> String {
    format!("{job}\u{0}{name}")
}

/// A level's link to the exchange: its program's key, what of its tables
/// each destination has, and each source's translation into its ids.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) exchange: std::sync::Arc<Exchange>,
    pub(crate) program: String,
    shared: std::sync::Arc<crate::program::Shared>,
    /// Per destination: table lengths (names, communicators, paths) sent.
    cursors: Mutex<Vec<[usize; 3]>>,
    /// Per source: its ids to ours.
    inbound: Mutex<Vec<IdMap>>,
}

impl Link {
    pub(crate) fn new(
        exchange: std::sync::Arc<Exchange>,
        program: String,
        shared: std::sync::Arc<crate::program::Shared>,
    ) -> Link {
        let n = exchange.analysers() as usize;
        Link {
            exchange,
            program,
            shared,
            cursors: Mutex::new(vec![[0; 3]; n]),
            inbound: Mutex::new(vec![IdMap::default(); n]),
        }
    }

    /// Queues items for analyser `to`, with the table entries they may
    /// name that `to` has not had yet.
    pub(crate) fn send(&self, to: u32, ops: Vec<P2pOp>, arrivals: Vec<Arrival>, waits: Vec<Wait>) {
        self.exchange.send(to, |p| {
            let mut cursors = lock(&self.cursors);
            let Some(cursor) = cursors.get_mut(to as usize) else {
                return;
            };
            let u = lock(&self.shared.unifier);
            let (names, comms, paths) = u.entries_from(*cursor);
            p.from = cursor.map(|c| c as u32);
            *cursor = u.lengths();
            drop(u);
            p.program = self.program.clone();
            p.names = names;
            p.comms = comms;
            p.paths = paths;
            p.ops = ops;
            p.arrivals = arrivals;
            p.waits = waits;
        });
    }

    /// Translates a parcel from analyser `from` into this level's ids,
    /// interning the table entries it brings.
    pub(crate) fn receive(&self, from: u32, mut parcel: Parcel) -> Result<Parcel, Error> {
        let mut inbound = lock(&self.inbound);
        let Some(map) = inbound.get_mut(from as usize) else {
            return Err(Error::new(ErrorKind::Partial(format!(
                "a parcel came from analyser {from}, which is not in this job"
            ))));
        };
        let have = map.lengths();
        if parcel.from != have {
            return Err(Error::new(ErrorKind::Partial(format!(
                "a parcel from analyser {from} continues its tables at {:?}, but {have:?} arrived before: parcels were lost or reordered",
                parcel.from
            ))));
        }
        {
            let mut unifier = lock(&self.shared.unifier);
            unifier.absorb_more(&parcel.names, &parcel.comms, &parcel.paths, map);
            // Operations and arrivals on communicators the sender folded
            // past the caps and this analyser may not have.
            let uses = (parcel.ops.iter().map(P2pOp::comm_use))
                .chain(parcel.arrivals.iter().map(Arrival::comm_use));
            map.resolve(uses, &mut unifier);
        }
        for op in &mut parcel.ops {
            op.remap(map);
        }
        for a in &mut parcel.arrivals {
            a.remap(map);
        }
        for w in &mut parcel.waits {
            w.remap(map);
        }
        Ok(parcel)
    }
}

impl Link {
    /// The owner of a collective instance on global communicator `comm`
    /// (this level's ids); this analyser when the communicator is unknown.
    pub(crate) fn owner_of_comm_id(&self, comm: u32) -> u32 {
        lock(&self.shared.unifier)
            .comm(comm)
            .map_or(self.exchange.me, |c| self.exchange.owner_of_comm(c))
    }
}
