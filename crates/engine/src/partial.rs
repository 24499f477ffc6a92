//! A program's partial result: what one server (or one analyser rank) knows
//! of a program, in a form that serialises and merges.
//!
//! A [`Partial`] holds the program's tables (names, files, communicators),
//! every rank's state of every knowledge source (saved), the message
//! matching and collective instances still open, and wait states found but
//! not yet given to their rank. Two partials of one program whose ranks were
//! split between servers merge ([`Partial::merge`]): tables are joined and
//! states renumbered, open matches completed. [`Partial::finish`] computes
//! every derived value once, from the merged data: the single server's
//! model goes through the same path, so one server or many give the same
//! model (`tests/a_split_run_merges_into_the_single_server_model.rs`).

use crate::matching::{Instances, P2pMatcher, Unmatched};
use crate::unpack::Wait;
use hark_analyses::StreamCx;
use hark_analyses::{DynAnalysis, DynRank};
use hark_analyses::{Error, ErrorKind};
use hark_analyses::{Finish, Input, RankMeta, Sensitivity};
use hark_analyses::{IdMap, Tables, Unifier};
use hark_model::{Accounting, Clock, Ending, Program, RankClock, RankInfo};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A rank with its states loaded.
type Loaded = (RankPartial, Vec<Box<dyn DynRank>>);

/// Bumped whenever a saved state's layout changes.
const FORMAT: u32 = 3;

/// Partial processes of a folded row named in the diagnostics; the rest
/// are counted.
pub(crate) const NAMED_PARTIAL: usize = 16;

/// One rank's accounting, as a partial result keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankAccounting {
    /// Events that arrived.
    pub received: u64,
    /// Events every knowledge source consumed.
    pub analysed: u64,
    /// From the end-of-stream record: events written and dropped.
    pub end: Option<(u64, u64)>,
    /// In the row of processes folded together: how many ended without
    /// their end-of-stream record (their written count is what arrived,
    /// and is in `end`), and the first 16 of them (pid, host).
    #[serde(default)]
    pub partial: u64,
    /// See `partial`.
    #[serde(default)]
    pub partial_named: Vec<(u32, String)>,
    /// How the stream ended, from its end-of-stream record.
    #[serde(default)]
    pub ended: Option<Ending>,
    /// The error code the process passed to `MPI_Abort`, if it called it.
    #[serde(default)]
    pub abort_code: Option<i32>,
}

impl RankAccounting {
    /// Adds one process's accounting to the row of folded processes: a
    /// process without its end-of-stream record counts what arrived as
    /// written, and as partial.
    pub(crate) fn add(&mut self, o: &RankAccounting, pid: u32, host: &str) {
        self.received = self.received.saturating_add(o.received);
        self.analysed = self.analysed.saturating_add(o.analysed);
        let (w, d) = self.end.unwrap_or((0, 0));
        let (ow, od) = o.end.unwrap_or((o.received, 0));
        self.end = Some((w.saturating_add(ow), d.saturating_add(od)));
        if o.end.is_none() && o.partial == 0 {
            self.partial += 1;
            if self.partial_named.len() < NAMED_PARTIAL {
                self.partial_named.push((pid, host.to_string()));
            }
        }
        self.partial += o.partial;
        for n in &o.partial_named {
            if self.partial_named.len() < NAMED_PARTIAL {
                self.partial_named.push(n.clone());
            }
        }
    }
}

/// One rank of a partial result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RankPartial {
    /// Who it is.
    pub meta: RankMeta,
    /// Its accounting.
    pub accounting: RankAccounting,
    /// How its clock was put on the common timeline.
    pub clock: RankClock,
    /// Each knowledge source's state, saved, in the order of `analyses`.
    states: Vec<Vec<u8>>,
}

/// One program's partial result (see the module doc).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Partial {
    format: u32,
    /// The program's name.
    pub name: String,
    /// Its origin on the common timeline.
    pub origin_ns: u64,
    /// Time slices: initial width `1 << slice_shift` ns, how many.
    pub slice_shift: u32,
    /// The fixed number of time slices.
    pub slices: usize,
    /// The knowledge sources whose states the ranks hold, in order.
    analyses: Vec<String>,
    tables: Tables,
    ranks: Vec<RankPartial>,
    p2p: BTreeMap<i32, P2pMatcher>,
    collectives: Instances,
    waits: Vec<Wait>,
    /// Requests forgotten by the trackers, definitions ignored.
    forgotten: u64,
    ignored_defs: u64,
    /// Knowledge sources that panicked, one sentence each.
    panics: Vec<String>,
}

