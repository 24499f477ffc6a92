//! Trace exports: a kept trace ([`hark_analyses::trace::Trace`], read from
//! the store by the server) written for the tools that read traces.
//!
//! | function          | writes                     | read by                        |
//! |-------------------|----------------------------|--------------------------------|
//! | [`write_perfetto`]| `trace.perfetto-trace`     | ui.perfetto.dev, `trace_processor` |
//! | [`write_otf2`]    | `trace.otf2/` (an archive) | Vampir, Scalasca, `otf2-print` |
//!
//! Both put every event on the aligned clock (the stream's clock mapping)
//! and both see the same [`Timeline`]: per stream and thread, the calls
//! (MPI, I/O) and user regions as properly nested slices, and the messages
//! matched send to receive. `docs/trace.md` says what each file holds.

mod otf2;
mod perfetto;

pub use otf2::{write_otf2, OTF2_AVAILABLE};
pub use perfetto::{encode_perfetto, write_perfetto};

use hark_analyses::trace::{Matched, Msg, Trace};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Event};
use std::borrow::Cow;
use std::collections::HashMap;

/// What a slice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SliceKind {
    /// A user region (`hark_region_begin`/`end`).
    Region,
    /// An MPI call, with its index in [`FUNCTIONS`].
    Mpi(usize),
    /// A POSIX or STDIO call, with its index in [`op::IO_NAMES`].
    Io(usize),
}

/// One slice: a call or a region, on the aligned clock.
#[derive(Clone, Debug)]
pub struct Slice {
    /// What it is.
    pub kind: SliceKind,
    /// Its name: the function, or the region's name.
    pub name: Cow<'static, str>,
    /// Enter, aligned clock (ns since the epoch).
    pub start: u64,
    /// Leave, aligned clock; never before `start`, never after its parent's.
    pub end: u64,
    /// The event it comes from (a call's record, or a region's begin).
    pub event: usize,
}

/// One thread of one stream: its slices in enter order and how they nest.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    /// Index of the stream in [`Trace::streams`].
    pub stream: usize,
    /// The thread's index in its process.
    pub thread: u16,
    /// The slices, in enter order (a parent before its children).
    pub slices: Vec<Slice>,
    /// Enter (`true`) and leave steps, in time order, properly nested.
    pub steps: Vec<(u64, bool, usize)>,
}

/// Everything both exports draw from a trace.
#[derive(Debug, Default)]
pub struct Timeline {
    /// One lane per (stream, thread) that has a slice.
    pub lanes: Vec<Lane>,
    /// Messages matched send to receive.
    pub messages: Vec<Matched>,
    /// Every message side the trace holds (matched or not), by the slice
    /// whose call completed it: (event that completed it, the message).
    pub sides: HashMap<(usize, usize), Vec<(usize, Msg)>>,
    /// Where each (stream, event) that is a slice or completes a message
    /// landed: (lane, slice).
    pub at: HashMap<(usize, usize), (usize, usize)>,
}

