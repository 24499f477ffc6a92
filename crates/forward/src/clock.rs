//! The node's clock, for its probes' ping-pongs: the forwarder's monotonic
//! clock aligned with `hark`'s, so that a rank aligns with `hark` through
//! its node's forwarder instead of opening connections of its own to
//! `hark` (`docs/cluster.md`, "Clocks through the forwarder").
//!
//! The forwarder aligns itself by the same ping-pong a probe makes
//! (Cristian's algorithm, `docs/wire.md`, "ClockPing"), on a short
//! connection of its own to the address its stream reached: at start, and
//! again whenever a probe pings and the last alignment is older than
//! [`FRESH`] (the pings of `MPI_Init`, then those of `MPI_Finalize`: a
//! check at the end that bounds the drift since). Each answer carries that
//! alignment's bound: half its best round trip, plus [`DRIFT_PPM`] of the
//! time since, which the rank adds to its own half round trip.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hark_wire::{Kind, Pong, HEADER_SIZE};

/// How long an alignment answers the node's pings before it is measured
/// again. Short, because the drift allowed on top grows with it; long
/// enough that the pings of one `MPI_Init` across the node's ranks share
/// one alignment (one connection into `hark`, not one per rank).
pub const FRESH: Duration = Duration::from_millis(200);

/// The drift allowed between the forwarder's `CLOCK_MONOTONIC` and
/// `hark`'s `CLOCK_REALTIME` since an alignment, in parts per million (ns
/// per ms): each clock may be slewed by up to 500 ppm (Linux's `adjtimex`
/// limit), in opposite directions.
pub const DRIFT_PPM: u64 = 1000;

/// One alignment with `hark`'s clock: the best round of a ping-pong.
#[derive(Clone, Copy, Debug)]
struct Aligned {
    /// This clock halfway through the best round.
    mid: Instant,
    /// `hark`'s clock when it answered that round.
    hark_ns: u64,
    /// Half the best round's round trip, plus `hark`'s own bound (0).
    bound_ns: u64,
}

/// The node's clock, aligned with `hark`'s at one address.
pub struct NodeClock {
    at: String,
    timeout: Duration,
    aligned: Mutex<Option<Aligned>>,
    alignments: AtomicU64,
}

impl NodeClock {
    /// A clock aligned on demand with `hark` at `at` (the address the
    /// forwarder's stream reached), each wait bounded by `timeout`.
    pub fn new(at: &str, timeout: Duration) -> NodeClock {
        NodeClock {
            at: at.to_string(),
            timeout,
            aligned: Mutex::new(None),
            alignments: AtomicU64::new(0),
        }
    }

    /// The connections made into `hark` to align (each successful or not).
    pub fn alignments(&self) -> u64 {
        self.alignments.load(Ordering::Relaxed)
    }

    /// Measures the alignment now, if the last one is older than
    /// [`FRESH`] (or there is none); whether one is known.
    pub fn refresh(&self) -> bool {
        let mut aligned = hark_sync::lock(&self.aligned);
        if aligned.is_none_or(|a| a.mid.elapsed() > FRESH) {
            self.alignments.fetch_add(1, Ordering::Relaxed);
            // A failed measurement keeps the old alignment, whose bound
            // keeps growing with its age.
            if let Ok(a) = measure(&self.at, self.timeout) {
                *aligned = Some(a);
            }
        }
        aligned.is_some()
    }

    /// The answer to a probe's ping: `hark`'s clock now, as this clock
    /// estimates it, and the bound of that estimate; `None` if `hark`'s
    /// clock was never reached. Pings of several probes at once wait for
    /// one measurement.
    pub fn answer(&self) -> Option<Pong> {
        self.refresh();
        let a = (*hark_sync::lock(&self.aligned))?;
        let age = a.mid.elapsed();
        let age_ns = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
        Some(Pong {
            reference_ns: a.hark_ns.saturating_add(age_ns),
            bound_ns: a.bound_ns.saturating_add(drift_ns(age)),
        })
    }
}

/// The drift allowed over `age` ([`DRIFT_PPM`]), rounded up.
pub fn drift_ns(age: Duration) -> u64 {
    let ns = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
    ns.saturating_mul(DRIFT_PPM).div_ceil(1_000_000)
}

