//! One measured process as the engine sees it: its identity, its clock and
//! its id translation ([`StreamInfo`], shared by every knowledge source, which
//! hands each batch's [`StreamCx`] out), and a simple owner of all knowledge
//! sources' states for feeding a process by hand ([`Stream`]).

use crate::program::Shared;
use crate::unpack::Unpacker;
use hark_analyses::clock::{Alignment, HostClock};
use hark_analyses::{DynRank, Input, RankMeta, StreamCx, Translation};
use hark_wire::{ClockSync, Def, End, Event, Hello, RankInfo};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Everything known about one process's stream that is not an analysis
/// result: who it is, how its clock maps to the common timeline, and how its
/// local ids map to the program's global ones.
///
/// Shared (`Arc`) between the knowledge sources of the stream. Definitions
/// only ever add ids, so a batch analysed after later definitions arrived
/// still finds every id it uses.
#[derive(Debug)]
pub struct StreamInfo {
    conn: u64,
    /// The row its events fold into: its own connection's number, or that
    /// of the stream it continues ([`StreamInfo::continuing`]).
    row: u64,
    hello: Hello,
    clock: Mutex<Alignment>,
    /// Its host's best clock measurements (kept by the server, shared by
    /// the streams of the host), once it measured against the server.
    host_clock: std::sync::OnceLock<Arc<Mutex<HostClock>>>,
    origin_ns: u64,
    slice_shift: u32,
    slices: usize,
    rank: Mutex<Option<RankInfo>>,
    translation: RwLock<Translation>,
    /// Bytes of this stream's packs on the board, not yet analysed.
    pub(crate) in_flight: Arc<AtomicU64>,
    pub(crate) shared: Arc<Shared>,
}

impl StreamInfo {
    pub(crate) fn new(shared: Arc<Shared>, conn: u64, hello: Hello, offset_ns: i64) -> StreamInfo {
        StreamInfo {
            conn,
            row: conn,
            hello,
            clock: Mutex::new(Alignment::new(offset_ns)),
            host_clock: std::sync::OnceLock::new(),
            origin_ns: shared.origin_ns,
            slice_shift: shared.config.slice_shift,
            slices: shared.config.slices,
            rank: Mutex::new(None),
            translation: RwLock::new(Translation::default()),
            in_flight: Arc::default(),
            shared,
        }
    }

    /// The connection's number, unique in the server, in order of connection.
    pub fn conn(&self) -> u64 {
        self.conn
    }

    /// The same process as `earlier`, after an `exec`: its events fold
    /// into `earlier`'s row, after `earlier`'s, and the two streams are one
    /// rank. Each keeps its own handshake, clock and ids (the new image's
    /// probe starts afresh). Call before any of its frames is submitted.
    pub fn continuing(mut self, earlier: &StreamInfo) -> StreamInfo {
        self.row = earlier.row;
        self
    }

    /// The row this stream's events fold into: the connection's number of
    /// the first stream of its process (see [`StreamInfo::continuing`]).
    pub fn row(&self) -> u64 {
        self.row
    }

    /// Bytes of this stream's events submitted and not yet analysed by
    /// every analysis: the share of [`crate::OnBoard::in_flight`] that is
    /// this stream's packs.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The handshake.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The rank frame, once MPI is initialised.
    pub fn rank_info(&self) -> Option<RankInfo> {
        hark_sync::lock(&self.rank).clone()
    }

    /// World rank: from the rank frame, else the launcher's, else -1.
    pub fn world_rank(&self) -> i32 {
        self.rank_info().map_or(self.hello.rank, |r| r.world_rank)
    }

    /// `MPI_APPNUM`, 0 when unknown.
    pub fn appnum(&self) -> i32 {
        self.rank_info().map_or(0, |r| r.appnum.max(0))
    }

