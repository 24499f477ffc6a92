//! Selective traces: which raw events to keep, and the kept trace as a value.
//!
//! Hark reduces events in passing; `hark run --trace[=SPEC]` also keeps some
//! of them, raw, for the tools that read traces (Vampir through OTF2,
//! Perfetto). This module is the pure half of that: [`Selection`] parses
//! the SPEC, a [`Filter`] per stream decides event by event (it follows the
//! stream's regions and iteration marks, so it must see every event, in
//! order), and [`Trace`] is a kept trace read back, with each stream's clock
//! [`Mapping`] so that every event can be put on the aligned clock. Where
//! the events are stored, and how, is the server's business
//! (`docs/trace.md`).

use crate::requests::RequestTable;
use hark_analyses::clock::Mapping;
pub use hark_analyses::Msg;
use hark_wire::{op, Def, Event, NameKind};
use std::collections::HashSet;

/// What `--trace=SPEC` asks to keep. Terms are separated by commas; a term
/// repeated adds alternatives (`ranks=0-1,ranks=3`); terms of different
/// kinds must all hold (`ranks=0,region=solve`: rank 0's events inside
/// `solve`). No term keeps everything.
///
/// | term               | keeps                                                   |
/// |--------------------|---------------------------------------------------------|
/// | `ranks=A-B`, `=A`  | the world ranks `A..=B`                                 |
/// | `window=S-E`       | events overlapping `[S, E]` seconds after the start     |
/// | `iterations=A-B`   | from the mark numbered `A` up to the mark after `B`     |
/// | `region=NAME`      | events inside the user region `NAME` (itself included)  |
/// | `auto`, `auto=N`   | the `N` (default [`AUTO_WINDOWS`]) time windows holding the most wait-state time |
/// | `all`              | everything (the same as no SPEC)                        |
///
/// `auto` is a storage policy more than a filter: the other terms still
/// choose events, and the server keeps them in windows of
/// [`AUTO_WINDOW_NS`] until the analyses say which windows waited most.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// World rank ranges, inclusive; empty: every rank.
    pub ranks: Vec<(i32, i32)>,
    /// Windows in ns since the program's start; empty: any time.
    pub windows: Vec<(u64, u64)>,
    /// Iteration ranges (numbers of `hark_mark`), inclusive; empty: any.
    pub iterations: Vec<(u64, u64)>,
    /// Region names; empty: anywhere.
    pub regions: Vec<String>,
    /// `auto`: how many windows around the costliest wait states to keep.
    pub auto: Option<usize>,
}

/// Windows `auto` keeps unless told (`auto=N`).
pub const AUTO_WINDOWS: usize = 4;

/// The width of an `auto` window, in ns: 2^27 ns, about 134 ms.
pub const AUTO_WINDOW_SHIFT: u32 = 27;

/// [`AUTO_WINDOW_SHIFT`] as a width.
pub const AUTO_WINDOW_NS: u64 = 1 << AUTO_WINDOW_SHIFT;

impl Selection {
    /// Parses a SPEC; the error says which term is wrong and what a right
    /// one looks like.
    pub fn parse(spec: &str) -> Result<Selection, String> {
        let mut s = Selection::default();
        for term in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if term == "all" {
                continue;
            }
            if term == "auto" {
                s.auto = Some(AUTO_WINDOWS);
                continue;
            }
            let Some((key, value)) = term.split_once('=') else {
                return Err(format!(
                    "`{term}` is not a trace term: write ranks=A-B, window=S-E (seconds), iterations=A-B, region=NAME, auto, auto=N or all"
                ));
            };
            match key.trim() {
                "ranks" | "rank" => {
                    let (a, b) = range(value, |v| v.parse::<i32>().ok().filter(|r| *r >= 0))
                        .ok_or_else(|| format!("`{term}`: ranks are A or A-B, e.g. ranks=0-3"))?;
                    s.ranks.push((a, b));
                }
                "window" => {
                    let secs = |v: &str| {
                        let v = v.trim().trim_end_matches('s');
                        v.parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x >= 0.0)
                            .map(|x| (x * 1e9) as u64)
                    };
                    let (a, b) = range(value, secs).ok_or_else(|| {
                        format!("`{term}`: a window is START-END in seconds after the program's start, e.g. window=1.5-3")
                    })?;
                    s.windows.push((a, b));
                }
                "iterations" | "iteration" | "iter" => {
                    let (a, b) = range(value, |v| v.parse::<u64>().ok()).ok_or_else(|| {
                        format!("`{term}`: iterations are A or A-B (numbers of hark_mark), e.g. iterations=10-20")
                    })?;
                    s.iterations.push((a, b));
                }
                "auto" => {
                    let n = value.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("`{term}`: auto=N keeps the N windows with the most waiting, e.g. auto=4")
                    })?;
                    s.auto = Some(n);
                }
                "region" | "regions" if !value.trim().is_empty() => {
                    s.regions.push(value.trim().to_string())
                }
                _ => {
                    return Err(format!(
                        "`{term}` is not a trace term: write ranks=A-B, window=S-E (seconds), iterations=A-B, region=NAME, auto, auto=N or all"
                    ))
                }
            }
        }
        Ok(s)
    }

    /// Whether world rank `rank` is kept at all.
    pub fn keeps_rank(&self, rank: i32) -> bool {
        self.ranks.is_empty() || self.ranks.iter().any(|&(a, b)| (a..=b).contains(&rank))
    }

    /// Whether every event is chosen (no filtering term; `auto` may still
    /// keep only some windows of them).
    pub fn is_all(&self) -> bool {
        self.ranks.is_empty()
            && self.windows.is_empty()
            && self.iterations.is_empty()
            && self.regions.is_empty()
    }
}