impl Partial {
    /// An empty partial result of program `name` analysed by `analyses`.
    pub(crate) fn new(
        name: &str,
        origin_ns: u64,
        slice_shift: u32,
        slices: usize,
        analyses: &[Arc<dyn DynAnalysis>],
        unifier: &Unifier,
    ) -> Partial {
        Partial {
            format: FORMAT,
            name: name.to_string(),
            origin_ns,
            slice_shift,
            slices,
            analyses: analyses.iter().map(|a| a.spec().name.to_string()).collect(),
            tables: unifier.tables(),
            ranks: Vec::new(),
            p2p: BTreeMap::new(),
            collectives: Instances::default(),
            waits: Vec::new(),
            forgotten: 0,
            ignored_defs: 0,
            panics: Vec::new(),
        }
    }

    pub(crate) fn push_rank(
        &mut self,
        meta: RankMeta,
        accounting: RankAccounting,
        clock: RankClock,
        states: &[&dyn DynRank],
    ) {
        self.push_saved_rank(
            meta,
            accounting,
            clock,
            states.iter().map(|s| s.save()).collect(),
        );
    }

    /// [`Partial::push_rank`] with the states already saved.
    pub(crate) fn push_saved_rank(
        &mut self,
        meta: RankMeta,
        accounting: RankAccounting,
        clock: RankClock,
        states: Vec<Vec<u8>>,
    ) {
        self.ranks.push(RankPartial {
            meta,
            accounting,
            clock,
            states,
        });
    }

    pub(crate) fn set_matching(&mut self, p2p: BTreeMap<i32, P2pMatcher>, collectives: Instances) {
        self.p2p = p2p;
        self.collectives = collectives;
    }

    pub(crate) fn add_waits(&mut self, waits: impl IntoIterator<Item = Wait>) {
        self.waits.extend(waits);
    }

    pub(crate) fn add_counts(&mut self, forgotten: u64, ignored_defs: u64) {
        self.forgotten += forgotten;
        self.ignored_defs += ignored_defs;
    }

    pub(crate) fn add_panic(&mut self, what: String) {
        if !self.panics.contains(&what) {
            self.panics.push(what);
        }
    }

    /// Its ranks.
    pub fn ranks(&self) -> &[RankPartial] {
        &self.ranks
    }

