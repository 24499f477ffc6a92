//! Time slices: every metric family per rank over time, in a fixed number
//! of slices that coarsen as the run grows.
//!
//! A slice starts `1 << slice_shift` ns wide (about 1 ms) and doubles as the
//! run grows (see `slices.rs`), so memory is `slices × metrics × ranks`
//! whatever the run's length. At the end, ranks are brought to the widest
//! width any of them reached; the regions' series join at the same width.
//!
//! Durations are split over the slices a call spans; counts and bytes go to
//! the slice where the call started.
//!
//! Metrics (all documented in `docs/profile-json.md`):
//!
//! - totals: `mpi_time_ns`, `mpi_calls`, `p2p_messages`, `p2p_bytes` (sent),
//!   `p2p_time_ns`, `collective_calls`, `collective_bytes` (sent),
//!   `collective_time_ns`, `io_ops`, `io_bytes`, `io_time_ns`;
//! - per function `<name>.calls`, `<name>.time_ns`, `<name>.bytes` for every
//!   MPI, POSIX and STDIO function called (`MPI_Send.time_ns`, `write.bytes`);
//! - per file `file:<path>.ops|bytes|read_bytes|write_bytes|time_ns`;
//! - per communicator `comm:<i>.calls|bytes|time_ns`, `i` the communicator's
//!   index in the program's `collectives`;
//! - per counter `counter:<name>.count|sum|min|max|last`;
//! - per destination `p2p_to:<rank>.messages|bytes` (program ranks), only for
//!   programs of at most [`PAIR_RANKS`] ranks.
//!
//! Files, communicators and counters are open-ended, so each rank keeps its
//! own series for the first [`KEYS`] of each it meets and folds the rest into
//! one `<other …>` series; the model keeps the [`KEYS`] busiest of each over
//! all ranks and folds the rest into `file:<other files>`,
//! `comm:<other>` and `counter:<other counters>.count` (a minimum or a last
//! value of several counters means nothing, so only their count is kept).
//! The model thus holds at most `slices × ranks × metrics` values, where
//! the metrics are bounded by the function table, [`KEYS`] and
//! [`PAIR_RANKS`]: never by the run's length.
//!
//! A counter's `.min`, `.max` and `.last` merge as minimum, maximum and
//! later value when slices coarsen, not as sums; the model's slices are
//! unsigned, so a counter that goes below zero also gets
//! `.min_negative`, `.max_negative`, `.last_negative` and `.sum_negative`
//! (the value is `v - v_negative`), and all four read 0 where `.count` is 0.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::fx::{FxHashMap, FxHashSet};
use crate::ks::io::{direction, file_name, file_of, is_io, Dir, File};
use crate::ks::mpi_profile::{completion_bytes, own_bytes};
use crate::slices::{publish, Combine, Series};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::unify::UNDEFINED;
use hark_model::Program;
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hash::Hash;

/// See the module documentation.
pub struct TimeSlices;

/// Files, communicators and counters with series of their own, per rank and
/// in the model; the rest share one series per family.
pub const KEYS: usize = 16;

/// Programs of at most this many ranks get per-destination series
/// (`p2p_to:<rank>.*`); larger ones only the per-rank totals, since pairs
/// grow as ranks².
pub const PAIR_RANKS: usize = 64;

