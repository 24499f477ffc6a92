//! Control frames: requests a service (`hark serve`) writes back to a probe
//! on the probe's own connection, and the probe's answers in its stream.
//!
//! The connection is otherwise one-way (probe to server), so a probe that
//! never reads its socket loses nothing but the requests. Requests are
//! small fixed-size frames (kind 9, 25 bytes with the header) that a probe
//! reads off its hot path, in its shipping thread. `docs/wire.md`,
//! "Control", is the specification.

use crate::codec::{Reader, Writer};
use crate::frame::{frame, Kind};
use crate::{Error, HEADER_SIZE};

/// What a [`Control`] frame asks for, or answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    /// Server to probe: stop recording events (as `MPI_Pcontrol(0)`).
    Pause = 1,
    /// Server to probe: record again (as `MPI_Pcontrol(1)`).
    Resume = 2,
    /// Server to probe: ship every event recorded so far, partly filled
    /// buffers included, then answer [`Action::Flushed`] with the same `seq`.
    Dump = 3,
    /// Server to probe: record detailed events only if the probe's world
    /// rank modulo `of` is below `keep`; `keep == of` records every rank.
    Sample = 4,
    /// Probe to server, in its stream: every event recorded before the
    /// [`Action::Dump`] numbered `seq` precedes this frame.
    Flushed = 5,
    /// Server to probe, just before it cuts the stream: the stream is
    /// refused, for the reason `seq` names ([`REFUSED_TOKEN`]); the probe
    /// says so once and its process runs unmeasured.
    Refused = 6,
}

/// [`Action::Refused`]'s `seq`: the `Hello` proves no token the service
/// takes (a TCP stream without one, or with another service's).
pub const REFUSED_TOKEN: u64 = 1;

/// A control request or answer. `keep` and `of` matter only to
/// [`Action::Sample`], `seq` only to [`Action::Dump`] and [`Action::Flushed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    /// What is asked or answered.
    pub action: Action,
    /// Ranks kept out of every `of` (sampling).
    pub keep: u32,
    /// The sampling period in ranks (sampling).
    pub of: u32,
    /// Which dump this is, or answers.
    pub seq: u64,
}

/// Bytes of an encoded control frame, header included.
pub const CONTROL_SIZE: usize = HEADER_SIZE + 17;

impl Control {
    /// A request or answer without parameters.
    pub fn new(action: Action) -> Control {
        Control {
            action,
            keep: 0,
            of: 0,
            seq: 0,
        }
    }

    /// Appends this frame to `out` ([`CONTROL_SIZE`] bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Control, |w: &mut Writer| {
            w.u8(self.action as u8)
                .u32(self.keep)
                .u32(self.of)
                .u64(self.seq);
        })
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Control, Error> {
        let action = match r.u8("action")? {
            1 => Action::Pause,
            2 => Action::Resume,
            3 => Action::Dump,
            4 => Action::Sample,
            5 => Action::Flushed,
            6 => Action::Refused,
            a => return Err(Error::malformed(format!("control: unknown action {a}"))),
        };
        Ok(Control {
            action,
            keep: r.u32("keep")?,
            of: r.u32("of")?,
            seq: r.u64("seq")?,
        })
    }

    /// Takes the first whole control frame off the front of `bytes`: the
    /// frame and the bytes it used, `Ok(None)` if more bytes are needed, an
    /// error if the bytes are not a control frame (the reader should stop
    /// reading: the other side speaks something else).
    pub fn take(bytes: &[u8]) -> Result<Option<(Control, usize)>, Error> {
        if bytes.len() < HEADER_SIZE {
            return Ok(None);
        }
        let kind = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        if kind != Kind::Control as u32 || len != CONTROL_SIZE - HEADER_SIZE {
            return Err(Error::malformed(format!(
                "expected a control frame, found kind {kind} of {len} bytes"
            )));
        }
        if bytes.len() < CONTROL_SIZE {
            return Ok(None);
        }
        let mut r = Reader::new(&bytes[HEADER_SIZE..CONTROL_SIZE], "control frame");
        Ok(Some((Control::decode(&mut r)?, CONTROL_SIZE)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, FrameReader};

    #[test]
    fn a_control_frame_round_trips_through_both_readers() {
        let c = Control {
            action: Action::Sample,
            keep: 1,
            of: 4,
            seq: 9,
        };
        let mut bytes = Vec::new();
        c.encode(&mut bytes);
        assert_eq!(bytes.len(), CONTROL_SIZE);
        assert_eq!(Control::take(&bytes[..10]).unwrap(), None);
        assert_eq!(Control::take(&bytes).unwrap(), Some((c, CONTROL_SIZE)));
        let mut r = FrameReader::new(&bytes[..]);
        match r.next_frame().unwrap() {
            Some(Frame::Control(got)) => assert_eq!(got, c),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(Control::take(&[1, 0, 0, 0, 17, 0, 0, 0]).is_err());
        let mut bytes = Vec::new();
        Control::new(Action::Pause).encode(&mut bytes);
        bytes[HEADER_SIZE] = 77;
        assert!(Control::take(&bytes).is_err());
    }
}
