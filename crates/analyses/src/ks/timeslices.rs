//! Time slices: the main metrics per rank over time, in a fixed number of
//! slices that coarsen as the run grows.
//!
//! A slice starts `1 << slice_shift` ns wide (about 1 ms). When an event falls
//! beyond the last slice, neighbouring slices are merged pairwise and the
//! width doubles, as many times as needed, so memory is
//! `slices × metrics × ranks` whatever the run's length. Every rank of a
//! program counts from the same origin on the common timeline, so its slice
//! edges are the program's slice edges at any width; at the end, ranks are
//! brought to the widest width any of them reached.
//!
//! Durations are split over the slices a call spans; counts and bytes go to
//! the slice where the call started.
//!
//! Metrics: `mpi_time_ns`, `mpi_calls`, `p2p_messages`, `p2p_bytes` (sent),
//! `collective_bytes` (sent), `io_ops`, `io_bytes`, `io_time_ns`, and per
//! function `<name>.calls`, `<name>.time_ns`, `<name>.bytes` for every MPI,
//! POSIX and STDIO function called (`MPI_Send.time_ns`, `write.bytes`).

use crate::analysis::{Analysis, Finish, RankState, Sensitivity, Spec};
use crate::ks::mpi_profile::moves_own_bytes;
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::tracker::Tracker;
use hark_model::Program;
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Event};
use std::any::Any;

/// See the module documentation.
pub struct TimeSlices;