/// `A` or `A-B` (with `A <= B`) parsed by `one`.
fn range<T: PartialOrd + Copy>(v: &str, one: impl Fn(&str) -> Option<T>) -> Option<(T, T)> {
    let (a, b) = match v.split_once('-') {
        Some((a, b)) => (one(a.trim())?, one(b.trim())?),
        None => {
            let a = one(v.trim())?;
            (a, a)
        }
    };
    (a <= b).then_some((a, b))
}

/// One stream's decision, event by event. Feed it the stream's definitions
/// ([`Filter::define`]) and every event in order ([`Filter::keep`]).
#[derive(Debug)]
pub struct Filter {
    selection: Selection,
    /// Local name ids of the selected regions.
    chosen: HashSet<u32>,
    /// Per thread: how many selected regions are open.
    inside: Vec<u32>,
    /// Whether the last mark seen was in a selected iteration range.
    in_iteration: bool,
}

impl Filter {
    /// A filter for one stream.
    pub fn new(selection: Selection) -> Filter {
        Filter {
            selection,
            chosen: HashSet::new(),
            inside: Vec::new(),
            in_iteration: false,
        }
    }

    /// Learns the stream's definitions (region names).
    pub fn define(&mut self, defs: &[Def]) {
        for d in defs {
            if let Def::Name {
                id,
                kind: NameKind::Region,
                name,
            } = d
            {
                if self.selection.regions.iter().any(|r| r == name) {
                    self.chosen.insert(*id);
                }
            }
        }
    }

    /// Whether to keep `ev`, an event of world rank `rank` that starts
    /// `since_start` ns and ends `until_end` ns after the program's start.
    pub fn keep(&mut self, ev: &Event, rank: i32, since_start: u64, until_end: u64) -> bool {
        let s = &self.selection;
        let code = ev.op();
        let window = |since_start: u64, until_end: u64| {
            s.windows.is_empty()
                || s.windows
                    .iter()
                    .any(|&(a, b)| since_start <= b && until_end >= a)
        };
        // Samples are readings between two times, not calls on a timeline:
        // only counter and sensor readings are kept (the OTF2 export's
        // metrics), for the ranks and windows chosen, whatever the region
        // or iteration (a reading spans them).
        if op::kind(code) == op::OpKind::Sample {
            let metric =
                code == op::COUNTER_SLICE || (op::SENSOR_BASE..=op::SENSOR_LAST).contains(&code);
            return metric && s.keeps_rank(rank) && window(since_start, until_end);
        }
        // Regions and marks are followed whatever the rank and window.
        let mut region = s.regions.is_empty();
        if !s.regions.is_empty() {
            let t = ev.thread.get() as usize;
            if self.inside.len() <= t {
                self.inside.resize(t + 1, 0);
            }
            let chosen = self.chosen.contains(&ev.obj.get());
            match code {
                op::REGION_BEGIN if chosen => {
                    self.inside[t] += 1;
                    region = true;
                }
                op::REGION_END if chosen => {
                    region = self.inside[t] > 0;
                    self.inside[t] = self.inside[t].saturating_sub(1);
                }
                _ => region = self.inside[t] > 0,
            }
        }
        let mut iteration = s.iterations.is_empty();
        if !s.iterations.is_empty() {
            if code == op::MARK {
                let n = ev.bytes.get();
                self.in_iteration = s.iterations.iter().any(|&(a, b)| (a..=b).contains(&n));
            }
            iteration = self.in_iteration;
        }
        region && iteration && window(since_start, until_end) && s.keeps_rank(rank)
    }
}

