//! Trace exports: a kept trace ([`hark_engine::trace::Trace`], read from
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
//!
//! Where a call was made from travels as its source location ([`Sources`]),
//! when the caller names the trace's call sites: an OTF2 attribute on the
//! call's Enter, debug annotations on the Perfetto slice.

mod otf2;
mod perfetto;

pub use otf2::{write_otf2, OTF2_AVAILABLE, OTF2_MISSING};
pub use perfetto::{encode_perfetto, write_perfetto};

use hark_engine::trace::{Matched, Msg, Trace};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::{op, Def, Event};
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

/// A source location: file and line.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source {
    /// Source file, as the debug information names it.
    pub file: String,
    /// Line in it.
    pub line: u32,
}

/// The source location of each call site of a trace's streams, by
/// (stream, call-site id): what the exports attach to the calls made there.
/// Empty when nothing names them ([`Sources::default`]).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    of: HashMap<(usize, u16), Source>,
}

impl Sources {
    /// Names every call site `trace`'s streams define with `place`, which
    /// is given a frame as the object's path, its build id and the return
    /// address less the object's load bias (as the call-site analysis keys
    /// them), and gives the file and line if it knows them.
    pub fn of(trace: &Trace, place: impl Fn(&str, &str, u64) -> Option<Source>) -> Sources {
        let mut sources = Sources::default();
        for (si, s) in trace.streams.iter().enumerate() {
            // Objects as defined so far: a call site lies in one sent
            // before it; the latest holding the address wins.
            let mut objects: Vec<(&str, &str, u64, u64, u64)> = Vec::new();
            for d in &s.defs {
                match d {
                    Def::Object {
                        path,
                        build_id,
                        bias,
                        start,
                        size,
                    } => objects.push((path, build_id, *bias, *start, start.saturating_add(*size))),
                    Def::Callsite { id, frames } => {
                        let (Ok(id), Some(&ret)) = (u16::try_from(*id), frames.first()) else {
                            continue;
                        };
                        let object = objects.iter().rev().find(|o| (o.3..o.4).contains(&ret));
                        let Some(&(path, build_id, bias, _, _)) = object else {
                            continue;
                        };
                        if let Some(src) = place(path, build_id, ret.wrapping_sub(bias)) {
                            sources.of.insert((si, id), src);
                        }
                    }
                    _ => {}
                }
            }
        }
        sources
    }

    /// Where event `e` of stream `stream` was called from, if known.
    pub fn of_event(&self, stream: usize, e: &Event) -> Option<&Source> {
        match e.callsite() {
            0 => None,
            id => self.of.get(&(stream, id)),
        }
    }