impl Timeline {
    /// Builds the timeline of `trace`.
    pub fn of(trace: &Trace) -> Timeline {
        let mut t = Timeline::default();
        for (si, s) in trace.streams.iter().enumerate() {
            let mut per_thread: HashMap<u16, Vec<Slice>> = HashMap::new();
            // Open regions per thread: (name id, start, event).
            let mut open: HashMap<u16, Vec<(u32, u64, usize)>> = HashMap::new();
            let mut last_end = 0u64;
            for (i, e) in s.events.iter().enumerate() {
                let thread = e.thread.get();
                let start = s.mapping.common(e.start.get());
                let end = s.mapping.common(e.end.get()).max(start);
                last_end = last_end.max(end);
                let kind = match op::kind(e.op()) {
                    op::OpKind::Mpi(f) => SliceKind::Mpi(f),
                    op::OpKind::Io(f) => SliceKind::Io(f),
                    _ => {
                        let stack = open.entry(thread).or_default();
                        match e.op() {
                            op::REGION_BEGIN => stack.push((e.obj.get(), start, i)),
                            op::REGION_END => {
                                if let Some(k) = stack.iter().rposition(|r| r.0 == e.obj.get()) {
                                    // Regions left without their own end
                                    // close with the one that encloses them.
                                    for (id, from, ev) in stack.drain(k..).rev() {
                                        per_thread.entry(thread).or_default().push(Slice {
                                            kind: SliceKind::Region,
                                            name: Cow::Owned(region_name(s.name(id), id)),
                                            start: from,
                                            end: start.max(from),
                                            event: ev,
                                        });
                                    }
                                }
                            }
                            _ => {}
                        }
                        continue;
                    }
                };
                per_thread.entry(thread).or_default().push(Slice {
                    kind,
                    name: Cow::Borrowed(op::name(e.op())),
                    start,
                    end,
                    event: i,
                });
            }
            // Regions still open at the end of what was kept close there.
            for (thread, stack) in open {
                for (id, from, ev) in stack {
                    per_thread.entry(thread).or_default().push(Slice {
                        kind: SliceKind::Region,
                        name: Cow::Owned(region_name(s.name(id), id)),
                        start: from,
                        end: last_end.max(from),
                        event: ev,
                    });
                }
            }
            let mut threads: Vec<_> = per_thread.into_iter().collect();
            threads.sort_by_key(|(t, _)| *t);
            for (thread, slices) in threads {
                let lane = nest(si, thread, slices);
                let li = t.lanes.len();
                for (k, sl) in lane.slices.iter().enumerate() {
                    t.at.insert((si, sl.event), (li, k));
                }
                // A completion record belongs to the call just before it on
                // its thread (`MPI_Wait` and its completions).
                let mut last_call = None;
                for (i, e) in s.events.iter().enumerate() {
                    if e.thread.get() != thread {
                        continue;
                    }
                    match op::kind(e.op()) {
                        op::OpKind::Mpi(_) => last_call = t.at.get(&(si, i)).copied(),
                        op::OpKind::Detail => {
                            if let Some(at) = last_call {
                                t.at.insert((si, i), at);
                            }
                        }
                        _ => {}
                    }
                }
                t.lanes.push(lane);
            }
            for (i, m) in s.messages() {
                if let Some(&at) = t.at.get(&(si, i)) {
                    t.sides.entry(at).or_default().push((i, m));
                }
            }
        }
        t.messages = trace
            .matched()
            .into_iter()
            .filter(|m| t.at.contains_key(&m.send) && t.at.contains_key(&m.recv))
            .collect();
        t
    }
}

fn region_name(name: Option<&str>, id: u32) -> String {
    name.map_or_else(|| format!("region {id}"), str::to_string)
}

/// Orders one thread's slices so that they nest: a slice that starts inside
/// another ends inside it (clamped if the clock says otherwise), and an
/// outer one comes first when two start together.
fn nest(stream: usize, thread: u16, mut slices: Vec<Slice>) -> Lane {
    slices.sort_by(|a, b| {
        (a.start, std::cmp::Reverse(a.end), a.kind, a.event).cmp(&(
            b.start,
            std::cmp::Reverse(b.end),
            b.kind,
            b.event,
        ))
    });
    let mut steps = Vec::with_capacity(slices.len() * 2);
    let mut stack: Vec<usize> = Vec::new();
    for k in 0..slices.len() {
        while let Some(&top) = stack.last() {
            if slices[top].end <= slices[k].start && slices[top].end < slices[k].end
                || slices[top].end < slices[k].start
            {
                steps.push((slices[top].end, false, top));
                stack.pop();
            } else {
                break;
            }
        }
        if let Some(&top) = stack.last() {
            slices[k].end = slices[k].end.min(slices[top].end);
        }
        steps.push((slices[k].start, true, k));
        stack.push(k);
    }
    while let Some(top) = stack.pop() {
        steps.push((slices[top].end, false, top));
    }
    Lane {
        stream,
        thread,
        slices,
        steps,
    }
}

/// The OTF2 collective operation of an MPI collective, by name.
pub(crate) fn collective_class(func: usize) -> bool {
    matches!(
        FUNCTIONS[func].class,
        Class::Collective | Class::Icollective
    )
}

/// Bytes a collective's record says it received (`extra`), if any.
#[cfg_attr(not(feature = "otf2"), allow(dead_code))]
pub(crate) fn received(e: &Event) -> u64 {
    match e.extra.get() {
        hark_wire::EXTRA_NONE => 0,
        x => x,
    }
}
