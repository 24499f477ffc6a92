//! The frames of a forwarder's connection: many probe streams over one.
//!
//! A forwarder (`hark forward`, one per node) accepts the node's probe
//! streams as a server does and sends them upstream over one connection.
//! That connection starts with a [`Node`] frame instead of a `Hello`; after
//! it, every frame is a [`Kind::Mux`] frame carrying one whole frame of one
//! stream, named by a stream number the forwarder chose, or a [`Gone`]
//! frame saying how a stream ended. Downwards, the server writes `Mux`
//! frames carrying `Control` frames to a stream's probe, and `Gone` frames
//! asking the forwarder to cut a stream. `docs/wire.md`, "Forwarded
//! streams", is the specification.

use crate::codec::{Reader, Writer};
use crate::frame::{frame, Kind, MAGIC, VERSION};
use crate::{Error, HEADER_SIZE};

/// Bytes in front of the carried frame in a [`Kind::Mux`] frame: its own
/// header and the stream number.
pub const MUX_OVERHEAD: usize = HEADER_SIZE + 8;

/// A forwarder's opening frame: who forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The forwarder's host name (`gethostname`).
    pub host: String,
    /// The forwarder's process id.
    pub pid: u32,
}

impl Node {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Node, |w: &mut Writer| {
            w.0.extend_from_slice(&MAGIC);
            w.u16(VERSION).str(&self.host).u32(self.pid);
        })
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Node, Error> {
        let mut magic = [0u8; 4];
        for m in &mut magic {
            *m = r.u8("magic")?;
        }
        if magic != MAGIC {
            return Err(Error::malformed(format!(
                "node: the forwarder's frame does not start with the Hark magic (found {magic:?})"
            )));
        }
        let version = r.u16("version")?;
        if version != VERSION {
            return Err(Error::malformed(format!(
                "node: the forwarder speaks wire version {version}, this reader {VERSION}; \
                 run the same Hark on every node"
            )));
        }
        Ok(Node {
            host: r.str("host")?,
            pid: r.u32("pid")?,
        })
    }
}

/// Writes the header of a [`Kind::Mux`] frame carrying `inner_len` bytes
/// (a whole frame, its header included) of stream `stream` into
/// `out[..MUX_OVERHEAD]`; the carried frame follows it.
pub fn write_mux_header(out: &mut [u8], stream: u64, inner_len: usize) {
    out[0..4].copy_from_slice(&(Kind::Mux as u32).to_le_bytes());
    out[4..8].copy_from_slice(&((8 + inner_len) as u32).to_le_bytes());
    out[8..16].copy_from_slice(&stream.to_le_bytes());
}

/// Appends a [`Kind::Mux`] frame carrying `inner` (one whole frame) of
/// stream `stream`.
pub fn encode_mux(stream: u64, inner: &[u8], out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + MUX_OVERHEAD, 0);
    write_mux_header(&mut out[at..], stream, inner.len());
    out.extend_from_slice(inner);
}

/// How a forwarded stream ended, in a [`Gone`] frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum GoneHow {
    /// The stream's connection closed between frames (after its `End`, or
    /// without one: the server knows which it forwarded).
    Closed = 1,
    /// The stream was unreadable at the forwarder, or the server asks the
    /// forwarder to cut it: the reason says why.
    Broken = 2,
}

/// A forwarded stream has ended (forwarder to server), or is to be cut
/// (server to forwarder). Nothing of the stream follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gone {
    /// The stream's number on this connection.
    pub stream: u64,
    /// How it ended.
    pub how: GoneHow,
    /// Events its probe had recorded in shared memory but not published
    /// when it died (see `Sink::on_lost`); 0 when none.
    pub lost_events: u64,
    /// The buffers those events were in.
    pub lost_packs: u64,
    /// Why, for [`GoneHow::Broken`]; empty otherwise.
    pub reason: String,
}

impl Gone {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Gone, |w: &mut Writer| {
            w.u64(self.stream)
                .u8(self.how as u8)
                .u64(self.lost_events)
                .u64(self.lost_packs)
                .str(&self.reason);
        })
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Gone, Error> {
        let stream = r.u64("stream")?;
        let how = match r.u8("how")? {
            1 => GoneHow::Closed,
            2 => GoneHow::Broken,
            h => return Err(Error::malformed(format!("gone: unknown ending {h}"))),
        };
        Ok(Gone {
            stream,
            how,
            lost_events: r.u64("lost_events")?,
            lost_packs: r.u64("lost_packs")?,
            reason: r.str("reason")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, Control, Frame, FrameReader};

    #[test]
    fn forwarder_frames_read_back_as_written() {
        let mut bytes = Vec::new();
        let node = Node {
            host: "n1".into(),
            pid: 42,
        };
        node.encode(&mut bytes);
        let mut control = Vec::new();
        Control::new(Action::Pause).encode(&mut control);
        encode_mux(7, &control, &mut bytes);
        let gone = Gone {
            stream: 7,
            how: GoneHow::Broken,
            lost_events: 3,
            lost_packs: 1,
            reason: "cut".into(),
        };
        gone.encode(&mut bytes);
        let mut r = FrameReader::new(&bytes[..]);
        assert!(matches!(r.next_frame().unwrap(), Some(Frame::Node(n)) if n == node));
        match r.next_frame().unwrap() {
            Some(Frame::Mux { stream: 7, frame }) => assert_eq!(frame, &control[..]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.next_frame().unwrap(), Some(Frame::Gone(g)) if g == gone));
        assert!(r.next_frame().unwrap().is_none());
    }

    #[test]
    fn a_node_frame_of_another_version_is_refused_naming_both() {
        let mut bytes = Vec::new();
        frame(&mut bytes, Kind::Node, |w| {
            w.0.extend_from_slice(&MAGIC);
            w.u16(VERSION + 1).str("n").u32(1);
        });
        let e = FrameReader::new(&bytes[..]).next_frame().unwrap_err();
        assert!(
            e.to_string().contains(&format!("version {}", VERSION + 1)),
            "{e}"
        );
    }
}