    /// The distinct locations, sorted.
    pub fn distinct(&self) -> Vec<&Source> {
        let mut all: Vec<&Source> = self.of.values().collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Where an event landed: (lane, slice), or nowhere.
const NOWHERE: (u32, u32) = (u32::MAX, u32::MAX);

/// Everything both exports draw from a trace.
///
/// Built in passes over flat vectors, with no map entry per event: a 10^7
/// event trace has as many slices, and the exports spent most of their time
/// hashing them (`BENCHMARKS.md`).
#[derive(Debug, Default)]
pub struct Timeline {
    /// One lane per (stream, thread) that has a slice.
    pub lanes: Vec<Lane>,
    /// Messages matched send to receive.
    pub messages: Vec<Matched>,
    /// Per stream, the message sides its kept events complete, in stream
    /// order: (event that completes it, the message) —
    /// [`TraceStream::messages`](hark_engine::trace::TraceStream::messages).
    pub sides_of_stream: Vec<Vec<(usize, Msg)>>,
    /// Per stream and event: the (lane, slice) it is or belongs to.
    at: Vec<Vec<(u32, u32)>>,
    /// Every message side by the slice whose call completed it, ordered by
    /// (lane, slice) and then stream order: (lane, slice, event, message).
    sides: Vec<(u32, u32, usize, Msg)>,
}

impl Timeline {
    /// Builds the timeline of `trace`.
    pub fn of(trace: &Trace) -> Timeline {
        let mut t = Timeline::default();
        for (si, s) in trace.streams.iter().enumerate() {
            // Slices and open regions, by thread (threads are small numbers).
            let mut per_thread: Vec<Vec<Slice>> = Vec::new();
            // Open regions per thread: (name id, start, event).
            let mut open: Vec<Vec<(u32, u64, usize)>> = Vec::new();
            let mut names: HashMap<u32, Cow<'static, str>> = HashMap::new();
            let mut region = |id: u32| {
                names
                    .entry(id)
                    .or_insert_with(|| Cow::Owned(region_name(s.name(id), id)))
                    .clone()
            };
            let mut last_end = 0u64;
            for (i, e) in s.events.iter().enumerate() {
                let thread = e.thread.get() as usize;
                if per_thread.len() <= thread {
                    per_thread.resize_with(thread + 1, Vec::new);
                    open.resize_with(thread + 1, Vec::new);
                }
                let start = s.mapping.common(e.start.get());
                let end = s.mapping.common(e.end.get()).max(start);
                last_end = last_end.max(end);
                let kind = match op::kind(e.op()) {
                    op::OpKind::Mpi(f) => SliceKind::Mpi(f),
                    op::OpKind::Io(f) => SliceKind::Io(f),
                    _ => {
                        let stack = &mut open[thread];
                        match e.op() {
                            op::REGION_BEGIN => stack.push((e.obj.get(), start, i)),
                            op::REGION_END => {
                                if let Some(k) = stack.iter().rposition(|r| r.0 == e.obj.get()) {
                                    // Regions left without their own end
                                    // close with the one that encloses them.
                                    for (id, from, ev) in stack.drain(k..).rev() {
                                        per_thread[thread].push(Slice {
                                            kind: SliceKind::Region,
                                            name: region(id),
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
                per_thread[thread].push(Slice {
                    kind,
                    name: Cow::Borrowed(op::name(e.op())),
                    start,
                    end,
                    event: i,
                });
            }
            // Regions still open at the end of what was kept close there.
            for (thread, stack) in open.into_iter().enumerate() {
                for (id, from, ev) in stack {
                    per_thread[thread].push(Slice {
                        kind: SliceKind::Region,
                        name: region(id),
                        start: from,
                        end: last_end.max(from),
                        event: ev,
                    });
                }
            }
            let mut at = vec![NOWHERE; s.events.len()];
            let first_lane = t.lanes.len();
            for (thread, slices) in per_thread.into_iter().enumerate() {
                if slices.is_empty() {
                    continue;
                }
                let lane = nest(si, thread as u16, slices);
                let li = t.lanes.len() as u32;
                for (k, sl) in lane.slices.iter().enumerate() {
                    at[sl.event] = (li, k as u32);
                }
                t.lanes.push(lane);
            }
            // A completion record belongs to the call just before it on
            // its thread (`MPI_Wait` and its completions).
            let mut last_call: Vec<(u32, u32)> = Vec::new();
            for (i, e) in s.events.iter().enumerate() {
                let thread = e.thread.get() as usize;
                match op::kind(e.op()) {
                    op::OpKind::Mpi(_) => {
                        if last_call.len() <= thread {
                            last_call.resize(thread + 1, NOWHERE);
                        }
                        last_call[thread] = at[i];
                    }
                    op::OpKind::Detail => {
                        if let Some(&call) = last_call.get(thread).filter(|c| **c != NOWHERE) {
                            at[i] = call;
                        }
                    }
                    _ => {}
                }
            }
            debug_assert!(t.lanes[first_lane..].iter().all(|l| l.stream == si));
            let messages = s.messages();
            for &(i, m) in &messages {
                let (li, k) = at[i];
                if (li, k) != NOWHERE {
                    t.sides.push((li, k, i, m));
                }
            }
            t.sides_of_stream.push(messages);
            t.at.push(at);
        }
        // Stable: sides of one slice stay in stream order.
        t.sides.sort_by_key(|&(li, k, _, _)| (li, k));
        t.messages = trace
            .matched_from(&t.sides_of_stream)
            .into_iter()
            .filter(|m| t.at(m.send).is_some() && t.at(m.recv).is_some())
            .collect();
        t
    }

    /// Where event `event` of stream `stream` landed: the (lane, slice)
    /// that is it, or, for a completion record, the call it belongs to.
    pub fn at(&self, (stream, event): (usize, usize)) -> Option<(usize, usize)> {
        let (li, k) = *self.at.get(stream)?.get(event)?;
        ((li, k) != NOWHERE).then_some((li as usize, k as usize))
    }

    /// The message sides the call of slice `k` of lane `li` completed, in
    /// stream order: (event that completes it, the message).
    pub fn sides(&self, li: usize, k: usize) -> impl Iterator<Item = (usize, Msg)> + '_ {
        let key = (li as u32, k as u32);
        let from = self.sides.partition_point(|x| (x.0, x.1) < key);
        self.sides[from..]
            .iter()
            .take_while(move |x| (x.0, x.1) == key)
            .map(|x| (x.2, x.3))
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
#[cfg_attr(not(hark_otf2), allow(dead_code))]
pub(crate) fn received(e: &Event) -> u64 {
    match e.extra() {
        hark_wire::EXTRA_NONE => 0,
        x => x,
    }
}
