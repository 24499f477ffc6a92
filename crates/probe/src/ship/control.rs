//! Control frames from a service (`hark serve`), read by the shipping
//! thread off the program's hot path.
//!
//! The probe's connection is otherwise one-way. A service may write
//! [`Control`] frames back on it (`docs/wire.md`, "Control"); the shipper
//! looks for them at most every [`POLL`] with a non-blocking `recv`, one
//! system call when nothing came, so a server that never writes (a `hark
//! run`) costs ten calls a second. Bytes that are not control frames stop
//! the reading for good: the probe never guesses.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use hark_wire::Control;

/// How often the shipper looks for control frames.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The shipper's end of the control channel.
pub(crate) struct ControlIn {
    buf: Vec<u8>,
    last: Option<Instant>,
    stopped: bool,
}

impl ControlIn {
    pub(crate) fn new() -> ControlIn {
        ControlIn {
            buf: Vec::new(),
            last: None,
            stopped: false,
        }
    }

    /// Reads what the service sent on `fd`, if [`POLL`] has passed since
    /// the last look, and hands every whole frame to `act`, in order.
    pub(crate) fn poll(&mut self, fd: RawFd, act: &mut dyn FnMut(Control)) {
        if self.stopped || fd < 0 || self.last.is_some_and(|t| t.elapsed() < POLL) {
            return;
        }
        self.last = Some(Instant::now());
        let mut chunk = [0u8; 512];
        loop {
            // SAFETY: `chunk` is writable for its length; MSG_DONTWAIT keeps
            // the shipper from ever blocking here.
            let n = unsafe {
                libc::recv(
                    fd,
                    chunk.as_mut_ptr().cast(),
                    chunk.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                break;
            }
            self.buf.extend_from_slice(&chunk[..n as usize]);
            if self.buf.len() > 64 << 10 {
                self.stopped = true;
                return;
            }
        }
        loop {
            match Control::take(&self.buf) {
                Ok(Some((c, used))) => {
                    self.buf.drain(..used);
                    act(c);
                }
                Ok(None) => return,
                Err(_) => {
                    self.stopped = true;
                    return;
                }
            }
        }
    }
}
