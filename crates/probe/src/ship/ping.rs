//! Aligning this process's probe clock with the server's, by a ping-pong on
//! a connection of its own (Cristian's algorithm).
//!
//! The probe sends a `ClockPing` at `t_send`, the server's reader answers at
//! once with its `CLOCK_REALTIME` (the common timeline itself), the answer
//! arrives at `t_recv`: `server − (t_send + t_recv) / 2` is the offset,
//! wrong by at most half the round trip whatever the delays of the two
//! ways. Of [`ROUNDS`] rounds the one with the smallest round trip is kept.
//!
//! A connection of its own, not the stream's: the stream's bytes may go
//! through a shared-memory ring, its socket is written by the shipping
//! thread and read for control frames, and a ping queued behind packs
//! would measure the queue. Nothing here waits for another process than
//! the server, and every wait is bounded (the connect and receive
//! timeouts): a process whose server is gone loses its alignment, never
//! its run.

use std::os::fd::RawFd;
use std::time::Duration;

use hark_wire::{ClockPhase, ClockReference, ClockSync, Kind, Pong, HEADER_SIZE};

use crate::core::now as clock_now;

/// Rounds of ping-pong per measurement.
pub(crate) const ROUNDS: usize = hark_wire::partition::CLOCK_ROUNDS;

/// One measurement against the first address of `list` that answers (in
/// the order streams try them), each wait bounded by `timeout`; `None` if
/// none can be reached or answers in time. `list` is `HARK_ADDR`'s, or the
/// node's forwarder's socket when the stream goes through it: the
/// forwarder answers with its clock aligned to `hark`'s, and that
/// alignment's bound ([`Pong::bound_ns`]), which the measurement carries
/// on. Only over `unix:` and `tcp:`: a `tls:` service is not pinged, and
/// its streams keep the handshake's estimate.
///
/// Of the rounds, the one whose offset is least uncertain is kept (half
/// its round trip plus the answer's own bound).
pub(crate) fn measure(list: &str, timeout: Duration, phase: ClockPhase) -> Option<ClockSync> {
    let plain: Vec<&str> = super::reach::split(list)
        .into_iter()
        .filter(|a| !a.starts_with("tls:"))
        .collect();
    if plain.is_empty() {
        return None;
    }
    let (fd, _, _) =
        super::reach::connect_first(&plain.join(","), None, timeout, timeout, 4096).ok()?;
    set_receive_timeout(fd, timeout);
    let best = rounds(fd, phase);
    // SAFETY: our own descriptor; the raw syscall bypasses the probe's
    // `close` wrapper.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    best
}

fn rounds(fd: RawFd, phase: ClockPhase) -> Option<ClockSync> {
    let mut ping = Vec::with_capacity(HEADER_SIZE);
    hark_wire::encode_clock_ping(&mut ping);
    let mut best: Option<ClockSync> = None;
    for _ in 0..ROUNDS {
        let t_send = clock_now();
        if !send_all(fd, &ping) {
            break;
        }
        let Some(pong) = receive_pong(fd) else {
            break;
        };
        let round_trip = clock_now().saturating_sub(t_send);
        let sync = ClockSync {
            phase,
            local_ns: t_send + round_trip / 2,
            reference_ns: pong.reference_ns,
            round_trip_ns: round_trip,
            reference: ClockReference::Server,
            relay_bound_ns: pong.bound_ns,
        };
        if best.is_none_or(|b| sync.uncertainty_ns() < b.uncertainty_ns()) {
            best = Some(sync);
        }
    }
    best
}

fn send_all(fd: RawFd, bytes: &[u8]) -> bool {
    // SAFETY: `bytes` is valid for its length; MSG_NOSIGNAL turns a closed
    // server into EPIPE instead of SIGPIPE.
    let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
    n == bytes.len() as isize
}

/// The answer of one `ClockPong`, or `None` on a timeout, a closed
/// connection, or anything else.
fn receive_pong(fd: RawFd) -> Option<Pong> {
    let mut buf = [0u8; HEADER_SIZE + 16];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the rest of `buf` is writable for its length.
        let n = unsafe { libc::recv(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n <= 0 {
            let interrupted =
                n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
            if interrupted {
                continue;
            }
            return None;
        }
        got += n as usize;
    }
    let kind = u32::from_le_bytes(buf[0..4].try_into().ok()?);
    let len = u32::from_le_bytes(buf[4..8].try_into().ok()?);
    let word = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or_default());
    (kind == Kind::ClockPong as u32 && len == 16).then(|| Pong {
        reference_ns: word(8),
        bound_ns: word(16),
    })
}

fn set_receive_timeout(fd: RawFd, timeout: Duration) {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: `tv` is a valid timeval for SO_RCVTIMEO; a failure leaves
    // the receive unbounded only until the server closes.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_answers_and_the_best_round_is_kept() {
        let dir = std::env::temp_dir().join(format!("hark-ping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let addr = format!("unix:{}", dir.join("s").display());
        let collector = hark_transport::collect::serve_collect(&addr).unwrap();
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let s = measure(&addr, Duration::from_secs(5), ClockPhase::Init).expect("answered");
        assert_eq!(s.reference, ClockReference::Server);
        assert!(s.reference_ns >= before, "{s:?}");
        assert!(s.round_trip_ns < 5_000_000_000, "{s:?}");
        drop(collector);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn over_tcp_too() {
        let collector = hark_transport::collect::serve_collect("tcp:127.0.0.1:0").unwrap();
        let s = measure(
            collector.addr(),
            Duration::from_secs(5),
            ClockPhase::Finalize,
        )
        .expect("answered");
        assert_eq!(
            (s.phase, s.reference),
            (ClockPhase::Finalize, ClockReference::Server)
        );
    }

    #[test]
    fn nobody_listening_is_no_measurement_and_no_wait() {
        let s = measure(
            "unix:/nonexistent/hark.sock",
            Duration::from_millis(200),
            ClockPhase::Init,
        );
        assert_eq!(s, None);
    }
}