static SPEC: Spec = Spec {
    name: "timeslices",
    description: "MPI, point-to-point, collective, I/O and counter metrics per rank, function, file, communicator and destination in a fixed number of time slices that coarsen as the run grows.",
    sensitivities: &[Sensitivity::Defs, Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["timeslices"],
};

const MPI_TIME: usize = 0;
const MPI_CALLS: usize = 1;
const P2P_MESSAGES: usize = 2;
const P2P_BYTES: usize = 3;
const COLLECTIVE_BYTES: usize = 4;
const IO_OPS: usize = 5;
const IO_BYTES: usize = 6;
const IO_TIME: usize = 7;
const P2P_TIME: usize = 8;
const COLLECTIVE_CALLS: usize = 9;
const COLLECTIVE_TIME: usize = 10;
const PAUSED_TIME: usize = 11;
const FIXED: &[&str] = &[
    "mpi_time_ns",
    "mpi_calls",
    "p2p_messages",
    "p2p_bytes",
    "collective_bytes",
    "io_ops",
    "io_bytes",
    "io_time_ns",
    "p2p_time_ns",
    "collective_calls",
    "collective_time_ns",
    "paused_ns",
];
/// Per function: calls, time, bytes.
const PER_FUNCTION: [&str; 3] = ["calls", "time_ns", "bytes"];
const PER_FILE: [&str; 5] = ["ops", "bytes", "read_bytes", "write_bytes", "time_ns"];
const PER_COMM: [&str; 3] = ["calls", "bytes", "time_ns"];
const PER_COUNTER: [&str; 6] = ["count", "sum", "sum_negative", "min", "max", "last"];
const PER_PAIR: [&str; 2] = ["messages", "bytes"];

/// Where each family's metrics start; a family of `K` fields and `S` slots
/// takes metrics `base + K * slot + field`.
const FUNCS: usize = FIXED.len();
const FILES: usize = FUNCS + PER_FUNCTION.len() * (FUNCTIONS.len() + op::IO_NAMES.len());
const COMMS: usize = FILES + PER_FILE.len() * (KEYS + 1);
const COUNTERS: usize = COMMS + PER_COMM.len() * (KEYS + 1);
const PAIRS: usize = COUNTERS + PER_COUNTER.len() * (KEYS + 1);
const END: usize = PAIRS + PER_PAIR.len() * PAIR_RANKS;

fn mpi_metric(i: usize) -> usize {
    FUNCS + 3 * i
}
fn io_metric(i: usize) -> usize {
    FUNCS + 3 * FUNCTIONS.len() + 3 * i
}

/// What a metric index stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    Fixed(usize),
    Function(usize, usize),
    File(usize, usize),
    Comm(usize, usize),
    Counter(usize, usize),
    Pair(usize, usize),
}

/// The families after the fixed metrics: where each starts, how many
/// fields it has, and what it stands for (`(slot, field)`), in order.
type Family = (usize, usize, fn(usize, usize) -> Metric);
const FAMILIES: [Family; 5] = [
    (FUNCS, PER_FUNCTION.len(), Metric::Function),
    (FILES, PER_FILE.len(), Metric::File),
    (COMMS, PER_COMM.len(), Metric::Comm),
    (COUNTERS, PER_COUNTER.len(), Metric::Counter),
    (PAIRS, PER_PAIR.len(), Metric::Pair),
];

fn metric(m: usize) -> Option<Metric> {
    if m < FUNCS {
        return Some(Metric::Fixed(m));
    }
    if m >= END {
        return None;
    }
    let &(base, fields, make) = FAMILIES.iter().rev().find(|f| m >= f.0)?;
    Some(make((m - base) / fields, (m - base) % fields))
}

/// The first [`KEYS`] keys met get slots `0..KEYS`; later ones share slot
/// `KEYS`.
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "K: Serialize + Eq + Hash",
    deserialize = "K: Deserialize<'de> + Eq + Hash"
))]
struct Keys<K> {
    slots: FxHashMap<K, usize>,
    order: Vec<K>,
    /// Events filed under the shared slot.
    folded: u64,
}

impl<K> Default for Keys<K> {
    fn default() -> Self {
        Keys {
            slots: FxHashMap::default(),
            order: Vec::new(),
            folded: 0,
        }
    }
}

impl<K: Copy + Eq + Hash> Keys<K> {
    #[inline]
    fn slot(&mut self, key: K) -> usize {
        if let Some(&s) = self.slots.get(&key) {
            return s;
        }
        if self.order.len() < KEYS {
            self.order.push(key);
            self.slots.insert(key, self.order.len() - 1);
            return self.order.len() - 1;
        }
        self.folded += 1;
        KEYS
    }

    /// Renumbers the keys, keeping their slots.
    fn remap(&mut self, f: impl Fn(K) -> K) {
        for k in &mut self.order {
            *k = f(*k);
        }
        self.slots = self
            .order
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i))
            .collect();
    }
}