    /// As bytes (to send to another analyser).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_allocvec(self).unwrap_or_default()
    }

    /// From [`Partial::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Partial, Error> {
        let p: Partial = postcard::from_bytes(bytes).map_err(|e| {
            Error::new(ErrorKind::Partial(format!(
                "a partial result does not decode ({e}); was it made by another version of Hark?"
            )))
        })?;
        if p.format != FORMAT {
            return Err(Error::new(ErrorKind::Partial(format!(
                "a partial result has format {}, this Hark reads {FORMAT}",
                p.format
            ))));
        }
        Ok(p)
    }

    /// Merges `other`, a partial result of the same program from another
    /// server, into this one. `analyses` must be the knowledge sources both
    /// were made with, in order (else an error says which differ).
    pub fn merge(
        &mut self,
        other: Partial,
        analyses: &[Arc<dyn DynAnalysis>],
    ) -> Result<(), Error> {
        if other.analyses != self.analyses
            || other
                .analyses
                .iter()
                .zip(analyses)
                .any(|(n, a)| n != a.spec().name)
            || other.analyses.len() != analyses.len()
        {
            return Err(Error::new(ErrorKind::Partial(format!(
                "cannot merge partial results of `{}` made with different analyses ({} and {})",
                self.name,
                self.analyses.join(","),
                other.analyses.join(",")
            ))));
        }
        let mut unifier = Unifier::new();
        unifier.absorb(&self.tables);
        let mut ids = unifier.absorb(&other.tables);
        // Messages and instances on communicators the other side folded
        // past the caps and this one may not have.
        let uses = (other.p2p.values())
            .flat_map(P2pMatcher::comm_uses)
            .chain(other.collectives.comm_uses());
        ids.resolve(uses, &mut unifier);
        for mut rank in other.ranks {
            rank.states = reload(&rank.states, analyses, &ids)?;
            self.ranks.push(rank);
        }
        self.join_folded(analyses);
        self.ranks.sort_by_key(|r| order(&r.meta));
        for (key, mut m) in other.p2p {
            m.remap(&ids);
            let found = self.p2p.entry(key).or_default().merge(m);
            self.waits.extend(found);
        }
        let mut collectives = other.collectives;
        collectives.remap(&ids);
        let found = self.collectives.merge(collectives);
        self.waits.extend(found);
        self.waits.extend(other.waits.into_iter().map(|mut w| {
            w.remap(&ids);
            w
        }));
        self.forgotten += other.forgotten;
        self.ignored_defs += other.ignored_defs;
        for p in other.panics {
            self.add_panic(p);
        }
        self.tables = unifier.tables();
        Ok(())
    }

    /// Joins the rows of folded processes of one application (one from
    /// each server merged) into one row.
    fn join_folded(&mut self, analyses: &[Arc<dyn DynAnalysis>]) {
        let mut at: BTreeMap<i32, usize> = BTreeMap::new();
        let mut i = 0;
        while i < self.ranks.len() {
            if self.ranks[i].meta.folded == 0 {
                i += 1;
                continue;
            }
            let Some(&first) = at.get(&self.ranks[i].meta.appnum) else {
                at.insert(self.ranks[i].meta.appnum, i);
                i += 1;
                continue;
            };
            let ids = IdMap::identity();
            let load = |r: &RankPartial| -> Option<Vec<Box<dyn DynRank>>> {
                analyses
                    .iter()
                    .zip(&r.states)
                    .map(|(a, b)| a.load(b, &ids).ok())
                    .collect()
            };
            let (Some(mut into), Some(from)) = (load(&self.ranks[first]), load(&self.ranks[i]))
            else {
                i += 1;
                continue;
            };
            if !into.iter().zip(&from).all(|(a, b)| a.absorbs(b.as_ref())) {
                i += 1;
                continue;
            }
            for (a, b) in into.iter_mut().zip(&from) {
                a.absorb(b.as_ref());
            }
            let gone = self.ranks.remove(i);
            let row = &mut self.ranks[first];
            row.states = into.iter().map(|s| s.save()).collect();
            row.meta.folded += gone.meta.folded;
            row.accounting.add(&gone.accounting, 0, "");
        }
    }

    /// The program's model (several when an MPMD launch ran the executable
    /// as several applications), every derived value computed here, once.
    /// `live`: the program still runs, so a missing end-of-stream record
    /// means nothing yet.
    pub fn finish(mut self, analyses: &[Arc<dyn DynAnalysis>], live: bool) -> Vec<Program> {
        let mut unifier = Unifier::new();
        unifier.absorb(&self.tables);
        let (canonical, ids) = unifier.canonical();
        let mut unmatched = Unmatched::default();
        for m in self.p2p.values_mut() {
            let (waits, left) = m.finish();
            self.waits.extend(waits);
            unmatched.add(&left);
        }
        unmatched.add(&self.collectives.finish());
        let mut problems = Vec::new();
        let mut ranks: Vec<Loaded> = Vec::new();
        for rank in std::mem::take(&mut self.ranks) {
            let mut states = Vec::new();
            for (a, bytes) in analyses.iter().zip(&rank.states) {
                match a.load(bytes, &ids) {
                    Ok(s) => states.push(s),
                    Err(e) => {
                        problems.push(e.to_string());
                        states.push(a.new_rank());
                    }
                }
            }
            ranks.push((rank, states));
        }
        ranks.sort_by_key(|r| order(&r.0.meta));
        // Waits found at the end or by merging go to the rank that waited.
        let mut waits: BTreeMap<i32, Vec<Wait>> = BTreeMap::new();
        for mut w in std::mem::take(&mut self.waits) {
            w.remap(&ids);
            waits.entry(w.waiter).or_default().push(w);
        }
        let cx = StreamCx::bare(self.origin_ns, self.slice_shift, self.slices);
        for (rank, states) in &mut ranks {
            let Some(mine) = waits.remove(&rank.meta.world_rank) else {
                continue;
            };
            let input = Input {
                waits: &mine,
                ..Input::default()
            };
            for (a, s) in analyses.iter().zip(states.iter_mut()) {
                if a.spec().sensitivities.contains(&Sensitivity::Waits) {
                    s.fold(&cx, &input);
                }
            }
        }
        let lost_waits: usize = waits.values().map(Vec::len).sum();

        let mut by_app: BTreeMap<i32, Vec<Loaded>> = BTreeMap::new();
        for r in ranks {
            by_app.entry(r.0.meta.appnum).or_default().push(r);
        }
        let apps = by_app.len();
        let mut programs: Vec<Program> = by_app
            .into_iter()
            .map(|(appnum, ranks)| {
                let name = if apps > 1 {
                    format!("{} (app {appnum})", self.name)
                } else {
                    self.name.clone()
                };
                let mut p = self.fold(name, &ranks, &canonical, analyses, live);
                let clocks: Vec<RankClock> = ranks.iter().map(|r| r.0.clock.clone()).collect();
                p.clock = Clock {
                    residual_ns: clocks.iter().map(|c| c.residual_ns).max().unwrap_or(0),
                    ranks: clocks,
                    violations: unmatched.clock_violations,
                };
                p
            })
            .collect();
        for p in &mut programs {
            let skipped = timed_only(p);
            if !skipped.is_empty() {
                p.diagnostics.push(format!(
                    "MPI 4.0: {skipped} are timed and counted only: their messages and collectives are in no communication matrix, byte count or wait state (docs/mpi.md, \"MPI 4.0\")"
                ));
            }
            // One record cannot name the requests MPI_Startall starts.
            let startall = p.mpi.get("MPI_Startall");
            if startall.is_some_and(|f| f.calls.iter().any(|&c| c > 0)) {
                p.diagnostics.push(
                    "MPI_Startall: the persistent sends it starts are not matched with their receives, so their messages are in no wait state (the receives are counted; docs/mpi.md)".into(),
                );
            }
        }
        if let Some(first) = programs.first_mut() {
            let d = &mut first.diagnostics;
            d.extend(problems);
            d.extend(canonical.diagnostics());
            for p in &self.panics {
                d.push(p.clone());
            }
            if unmatched.sends + unmatched.recvs > 0 {
                d.push(format!(
                    "matching: {} sends and {} receives found no partner (a rank that died, a request never completed, a message to another program, or events lost); {} were dropped while the run went on to bound memory",
                    unmatched.sends, unmatched.recvs, unmatched.dropped
                ));
            }
            if unmatched.arrivals > 0 {
                d.push(format!(
                    "matching: {} arrivals at collectives belong to instances that never completed (a rank that died or paused differently?)",
                    unmatched.arrivals
                ));
            }
            if unmatched.clock_violations > 0 {
                d.push(format!(
                    "matching: {} receives completed before their send began (clock condition violations): the clocks of the ranks were not aligned well enough, and these waits are underestimated",
                    unmatched.clock_violations
                ));
            }
            if lost_waits > 0 {
                d.push(format!(
                    "wait-states: {lost_waits} waits belong to ranks not in this program and were ignored"
                ));
            }
            if self.forgotten > 0 {
                d.push(format!(
                    "tracking: {} outstanding requests were forgotten (over a million open at once); their messages are missing",
                    self.forgotten
                ));
            }
            if self.ignored_defs > 0 {
                d.push(format!(
                    "{} definitions had ids out of range and were ignored",
                    self.ignored_defs
                ));
            }
        }
        programs
    }

    fn fold(
        &self,
        name: String,
        ranks: &[Loaded],
        unifier: &Unifier,
        analyses: &[Arc<dyn DynAnalysis>],
        live: bool,
    ) -> Program {
        let mut world_to_program = HashMap::new();
        for (i, (r, _)) in ranks.iter().enumerate() {
            if r.meta.world_rank >= 0 {
                world_to_program.entry(r.meta.world_rank).or_insert(i);
            }
        }
        let metas: Vec<RankMeta> = ranks.iter().map(|(r, _)| r.meta.clone()).collect();
        let mut p = Program {
            name,
            command: metas.first().map(|m| m.argv.clone()).unwrap_or_default(),
            ranks: ranks.len(),
            ..Program::default()
        };
        for (rank, (r, _)) in ranks.iter().enumerate() {
            let acc = &r.accounting;
            if r.meta.folded > 0 {
                p.rank_info.push(folded_info(r));
                p.diagnostics.push(folded_diagnostic(rank, r));
                continue;
            }
            let partial = acc.end.is_none() && !live;
            p.rank_info.push(RankInfo {
                world_rank: r.meta.world_rank,
                host: r.meta.host.clone(),
                pid: r.meta.pid,
                accounting: Accounting {
                    events_written: acc.end.map_or(acc.received, |e| e.0),
                    events_received: acc.received,
                    events_analysed: acc.analysed,
                    events_dropped: acc.end.map_or(0, |e| e.1),
                    partial_ranks: partial as u64,
                    partial_children: 0,
                },
                partial,
                folded: 0,
                ended: acc.ended,
                abort_code: acc.abort_code,
            });
            if partial {
                p.diagnostics.push(format!(
                    "rank {rank} (world rank {}, pid {} on {}) ended without its end-of-stream record (killed or crashed?); the {} events that arrived are kept",
                    r.meta.world_rank, r.meta.pid, r.meta.host, acc.received
                ));
            }
        }
        let cx = Finish {
            ranks: &metas,
            unifier,
            origin_ns: self.origin_ns,
            slice_shift: self.slice_shift,
            slices: self.slices,
            world_to_program: &world_to_program,
        };
        for (index, analysis) in analyses.iter().enumerate() {
            let states: Vec<&dyn DynRank> = ranks.iter().map(|(_, s)| s[index].as_ref()).collect();
            let done = catch_unwind(AssertUnwindSafe(|| analysis.finish(&cx, &states, &mut p)));
            if let Err(panic) = done {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                p.diagnostics.push(format!(
                    "analysis `{}` failed while folding its results ({message}); its part of this report is missing or incomplete",
                    analysis.spec().name
                ));
            }
        }
        p
    }
}