static SPEC: Spec = Spec {
    name: "timeslices",
    description: "MPI, point-to-point, collective and I/O metrics per rank in a fixed number of time slices that coarsen as the run grows.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
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
const FIXED: &[&str] = &[
    "mpi_time_ns",
    "mpi_calls",
    "p2p_messages",
    "p2p_bytes",
    "collective_bytes",
    "io_ops",
    "io_bytes",
    "io_time_ns",
];
/// Per function: calls, time, bytes.
const PER_FUNCTION: [&str; 3] = ["calls", "time_ns", "bytes"];

fn mpi_metric(i: usize) -> usize {
    FIXED.len() + 3 * i
}
fn io_metric(i: usize) -> usize {
    FIXED.len() + 3 * FUNCTIONS.len() + 3 * i
}
fn metric_count() -> usize {
    io_metric(op::IO_NAMES.len())
}
fn metric_name(m: usize) -> String {
    if m < FIXED.len() {
        return FIXED[m].to_string();
    }
    let k = m - FIXED.len();
    let (func, what) = (k / 3, PER_FUNCTION[k % 3]);
    if func < FUNCTIONS.len() {
        format!("{}.{what}", FUNCTIONS[func].name)
    } else {
        format!("{}.{what}", op::IO_NAMES[func - FUNCTIONS.len()])
    }
}

/// One rank's slices.
#[derive(Clone)]
struct Series {
    shift: u32,
    /// Past this shift, slice edges would not fit in a u64: the last slice
    /// takes whatever lies beyond (only a corrupt clock gets there).
    max_shift: u32,
    slices: usize,
    metrics: Vec<Option<Box<[u64]>>>,
}

impl Series {
    fn new(shift: u32, slices: usize) -> Series {
        // Pairwise merging needs an even count.
        let slices = (slices.max(2) + 1) & !1;
        let max_shift = 63 - slices.next_power_of_two().trailing_zeros();
        Series {
            shift: shift.min(max_shift),
            max_shift,
            slices,
            metrics: vec![None; metric_count()],
        }
    }

    /// Coarsens until `rel` (ns since the origin) falls inside the slices.
    #[inline]
    fn fit(&mut self, rel: u64) {
        while (rel >> self.shift) >= self.slices as u64 && self.shift < self.max_shift {
            self.coarsen();
        }
    }

    #[cold]
    fn coarsen(&mut self) {
        let half = self.slices / 2;
        for m in self.metrics.iter_mut().flatten() {
            for i in 0..half {
                m[i] = m[2 * i].saturating_add(m[2 * i + 1]);
            }
            m[half..].fill(0);
        }
        self.shift += 1;
    }

    #[inline]
    fn index(&self, rel: u64) -> usize {
        ((rel >> self.shift) as usize).min(self.slices - 1)
    }

    #[inline]
    fn slot(&mut self, metric: usize) -> &mut [u64] {
        let n = self.slices;
        self.metrics[metric].get_or_insert_with(|| vec![0; n].into_boxed_slice())
    }

    /// Adds `v` to slice `i` of `metric`.
    #[inline]
    fn add(&mut self, metric: usize, i: usize, v: u64) {
        self.slot(metric)[i].sat(v);
    }

    /// Adds the duration `[start, end)`, which lies in slices `a..=b`, to
    /// the slices it covers.
    #[inline]
    fn add_span(&mut self, metric: usize, (a, b): (usize, usize), start: u64, end: u64) {
        let shift = self.shift;
        let slot = self.slot(metric);
        if a == b {
            slot[a].sat(end - start);
            return;
        }
        slot[a].sat(((a as u64 + 1) << shift) - start);
        for s in &mut slot[a + 1..b] {
            s.sat(1 << shift);
        }
        slot[b].sat(end.saturating_sub((b as u64) << shift));
    }
}

#[derive(Default)]
struct Rank {
    /// Made on the first batch, when the stream's settings are known.
    series: Option<Series>,
    tracker: Tracker,
}

impl RankState for Rank {
    fn events(&mut self, cx: &StreamCx<'_>, events: &[Event]) {
        let s = self
            .series
            .get_or_insert_with(|| Series::new(cx.slice_shift(), cx.slices()));
        for ev in events {
            let code = ev.op();
            let msg = if code < op::IO_BASE {
                self.tracker.step(ev)
            } else {
                None
            };
            let start = cx.since_origin(ev.start.get());
            let end = cx.since_origin(ev.end.get()).max(start);
            let kind = op::kind(code);
            if matches!(kind, op::OpKind::Mpi(_) | op::OpKind::Io(_)) {
                s.fit(end);
            } else if msg.is_some() {
                s.fit(start);
            } else {
                continue;
            }
            // Counts and bytes go to the start's slice, durations are spread
            // over the slices from the start's to the end's.
            let at = s.index(start);
            let span = (at, s.index(end));
            match kind {
                op::OpKind::Mpi(i) => {
                    let class = FUNCTIONS[i].class;
                    let m = mpi_metric(i);
                    s.add(MPI_CALLS, at, 1);
                    s.add(m, at, 1);
                    s.add_span(MPI_TIME, span, start, end);
                    s.add_span(m + 1, span, start, end);
                    if moves_own_bytes(class) {
                        s.add(m + 2, at, ev.bytes.get());
                    }
                    if class == Class::Collective || class == Class::Icollective {
                        s.add(COLLECTIVE_BYTES, at, ev.bytes.get());
                    }
                    if matches!(class, Class::FileMeta | Class::FileRead | Class::FileWrite) {
                        s.add(IO_OPS, at, 1);
                        s.add(IO_BYTES, at, ev.bytes.get());
                        s.add_span(IO_TIME, span, start, end);
                    }
                }
                op::OpKind::Io(i) => {
                    let m = io_metric(i);
                    s.add(IO_OPS, at, 1);
                    s.add(IO_BYTES, at, ev.bytes.get());
                    s.add_span(IO_TIME, span, start, end);
                    s.add(m, at, 1);
                    s.add_span(m + 1, span, start, end);
                    s.add(m + 2, at, ev.bytes.get());
                }
                op::OpKind::Detail => {
                    // A request completed: its bytes go to the function that
                    // posted it, as in the MPI profile.
                    if let Some(msg) = msg.filter(|m| FUNCTIONS[m.func].class != Class::Sendrecv) {
                        s.add(mpi_metric(msg.func) + 2, at, msg.bytes);
                        if msg.file {
                            s.add(IO_BYTES, at, msg.bytes);
                        }
                    }
                }
                _ => {}
            }
            if let Some(msg) = msg.filter(|m| m.send && !m.file) {
                s.add(P2P_MESSAGES, at, 1);
                s.add(P2P_BYTES, at, msg.bytes);
            }
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Analysis for TimeSlices {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Box<dyn RankState> {
        Box::<Rank>::default()
    }
    fn finish(&self, cx: &Finish<'_>, out: &mut Program) {
        let mut ranks: Vec<Series> = cx
            .states::<Rank>()
            .zip(&cx.ranks)
            .map(|(r, view)| {
                r.series
                    .clone()
                    .unwrap_or_else(|| Series::new(view.info.slice_shift(), view.info.slices()))
            })
            .collect();
        let Some(shift) = ranks.iter().map(|s| s.shift).max() else {
            return;
        };
        for s in &mut ranks {
            while s.shift < shift {
                s.coarsen();
            }
        }
        let used = ranks
            .iter()
            .flat_map(|s| s.metrics.iter().flatten())
            .filter_map(|m| m.iter().rposition(|&v| v > 0))
            .max()
            .map_or(0, |last| last + 1);
        let t = &mut out.timeslices;
        t.slice_ns = 1u64 << shift;
        t.origin_ns = cx.ranks.first().map_or(0, |r| r.info.origin_ns());
        for m in 0..metric_count() {
            if ranks.iter().all(|s| s.metrics[m].is_none()) {
                continue;
            }
            let per_rank = ranks
                .iter()
                .map(|s| match &s.metrics[m] {
                    Some(v) => v[..used].to_vec(),
                    None => vec![0; used],
                })
                .collect();
            t.metrics.insert(metric_name(m), per_rank);
        }
    }
}