/// One stream of a kept trace, as read back from the store.
#[derive(Clone, Debug)]
pub struct TraceStream {
    /// World rank (`-1` for a process without MPI).
    pub world_rank: i32,
    /// Program name.
    pub program: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// The probe clock's mapping onto the run's aligned clock.
    pub mapping: Mapping,
    /// Every definition of the stream (local ids, as in its events).
    pub defs: Vec<Def>,
    /// The kept events, in stream order, on the probe's clock (ns).
    pub events: Vec<Event>,
    /// Events the selection chose that the store's cap dropped.
    pub dropped: u64,
}

impl TraceStream {
    /// The world ranks of communicator `local` (as in events' `obj`), or
    /// `None` if the stream never defined it.
    pub fn comm_members(&self, local: u32) -> Option<&[i32]> {
        self.defs.iter().find_map(|d| match d {
            Def::Comm { id, members, .. } if *id == local => Some(members.as_slice()),
            _ => None,
        })
    }

    /// Every communicator the stream defined: local id -> its world ranks
    /// (the first definition of an id, as [`TraceStream::comm_members`]
    /// finds it). One lookup per id for code that asks per event.
    pub fn comms(&self) -> std::collections::HashMap<u32, &[i32]> {
        self.defs
            .iter()
            .rev()
            .filter_map(|d| match d {
                Def::Comm { id, members, .. } => Some((*id, members.as_slice())),
                _ => None,
            })
            .collect()
    }

    /// The name of name id `local` (a region, counter or mark).
    pub fn name(&self, local: u32) -> Option<&str> {
        self.defs.iter().find_map(|d| match d {
            Def::Name { id, name, .. } if *id == local => Some(name.as_str()),
            _ => None,
        })
    }

    /// The path of file id `local`.
    pub fn file(&self, local: u32) -> Option<&str> {
        self.defs.iter().find_map(|d| match d {
            Def::File { id, path } if *id == local => Some(path.as_str()),
            _ => None,
        })
    }

    /// The point-to-point messages the kept events complete, each with the
    /// index of the event that completes it — the same rule the analyses
    /// count messages by (a blocking call's own record, or the completion
    /// record after a `MPI_Wait*`).
    pub fn messages(&self) -> Vec<(usize, Msg)> {
        let mut tracker = RequestTable::default();
        self.events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| tracker.step(e).map(|m| (i, m)))
            .collect()
    }
}

/// A kept trace: every stream the store holds, ordered by world rank.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The streams.
    pub streams: Vec<TraceStream>,
}

/// A message matched across two streams of a [`Trace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matched {
    /// Sending stream (index in [`Trace::streams`]) and its completing event.
    pub send: (usize, usize),
    /// Receiving stream and its completing event.
    pub recv: (usize, usize),
    /// Bytes received.
    pub bytes: u64,
}

impl Trace {
    /// Every event of the trace, on the aligned clock: the earliest start.
    pub fn first_ns(&self) -> u64 {
        self.streams
            .iter()
            .filter_map(|s| s.events.first().map(|e| s.mapping.common(e.start.get())))
            .min()
            .unwrap_or(0)
    }

    /// The messages of the trace matched send to receive. Within a channel
    /// (communicator members, source, destination, tag) MPI does not let
    /// messages overtake, so the n-th send matches the n-th receive, as in
    /// the analyses' matching. A message whose other side is not in the
    /// trace (another rank, outside the window) is left out.
    pub fn matched(&self) -> Vec<Matched> {
        let sides: Vec<Vec<(usize, Msg)>> = self.streams.iter().map(|s| s.messages()).collect();
        self.matched_from(&sides)
    }

