//! Time slices: the main metrics per rank over time, in a fixed number of
//! slices that coarsen as the run grows.
//!
//! A slice starts `1 << slice_shift` ns wide (about 1 ms) and doubles as the
//! run grows (see `slices.rs`), so memory is `slices × metrics × ranks`
//! whatever the run's length. At the end, ranks are brought to the widest
//! width any of them reached; the regions' series join at the same width.
//!
//! Durations are split over the slices a call spans; counts and bytes go to
//! the slice where the call started.
//!
//! Metrics: `mpi_time_ns`, `mpi_calls`, `p2p_messages`, `p2p_bytes` (sent),
//! `collective_bytes` (sent), `io_ops`, `io_bytes`, `io_time_ns`, and per
//! function `<name>.calls`, `<name>.time_ns`, `<name>.bytes` for every MPI,
//! POSIX and STDIO function called (`MPI_Send.time_ns`, `write.bytes`).

use crate::analysis::{Analysis, Finish, RankState, Sensitivity, Spec};
use crate::ks::mpi_profile::{completion_bytes, own_bytes};
use crate::slices::{publish, Series};
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
                    if own_bytes(i) {
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
                    if let Some(msg) = msg.filter(|m| completion_bytes(m.func)) {
                        s.add(mpi_metric(msg.func) + 2, at, msg.bytes);
                    }
                }
                _ => {}
            }
            if let Some(msg) = msg.filter(|m| m.send) {
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
        let series = cx.states::<Rank>().map(|r| r.series.as_ref());
        publish(cx, &mut out.timeslices, series, |_, m| Some(metric_name(m)));
    }
}
