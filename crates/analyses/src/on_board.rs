//! The knowledge sources on the board: one level per program, a data flow of
//! two entry types, every analysis a board knowledge source.
//!
//! ```text
//!  server reader ──"frames"──▶ unpack ──"events"──▶ summary, mpi-profile, p2p-topology, ...
//!  (keyed by connection)      (serial by key:        (each serial by key: one rank's
//!                              unifies definitions,    batches in order, ranks and
//!                              forwards packs)         analyses in parallel)
//! ```
//!
//! Every entry is keyed by its connection, and every knowledge source here
//! runs the jobs of one key in order, so a rank's definitions are unified
//! before the batches that follow them are analysed, and each analysis sees a
//! rank's batches in stream order (region nesting and time slices need it).
//! Different ranks, and different analyses of one rank, run on different
//! workers at once.
//!
//! Per-rank states live in the knowledge sources' closures, one map per
//! analysis per level; [`OnBoard::finish`] drains the level, takes them out
//! and folds them with [`ProgramAnalysis::finish_ranks`].

use crate::analysis::RankState;
use crate::fx::FxHashMap;
use crate::program::{ProgramAnalysis, RankRef};
use crate::stream::{RankInput, StreamAccounting, StreamInfo};
use crate::{Error, ErrorKind};
use hark_board::{Board, Entry, EntryType, KnowledgeSource, KsId, Level};
use hark_model::Program;
use hark_wire::{Def, Event, EVENT_SIZE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The board entry type of stream input, submitted by the server.
pub const FRAMES: &str = "frames";
/// The board entry type of event batches, submitted by `unpack`.
pub const EVENTS: &str = "events";

/// A "frames" entry: one frame of one stream that the analyses consume.
struct Frame {
    info: Arc<StreamInfo>,
    what: What,
}

enum What {
    Defs(Vec<Def>),
    Pack(Arc<Batch>),
}

/// An "events" entry: one pack of one stream. Its drop gives its bytes back
/// to the program's in-flight count, which is what the server throttles on,
/// and its buffer to the program's pool.
struct Batch {
    info: Arc<StreamInfo>,
    events: Vec<Event>,
    flow: Arc<Flow>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flow
            .in_flight
            .fetch_sub((self.events.len() * EVENT_SIZE) as u64, Ordering::Relaxed);
        self.flow.give_back(std::mem::take(&mut self.events));
    }
}

/// Buffers kept for reuse: enough for the packs in flight at the default
/// limits, so that steady streaming allocates (and page-faults) nothing.
const POOL: usize = 64;

/// What is in flight on a level, and the pack buffers to reuse.
#[derive(Default)]
struct Flow {
    in_flight: AtomicU64,
    pool: Mutex<Vec<Vec<Event>>>,
}

impl Flow {
    fn take(&self) -> Vec<Event> {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn give_back(&self, mut buf: Vec<Event>) {
        if buf.capacity() == 0 {
            return;
        }
        buf.clear();
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(buf);
        }
    }
}

struct Slot {
    state: Box<dyn RankState>,
    analysed: u64,
}

/// One analysis's per-rank states on one level.
type Slots = Mutex<FxHashMap<u64, Arc<Mutex<Slot>>>>;

/// A program installed on a board level.
pub struct OnBoard {
    board: Board,
    level: Level,
    program: ProgramAnalysis,
    frames: EntryType,
    slots: Vec<Arc<Slots>>,
    ids: Vec<KsId>,
    flow: Arc<Flow>,
}

fn board_error(e: hark_board::Error) -> Error {
    Error::new(ErrorKind::Board(e.to_string()))
}