/// The model's row of processes folded together.
fn folded_info(r: &RankPartial) -> RankInfo {
    let acc = &r.accounting;
    let (written, dropped) = acc.end.unwrap_or((acc.received, 0));
    RankInfo {
        world_rank: -1,
        host: r.meta.host.clone(),
        pid: 0,
        accounting: Accounting {
            events_written: written,
            events_received: acc.received,
            events_analysed: acc.analysed,
            events_dropped: dropped,
            partial_ranks: acc.partial,
            partial_children: 0,
        },
        partial: false,
        folded: r.meta.folded,
        ended: None,
        abort_code: None,
    }
}

/// What the diagnostics say of the row of folded processes.
fn folded_diagnostic(rank: usize, r: &RankPartial) -> String {
    let acc = &r.accounting;
    let mut s = format!(
        "row {rank} (\"{} other processes\") stands for {} processes without an MPI rank, beyond the program's first per-process rows, folded together to bound memory (their counts are exact: calls, bytes and times summed, minima and maxima kept)",
        r.meta.folded, r.meta.folded
    );
    if acc.partial > 0 {
        let named: Vec<String> = acc
            .partial_named
            .iter()
            .map(|(pid, host)| format!("pid {pid} on {host}"))
            .collect();
        s.push_str(&format!(
            "; {} of them ended without their end-of-stream record (killed or crashed?), what arrived is kept: {}",
            acc.partial,
            named.join(", ")
        ));
        if acc.partial > named.len() as u64 {
            s.push_str(&format!(" and {} more", acc.partial - named.len() as u64));
        }
    }
    s
}

/// Loads saved states and saves them again renumbered.
fn reload(
    states: &[Vec<u8>],
    analyses: &[Arc<dyn DynAnalysis>],
    ids: &IdMap,
) -> Result<Vec<Vec<u8>>, Error> {
    analyses
        .iter()
        .zip(states)
        .map(|(a, bytes)| Ok(a.load(bytes, ids)?.save()))
        .collect()
}

/// The order of ranks in a program: world ranks first, in order; processes
/// without one after them, in order of their handshake.
fn order(m: &RankMeta) -> (i32, bool, i32, u64, u64, u32) {
    (
        m.appnum,
        m.world_rank < 0,
        m.world_rank,
        m.hello_ns,
        m.conn,
        m.pid,
    )
}

/// The functions `p` called whose communication the analyses skip
/// ([`hark_wire::mpi::timed_only_communication`]), comma-separated.
fn timed_only(p: &Program) -> String {
    let names: Vec<&str> = p
        .mpi
        .iter()
        .filter(|(name, f)| {
            f.calls.iter().any(|&c| c > 0)
                && hark_wire::mpi::by_name(name)
                    .is_some_and(|(_, f)| hark_wire::mpi::timed_only_communication(f))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    names.join(", ")
}
