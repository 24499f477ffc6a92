//! The fixed-size event record.
//!
//! Every event the probe sees becomes one 48-byte record in little-endian byte
//! order. The fields are zerocopy's unaligned little-endian integers, so a pack
//! received into any `&[u8]` is read as `&[Event]` in place, on any host, with
//! no copy and no alignment requirement.

use zerocopy::little_endian::{I32, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of one [`Event`] on the wire, in bytes.
pub const EVENT_SIZE: usize = 48;

/// `peer` when the event has no peer.
pub const PEER_NONE: i32 = -1;
/// `peer` for `MPI_ANY_SOURCE` (whatever the MPI library's own value is).
pub const PEER_ANY: i32 = -2;
/// `peer` for `MPI_PROC_NULL`.
pub const PEER_NULL: i32 = -3;
/// `peer` for `MPI_ROOT` (the root side of an inter-communicator collective).
pub const PEER_ROOT: i32 = -4;
/// `tag` for `MPI_ANY_TAG`.
pub const TAG_ANY: i32 = -1;
/// `extra` when it carries nothing.
pub const EXTRA_NONE: u64 = u64::MAX;
/// Bits of the `extra` word that hold its value; the 16 above them hold the
/// event's call site ([`Event::callsite`]).
pub const EXTRA_BITS: u32 = 48;
/// The value bits of the `extra` word.
pub const EXTRA_MASK: u64 = (1 << EXTRA_BITS) - 1;

/// One event: a call, or a detail of the call just before it.
///
/// What `bytes`, `extra`, `obj`, `peer` and `tag` mean depends on the kind of
/// `op` (see [`crate::op`] and `docs/wire.md`):
///
/// | op kind            | obj       | peer               | tag      | bytes        | extra             |
/// |--------------------|-----------|--------------------|----------|--------------|-------------------|
/// | MPI point-to-point | comm id   | world rank of peer | tag      | bytes        | request id        |
/// | MPI collective     | comm id   | world rank of root | sequence | send bytes   | receive bytes     |
/// | MPI completion     | comm id   | actual source/dest | tag      | bytes        | request id        |
/// | I/O                | file id   | file descriptor    | -        | bytes        | offset            |
/// | user region/mark   | name id   | -                  | -        | -            | -                 |
/// | user counter       | name id   | -                  | -        | value (i64)  | -                 |
///
/// `extra` is two fields: its low 48 bits the value above ([`Event::extra`]),
/// its top 16 bits the call site ([`Event::callsite`]), 0 when none.
///
/// MPI refinements (the probe's MPI adapter, `docs/mpi.md`, says more):
/// - A message is counted once, where it is complete: a blocking call's own
///   event (`MPI_Send`, `MPI_Recv` with the actual source, tag and bytes from
///   the status; `MPI_Sendrecv` is its send, its receive follows as a
///   `COMPLETE_RECV` detail with `extra` 0), or the `COMPLETE_*` detail of a
///   request. Posting calls (`MPI_Isend`, `MPI_Irecv`, `*_init`, `MPI_Start`)
///   carry the posted values but are not messages by themselves.
/// - Wait/Test calls: `bytes` is the number of requests the call completed,
///   each followed by its detail record.
/// - Probes: `peer`/`tag`/`bytes` are the probed message's (the posted ones
///   when none was found); `extra` is 1 when a message was found, 0 if not.
/// - Communicator creation: `obj` is the parent communicator, `extra` the new
///   communicator's id (`EXTRA_NONE` for `MPI_COMM_NULL`). Window creation
///   likewise; one-sided events have the window's id in `obj`, the window
///   being defined as a communicator over the window's group.
/// - MPI-IO: `obj` is the file id, `peer` is `PEER_NONE`, `bytes` the bytes
///   the status says were moved (at completion for non-blocking ones and at
///   `*_end` for split collectives), `extra` the explicit offset in bytes or
///   etypes as given (`EXTRA_NONE` without one; the request id for
///   non-blocking ones).
#[derive(
    Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Event {
    /// Start of the call, in nanoseconds of the probe's clock. On the wire,
    /// under a [`ClockSource::Tsc`](crate::ClockSource::Tsc) Hello, TSC ticks
    /// until [`FrameReader`](crate::FrameReader) converts them.
    pub start: U64,
    /// End of the call, likewise.
    pub end: U64,
    /// Bytes moved, or a counter's value.
    pub bytes: U64,
    /// Request id, collective receive bytes, or file offset; [`EXTRA_NONE`] if unused.
    pub extra: U64,
    /// What happened: an op code (see [`crate::op`]).
    pub op: U16,
    /// Index of the thread in its process, in order of first event.
    pub thread: U16,
    /// Id of the communicator, file or name the event is about; 0 for none.
    pub obj: U32,
    /// World rank of the peer or root, or one of the `PEER_*` values.
    pub peer: I32,
    /// Message tag, or the collective's sequence number on its communicator.
    pub tag: I32,
}

const _: () = assert!(std::mem::size_of::<Event>() == EVENT_SIZE);

impl Event {
    /// An event of kind `op` over `[start, end]`, every other field empty.
    #[inline(always)]
    pub fn new(op: u16, start: u64, end: u64) -> Event {
        Event {
            start: U64::new(start),
            end: U64::new(end),
            bytes: U64::new(0),
            extra: U64::new(EXTRA_NONE),
            op: U16::new(op),
            thread: U16::new(0),
            obj: U32::new(0),
            peer: I32::new(PEER_NONE),
            tag: I32::new(0),
        }
    }

    /// Views `bytes` as events without copying. Trailing bytes that do not
    /// make up a whole event are an error.
    pub fn slice_from(bytes: &[u8]) -> Result<&[Event], crate::Error> {
        <[Event]>::ref_from_bytes(bytes).map_err(|_| {
            crate::Error::malformed(format!(
                "pack of {} bytes is not a whole number of {EVENT_SIZE}-byte events",
                bytes.len()
            ))
        })
    }

    /// The `extra` field's value without its call site: [`EXTRA_NONE`] when
    /// it carries nothing. Values are 48 bits wide (request ids, receive
    /// bytes and file offsets below 256 TiB).
    #[inline(always)]
    pub fn extra(&self) -> u64 {
        match self.extra.get() & EXTRA_MASK {
            EXTRA_MASK => EXTRA_NONE,
            v => v,
        }
    }

    /// Id of the call site the event was recorded at (a [`crate::Def::Callsite`]
    /// of its stream), 0 when unknown: the top 16 bits of `extra`.
    #[inline(always)]
    pub fn callsite(&self) -> u16 {
        (self.extra.get() >> EXTRA_BITS) as u16
    }

    /// Puts call site `site` into the top bits of `extra`, keeping its value.
    #[inline(always)]
    pub fn set_callsite(&mut self, site: u16) {
        let v = self.extra.get() & EXTRA_MASK;
        self.extra.set(v | (site as u64) << EXTRA_BITS);
    }

    /// The event's `op` field.
    #[inline(always)]
    pub fn op(&self) -> u16 {
        self.op.get()
    }
    /// Duration in nanoseconds (0 if the clock went backwards).
    #[inline(always)]
    pub fn duration(&self) -> u64 {
        self.end.get().saturating_sub(self.start.get())
    }
}

/// How many of a pack's `events` count in a stream's accounting (events
/// written, received, dropped, analysed): all of them, unless the pack
/// holds the shipping thread's samples (`op::SAMPLE_BASE..`, its CPU and
/// counter readings), which travel in packs of their own and count in
/// none, since how many there are depends on how long the program ran,
/// not on what it did. Region counters (`op::COUNTER_REGION`) are samples
/// too, but recorded by a program's thread among its events: they count,
/// and a pack may start with one.
#[inline]
pub fn accounted(events: &[Event]) -> u64 {
    match events.first() {
        Some(e)
            if crate::op::kind(e.op()) == crate::op::OpKind::Sample
                && e.op() != crate::op::COUNTER_REGION =>
        {
            0
        }
        _ => events.len() as u64,
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("op", &crate::op::name(self.op.get()))
            .field("start", &self.start.get())
            .field("end", &self.end.get())
            .field("thread", &self.thread.get())
            .field("obj", &self.obj.get())
            .field("peer", &self.peer.get())
            .field("tag", &self.tag.get())
            .field("bytes", &self.bytes.get())
            .field("extra", &self.extra())
            .field("callsite", &self.callsite())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op;

    #[test]
    fn shipper_samples_count_in_no_total_and_region_counters_do() {
        let ev = |code| Event::new(code, 1, 2);
        assert_eq!(accounted(&[ev(op::CPU_TASK), ev(op::COUNTER_SLICE)]), 0);
        assert_eq!(accounted(&[ev(op::COUNTER_REFUSED)]), 0);
        assert_eq!(accounted(&[ev(op::SENSOR_CPU), ev(op::SENSOR_LOAD)]), 0);
        let region = [ev(op::COUNTER_REGION), ev(op::REGION_BEGIN)];
        assert_eq!(accounted(&region), 2);
    }
}