/// Per rank: the series and which keys have series of their own.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    /// Made on the first batch, when the stream's settings are known.
    series: Option<Series>,
    files: Keys<File>,
    comms: Keys<u32>,
    counters: Keys<u32>,
    /// Every communicator a collective ran on, to name `comm:<i>` as the
    /// collectives knowledge source orders them (grows with communicators,
    /// as that knowledge source does, never with events).
    comm_ids: FxHashSet<u32>,
    /// Messages sent to world ranks at or beyond [`PAIR_RANKS`].
    far_peers: u64,
    /// The communicator of this rank's last collective and its slot, if it
    /// has one of its own: a program's collectives keep to one or two
    /// communicators, and looking one up costs two hash lookups. Not
    /// saved; cleared when ids change.
    #[serde(skip)]
    last_comm: Option<(u32, usize)>,
}

impl RankState for Rank {
    /// Counters keep their last value per slice, which has no order
    /// across processes: a process with counters keeps its row.
    fn absorbs(&self, o: &Rank) -> bool {
        o.counters.order.is_empty() && o.counters.folded == 0
    }
    fn absorb(&mut self, o: &Rank) {
        let files: Vec<usize> = o.files.order.iter().map(|&k| self.files.slot(k)).collect();
        let comms: Vec<usize> = o.comms.order.iter().map(|&k| self.comms.slot(k)).collect();
        self.files.folded += o.files.folded;
        self.comms.folded += o.comms.folded;
        self.comm_ids.extend(o.comm_ids.iter().copied());
        self.far_peers += o.far_peers;
        let Some(os) = &o.series else { return };
        let s = self.series.get_or_insert_with(|| os.empty_like());
        s.absorb(os, |m| match metric(m) {
            Some(Metric::File(slot, f)) => {
                FILES + PER_FILE.len() * files.get(slot).copied().unwrap_or(KEYS) + f
            }
            Some(Metric::Comm(slot, f)) => {
                COMMS + PER_COMM.len() * comms.get(slot).copied().unwrap_or(KEYS) + f
            }
            _ => m,
        });
    }

    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        let events = input.events;
        let s = self
            .series
            .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
        // Time recording was paused (not measured: the live view and the
        // report draw it apart from useful time).
        for &(from, to) in input.times.map_or(&[][..], |t| &t.paused[..]) {
            let (start, end) = (cx.since_origin(from), cx.since_origin(to));
            let end = end.max(start);
            s.fit(end);
            s.add_span(PAUSED_TIME, (s.index(start), s.index(end)), start, end);
        }
        for ev in events {
            let code = ev.op();
            let kind = op::kind(code);
            // Told apart before any time is mapped: most events of some
            // streams (OpenMP's, completions, samples) are none of these.
            let counter = match kind {
                op::OpKind::Mpi(_) | op::OpKind::Io(_) => false,
                _ if code == op::COUNTER => true,
                _ => continue,
            };
            let start = cx.since_origin(ev.start.get());
            let end = cx.since_origin(ev.end.get()).max(start);
            s.fit(if counter { start } else { end });
            // Counts and bytes go to the start's slice, durations are spread
            // over the slices from the start's to the end's.
            let at = s.index(start);
            let span = (at, s.index(end));
            let bytes = ev.bytes.get();
            match kind {
                op::OpKind::Mpi(i) => {
                    let class = FUNCTIONS[i].class;
                    // The totals over functions, communicators and files
                    // are summed from these at the end (`with_totals`).
                    let m = mpi_metric(i);
                    s.add(m, at, 1);
                    s.add_span(m + 1, span, start, end);
                    if own_bytes(i) {
                        s.add(m + 2, at, bytes);
                    }
                    if matches!(class, Class::Collective | Class::Icollective) {
                        let comm = cx.comm(ev.obj.get());
                        let slot = match self.last_comm {
                            Some((last, slot)) if last == comm => slot,
                            _ => {
                                self.comm_ids.insert(comm);
                                let slot = self.comms.slot(comm);
                                // The shared slot counts every event it
                                // takes (`Keys::folded`): not kept.
                                self.last_comm = (slot < KEYS).then_some((comm, slot));
                                slot
                            }
                        };
                        let c = COMMS + PER_COMM.len() * slot;
                        s.add(c, at, 1);
                        s.add(c + 1, at, bytes);
                        s.add_span(c + 2, span, start, end);
                    }
                }
                op::OpKind::Io(i) => {
                    let m = io_metric(i);
                    s.add(m, at, 1);
                    s.add_span(m + 1, span, start, end);
                    s.add(m + 2, at, bytes);
                }
                op::OpKind::User if code == op::COUNTER => {
                    let name = cx.name(ev.obj.get());
                    if name != UNDEFINED {
                        let slot = self.counters.slot(name);
                        let c = COUNTERS + PER_COUNTER.len() * slot;
                        s.add(c, at, 1);
                        if slot < KEYS {
                            let v = bytes as i64;
                            s.add(c + 1, at, v.max(0) as u64);
                            s.add(c + 2, at, v.min(0).unsigned_abs());
                            // In `Combine`'s encodings, on the order-keeping
                            // map of i64 onto u64; `.count` tells empty slices.
                            let o = ordered(v);
                            s.keep(c + 3, at, !o, Combine::Max);
                            s.keep(c + 4, at, o, Combine::Max);
                            s.keep(c + 5, at, o.max(1), Combine::Last);
                        }
                    }
                }
                _ => {}
            }
            if is_io(code) {
                let file = file_of(cx, ev.obj.get(), ev.peer.get());
                let f = FILES + PER_FILE.len() * self.files.slot(file);
                s.add(f, at, 1);
                s.add(f + 1, at, bytes);
                match direction(code) {
                    Dir::Read => s.add(f + 2, at, bytes),
                    Dir::Write => s.add(f + 3, at, bytes),
                    Dir::Other => {}
                }
                s.add_span(f + 4, span, start, end);
            }
        }
        for msg in input.msgs {
            let start = cx.since_origin(msg.start);
            s.fit(start);
            let at = s.index(start);
            // A request completed: its bytes go to the function that posted
            // it, as in the MPI profile.
            if completion_bytes(msg.func) {
                s.add(mpi_metric(msg.func) + 2, at, msg.bytes);
            }
            if !msg.send {
                continue;
            }
            s.add(P2P_MESSAGES, at, 1);
            s.add(P2P_BYTES, at, msg.bytes);
            match usize::try_from(msg.peer) {
                Ok(peer) if peer < PAIR_RANKS => {
                    let p = PAIRS + PER_PAIR.len() * peer;
                    s.add(p, at, 1);
                    s.add(p + 1, at, msg.bytes);
                }
                _ => self.far_peers += 1,
            }
        }
    }
    fn remap(&mut self, ids: &IdMap) {
        self.last_comm = None;
        self.files.remap(|f| f.remap(ids));
        self.comms.remap(|c| ids.comm(c));
        self.counters.remap(|c| ids.name(c));
        self.comm_ids = std::mem::take(&mut self.comm_ids)
            .into_iter()
            .map(|c| ids.comm(c))
            .collect();
    }
}

