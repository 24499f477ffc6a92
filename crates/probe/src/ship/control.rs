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

use super::transport::{recv_raw, ClientTls};

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

    /// Makes the next [`poll`](ControlIn::poll) look at once.
    pub(crate) fn now(&mut self) {
        self.last = None;
    }

    /// Reads what the service sent on `fd` (through `tls` on a `tls:`
    /// stream), if [`POLL`] has passed since the last look, and hands every
    /// whole frame to `act`, in order. True when what came is a TLS
    /// service's refusal of a plaintext client
    /// ([`hark_tls::PLAINTEXT_REFUSAL`]): nothing more will be read.
    pub(crate) fn poll(
        &mut self,
        fd: RawFd,
        tls: Option<&ClientTls>,
        act: &mut dyn FnMut(Control),
    ) -> bool {
        if self.stopped || fd < 0 || self.last.is_some_and(|t| t.elapsed() < POLL) {
            return false;
        }
        self.last = Some(Instant::now());
        match tls {
            Some(tls) => {
                tls.recv_nonblocking(fd, &mut self.buf);
            }
            None => {
                let mut chunk = [0u8; 512];
                loop {
                    let n = recv_raw(fd, &mut chunk);
                    if n <= 0 {
                        break;
                    }
                    self.buf.extend_from_slice(&chunk[..n as usize]);
                    if self.buf.len() > 64 << 10 {
                        break;
                    }
                }
                if hark_tls::is_alert(&self.buf) {
                    self.stopped = true;
                    return true;
                }
            }
        }
        if self.buf.len() > 64 << 10 {
            self.stopped = true;
            return false;
        }
        loop {
            match Control::take(&self.buf) {
                Ok(Some((c, used))) => {
                    self.buf.drain(..used);
                    act(c);
                }
                Ok(None) => return false,
                Err(_) => {
                    self.stopped = true;
                    return false;
                }
            }
        }
    }
}
