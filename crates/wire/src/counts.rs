//! Counts frames: what a sampled-out probe ships instead of its events.
//!
//! A service may ask a probe to keep detailed events from only `keep` of
//! every `of` ranks ([`crate::Action::Sample`]). A rank left out still
//! counts every call exactly: its shipper folds each pack it would have
//! sent into per-function totals and sends those instead, one [`Counts`]
//! frame (kind 10) per folded pack. The frames are deltas: the server adds
//! them up. `docs/wire.md`, "Counts", is the specification.

use crate::codec::{Reader, Writer};
use crate::frame::{frame, Kind};
use crate::Error;

/// Bytes of a [`Counts`] payload before its cells.
pub const COUNTS_FIXED_SIZE: usize = 8 + 8 + 8 + 4;

/// Bytes of one encoded [`Count`].
pub const COUNT_SIZE: usize = 2 + 4 + 4 + 5 * 8;

/// Totals of one function (and, for I/O, one file) over the events a
/// [`Counts`] frame stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// The op code of the calls.
    pub op: u16,
    /// The events' `obj` for I/O calls and user regions (a file or name id
    /// of the stream's definitions); 0 for MPI calls.
    pub obj: u32,
    /// The events' `peer` for I/O calls (the descriptor of a file never
    /// seen opened); 0 otherwise.
    pub peer: i32,
    /// Calls.
    pub calls: u64,
    /// Sum of the events' `bytes`.
    pub bytes: u64,
    /// Sum of the calls' durations, in ns.
    pub time_ns: u64,
    /// Shortest call, in ns.
    pub min_ns: u64,
    /// Longest call, in ns.
    pub max_ns: u64,
}

/// What a sampled-out probe sends in place of one pack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// The probe clock (ns) at the start of the earliest event counted here.
    pub since_ns: u64,
    /// The probe clock (ns) at the end of the latest event counted here.
    pub until_ns: u64,
    /// Events folded into this frame (they count as received).
    pub events: u64,
    /// One cell per distinct (op, obj, peer), in any order.
    pub cells: Vec<Count>,
}

impl Counts {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Counts, |w: &mut Writer| {
            w.u64(self.since_ns)
                .u64(self.until_ns)
                .u64(self.events)
                .u32(self.cells.len() as u32);
            for c in &self.cells {
                w.u16(c.op)
                    .u32(c.obj)
                    .i32(c.peer)
                    .u64(c.calls)
                    .u64(c.bytes)
                    .u64(c.time_ns)
                    .u64(c.min_ns)
                    .u64(c.max_ns);
            }
        })
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Counts, Error> {
        let since_ns = r.u64("since_ns")?;
        let until_ns = r.u64("until_ns")?;
        let events = r.u64("events")?;
        let n = r.u32("cell count")? as usize;
        if n > r.rest().len() / COUNT_SIZE {
            return Err(Error::malformed(format!(
                "counts: {n} cells claimed, more than the frame holds"
            )));
        }
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            let c = Count {
                op: r.u16("op")?,
                obj: r.u32("obj")?,
                peer: r.i32("peer")?,
                calls: r.u64("calls")?,
                bytes: r.u64("bytes")?,
                time_ns: r.u64("time_ns")?,
                min_ns: r.u64("min_ns")?,
                max_ns: r.u64("max_ns")?,
            };
            if c.calls > events || (c.calls > 0 && c.min_ns > c.max_ns) {
                return Err(Error::malformed(format!(
                    "counts: a cell of op {} claims {} calls of {events} events, or min above max",
                    c.op, c.calls
                )));
            }
            cells.push(c);
        }
        Ok(Counts {
            since_ns,
            until_ns,
            events,
            cells,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, FrameReader};

    #[test]
    fn a_counts_frame_round_trips() {
        let c = Counts {
            since_ns: 7,
            until_ns: 70,
            events: 5,
            cells: vec![
                Count {
                    op: 3,
                    calls: 4,
                    bytes: 400,
                    time_ns: 40,
                    min_ns: 9,
                    max_ns: 11,
                    ..Count::default()
                },
                Count {
                    op: 0x1001,
                    obj: 2,
                    peer: -1,
                    calls: 1,
                    bytes: 8,
                    time_ns: 3,
                    min_ns: 3,
                    max_ns: 3,
                },
            ],
        };
        let mut bytes = Vec::new();
        c.encode(&mut bytes);
        let mut r = FrameReader::new(&bytes[..]);
        match r.next_frame().unwrap() {
            Some(Frame::Counts(got)) => assert_eq!(got, c),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_cell_count_beyond_the_frame_is_refused() {
        let mut bytes = Vec::new();
        Counts {
            events: 1,
            ..Counts::default()
        }
        .encode(&mut bytes);
        // Claim a million cells in a frame that holds none.
        let at = crate::HEADER_SIZE + 24;
        bytes[at..at + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
        assert!(FrameReader::new(&bytes[..]).next_frame().is_err());
    }
}
