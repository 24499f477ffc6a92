//! A measured program: the streams of its ranks, and the fold of every
//! knowledge source's per-rank states into one [`hark_model::Program`].
//!
//! Which rank is which is only settled at the end: a program's rank *within
//! the program* is the order of its processes' world ranks, and the last
//! process to connect may well be world rank 0. So streams accumulate under
//! their world ranks (peers of messages are world ranks too), and the
//! translation to program ranks happens once, when the partial result is
//! folded ([`crate::Partial::finish`]).

use crate::matching::{Instances, P2pMatcher};
use crate::partial::{Partial, RankAccounting};
use crate::stream::{Stream, StreamAccounting, StreamInfo};
use crate::unpack::{Derived, Wait};
use hark_analyses::clock::{Alignment, Method};
use hark_analyses::DynAnalysis;
use hark_analyses::Sensitivity;
use hark_analyses::Unifier;
use hark_model::{Ending, Program};
use hark_wire::{ClockSync, EndReason, Hello};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Settings shared by every program.
#[derive(Clone, Debug)]
pub struct Config {
    /// The fixed number of time slices per program (even; at least 2).
    pub slices: usize,
    /// A time slice starts `1 << slice_shift` ns wide and doubles as the run
    /// outgrows the slices (20: about 1 ms).
    pub slice_shift: u32,
    /// Per-process rows kept for processes without an MPI rank (a shell
    /// loop, make, a Python tool): processes of a program beyond its first
    /// `rows` connections that end without a world rank are folded, once
    /// their stream is analysed, into one row of exact totals, so that
    /// memory stays flat however many processes a run starts. MPI ranks
    /// always keep their rows. Default [`DEFAULT_ROWS`].
    pub rows: usize,
}

/// The default of [`Config::rows`], as for the other per-kind record caps
/// (files, communicators, regions, counters).
pub const DEFAULT_ROWS: usize = 1000;

impl Default for Config {
    fn default() -> Config {
        Config {
            slices: 256,
            slice_shift: 20,
            rows: DEFAULT_ROWS,
        }
    }
}

/// Matching for streams fed by hand (the board has keyed knowledge sources
/// for it instead).
#[derive(Default)]
pub(crate) struct Hand {
    pub(crate) p2p: BTreeMap<i32, P2pMatcher>,
    pub(crate) collectives: Instances,
    pub(crate) waits: Vec<Wait>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) unifier: Mutex<Unifier>,
    pub(crate) analyses: Vec<Arc<dyn DynAnalysis>>,
    pub(crate) origin_ns: u64,
    pub(crate) config: Config,
    pub(crate) hand: Mutex<Hand>,
}

impl Shared {
    /// Does any knowledge source want wait states (and so matching)?
    pub(crate) fn cross(&self) -> bool {
        self.analyses
            .iter()
            .any(|a| a.spec().sensitivities.contains(&Sensitivity::Waits))
    }
}

impl std::fmt::Debug for Hand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hand").finish_non_exhaustive()
    }
}

impl Shared {
    /// Matches what a hand-fed stream's pack yielded.
    pub(crate) fn hand_match(&self, derived: Derived) {
        let mut hand = hark_sync::lock(&self.hand);
        let Hand {
            p2p,
            collectives,
            waits,
        } = &mut *hand;
        for (dst, ops) in derived.ops.parts {
            let m = p2p.entry(dst as u32 as i32).or_default();
            for op in &ops {
                m.add(op, waits);
            }
        }
        for a in derived.arrivals {
            collectives.add(a, waits);
        }
    }
}

/// One program being measured: opens its streams and folds them at the end.
///
/// ```
/// use hark_analyses::registry;
/// use hark_engine::{Config, ProgramAnalysis};
/// use hark_wire::{op, ClockSource, Event, Hello};
///
/// let hello = Hello {
///     program: "app".into(), argv: vec!["./app".into()], host: "h".into(), pid: 1,
///     rank: 0, size: 1, job: "j".into(), clock: ClockSource::Monotonic,
///     clock_ns: 0, realtime_ns: 0, pack_size: 1 << 20, secret: String::new(), parent: 0,
/// };
/// let program = ProgramAnalysis::new("app", 0, registry::all(), Config::default());
/// let mut stream = program.open(0, hello, 0);
/// stream.events(&[Event::new(op::mpi_op("MPI_Barrier").unwrap(), 10, 30)]);
/// let model = program.finish(vec![stream]);
/// assert_eq!(model[0].mpi["MPI_Barrier"].calls, vec![1]);
/// assert!(model[0].rank_info[0].partial, "no end-of-stream record came");
/// ```
pub struct ProgramAnalysis {
    name: String,
    shared: Arc<Shared>,
}