    /// The program's origin on the common timeline.
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }

    /// Who this process is, as the fold sees it.
    pub fn meta(&self) -> RankMeta {
        let rank = self.rank_info();
        RankMeta {
            world_rank: rank.as_ref().map_or(self.hello.rank, |r| r.world_rank),
            appnum: rank.as_ref().map_or(0, |r| r.appnum.max(0)),
            host: self.hello.host.clone(),
            pid: self.hello.pid,
            argv: self.hello.argv.clone(),
            hello_ns: self.common(self.hello.clock_ns),
            conn: self.conn,
            folded: 0,
        }
    }

    /// A probe timestamp on the run's common timeline, in ns, as mapped now
    /// (see [`hark_analyses::clock`]; a batch maps all its events with one mapping).
    pub fn common(&self, probe_ns: u64) -> u64 {
        self.clock().mapping().common(probe_ns)
    }

    /// What is known of this stream's clock, with its host's best
    /// measurements as they are now.
    pub fn clock(&self) -> Alignment {
        let own = *hark_sync::lock(&self.clock);
        match self.host_clock.get() {
            Some(host) => own.with_host(*hark_sync::lock(host)),
            None => own,
        }
    }

    /// A clock alignment arrived (`Clock` frame).
    pub fn align(&self, sync: ClockSync) {
        hark_sync::lock(&self.clock).measured(sync);
    }

    /// A clock alignment against the server arrived, with the best
    /// measurements of the same job and host, which it may share (see
    /// [`hark_analyses::clock::applied_offset_ns`]).
    pub fn align_sharing(&self, sync: ClockSync, host: Option<Arc<Mutex<HostClock>>>) {
        if let Some(host) = host {
            let _ = self.host_clock.set(host);
        }
        hark_sync::lock(&self.clock).measured(sync);
    }

    /// World rank 0's handshake offset, the reference every aligned stream
    /// of the job shares, became known.
    pub fn set_clock_reference(&self, reference_ns: i64) {
        hark_sync::lock(&self.clock).set_reference(reference_ns);
    }

    /// The initial width of a time slice is `1 << slice_shift()` ns.
    pub fn slice_shift(&self) -> u32 {
        self.slice_shift
    }

    /// The fixed number of time slices.
    pub fn slices(&self) -> usize {
        self.slices
    }

    /// The rank frame arrived.
    pub fn set_rank(&self, info: RankInfo) {
        *hark_sync::lock(&self.rank) = Some(info);
    }

    /// Definitions arrived: unify them into the program's global ids. Call
    /// before submitting the batches that follow them in the stream.
    pub fn define(&self, defs: &[Def]) {
        // A poisoned lock means a panic elsewhere; the tables are
        // append-only, so what is there is still consistent.
        let mut unifier = self
            .shared
            .unifier
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        hark_sync::write(&self.translation).define(defs, &mut unifier);
    }

    /// The view a knowledge source gets with a batch (holds a read lock on
    /// the translation while it lives: drop it before defining more).
    pub fn cx(&self) -> StreamCx<'_> {
        StreamCx::new(
            self.clock().mapping(),
            hark_sync::read(&self.translation),
            &self.shared.unifier,
            self.origin_ns,
            self.slice_shift,
            self.slices,
        )
    }

    pub(crate) fn ignored_defs(&self) -> u64 {
        hark_sync::read(&self.translation).ignored
    }
}

/// Per-stream accounting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamAccounting {
    /// Events that arrived in packs.
    pub received: u64,
    /// Events every knowledge source consumed.
    pub analysed: u64,
    /// The end-of-stream record, if it arrived.
    pub end: Option<End>,
    /// The error code the process passed to `MPI_Abort`, if it called it.
    pub abort_code: Option<i32>,
}

/// One measured process with every knowledge source's state, fed by hand
/// in stream order (tests, tools; the server feeds states through the board).
/// Its cross-rank results (messages matched with other streams, collective
/// instances) are found by the program it was opened on.
pub struct Stream {
    info: Arc<StreamInfo>,
    states: Vec<Box<dyn DynRank>>,
    track: Unpacker,
    acc: StreamAccounting,
}

impl Stream {
    pub(crate) fn new(info: StreamInfo) -> Stream {
        let states = info.shared.analyses.iter().map(|a| a.new_rank()).collect();
        let track = Unpacker::new(info.shared.cross());
        Stream {
            info: Arc::new(info),
            states,
            track,
            acc: StreamAccounting::default(),
        }
    }

    /// The stream's identity.
    pub fn info(&self) -> &Arc<StreamInfo> {
        &self.info
    }

    /// The rank frame arrived.
    pub fn rank(&mut self, info: RankInfo) {
        self.info.set_rank(info);
    }

    /// Definitions arrived.
    pub fn defs(&mut self, defs: &[Def]) {
        self.info.define(defs);
    }

    /// A pack arrived: counts its events as received and analyses them.
    pub fn events(&mut self, events: &[Event]) {
        self.acc.received += hark_wire::accounted(events);
        let cx = self.info.cx();
        let mut derived = self.track.pack(&cx, self.info.world_rank(), events);
        // Those recorded while paused are for matching alone.
        let kept = derived.kept.take();
        let input = Input {
            events: kept.as_deref().unwrap_or(events),
            msgs: &derived.msgs,
            times: self.track.gathers_times().then_some(&derived.times),
            waits: &[],
            counts: None,
            pages: Some(derived.pages),
        };
        for state in &mut self.states {
            state.fold(&cx, &input);
        }
        drop(cx);
        self.info.shared.hand_match(derived);
        self.acc.analysed += hark_wire::accounted(events);
        self.acc.abort_code = self.track.abort_code();
    }

    /// A sampled-out probe's totals arrived in place of a pack: counted as
    /// received and analysed, folded by the per-function analyses.
    pub fn counts(&mut self, counts: &hark_wire::Counts) {
        self.acc.received += counts.events;
        let cx = self.info.cx();
        let input = Input {
            counts: Some(counts),
            ..Input::default()
        };
        for state in &mut self.states {
            state.fold(&cx, &input);
        }
        self.acc.analysed += counts.events;
    }

    /// The end-of-stream record arrived.
    pub fn end(&mut self, end: End) {
        self.acc.end = Some(end);
    }

    /// Its accounting so far.
    pub fn accounting(&self) -> &StreamAccounting {
        &self.acc
    }

    /// Gives up the stream for folding: its receives still held are matched
    /// first.
    pub(crate) fn into_parts(
        mut self,
    ) -> (
        Arc<StreamInfo>,
        StreamAccounting,
        Vec<Box<dyn DynRank>>,
        u64,
    ) {
        let derived = self.track.flush();
        self.info.shared.hand_match(derived);
        let forgotten = self.track.forgotten();
        (self.info, self.acc, self.states, forgotten)
    }
}