/// Whether an MPI function's time counts as point-to-point time.
fn p2p_timed(class: Class) -> bool {
    matches!(
        class,
        Class::Send
            | Class::Recv
            | Class::Sendrecv
            | Class::Isend
            | Class::Irecv
            | Class::SendInit
            | Class::RecvInit
            | Class::Start
            | Class::Probe
    )
}

/// `s` with its totals: every MPI call is under its function, every
/// collective under its communicator's slot and every I/O call under its
/// file's, so the totals are sums of those series, taken once here rather
/// than kept beside them at every event (the same values: sums commute).
fn with_totals(s: &Series) -> Series {
    let mut s = s.clone();
    let functions = || (0..FUNCTIONS.len()).map(mpi_metric);
    let comms = || (0..=KEYS).map(|k| COMMS + PER_COMM.len() * k);
    let files = || (0..=KEYS).map(|k| FILES + PER_FILE.len() * k);
    s.set_sum(MPI_CALLS, functions());
    s.set_sum(MPI_TIME, functions().map(|m| m + 1));
    let p2p = (0..FUNCTIONS.len()).filter(|&i| p2p_timed(FUNCTIONS[i].class));
    s.set_sum(P2P_TIME, p2p.map(|i| mpi_metric(i) + 1));
    s.set_sum(COLLECTIVE_CALLS, comms());
    s.set_sum(COLLECTIVE_BYTES, comms().map(|c| c + 1));
    s.set_sum(COLLECTIVE_TIME, comms().map(|c| c + 2));
    s.set_sum(IO_OPS, files());
    s.set_sum(IO_BYTES, files().map(|f| f + 1));
    s.set_sum(IO_TIME, files().map(|f| f + 4));
    s
}