impl ProgramAnalysis {
    /// A program called `name` whose time slices start at `origin_ns` on the
    /// common timeline (usually the first process's handshake), analysed by
    /// `analyses` in this order.
    pub fn new(
        name: &str,
        origin_ns: u64,
        analyses: Vec<Arc<dyn DynAnalysis>>,
        config: Config,
    ) -> ProgramAnalysis {
        ProgramAnalysis {
            name: name.to_string(),
            shared: Arc::new(Shared {
                unifier: Mutex::new(Unifier::new()),
                analyses,
                origin_ns,
                config,
                hand: Mutex::default(),
            }),
        }
    }

    /// What the program's streams share (tables, analyses).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program's knowledge sources, in fold order.
    pub fn analyses(&self) -> &[Arc<dyn DynAnalysis>] {
        &self.shared.analyses
    }

    /// Whether messages are matched across ranks: only when a knowledge
    /// source is sensitive to wait states.
    pub fn cross(&self) -> bool {
        self.shared.cross()
    }

    /// The identity of the process that said `hello` on connection number
    /// `conn`; `offset_ns` converts its clock to the common timeline
    /// (`common = probe + offset`).
    pub fn stream_info(&self, conn: u64, hello: Hello, offset_ns: i64) -> StreamInfo {
        StreamInfo::new(self.shared.clone(), conn, hello, offset_ns)
    }

    /// A stream owning every knowledge source's state, to feed by hand.
    pub fn open(&self, conn: u64, hello: Hello, offset_ns: i64) -> Stream {
        Stream::new(self.stream_info(conn, hello, offset_ns))
    }

    /// An empty partial result of this program, with its tables as they are.
    pub(crate) fn empty_partial(&self) -> Partial {
        let unifier = self
            .shared
            .unifier
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Partial::new(
            &self.name,
            self.shared.origin_ns,
            self.shared.config.slice_shift,
            self.shared.config.slices,
            &self.shared.analyses,
            &unifier,
        )
    }

    /// The partial result of streams fed by hand.
    pub fn partial(&self, streams: Vec<Stream>) -> Partial {
        let parts: Vec<_> = streams.into_iter().map(Stream::into_parts).collect();
        let mut partial = self.empty_partial();
        for (info, acc, states, forgotten) in &parts {
            let states: Vec<_> = states.iter().map(|s| s.as_ref()).collect();
            partial.push_rank(
                info.meta(),
                rank_accounting(acc),
                rank_record(&info.clock()),
                &states,
            );
            partial.add_counts(*forgotten, info.ignored_defs());
        }
        let hand = std::mem::take(&mut *hark_sync::lock(&self.shared.hand));
        partial.set_matching(hand.p2p, hand.collectives);
        partial.add_waits(hand.waits);
        partial
    }

    /// Folds streams fed by hand into the program's model.
    ///
    /// Usually one program; more when an MPMD launch ran the same executable
    /// as several applications (`MPI_APPNUM` tells them apart), in order of
    /// appnum. A rank whose end-of-stream record is missing is kept, with
    /// what arrived, and marked partial.
    pub fn finish(&self, streams: Vec<Stream>) -> Vec<Program> {
        self.partial(streams).finish(&self.shared.analyses, false)
    }
}

/// A stream's accounting as a partial result keeps it.
/// The model's record of one rank's clock.
pub(crate) fn rank_record(a: &Alignment) -> hark_model::RankClock {
    let measured = |s: Option<ClockSync>| {
        s.map(|s| hark_model::ClockMeasurement {
            offset_ns: s.offset_ns(),
            round_trip_ns: s.round_trip_ns,
            applied_ns: a.applied_ns(&s),
            bound_ns: a.measurement_bound_ns(&s),
        })
    };
    let reference = match a.init().or(a.finalize()).map(|s| s.reference) {
        Some(hark_wire::ClockReference::Server) => "hark",
        Some(hark_wire::ClockReference::WorldRank0) => "world rank 0",
        None => "",
    };
    hark_model::RankClock {
        method: match a.method() {
            Method::Handshake => "handshake",
            Method::PingPong => "ping-pong",
            Method::Rejected => "handshake (ping-pong rejected)",
        }
        .to_string(),
        reference: reference.to_string(),
        init: measured(a.init()),
        finalize: measured(a.finalize()),
        residual_ns: a.residual_ns(),
    }
}

pub(crate) fn rank_accounting(acc: &StreamAccounting) -> RankAccounting {
    RankAccounting {
        received: acc.received,
        analysed: acc.analysed,
        end: acc
            .end
            .as_ref()
            .map(|e| (e.events_written, e.events_dropped)),
        ended: acc.end.as_ref().map(|e| match e.reason {
            EndReason::Finalize => Ending::Finalize,
            EndReason::Exit => Ending::Exit,
            EndReason::Abort => Ending::Abort,
            EndReason::Signal => Ending::Signal,
        }),
        abort_code: acc.abort_code,
        ..RankAccounting::default()
    }
}
