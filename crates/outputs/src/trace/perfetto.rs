//! A Perfetto trace (protobuf `perfetto.protos.Trace`), encoded by hand:
//! the few messages it needs are a dozen fields, not worth `protoc`.
//!
//! Layout: a process track per rank (`rank N`), a thread track per thread
//! under it, slices for MPI calls, I/O calls and user regions
//! (`TrackEvent` begin/end, category `mpi`, `io` or `region`), a flow from
//! each matched send's slice to its receive's (`flow_ids` /
//! `terminating_flow_ids`), the call's source location as debug
//! annotations `source_file` and `source_line` ([`Sources`]), and counter
//! tracks: each rank's MPI bytes sent
//! so far, and every user counter. Field numbers are those of Perfetto's
//! `protos/perfetto/trace/` (checked against its Python package in the
//! tests).

use super::{SliceKind, Sources, Timeline};
use crate::Error;
use hark_engine::trace::Trace;
use hark_wire::op;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// The file [`write_perfetto`] writes in its directory.
pub const PERFETTO_FILE: &str = "trace.perfetto-trace";

const SEQUENCE: u64 = 1;
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
const COUNTER: u64 = 4;

/// Protobuf wire encoding, just what the trace needs.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn uint(&mut self, field: u64, v: u64) -> &mut Self {
        self.varint(field << 3);
        self.varint(v);
        self
    }
    fn int(&mut self, field: u64, v: i64) -> &mut Self {
        self.uint(field, v as u64)
    }
    fn fixed64(&mut self, field: u64, v: u64) -> &mut Self {
        self.varint(field << 3 | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, field: u64, b: &[u8]) -> &mut Self {
        self.varint(field << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, field: u64, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }
    fn msg(&mut self, field: u64, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }
    /// Empties it for the next message, keeping its buffer.
    fn clear(&mut self) -> &mut Self {
        self.0.clear();
        self
    }
}

/// The flow ids of slice `k` of lane `li` in `all` (ordered by slice).
fn flows(all: &[(u32, u32, u64)], li: usize, k: usize) -> impl Iterator<Item = u64> + '_ {
    let key = (li as u32, k as u32);
    let from = all.partition_point(|x| (x.0, x.1) < key);
    all[from..]
        .iter()
        .take_while(move |x| (x.0, x.1) == key)
        .map(|x| x.2)
}

/// Writes `TracePacket`s, each wrapped as a `Trace`'s field 1, through one
/// reused buffer (a 10^7-event trace makes 2·10^7 packets).
struct Packets {
    first: bool,
    wrapper: Msg,
}

impl Packets {
    fn write(&mut self, out: &mut dyn Write, body: &mut Msg) -> std::io::Result<()> {
        body.uint(10, SEQUENCE);
        if self.first {
            // SEQ_INCREMENTAL_STATE_CLEARED: nothing is interned.
            body.uint(13, 1);
            self.first = false;
        }
        self.wrapper.clear().msg(1, body);
        out.write_all(&self.wrapper.0)
    }
}

/// Writes `trace` as `dir/trace.perfetto-trace`, calls with their
/// `sources`; returns its path.
pub fn write_perfetto(
    trace: &Trace,
    sources: &Sources,
    dir: &Path,
) -> Result<std::path::PathBuf, Error> {
    let path = dir.join(PERFETTO_FILE);
    let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    encode_perfetto(trace, sources, &mut out).map_err(|e| Error::io(&path, e))?;
    out.flush().map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// Encodes `trace` as a Perfetto trace into `out`, calls with their
/// `sources`.
pub fn encode_perfetto(
    trace: &Trace,
    sources: &Sources,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let timeline = Timeline::of(trace);
    let mut enc = Encoder {
        trace,
        sources,
        timeline: &timeline,
        out,
        packets: Packets {
            first: true,
            wrapper: Msg::default(),
        },
        body: Msg::default(),
        ev: Msg::default(),
        arg: Msg::default(),
    };
    enc.process_tracks()?;
    enc.thread_tracks()?;
    enc.slices(&Flows::of(&timeline))?;
    for si in 0..trace.streams.len() {
        enc.bytes_sent(si)?;
        enc.counters_and_marks(si)?;
    }
    Ok(())
}

/// A trace being encoded: where packets go, and the messages built in
/// buffers reused from one packet to the next.
struct Encoder<'a> {
    trace: &'a Trace,
    sources: &'a Sources,
    timeline: &'a Timeline,
    out: &'a mut dyn Write,
    packets: Packets,
    body: Msg,
    ev: Msg,
    arg: Msg,
}