/// The [`KEYS`] keys of one family with the largest `activity` over all
/// ranks (ties: the smaller key), from each rank's slots.
fn busiest<K: Copy + Ord + Hash>(
    ranks: &[&Rank],
    keys: impl Fn(&Rank) -> &Keys<K>,
    activity: impl Fn(usize) -> usize,
) -> (FxHashMap<K, usize>, usize) {
    let mut totals: BTreeMap<K, u64> = BTreeMap::new();
    for rank in ranks {
        let Some(s) = &rank.series else { continue };
        for (slot, &key) in keys(rank).order.iter().enumerate() {
            *totals.entry(key).or_default() += s.total(activity(slot));
        }
    }
    let all = totals.len();
    let mut sorted: Vec<(K, u64)> = totals.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let kept = sorted
        .into_iter()
        .take(KEYS)
        .enumerate()
        .map(|(i, (k, _))| (k, i))
        .collect();
    (kept, all)
}

impl Analysis for TimeSlices {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let ranks: Vec<&Rank> = ranks.to_vec();
        let n = ranks.len();
        let (files, file_keys) = busiest(&ranks, |r| &r.files, |k| FILES + PER_FILE.len() * k);
        let (comms, comm_keys) = busiest(&ranks, |r| &r.comms, |k| COMMS + PER_COMM.len() * k);
        let (counters, counter_keys) = busiest(
            &ranks,
            |r| &r.counters,
            |k| COUNTERS + PER_COUNTER.len() * k,
        );
        // `comm:<i>`: `i` as the collectives knowledge source orders them.
        let mut comm_ids: Vec<u32> = ranks
            .iter()
            .flat_map(|r| r.comm_ids.iter().copied())
            .collect();
        comm_ids.sort_unstable();
        comm_ids.dedup();
        let pairs = n <= PAIR_RANKS;
        let world: Vec<usize> = (0..PAIR_RANKS)
            .map(|w| cx.program_rank(w as i32).unwrap_or(usize::MAX))
            .collect();
        let name = |r: usize, m: usize| -> Option<String> {
            let rank = ranks[r];
            Some(match metric(m)? {
                Metric::Fixed(i) => FIXED[i].to_string(),
                Metric::Function(f, w) => {
                    let func = FUNCTIONS
                        .get(f)
                        .map_or_else(|| op::IO_NAMES[f - FUNCTIONS.len()], |d| d.name);
                    format!("{func}.{}", PER_FUNCTION[w])
                }
                Metric::File(k, w) => {
                    let file = match rank.files.order.get(k).filter(|f| files.contains_key(f)) {
                        Some(&f) => file_name(f, cx),
                        None => "<other files>".into(),
                    };
                    format!("file:{file}.{}", PER_FILE[w])
                }
                Metric::Comm(k, w) => {
                    let comm = match rank.comms.order.get(k).filter(|c| comms.contains_key(c)) {
                        Some(c) => comm_ids.binary_search(c).ok()?.to_string(),
                        None => "<other>".into(),
                    };
                    format!("comm:{comm}.{}", PER_COMM[w])
                }
                Metric::Counter(k, w) => {
                    let counter = rank
                        .counters
                        .order
                        .get(k)
                        .filter(|c| counters.contains_key(c));
                    match counter {
                        Some(c) => format!(
                            "counter:{}.{}",
                            cx.unifier.name(*c).unwrap_or("?"),
                            PER_COUNTER[w]
                        ),
                        None if w == 0 => "counter:<other counters>.count".into(),
                        _ => return None,
                    }
                }
                Metric::Pair(peer, w) => {
                    let to = *world.get(peer).filter(|&&p| pairs && p < n)?;
                    format!("p2p_to:{to}.{}", PER_PAIR[w])
                }
            })
        };
        let series: Vec<Option<Series>> = (ranks.iter())
            .map(|r| r.series.as_ref().map(with_totals))
            .collect();
        publish(
            cx,
            &mut out.timeslices,
            series.iter().map(Option::as_ref),
            name,
        );
        decode_counters(&mut out.timeslices.metrics);
        let mut say = |what: String| out.diagnostics.push(format!("timeslices: {what}"));
        for (family, all, folded) in [
            (
                "files",
                file_keys,
                ranks.iter().map(|r| r.files.folded).sum::<u64>(),
            ),
            (
                "communicators",
                comm_keys,
                ranks.iter().map(|r| r.comms.folded).sum(),
            ),
            (
                "counters",
                counter_keys,
                ranks.iter().map(|r| r.counters.folded).sum(),
            ),
        ] {
            if all > KEYS || folded > 0 {
                say(format!(
                    "{family} beyond the {KEYS} busiest (or a rank's first {KEYS}) share one `<other …>` series to bound memory ({folded} events folded on the ranks, {all} {family} had series of their own)"
                ));
            }
        }
        let far: u64 = ranks.iter().map(|r| r.far_peers).sum();
        if !pairs {
            say(format!(
                "per-destination slices (`p2p_to:<rank>.*`) are omitted above {PAIR_RANKS} ranks to bound memory; `p2p_messages` and `p2p_bytes` per rank remain"
            ));
        } else if far > 0 {
            say(format!(
                "{far} messages went to world ranks at or beyond {PAIR_RANKS} and have no per-destination slices"
            ));
        }
    }
}