impl OnBoard {
    /// Creates a level named after `program` on `board` and registers on it
    /// `unpack` and every analysis of `program`.
    pub fn install(board: &Board, program: ProgramAnalysis) -> Result<OnBoard, Error> {
        let level = board.create_level(program.name());
        let frames = board.intern(FRAMES);
        let events = board.intern(EVENTS);
        let mut ids = Vec::new();
        ids.push(
            board
                .register(
                    level,
                    KnowledgeSource::new("unpack", &[frames], move |ctx, entries| {
                        let Some(frame) = entries[0].get::<Frame>() else {
                            ctx.report_error("unpack: a `frames` entry that is not a stream frame");
                            return;
                        };
                        match &frame.what {
                            What::Defs(defs) => frame.info.define(defs),
                            What::Pack(batch) => {
                                let bytes = batch.events.len() * EVENT_SIZE;
                                ctx.submit(Entry::with_bytes(events, batch.clone(), bytes));
                            }
                        }
                    })
                    .serial_by_key(),
                )
                .map_err(board_error)?,
        );
        let mut slots = Vec::new();
        for analysis in program.analyses() {
            let mine: Arc<Slots> = Arc::default();
            slots.push(mine.clone());
            let analysis = analysis.clone();
            let name = analysis.spec().name;
            let ks = KnowledgeSource::new(name, &[events], move |ctx, entries| {
                let Some(batch) = entries[0].get::<Arc<Batch>>() else {
                    ctx.report_error(format!("{name}: an `events` entry that is not a batch"));
                    return;
                };
                let slot = {
                    let mut map = mine.lock().unwrap_or_else(|e| e.into_inner());
                    map.entry(batch.info.conn())
                        .or_insert_with(|| {
                            Arc::new(Mutex::new(Slot {
                                state: analysis.new_rank(),
                                analysed: 0,
                            }))
                        })
                        .clone()
                };
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                let cx = batch.info.cx();
                slot.state.events(&cx, &batch.events);
                slot.analysed += batch.events.len() as u64;
            })
            .serial_by_key();
            ids.push(board.register(level, ks).map_err(board_error)?);
        }
        Ok(OnBoard {
            board: board.clone(),
            level,
            program,
            frames,
            slots,
            ids,
            flow: Arc::default(),
        })
    }

    /// The program's level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The program.
    pub fn program(&self) -> &ProgramAnalysis {
        &self.program
    }

    /// Bytes of events submitted and not yet analysed by every analysis;
    /// the server stops reading while this is too high.
    pub fn in_flight(&self) -> u64 {
        self.flow.in_flight.load(Ordering::Relaxed)
    }

    /// Submits a stream's definitions (in stream order with its packs).
    pub fn defs(&self, info: &Arc<StreamInfo>, defs: Vec<Def>) -> Result<(), Error> {
        let bytes = std::mem::size_of_val(&defs[..]);
        self.submit(info, What::Defs(defs), bytes)
    }

    /// Submits a copy of a stream's pack of events (in stream order with
    /// its definitions). The copy goes into a reused buffer.
    pub fn pack(&self, info: &Arc<StreamInfo>, events: &[Event]) -> Result<(), Error> {
        let bytes = std::mem::size_of_val(events);
        self.flow
            .in_flight
            .fetch_add(bytes as u64, Ordering::Relaxed);
        let mut buf = self.flow.take();
        buf.extend_from_slice(events);
        let batch = Arc::new(Batch {
            info: info.clone(),
            events: buf,
            flow: self.flow.clone(),
        });
        self.submit(info, What::Pack(batch), bytes)
    }

    fn submit(&self, info: &Arc<StreamInfo>, what: What, bytes: usize) -> Result<(), Error> {
        let frame = Frame {
            info: info.clone(),
            what,
        };
        self.board
            .submit_keyed(
                self.level,
                info.conn(),
                Entry::with_bytes(self.frames, frame, bytes),
            )
            .map_err(board_error)
    }

