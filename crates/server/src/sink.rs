//! The server's [`Sink`]: every connection's frames, from its reader thread,
//! onto its program's board level.
//!
//! A connection's `Hello` finds or creates its program — a program is the
//! pair (job, executable name); MPMD applications of one executable are told
//! apart later, by `MPI_APPNUM`, when the program is folded — and opens a
//! stream on it. Definitions and packs go to the board keyed by the
//! connection, in stream order; the rank frame, the end-of-stream totals and
//! the close are kept here, in the connection's record, for accounting.
//!
//! Back-pressure: a reader whose program has more than `max_in_flight` bytes
//! of events waiting for the analyses stops reading until it drops below.
//! The socket fills, the probe's buffers fill, and the probe (by default)
//! drops and counts what it cannot send: memory stays bounded and the loss
//! is reported, never hidden.

use hark_analyses::{Analysis, Config, OnBoard, ProgramAnalysis, StreamAccounting, StreamInfo};
use hark_board::Board;
use hark_model::Program;
use hark_transport::{Closed, ConnId, Sink};
use hark_wire::{Frame, Hello};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Handshake offsets smaller than this are taken as transmission delay
/// between hosts whose clocks agree (one host, or NTP): the probe's own
/// realtime reading is then the better estimate. Larger ones are clock
/// disagreement, and are applied.
const TRUSTED_SKEW_NS: i64 = 1_000_000;

/// What converts a stream's probe clock to the common timeline (the server's
/// `CLOCK_REALTIME`, ns since the epoch): `common = probe + offset`.
pub(crate) fn timeline_offset(hello: &Hello, clock_offset_ns: i64) -> i64 {
    let to_host_realtime = hello.realtime_ns as i64 - hello.clock_ns as i64;
    if clock_offset_ns.abs() > TRUSTED_SKEW_NS {
        to_host_realtime + clock_offset_ns
    } else {
        to_host_realtime
    }
}

pub(crate) struct ProgramSlot {
    pub(crate) job: String,
    pub(crate) name: String,
    pub(crate) on: Arc<OnBoard>,
    pub(crate) conns: Vec<u64>,
}

pub(crate) struct Conn {
    pub(crate) info: Arc<StreamInfo>,
    pub(crate) on: Arc<OnBoard>,
    pub(crate) acc: Mutex<StreamAccounting>,
    pub(crate) outcome: Mutex<Option<Closed>>,
    /// Events (and buffers) a probe that died had recorded but not yet
    /// published to its shared-memory ring.
    pub(crate) lost: Mutex<Option<(u64, u64)>>,
}

/// Counters for the live status line.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    /// Every `on_close`, with or without a hello.
    pub(crate) closed: AtomicU64,
    pub(crate) events: AtomicU64,
    pub(crate) broken: AtomicU64,
    pub(crate) throttled_ns: AtomicU64,
}

pub(crate) struct State {
    pub(crate) board: Board,
    pub(crate) analyses: Vec<Arc<dyn Analysis>>,
    pub(crate) config: Config,
    pub(crate) max_in_flight: u64,
    pub(crate) programs: Mutex<Vec<ProgramSlot>>,
    pub(crate) conns: RwLock<HashMap<u64, Arc<Conn>>>,
    pub(crate) counters: Counters,
    /// Why connections broke, for the report (bounded: the first few).
    pub(crate) problems: Mutex<Vec<String>>,
}

const MAX_PROBLEMS: usize = 32;

impl State {
    fn conn(&self, id: ConnId) -> Option<Arc<Conn>> {
        self.conns
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id.0)
            .cloned()
    }

    fn problem(&self, what: String) {
        let mut p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() < MAX_PROBLEMS {
            p.push(what);
        }
    }

    /// Every program's model as analysed so far, in order of first connection.
    pub(crate) fn snapshot(&self) -> Vec<Program> {
        let mut programs: Vec<(Option<u64>, Arc<OnBoard>, Vec<u64>)> = self
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| (p.conns.iter().min().copied(), p.on.clone(), p.conns.clone()))
            .collect();
        programs.sort_by_key(|p| p.0);
        let conns = self.conns.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for (_, on, ids) in programs {
            out.extend(on.snapshot(&ranks_of(&conns, &ids)));
        }
        out
    }

    /// Folds every program, in order of first connection.
    pub(crate) fn fold(&self) -> Vec<Program> {
        let mut programs =
            std::mem::take(&mut *self.programs.lock().unwrap_or_else(|e| e.into_inner()));
        // In order of first connection: readers say hello in whatever order
        // their threads run, connections are numbered as accepted.
        programs.sort_by_key(|p| p.conns.iter().min().copied());
        let conns = self.conns.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for slot in programs {
            let mut folded = slot.on.finish(ranks_of(&conns, &slot.conns));
            for p in &mut folded {
                for id in &slot.conns {
                    let Some(c) = conns.get(id) else { continue };
                    if let Some((events, packs)) = *c.lost.lock().unwrap_or_else(|e| e.into_inner())
                    {
                        p.diagnostics.push(format!(
                            "pid {} on {} died with {events} recorded events in {packs} buffers \
                             it had not shipped; they are lost",
                            c.info.hello().pid,
                            c.info.hello().host
                        ));
                    }
                    if let Some(Closed::Broken(why)) =
                        &*c.outcome.lock().unwrap_or_else(|e| e.into_inner())
                    {
                        p.diagnostics.push(format!(
                            "the stream of pid {} on {} broke: {why}; what arrived before is kept",
                            c.info.hello().pid,
                            c.info.hello().host
                        ));
                    }
                }
            }
            out.extend(folded);
        }
        out
    }
}