/// The order-keeping map of `i64` onto `u64` (`i64::MIN` → 0).
#[inline]
fn ordered(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// Turns the counters' `.min`, `.max` and `.last` from their encodings
/// (see where they are kept) into values: the non-negative part under the
/// metric's name and, for a counter that went below zero, the magnitude of
/// the negative part under `<name>_negative` (`value = v - v_negative`), 0
/// where `.count` is 0; drops `.sum_negative` when it is all zero.
fn decode_counters(metrics: &mut BTreeMap<String, Vec<Vec<u64>>>) {
    let mut negatives = Vec::new();
    for field in ["min", "max", "last"] {
        let names: Vec<String> = metrics
            .keys()
            .filter(|m| m.starts_with("counter:") && m.ends_with(&format!(".{field}")))
            .cloned()
            .collect();
        for name in names {
            let base = &name[..name.len() - field.len()];
            let Some(counts) = metrics.get(&format!("{base}count")).cloned() else {
                continue;
            };
            let Some(rows) = metrics.get_mut(&name) else {
                continue;
            };
            let mut below = vec![vec![0u64; rows.first().map_or(0, Vec::len)]; rows.len()];
            for ((row, neg), count) in rows.iter_mut().zip(&mut below).zip(&counts) {
                for (i, v) in row.iter_mut().enumerate() {
                    let value = if count.get(i).copied().unwrap_or(0) == 0 {
                        0
                    } else {
                        let o = if field == "min" { !*v } else { *v };
                        (o ^ (1 << 63)) as i64
                    };
                    *v = value.max(0) as u64;
                    if let Some(n) = neg.get_mut(i) {
                        *n = value.min(0).unsigned_abs();
                    }
                }
            }
            if below.iter().flatten().any(|&v| v > 0) {
                negatives.push((format!("{name}_negative"), below));
            }
        }
    }
    metrics.extend(negatives);
    metrics.retain(|name, rows| {
        !(name.starts_with("counter:") && name.ends_with(".sum_negative"))
            || rows.iter().flatten().any(|&v| v > 0)
    });
}
