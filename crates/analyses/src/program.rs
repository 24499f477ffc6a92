//! A measured program: the streams of its ranks, and the fold of every
//! knowledge source's per-rank states into one [`hark_model::Program`].
//!
//! Which rank is which is only settled at the end: a program's rank *within
//! the program* is the order of its processes' world ranks, and the last
//! process to connect may well be world rank 0. So streams accumulate under
//! their world ranks (peers of messages are world ranks too), and the
//! translation to program ranks happens once, in [`ProgramAnalysis::finish`].

use crate::analysis::{Analysis, Finish, RankState, RankView};
use crate::stream::{RankInput, Stream, StreamAccounting, StreamInfo};
use crate::unify::Unifier;
use hark_model::{Accounting, Program, RankInfo};
use hark_wire::Hello;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One rank's part of a fold, by reference (from owned [`RankInput`]s at the
/// end, or from the board's live states for a snapshot).
pub(crate) struct RankRef<'a> {
    pub(crate) info: &'a Arc<StreamInfo>,
    pub(crate) accounting: &'a StreamAccounting,
    pub(crate) states: Vec<&'a dyn RankState>,
}

/// Settings shared by every program.
#[derive(Clone, Debug)]
pub struct Config {
    /// The fixed number of time slices per program (even; at least 2).
    pub slices: usize,
    /// A time slice starts `1 << slice_shift` ns wide and doubles as the run
    /// outgrows the slices (20: about 1 ms).
    pub slice_shift: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            slices: 256,
            slice_shift: 20,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) unifier: Mutex<Unifier>,
    pub(crate) analyses: Vec<Arc<dyn Analysis>>,
    pub(crate) origin_ns: u64,
    pub(crate) config: Config,
}

impl std::fmt::Debug for dyn Analysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec().name)
    }
}

/// One program being measured: opens its streams and folds them at the end.
///
/// ```
/// use hark_analyses::{registry, Config, ProgramAnalysis};
/// use hark_wire::{op, ClockSource, Event, Hello};
///
/// let hello = Hello {
///     program: "app".into(), argv: vec!["./app".into()], host: "h".into(), pid: 1,
///     rank: 0, size: 1, job: "j".into(), clock: ClockSource::Monotonic,
///     clock_ns: 0, realtime_ns: 0, pack_size: 1 << 20,
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
        analyses: Vec<Arc<dyn Analysis>>,
        config: Config,
    ) -> ProgramAnalysis {
        ProgramAnalysis {
            name: name.to_string(),
            shared: Arc::new(Shared {
                unifier: Mutex::new(Unifier::new()),
                analyses,
                origin_ns,
                config,
            }),
        }
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The program's knowledge sources, in fold order.
    pub fn analyses(&self) -> &[Arc<dyn Analysis>] {
        &self.shared.analyses
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

    /// Folds streams fed by hand (see [`ProgramAnalysis::finish_ranks`]).
    pub fn finish(&self, streams: Vec<Stream>) -> Vec<Program> {
        self.finish_ranks(streams.into_iter().map(Stream::into_input).collect())
    }

    /// Folds the program's ranks into its model.
    ///
    /// Usually one program; more when an MPMD launch ran the same executable
    /// as several applications (`MPI_APPNUM` tells them apart), in order of
    /// appnum. A rank whose end-of-stream record is missing is kept, with
    /// what arrived, and marked partial.
    pub fn finish_ranks(&self, ranks: Vec<RankInput>) -> Vec<Program> {
        let refs = ranks
            .iter()
            .map(|r| RankRef {
                info: &r.info,
                accounting: &r.accounting,
                states: r.states.iter().map(|s| s.as_ref()).collect(),
            })
            .collect();
        self.fold_all(refs, false)
    }

    /// Folds ranks given by reference. `live`: the program is still running,
    /// so a missing end-of-stream record means nothing yet.
    pub(crate) fn fold_all(&self, mut ranks: Vec<RankRef<'_>>, live: bool) -> Vec<Program> {
        // World ranks first, in order; processes without one (not MPI) after
        // them, in order of connection.
        ranks.sort_by_key(|r| {
            let w = r.info.world_rank();
            (r.info.appnum(), w < 0, w, r.info.conn())
        });
        let mut by_app: BTreeMap<i32, Vec<RankRef<'_>>> = BTreeMap::new();
        for r in ranks {
            by_app.entry(r.info.appnum()).or_default().push(r);
        }
        let apps = by_app.len();
        let unifier = self
            .shared
            .unifier
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        by_app
            .into_iter()
            .map(|(appnum, ranks)| {
                let name = if apps > 1 {
                    format!("{} (app {appnum})", self.name)
                } else {
                    self.name.clone()
                };
                self.fold(name, &ranks, &unifier, live)
            })
            .collect()
    }

    fn fold(&self, name: String, ranks: &[RankRef<'_>], unifier: &Unifier, live: bool) -> Program {
        let mut world_to_program = HashMap::new();
        for (i, r) in ranks.iter().enumerate() {
            let w = r.info.world_rank();
            if w >= 0 {
                world_to_program.entry(w).or_insert(i);
            }
        }
        let mut p = Program {
            name,
            command: ranks
                .first()
                .map(|r| r.info.hello().argv.clone())
                .unwrap_or_default(),
            ranks: ranks.len(),
            ..Program::default()
        };
        let mut ignored = 0;
        for r in ranks {
            let acc = r.accounting;
            let end = acc.end.as_ref();
            let partial = end.is_none() && !live;
            p.rank_info.push(RankInfo {
                world_rank: r.info.world_rank(),
                host: r.info.hello().host.clone(),
                pid: r.info.hello().pid,
                accounting: Accounting {
                    events_written: end.map_or(acc.received, |e| e.events_written),
                    events_received: acc.received,
                    events_analysed: acc.analysed,
                    events_dropped: end.map_or(0, |e| e.events_dropped),
                    partial_ranks: partial as u64,
                },
                partial,
            });
            ignored += r.info.ignored_defs();
        }
        for (rank, r) in ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.accounting.end.is_none() && !live)
        {
            let h = r.info.hello();
            p.diagnostics.push(format!(
                "rank {rank} (world rank {}, pid {} on {}) ended without its end-of-stream record (killed or crashed?); the {} events that arrived are kept",
                r.info.world_rank(),
                h.pid,
                h.host,
                r.accounting.received
            ));
        }
        if ignored > 0 {
            p.diagnostics.push(format!(
                "{ignored} definitions had ids out of range and were ignored"
            ));
        }
        p.diagnostics.extend(unifier.diagnostics());
        for (index, analysis) in self.shared.analyses.iter().enumerate() {
            let cx = Finish {
                ranks: ranks
                    .iter()
                    .map(|r| RankView {
                        info: r.info,
                        states: &r.states,
                    })
                    .collect(),
                unifier,
                index,
                world_to_program: &world_to_program,
            };
            analysis.finish(&cx, &mut p);
        }
        p
    }
}