/// The streams `ids` with their accounting so far.
fn ranks_of(
    conns: &HashMap<u64, Arc<Conn>>,
    ids: &[u64],
) -> Vec<(Arc<StreamInfo>, StreamAccounting)> {
    ids.iter()
        .filter_map(|id| conns.get(id))
        .map(|c| {
            let acc = c.acc.lock().unwrap_or_else(|e| e.into_inner()).clone();
            (c.info.clone(), acc)
        })
        .collect()
}

impl Sink for State {
    fn on_hello(&self, conn: ConnId, hello: &Hello, clock_offset_ns: i64) {
        self.counters.accepted.fetch_add(1, Ordering::Relaxed);
        self.counters.open.fetch_add(1, Ordering::Relaxed);
        let offset = timeline_offset(hello, clock_offset_ns);
        let (on, info) = {
            let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
            let found = programs
                .iter()
                .position(|p| p.job == hello.job && p.name == hello.program);
            let index = match found {
                Some(i) => i,
                None => {
                    // The program's time slices start at its first handshake.
                    let origin = hello.clock_ns.saturating_add_signed(offset);
                    let analysis = ProgramAnalysis::new(
                        &hello.program,
                        origin,
                        self.analyses.clone(),
                        self.config.clone(),
                    );
                    match OnBoard::install(&self.board, analysis) {
                        Ok(on) => programs.push(ProgramSlot {
                            job: hello.job.clone(),
                            name: hello.program.clone(),
                            on: Arc::new(on),
                            conns: Vec::new(),
                        }),
                        Err(e) => {
                            drop(programs);
                            self.problem(format!("{conn} was not analysed: {e}"));
                            return;
                        }
                    }
                    programs.len() - 1
                }
            };
            programs[index].conns.push(conn.0);
            let info = programs[index]
                .on
                .program()
                .stream_info(conn.0, hello.clone(), offset);
            (programs[index].on.clone(), Arc::new(info))
        };
        self.conns
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                conn.0,
                Arc::new(Conn {
                    info,
                    on,
                    acc: Mutex::new(StreamAccounting::default()),
                    outcome: Mutex::new(None),
                    lost: Mutex::new(None),
                }),
            );
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        let Some(c) = self.conn(conn) else { return };
        let submitted = match frame {
            Frame::Pack { events, .. } => {
                let n = events.len() as u64;
                c.acc.lock().unwrap_or_else(|e| e.into_inner()).received += n;
                self.counters.events.fetch_add(n, Ordering::Relaxed);
                self.throttle(&c.on);
                c.on.pack(&c.info, events)
            }
            Frame::Defs(defs) => c.on.defs(&c.info, defs),
            Frame::Rank(r) => {
                c.info.set_rank(r);
                Ok(())
            }
            Frame::End(end) => {
                c.acc.lock().unwrap_or_else(|e| e.into_inner()).end = Some(end);
                Ok(())
            }
            Frame::Hello(_) | Frame::Ring => Ok(()),
        };
        if let Err(e) = submitted {
            self.problem(format!("{conn}: {e}"));
        }
    }

    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        if let Some(c) = self.conn(conn) {
            *c.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some((events, packs));
        }
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        self.counters.closed.fetch_add(1, Ordering::Relaxed);
        if let Closed::Broken(_) = outcome {
            self.counters.broken.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(c) = self.conn(conn) {
            self.counters.open.fetch_sub(1, Ordering::Relaxed);
            *c.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        }
    }
}

impl State {
    /// Waits while the program has too many events waiting for analysis.
    fn throttle(&self, on: &OnBoard) {
        let mut waited = 0u64;
        while on.in_flight() > self.max_in_flight {
            std::thread::sleep(Duration::from_micros(200));
            waited += 200_000;
        }
        if waited > 0 {
            self.counters
                .throttled_ns
                .fetch_add(waited, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_wire::ClockSource;

    fn hello(clock_ns: u64, realtime_ns: u64) -> Hello {
        Hello {
            program: "p".into(),
            argv: vec![],
            host: "h".into(),
            pid: 1,
            rank: 0,
            size: 1,
            job: "j".into(),
            clock: ClockSource::Monotonic,
            clock_ns,
            realtime_ns,
            pack_size: 1 << 20,
        }
    }

    #[test]
    fn a_small_handshake_offset_is_delay_and_the_probes_own_realtime_is_used() {
        let h = hello(5_000, 1_000_000_000);
        let off = timeline_offset(&h, 40_000);
        assert_eq!(5_000u64.saturating_add_signed(off), 1_000_000_000);
    }

    #[test]
    fn a_large_handshake_offset_is_clock_skew_and_is_applied() {
        let h = hello(5_000, 1_000_000_000);
        let off = timeline_offset(&h, 2_000_000_000);
        assert_eq!(5_000u64.saturating_add_signed(off), 3_000_000_000);
        let behind = timeline_offset(&h, -500_000_000);
        assert_eq!(5_000u64.saturating_add_signed(behind), 500_000_000);
    }
}