/// One ping-pong with `hark` at `at` (`unix:` or `tcp:`; a `tls:` service
/// answers no pings), the best of its rounds.
fn measure(at: &str, timeout: Duration) -> io::Result<Aligned> {
    let mut s = connect(at, timeout)?;
    let mut ping = Vec::with_capacity(HEADER_SIZE);
    hark_wire::encode_clock_ping(&mut ping);
    let mut best: Option<Aligned> = None;
    for _ in 0..hark_wire::partition::CLOCK_ROUNDS {
        let sent = Instant::now();
        s.write_all(&ping)?;
        let pong = receive_pong(&mut s)?;
        let round_trip = sent.elapsed();
        let half = round_trip / 2;
        let round = Aligned {
            mid: sent + half,
            hark_ns: pong.reference_ns,
            bound_ns: u64::try_from(half.as_nanos())
                .unwrap_or(u64::MAX)
                .saturating_add(pong.bound_ns),
        };
        if best.is_none_or(|b| round.bound_ns < b.bound_ns) {
            best = Some(round);
        }
    }
    best.ok_or_else(|| io::Error::other("no round of the ping-pong was answered"))
}

/// A connection to `at` with reads and writes bounded by `timeout`.
fn connect(at: &str, timeout: Duration) -> io::Result<Box<dyn ReadWrite>> {
    if let Some(path) = at.strip_prefix("unix:") {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        return Ok(Box::new(s));
    }
    let Some(hostport) = at.strip_prefix("tcp:") else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{at} answers no clock pings (only unix: and tcp: do)"),
        ));
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address found");
    for a in hostport.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                return Ok(Box::new(s));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn receive_pong(s: &mut dyn ReadWrite) -> io::Result<Pong> {
    let mut buf = [0u8; HEADER_SIZE + 16];
    s.read_exact(&mut buf)?;
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let kind = word(0) as u32;
    let len = (word(0) >> 32) as u32;
    if kind != Kind::ClockPong as u32 || len != 16 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("hark answered a clock ping with frame kind {kind} of {len} bytes"),
        ));
    }
    Ok(Pong {
        reference_ns: word(8),
        bound_ns: word(16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn realtime_ns() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    #[test]
    fn answers_hark_s_clock_within_the_bound_it_gives() {
        let collector = hark_transport::collect::serve_collect("tcp:127.0.0.1:0").unwrap();
        let clock = NodeClock::new(collector.addr(), Duration::from_secs(5));
        for _ in 0..3 {
            let before = realtime_ns();
            let p = clock.answer().expect("hark answered");
            let after = realtime_ns();
            // hark's clock is this host's realtime: the answer is within
            // its bound of the interval it was asked in.
            assert!(
                p.reference_ns + p.bound_ns >= before && p.reference_ns <= after + p.bound_ns,
                "{before} {p:?} {after}"
            );
            assert!(p.bound_ns > 0, "{p:?}");
        }
        // The three answers came within FRESH of each other on a quiet
        // machine; on a loaded one, one more measurement at most per
        // FRESH: never one per answer.
        assert!(clock.alignments() >= 1);
    }

    #[test]
    fn a_stale_alignment_is_measured_again_and_its_bound_grows_meanwhile() {
        let collector = hark_transport::collect::serve_collect("tcp:127.0.0.1:0").unwrap();
        let clock = NodeClock::new(collector.addr(), Duration::from_secs(5));
        assert!(clock.refresh());
        assert_eq!(clock.alignments(), 1);
        std::thread::sleep(FRESH + Duration::from_millis(50));
        clock.answer().unwrap();
        assert_eq!(clock.alignments(), 2);
        assert_eq!(drift_ns(Duration::from_millis(200)), 200_000);
        assert_eq!(drift_ns(Duration::from_nanos(1)), 1);
    }

    #[test]
    fn no_hark_no_answer() {
        let clock = NodeClock::new("unix:/nonexistent/hark.sock", Duration::from_millis(200));
        assert_eq!(clock.answer(), None);
        let tls = NodeClock::new("tls:127.0.0.1:1", Duration::from_millis(200));
        assert_eq!(tls.answer(), None);
    }
}
