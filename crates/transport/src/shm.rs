//! The shared-memory path: a probe on this node says `Ring` on its Unix
//! socket, with the ring's descriptor attached (`SCM_RIGHTS`), and from then
//! on its frames come through the ring ([`hark_ring`]) and are read in
//! place. The socket stays open only to tell when the probe dies: the probe
//! never writes to it again, so it becomes readable only at its end.
//!
//! [`FdCatcher`] reads the socket with `recvmsg` and keeps the descriptor
//! that comes with the bytes; [`read_ring`] then feeds the ring's frames to
//! the same [`Sink`] as the socket reader, with the same rules: `Hello`
//! only first, nothing after `End`, a malformed frame breaks only this
//! stream.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hark_ring::{Peer, Reader};
use hark_wire::{Event, Frame, Kind, TickScale, HEADER_SIZE, PACK_HEADER_SIZE};
use zerocopy::FromBytes;

use crate::{Closed, ConnId, Sink};

/// How long the reader sleeps on an idle ring before it looks at the
/// socket again (a dead writer is noticed within this).
const POLL: Duration = Duration::from_millis(20);

/// The descriptor a connection handed over, once it has come.
#[derive(Clone, Default)]
pub(crate) struct Handover(Arc<Mutex<Option<OwnedFd>>>);

impl Handover {
    /// The descriptor, taken out.
    pub(crate) fn take(&self) -> Option<OwnedFd> {
        hark_sync::lock(&self.0).take()
    }
}

/// A Unix stream read with `recvmsg`, keeping the last descriptor sent
/// with its bytes (any earlier or extra one is closed).
pub(crate) struct FdCatcher {
    stream: UnixStream,
    caught: Handover,
}

impl FdCatcher {
    pub(crate) fn new(stream: UnixStream) -> (FdCatcher, Handover) {
        let caught = Handover::default();
        (
            FdCatcher {
                stream,
                caught: caught.clone(),
            },
            caught,
        )
    }
}

impl Read for FdCatcher {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for a few descriptors, so that extras are received (and
        // closed) rather than left in the socket.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain data; all zeroes is a valid empty value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = loop {
            // SAFETY: `msg` points at live buffers of the sizes it gives.
            let n =
                unsafe { libc::recvmsg(self.stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        // SAFETY: walks the control messages recvmsg filled in, within
        // `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c) as *const RawFd;
                    let count = ((*c).cmsg_len as usize - (data as usize - c as usize))
                        / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        let fd = OwnedFd::from_raw_fd(data.add(i).read_unaligned());
                        *hark_sync::lock(&self.caught.0) = Some(fd);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(n)
    }
}

/// Whether the socket `fd` has reached its end (the probe closed it or
/// died), without waiting. Bytes on it are a protocol error: after `Ring`
/// a probe sends nothing more on its socket.
fn socket_state(fd: RawFd) -> Result<bool, String> {
    match hark_ring::peer(fd) {
        Peer::Alive => Ok(false),
        Peer::Gone => Ok(true),
        Peer::Spoke => Err("bytes arrived on the socket after the Ring frame".into()),
    }
}

/// Reads a stream's frames from the ring behind `ring` until its `End`,
/// or until the probe dies (`socket` reaches its end). Packs reach `sink`
/// in place; `ticks` converts their timestamps (as `FrameReader` does)
/// unless `convert` is false (a forwarder's).
pub(crate) fn read_ring(
    conn: ConnId,
    ring: OwnedFd,
    socket: RawFd,
    mut ticks: Option<TickScale>,
    convert: bool,
    sink: &dyn Sink,
) -> Closed {
    let reader = match Reader::open(ring) {
        Ok(r) => r,
        Err(e) => return Closed::Broken(e.to_string()),
    };
    let mut index = 0u64;
    // Once the socket has ended: the messages still to read (what was
    // published by then; a probe cut off from this side may go on).
    let mut gone = false;
    let mut left = 0u64;
    let mut looked = Instant::now();
    loop {
        // The socket is looked at every `POLL`, busy or idle (an idle ring
        // waits that long): a stream cut from this side (a server shutting
        // down) ends even while the probe keeps writing.
        if !gone && looked.elapsed() >= POLL {
            looked = Instant::now();
            match socket_state(socket) {
                Ok(ended) => (gone, left) = (ended, reader.pending()),
                Err(why) => return Closed::Broken(why),
            }
        }
        let msg = match reader.next(if gone { Duration::ZERO } else { POLL }) {
            Ok(_) if gone && left == 0 => None,
            Ok(m) => m,
            Err(e) => return Closed::Broken(e.to_string()),
        };
        let Some(msg) = msg else {
            if !gone {
                continue;
            }
            // Everything published has been read; what the probe had not
            // published is lost (it died, or this side cut the stream).
            let (events, packs) = reader.abandoned_events();
            if events > 0 {
                sink.on_lost(conn, events, packs);
            }
            return Closed::NoEnd;
        };
        left = left.saturating_sub(1);
        let at = index;
        index += 1;
        let ended = match deliver(conn, msg.bytes, &mut ticks, convert, sink) {
            Ok(ended) => ended,
            Err(why) => return Closed::Broken(format!("{why} (ring message {at})")),
        };
        reader.release(msg);
        if ended {
            return Closed::Clean;
        }
    }
}

/// Decodes one ring message (whole frames, one or more: a probe gathers a
/// burst of definitions in one slot) and hands them to `sink`; true if
/// the last was the `End`.
pub(crate) fn deliver(
    conn: ConnId,
    mut bytes: &mut [u8],
    ticks: &mut Option<TickScale>,
    convert: bool,
    sink: &dyn Sink,
) -> Result<bool, String> {
    if bytes.len() < HEADER_SIZE {
        return Err(format!("a message of {} bytes holds no frame", bytes.len()));
    }
    while !bytes.is_empty() {
        if bytes.len() < HEADER_SIZE {
            return Err(format!(
                "{} bytes after the message's last whole frame",
                bytes.len()
            ));
        }
        let kind = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        if len > bytes.len() - HEADER_SIZE {
            return Err(format!(
                "a frame claims {len} bytes where the message has {} left",
                bytes.len() - HEADER_SIZE
            ));
        }
        let (frame_bytes, rest) = std::mem::take(&mut bytes).split_at_mut(HEADER_SIZE + len);
        bytes = rest;
        let kind = Kind::from_u32(kind).map_err(|e| e.to_string())?;
        let payload = &mut frame_bytes[HEADER_SIZE..];
        if let (Kind::Pack, Some(scale), true) = (kind, *ticks, convert) {
            if let Some(events) = payload
                .get_mut(PACK_HEADER_SIZE..)
                .and_then(|b| <[Event]>::mut_from_bytes(b).ok())
            {
                scale.convert(events);
            }
        }
        let frame = Frame::decode(kind, payload).map_err(|e| e.to_string())?;
        match &frame {
            Frame::Hello(_) => return Err("a second Hello frame".into()),
            Frame::Ring => return Err("a second Ring frame".into()),
            Frame::ClockPing | Frame::ClockPong(_) => {
                return Err("a clock ping inside a stream (it has a connection of its own)".into())
            }
            Frame::End(_) if !bytes.is_empty() => {
                return Err("bytes after the End frame in its message".into())
            }
            // As `FrameReader` does: the packs after it take it.
            Frame::Scale(new) => TickScale::apply(ticks, *new).map_err(|e| e.to_string())?,
            _ => {}
        }
        let ended = matches!(frame, Frame::End(_));
        sink.on_frame(conn, frame);
        if ended {
            return Ok(true);
        }
    }
    Ok(false)
}