    /// The program's model as analysed so far, while it runs (for a live
    /// view): every analysis folds what its states hold now. Ranks are not
    /// marked partial. Each rank's states are locked while the fold runs
    /// (milliseconds), which pauses that rank's analysis meanwhile.
    pub fn snapshot(&self, ranks: &[(Arc<StreamInfo>, StreamAccounting)]) -> Vec<Program> {
        // Per analysis, per rank: its slot, if the rank sent events yet.
        let slots: Vec<Vec<Option<Arc<Mutex<Slot>>>>> = self
            .slots
            .iter()
            .map(|map| {
                let map = map.lock().unwrap_or_else(|e| e.into_inner());
                ranks
                    .iter()
                    .map(|(info, _)| map.get(&info.conn()).cloned())
                    .collect()
            })
            .collect();
        let guards: Vec<Vec<Option<std::sync::MutexGuard<'_, Slot>>>> = slots
            .iter()
            .map(|per_rank| {
                per_rank
                    .iter()
                    .map(|s| {
                        s.as_ref()
                            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()))
                    })
                    .collect()
            })
            .collect();
        let empty: Vec<Box<dyn RankState>> = self
            .program
            .analyses()
            .iter()
            .map(|a| a.new_rank())
            .collect();
        let accounting: Vec<StreamAccounting> = ranks
            .iter()
            .enumerate()
            .map(|(r, (_, acc))| {
                let analysed = guards
                    .iter()
                    .map(|g| g[r].as_ref().map_or(0, |s| s.analysed))
                    .min()
                    .unwrap_or(0);
                StreamAccounting {
                    analysed,
                    ..acc.clone()
                }
            })
            .collect();
        let refs = ranks
            .iter()
            .enumerate()
            .map(|(r, (info, _))| RankRef {
                info,
                accounting: &accounting[r],
                states: guards
                    .iter()
                    .zip(&empty)
                    .map(|(g, empty)| match &g[r] {
                        Some(slot) => slot.state.as_ref(),
                        None => empty.as_ref(),
                    })
                    .collect(),
            })
            .collect();
        self.program.fold_all(refs, true)
    }

    /// Waits until every submitted batch is analysed, folds the ranks into
    /// the program's model, and retires the level. Call once, after the
    /// last submission; later submissions are refused.
    ///
    /// `ranks` are the program's streams with their accounting as the
    /// server kept it (`received`, `end`); `analysed` is filled in here as
    /// the events every analysis consumed.
    pub fn finish(&self, ranks: Vec<(Arc<StreamInfo>, StreamAccounting)>) -> Vec<Program> {
        self.board.drain_level(self.level);
        let mut maps: Vec<FxHashMap<u64, Arc<Mutex<Slot>>>> = self
            .slots
            .iter()
            .map(|s| std::mem::take(&mut *s.lock().unwrap_or_else(|e| e.into_inner())))
            .collect();
        for id in &self.ids {
            self.board.remove(*id);
        }
        self.board.retire_level(self.level);
        let inputs = ranks
            .into_iter()
            .map(|(info, mut accounting)| {
                let mut analysed = u64::MAX;
                let states = self
                    .program
                    .analyses()
                    .iter()
                    .zip(maps.iter_mut())
                    .map(|(analysis, map)| match map.remove(&info.conn()) {
                        Some(slot) => {
                            let slot = match Arc::try_unwrap(slot) {
                                Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
                                // Still shared: a job is running despite the
                                // drain (cannot happen); analyse nothing more.
                                Err(shared) => {
                                    let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
                                    Slot {
                                        state: std::mem::replace(&mut g.state, analysis.new_rank()),
                                        analysed: g.analysed,
                                    }
                                }
                            };
                            analysed = analysed.min(slot.analysed);
                            slot.state
                        }
                        None => {
                            analysed = 0;
                            analysis.new_rank()
                        }
                    })
                    .collect();
                accounting.analysed = if analysed == u64::MAX { 0 } else { analysed };
                RankInput {
                    info,
                    accounting,
                    states,
                }
            })
            .collect();
        self.program.finish_ranks(inputs)
    }
}

impl std::fmt::Debug for OnBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnBoard")
            .field("program", &self.program.name())
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}