    /// [`Trace::matched`] from each stream's [`TraceStream::messages`],
    /// already made (`sides[i]` is stream `i`'s), in the same order:
    /// receives in stream order, each with its channel's oldest unmatched
    /// send. A channel is a small copyable key (the communicator's member
    /// list numbered once per distinct list), so matching allocates
    /// nothing per message.
    pub fn matched_from(&self, sides: &[Vec<(usize, Msg)>]) -> Vec<Matched> {
        use std::collections::{HashMap, VecDeque};
        // Distinct member lists, numbered; per stream, local communicator
        // id -> that number (`u32::MAX`: not defined, the empty list).
        let mut lists: HashMap<&[i32], u32> = HashMap::new();
        lists.insert(&[], u32::MAX);
        let comm_numbers: Vec<HashMap<u32, u32>> = self
            .streams
            .iter()
            .map(|s| {
                s.comms()
                    .into_iter()
                    .map(|(id, members)| {
                        let n = lists.len() as u32;
                        (id, *lists.entry(members).or_insert(n))
                    })
                    .collect()
            })
            .collect();
        type Key = (u32, i32, i32, i32);
        let mut sends: HashMap<Key, VecDeque<(usize, usize)>> = HashMap::new();
        let mut recvs: Vec<(Key, (usize, usize), u64)> = Vec::new();
        for (si, s) in self.streams.iter().enumerate() {
            for &(i, m) in sides.get(si).map_or(&[][..], Vec::as_slice) {
                let e = &s.events[i];
                let comm = comm_numbers[si]
                    .get(&e.obj.get())
                    .copied()
                    .unwrap_or(u32::MAX);
                let tag = e.tag.get();
                if m.send {
                    sends
                        .entry((comm, s.world_rank, m.peer, tag))
                        .or_default()
                        .push_back((si, i));
                } else {
                    recvs.push(((comm, m.peer, s.world_rank, tag), (si, i), m.bytes));
                }
            }
        }
        let mut out = Vec::with_capacity(recvs.len());
        for (key, at, bytes) in recvs {
            if let Some(send) = sends.get_mut(&key).and_then(VecDeque::pop_front) {
                out.push(Matched {
                    send,
                    recv: at,
                    bytes,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_parses_into_its_terms_and_a_bad_one_says_what_to_write() {
        let s =
            Selection::parse("ranks=0-1,ranks=3,window=1.5-2s,iterations=4,region=solve").unwrap();
        assert_eq!(s.ranks, vec![(0, 1), (3, 3)]);
        assert_eq!(s.windows, vec![(1_500_000_000, 2_000_000_000)]);
        assert_eq!(s.iterations, vec![(4, 4)]);
        assert_eq!(s.regions, vec!["solve".to_string()]);
        assert_eq!(Selection::parse("auto").unwrap().auto, Some(AUTO_WINDOWS));
        assert_eq!(Selection::parse("ranks=0,auto=2").unwrap().auto, Some(2));
        assert!(Selection::parse("").unwrap().is_all());
        assert!(Selection::parse("all").unwrap().is_all());
        for bad in [
            "ranks=3-1",
            "window=x",
            "colour=red",
            "ranks",
            "region=",
            "auto=0",
        ] {
            let e = Selection::parse(bad).unwrap_err();
            assert!(e.contains(bad.split('=').next().unwrap()), "{bad}: {e}");
        }
    }

    #[test]
    fn a_filter_keeps_what_is_inside_a_chosen_region_and_iteration() {
        let mut f = Filter::new(Selection::parse("region=solve,iterations=2").unwrap());
        f.define(&[Def::Name {
            id: 7,
            kind: NameKind::Region,
            name: "solve".into(),
        }]);
        let user = |code, obj, n| {
            let mut e = Event::new(code, 0, 0);
            e.obj.set(obj);
            e.bytes.set(n);
            e
        };
        let barrier = Event::new(op::mpi_op("MPI_Barrier").unwrap(), 0, 1);
        let kept: Vec<bool> = [
            user(op::MARK, 1, 1),
            user(op::REGION_BEGIN, 7, 0),
            barrier,
            user(op::REGION_END, 7, 0),
            user(op::MARK, 1, 2),
            barrier,
            user(op::REGION_BEGIN, 7, 0),
            barrier,
            user(op::REGION_END, 7, 0),
            user(op::MARK, 1, 3),
            user(op::REGION_BEGIN, 7, 0),
            barrier,
        ]
        .iter()
        .map(|e| f.keep(e, 0, 0, 0))
        .collect();
        assert_eq!(
            kept,
            [false, false, false, false, false, false, true, true, true, false, false, false]
        );
    }

    #[test]
    fn a_window_keeps_events_that_overlap_it() {
        let mut f = Filter::new(Selection::parse("window=1-2,ranks=1").unwrap());
        let e = Event::new(op::mpi_op("MPI_Barrier").unwrap(), 0, 1);
        assert!(f.keep(&e, 1, 500_000_000, 1_000_000_000));
        assert!(!f.keep(&e, 0, 500_000_000, 1_000_000_000));
        assert!(!f.keep(&e, 1, 2_000_000_001, 3_000_000_000));
    }

    #[test]
    fn counter_and_sensor_readings_are_kept_for_the_chosen_ranks_and_windows_only() {
        let mut f = Filter::new(Selection::parse("window=1-2,ranks=1,region=solve").unwrap());
        for code in [op::COUNTER_SLICE, op::SENSOR_CPU, op::SENSOR_LOAD] {
            let e = Event::new(code, 0, 1);
            // Outside any region: a reading spans them.
            assert!(f.keep(&e, 1, 500_000_000, 1_000_000_000), "{code:#x}");
            assert!(!f.keep(&e, 0, 500_000_000, 1_000_000_000), "{code:#x}");
            assert!(!f.keep(&e, 1, 2_000_000_001, 3_000_000_000), "{code:#x}");
        }
        for code in [op::CPU_TASK, op::COUNTER_REGION, op::COUNTER_MPI] {
            let e = Event::new(code, 0, 1);
            assert!(!f.keep(&e, 1, 500_000_000, 1_000_000_000), "{code:#x}");
        }
    }
}