/// Flows: outgoing on the send's slice, terminating on the receive's;
/// (lane, slice, flow id), ordered by slice and then id.
struct Flows {
    out: Vec<(u32, u32, u64)>,
    into: Vec<(u32, u32, u64)>,
}

impl Flows {
    fn of(timeline: &Timeline) -> Flows {
        let mut flows = Flows {
            out: Vec::with_capacity(timeline.messages.len()),
            into: Vec::with_capacity(timeline.messages.len()),
        };
        for (id, m) in timeline.messages.iter().enumerate() {
            let id = id as u64 + 1;
            let at = |side| {
                let (li, k) = timeline.at(side).expect("matched messages are on slices");
                (li as u32, k as u32, id)
            };
            flows.out.push(at(m.send));
            flows.into.push(at(m.recv));
        }
        flows.out.sort_unstable();
        flows.into.sort_unstable();
        flows
    }
}

impl Encoder<'_> {
    fn packet(&mut self, body: &mut Msg) -> std::io::Result<()> {
        self.packets.write(self.out, body)
    }

    /// Writes the packet built in `self.body`.
    fn body_packet(&mut self) -> std::io::Result<()> {
        self.packets.write(self.out, &mut self.body)
    }

    /// The pid shown for stream `si`: its world rank + 1, or a number past
    /// any rank for a process without one.
    fn pid_of(&self, si: usize) -> i64 {
        let s = &self.trace.streams[si];
        if s.world_rank >= 0 {
            s.world_rank as i64 + 1
        } else {
            (1 << 20) + si as i64
        }
    }

    fn lane_uuid(&self, li: usize) -> u64 {
        process_uuid(self.timeline.lanes[li].stream) | (li as u64 + 1)
    }

    /// Process tracks, and a counter of MPI bytes sent per rank.
    fn process_tracks(&mut self) -> std::io::Result<()> {
        for (si, s) in self.trace.streams.iter().enumerate() {
            let mut proc_ = Msg::default();
            proc_.int(1, self.pid_of(si)).str(
                6,
                &if s.world_rank >= 0 {
                    format!("rank {}", s.world_rank)
                } else {
                    format!("{} pid {}", s.program, s.pid)
                },
            );
            let mut desc = Msg::default();
            desc.uint(1, process_uuid(si)).msg(3, &proc_);
            self.packet(Msg::default().msg(60, &desc))?;
            let mut counter = Msg::default();
            counter
                .uint(1, process_uuid(si) | 0xfffff)
                .str(2, "MPI bytes sent")
                .uint(5, process_uuid(si))
                .msg(8, &Msg::default());
            self.packet(Msg::default().msg(60, &counter))?;
        }
        Ok(())
    }

    /// Thread tracks: one per lane.
    fn thread_tracks(&mut self) -> std::io::Result<()> {
        for (li, lane) in self.timeline.lanes.iter().enumerate() {
            let pid = self.pid_of(lane.stream);
            let mut thread = Msg::default();
            thread
                .int(1, pid)
                .int(2, pid * 1000 + lane.thread as i64)
                .str(5, &format!("thread {}", lane.thread));
            let mut desc = Msg::default();
            desc.uint(1, self.lane_uuid(li))
                .uint(5, process_uuid(lane.stream))
                .msg(4, &thread);
            self.packet(Msg::default().msg(60, &desc))?;
        }
        Ok(())
    }

    /// Slices, lane by lane: a begin (with its bytes and flows) or an end
    /// per step.
    fn slices(&mut self, ids: &Flows) -> std::io::Result<()> {
        let timeline = self.timeline;
        for (li, lane) in timeline.lanes.iter().enumerate() {
            let s = &self.trace.streams[lane.stream];
            let track = self.lane_uuid(li);
            for &(ts, enter, k) in &lane.steps {
                let slice = &lane.slices[k];
                self.ev.clear().uint(11, track);
                if enter {
                    let category = match slice.kind {
                        SliceKind::Mpi(_) => "mpi",
                        SliceKind::Io(_) => "io",
                        SliceKind::Region => "region",
                    };
                    self.ev
                        .uint(9, SLICE_BEGIN)
                        .str(22, category)
                        .str(23, &slice.name);
                    let e = &s.events[slice.event];
                    if !matches!(slice.kind, SliceKind::Region) && e.bytes.get() > 0 {
                        self.arg.clear().str(10, "bytes").uint(3, e.bytes.get());
                        self.ev.msg(4, &self.arg);
                    }
                    if let Some(src) = self.sources.of_event(lane.stream, e) {
                        self.arg.clear().str(10, "source_file").str(6, &src.file);
                        self.ev.msg(4, &self.arg);
                        self.arg
                            .clear()
                            .str(10, "source_line")
                            .uint(3, src.line as u64);
                        self.ev.msg(4, &self.arg);
                    }
                    for id in flows(&ids.out, li, k) {
                        self.ev.fixed64(47, id);
                    }
                    for id in flows(&ids.into, li, k) {
                        self.ev.fixed64(48, id);
                    }
                } else {
                    self.ev.uint(9, SLICE_END);
                }
                self.body.clear().uint(8, ts).msg(11, &self.ev);
                self.body_packet()?;
            }
        }
        Ok(())
    }

    /// Stream `si`'s MPI bytes sent so far, in completion order.
    fn bytes_sent(&mut self, si: usize) -> std::io::Result<()> {
        let s = &self.trace.streams[si];
        let mut sent: i64 = 0;
        for &(i, m) in &self.timeline.sides_of_stream[si] {
            if !m.send {
                continue;
            }
            sent += m.bytes as i64;
            let ts = s.mapping.common(s.events[i].end.get());
            self.ev
                .clear()
                .uint(9, COUNTER)
                .uint(11, process_uuid(si) | 0xfffff)
                .int(30, sent);
            self.body.clear().uint(8, ts).msg(11, &self.ev);
            self.body_packet()?;
        }
        Ok(())
    }

    /// Stream `si`'s user counters (a track each, defined where first
    /// seen) and iteration marks.
    fn counters_and_marks(&mut self, si: usize) -> std::io::Result<()> {
        let s = &self.trace.streams[si];
        let mut counters: HashMap<u32, u64> = HashMap::new();
        for e in &s.events {
            let ts = s.mapping.common(e.start.get());
            match e.op() {
                op::COUNTER => {
                    let next = 0xf0000 + counters.len() as u64;
                    let uuid = *counters
                        .entry(e.obj.get())
                        .or_insert_with(|| process_uuid(si) | next);
                    if uuid == (process_uuid(si) | next) {
                        let mut d = Msg::default();
                        d.uint(1, uuid)
                            .str(2, s.name(e.obj.get()).unwrap_or("counter"))
                            .uint(5, process_uuid(si))
                            .msg(8, &Msg::default());
                        self.packet(Msg::default().msg(60, &d))?;
                    }
                    let mut ev = Msg::default();
                    ev.uint(9, COUNTER)
                        .uint(11, uuid)
                        .int(30, e.bytes.get() as i64);
                    self.packet(Msg::default().uint(8, ts).msg(11, &ev))?;
                }
                op::MARK => {
                    let lane = self
                        .timeline
                        .lanes
                        .iter()
                        .position(|l| l.stream == si && l.thread == e.thread.get());
                    if let Some(li) = lane {
                        let mut ev = Msg::default();
                        ev.uint(9, INSTANT)
                            .uint(11, self.lane_uuid(li))
                            .str(22, "mark")
                            .str(
                                23,
                                &format!(
                                    "{} {}",
                                    s.name(e.obj.get()).unwrap_or("mark"),
                                    e.bytes.get()
                                ),
                            );
                        self.packet(Msg::default().uint(8, ts).msg(11, &ev))?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The uuid of stream `si`'s process track; its other tracks' are this
/// with low bits set.
fn process_uuid(si: usize) -> u64 {
    (si as u64 + 1) << 24
}
