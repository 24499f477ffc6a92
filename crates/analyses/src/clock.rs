//! One timeline across ranks: how a stream's probe clock maps onto the
//! run's common timeline (the server's `CLOCK_REALTIME`, ns since the epoch).
//!
//! Every stream starts with its handshake's estimate: `common = probe +
//! handshake offset`, good to about a millisecond. MPI processes then
//! measure their offset by a ping-pong at `MPI_Init` and again at
//! `MPI_Finalize` (`Clock` frames, `docs/wire.md`), against one of two
//! references ([`ClockReference`]):
//!
//! - **the server's clock**, the common timeline itself (streams over a
//!   socket): the measured offset maps the stream directly, no other
//!   stream needed;
//! - **world rank 0's probe clock** (streams over MPI): once the job's
//!   reference (world rank 0's handshake offset) is known too, all ranks
//!   share rank 0's handshake and differ from it only by what the
//!   ping-pong measured.
//!
//! ```text
//! common(t) = t + base + offset(t)          base = 0 (server) or world rank 0's handshake offset
//! offset(t) = init offset                                   before the finalize measurement arrives
//!           = init offset + (t − t_init) × drift / (t_fin − t_init), t clamped to [t_init, t_fin], after
//! ```
//!
//! A finalize offset within the noise of the init one is no drift (one
//! offset throughout), and `t_init`, `t_fin` are the moments of the host's
//! measurements when the host's offsets are applied ([`HostClock`]), so
//! that the processes of one host map with one line.
//!
//! Events are analysed online, before the finalize measurement exists:
//! they are mapped with the init offset (drift not corrected), and a batch
//! analysed after the finalize frame arrived with the interpolation. Each
//! batch takes one [`Mapping`] when its analysis starts.
//!
//! Every offset applied comes with a bound on its error
//! ([`Alignment::bound_ns`]): half the round trip of the ping-pong that set
//! it, plus how far the applied offset is from the measured one, plus the
//! drift the online mapping leaves uncorrected. That bound is what the
//! model reports as the rank's residual alignment error.
//!
//! Nothing here can corrupt time: readers bound every offset
//! (`hark_wire::MAX_CLOCK_OFFSET_NS`), arithmetic saturates, the interpolated
//! offset stays between the two measured ones, and an alignment that
//! disagrees with the stream's own handshake by more than
//! [`MAX_DISAGREEMENT_NS`] is not applied (the stream keeps its handshake and
//! the model says so).

use hark_wire::{ClockPhase, ClockReference, ClockSync};

/// Largest disagreement between the ping-pong's mapping and the stream's own
/// handshake that is believed: one second, a thousand times what the
/// handshake is trusted to. Beyond it one of them is broken, and the
/// handshake, which does not depend on another stream, is kept.
pub const MAX_DISAGREEMENT_NS: u64 = 1_000_000_000;

/// How a probe clock maps onto the common timeline at one moment. Cheap to
/// copy and to apply; a batch of events takes one and uses it throughout.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mapping {
    base_ns: i64,
    from_ns: u64,
    until_ns: u64,
    drift_per_ns: f64,
}

impl Mapping {
    /// A constant offset: `common = probe + offset_ns`.
    pub fn constant(offset_ns: i64) -> Mapping {
        Mapping {
            base_ns: offset_ns,
            from_ns: 0,
            until_ns: 0,
            drift_per_ns: 0.0,
        }
    }

    /// Whether the mapping is one offset (no drift): it then keeps the
    /// order of timestamps, so the earliest of a batch maps to the earliest.
    #[inline]
    pub fn is_offset(&self) -> bool {
        self.drift_per_ns == 0.0
    }

    /// A probe timestamp on the common timeline, in ns.
    #[inline]
    pub fn common(&self, probe_ns: u64) -> u64 {
        if self.drift_per_ns == 0.0 {
            // The common case: no drift known (yet), one add per event.
            return probe_ns.saturating_add_signed(self.base_ns);
        }
        let since = probe_ns.clamp(self.from_ns, self.until_ns) - self.from_ns;
        let drift = (since as f64 * self.drift_per_ns) as i64;
        probe_ns.saturating_add_signed(self.base_ns.saturating_add(drift))
    }
}

/// What a measurement is compared with before it is applied: an offset
/// the stream is expected to have, and how far that expectation may itself
/// be off (`slack_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The expected offset, in ns.
    pub offset_ns: i64,
    /// How far `offset_ns` may be from the truth, in ns.
    pub slack_ns: u64,
    /// When the measurement that set it was taken, on the probe clock
    /// (its `local_ns`), if it was one of the host's: a stream that applies
    /// the host's offset interpolates from the host's moment, so that every
    /// process of the host maps its clock with one line.
    pub local_ns: Option<u64>,
}

impl Expected {
    /// An expectation without slack or moment (zero, or a handshake).
    pub fn exact(offset_ns: i64) -> Expected {
        Expected {
            offset_ns,
            slack_ns: 0,
            local_ns: None,
        }
    }
}

/// The best measurement against the server of each phase on one host of a
/// job: the one with the smallest round trip, whose estimate is the
/// tightest. The processes of one host read one clock, so all of them
/// apply the host's offsets when theirs agree (see [`applied_offset_ns`]);
/// the server keeps one per host and every stream of the host reads it as
/// it is now ([`Alignment::with_host`]), so that a better measurement
/// arriving later moves all of them at once and they never disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostClock {
    best: [Option<Expected>; 2],
}

impl HostClock {
    /// A measurement of the host's clock: kept if its round trip is
    /// shorter than the best one of its phase so far.
    pub fn offer(&mut self, s: &ClockSync) {
        let e = Expected {
            offset_ns: s.offset_ns(),
            slack_ns: s.uncertainty_ns(),
            local_ns: Some(s.local_ns),
        };
        let best = &mut self.best[phase_index(s.phase)];
        if best.is_none_or(|b| e.slack_ns < b.slack_ns) {
            *best = Some(e);
        }
    }

    /// The host's best measurement of `phase`, if any.
    pub fn best(&self, phase: ClockPhase) -> Option<Expected> {
        self.best[phase_index(phase)]
    }
}

/// The offset a measurement gives: Cristian's estimate, or the *expected*
/// offset when the estimate lies within half the round trip (plus the
/// expectation's own slack) of it. The true offset is within half the
/// round trip of the estimate, so the expected one is then as consistent
/// with the measurement.
///
/// At `MPI_Finalize` the expected offset is the one applied at `MPI_Init`
/// (with that measurement's bound as slack): a drift the two measurements
/// cannot tell from their noise is none, so a short run is not bent by the
/// difference of two noisy estimates (microseconds over milliseconds).
/// Otherwise, against world rank 0 the expected offset is 0; against the
/// server it is the best measurement of the same job on the same host
/// ([`HostClock`], with half its round trip as slack), else the stream's
/// handshake. On one
/// host the processes read one clock (`CLOCK_MONOTONIC`, or the TSC
/// calibrated against it), so one offset is the truth for all of them,
/// and independent estimates differ only by the ping-pong's noise
/// (microseconds when ranks share cores: enough to make receives complete
/// before their sends). Offsets that the measurement can tell from the
/// expected one (another host, a skewed clock) are kept as measured.
pub fn applied_offset_ns(s: &ClockSync, expected: Expected) -> i64 {
    if agrees(s, expected) {
        expected.offset_ns
    } else {
        s.offset_ns()
    }
}

/// Whether measurement `s` cannot be told from `expected`: within half its
/// round trip plus the expectation's slack.
fn agrees(s: &ClockSync, expected: Expected) -> bool {
    s.offset_ns().abs_diff(expected.offset_ns)
        <= s.uncertainty_ns().saturating_add(expected.slack_ns)
}

/// How far the offset applied from `s` can be from the truth: half the
/// round trip (Cristian's bound on the estimate) and the answering clock's
/// own bound (a node's forwarder's alignment with hark), plus the distance
/// from the estimate to the offset applied.
pub fn measurement_bound_ns(s: &ClockSync, expected: Expected) -> u64 {
    s.uncertainty_ns()
        .saturating_add(applied_offset_ns(s, expected).abs_diff(s.offset_ns()))
}

fn phase_index(p: ClockPhase) -> usize {
    match p {
        ClockPhase::Init => 0,
        ClockPhase::Finalize => 1,
    }
}

/// How a stream's clock was placed on the common timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The handshake's estimate alone (no MPI, alignment off or failed, or
    /// world rank 0's reference not known).
    Handshake,
    /// A ping-pong, with the server or (over MPI) with world rank 0.
    PingPong,
    /// A ping-pong that disagreed with the handshake by more than
    /// [`MAX_DISAGREEMENT_NS`]; the handshake is used.
    Rejected,
}

/// Everything known about one stream's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alignment {
    handshake_ns: i64,
    reference_ns: Option<i64>,
    init: Option<ClockSync>,
    finalize: Option<ClockSync>,
    /// The best server measurements of the same job on the same host, as
    /// the server keeps them now, if it does.
    host: Option<HostClock>,
}

impl Alignment {
    /// A stream whose handshake maps its clock by `handshake_ns`.
    pub fn new(handshake_ns: i64) -> Alignment {
        Alignment {
            handshake_ns,
            reference_ns: None,
            init: None,
            finalize: None,
            host: None,
        }
    }

    /// The stream's own handshake offset.
    pub fn handshake_ns(&self) -> i64 {
        self.handshake_ns
    }

    /// World rank 0's handshake offset, once known (see
    /// [`Alignment::set_reference`]).
    pub fn reference_ns(&self) -> Option<i64> {
        self.reference_ns
    }

    /// World rank 0's handshake offset: the job's reference.
    pub fn set_reference(&mut self, reference_ns: i64) {
        self.reference_ns = Some(reference_ns);
    }

    /// This alignment with its host's best measurements as they are now
    /// (see [`HostClock`]).
    pub fn with_host(mut self, host: HostClock) -> Alignment {
        self.host = Some(host);
        self
    }

    /// What measurement `s` is compared with (see [`applied_offset_ns`]).
    pub fn expected(&self, s: &ClockSync) -> Expected {
        if let (ClockPhase::Finalize, Some(i)) = (s.phase, self.init) {
            let at_init = Expected {
                local_ns: Some(self.moment(&i)),
                offset_ns: self.applied_ns(&i),
                slack_ns: self.measurement_bound_ns(&i),
            };
            if i.reference == s.reference && agrees(s, at_init) {
                return at_init;
            }
        }
        match s.reference {
            ClockReference::WorldRank0 => Expected::exact(0),
            ClockReference::Server => self
                .host
                .and_then(|h| h.best(s.phase))
                .unwrap_or(Expected::exact(self.handshake_ns)),
        }
    }

    /// When the offset applied from `s` holds, on the probe clock: the
    /// moment of the host's measurement when the host's offset is applied
    /// (so that the processes of one host interpolate alike), else `s`'s.
    fn moment(&self, s: &ClockSync) -> u64 {
        let e = self.expected(s);
        match e.local_ns {
            Some(at) if applied_offset_ns(s, e) == e.offset_ns => at,
            _ => s.local_ns,
        }
    }

    /// A measurement arrived (the last one of each phase holds).
    pub fn measured(&mut self, sync: ClockSync) {
        match sync.phase {
            ClockPhase::Init => self.init = Some(sync),
            ClockPhase::Finalize => self.finalize = Some(sync),
        }
    }

    /// The measurement at `MPI_Init`, if any.
    pub fn init(&self) -> Option<ClockSync> {
        self.init
    }

    /// The measurement at `MPI_Finalize`, if any.
    pub fn finalize(&self) -> Option<ClockSync> {
        self.finalize
    }

    /// Which mapping [`Alignment::mapping`] gives.
    pub fn method(&self) -> Method {
        self.aligned().map_or(Method::Handshake, |(_, believed)| {
            if believed {
                Method::PingPong
            } else {
                Method::Rejected
            }
        })
    }

    /// The offset applied from measurement `s` (see [`applied_offset_ns`]).
    pub fn applied_ns(&self, s: &ClockSync) -> i64 {
        applied_offset_ns(s, self.expected(s))
    }

    /// The bound on the error of the offset applied from `s` (see
    /// [`measurement_bound_ns`]). When it is the host's best measurement's
    /// offset, that measurement bounds it too (one host, one clock): half
    /// its round trip, if smaller, so that one process's long round trip
    /// on a loaded host does not widen what its host's best one shows.
    pub fn measurement_bound_ns(&self, s: &ClockSync) -> u64 {
        let e = self.expected(s);
        let own = measurement_bound_ns(s, e);
        let host = self.host.and_then(|h| h.best(s.phase));
        if s.reference == ClockReference::Server
            && host == Some(e)
            && applied_offset_ns(s, e) == e.offset_ns
        {
            own.min(e.slack_ns)
        } else {
            own
        }
    }

    /// How far this stream's mapped timestamps can be from the reference's
    /// clock, 0 when it is not aligned by ping-pong. With one measurement,
    /// that measurement's bound. With both: the finalize measurement's
    /// bound plus the drift between the two offsets applied, which events
    /// mapped online (with the init offset) leave uncorrected, or the init
    /// measurement's bound if larger. (With linear drift: online, the
    /// error at time t is |init offset − true offset(t)|, at most the init
    /// bound at the start and |drift| + the finalize bound at the end;
    /// interpolated, at most the larger of the two bounds.) Drift after the
    /// last measurement is not known and not included.
    pub fn bound_ns(&self) -> u64 {
        if self.method() != Method::PingPong {
            return 0;
        }
        match (self.init, self.finalize) {
            (Some(i), Some(f)) => {
                let drift = self.applied_ns(&f).abs_diff(self.applied_ns(&i));
                self.measurement_bound_ns(&i)
                    .max(self.measurement_bound_ns(&f).saturating_add(drift))
            }
            (Some(m), None) | (None, Some(m)) => self.measurement_bound_ns(&m),
            (None, None) => 0,
        }
    }

    /// The residual alignment error the model reports: [`Alignment::bound_ns`].
    pub fn residual_ns(&self) -> u64 {
        self.bound_ns()
    }

    /// The mapping to use now.
    pub fn mapping(&self) -> Mapping {
        match self.aligned() {
            Some((m, true)) => m,
            _ => Mapping::constant(self.handshake_ns),
        }
    }

    /// The ping-pong's mapping, if it can be made, and whether it agrees
    /// with the handshake.
    fn aligned(&self) -> Option<(Mapping, bool)> {
        let first = self.init.or(self.finalize)?;
        let base_ns = match first.reference {
            ClockReference::Server => self.applied_ns(&first),
            ClockReference::WorldRank0 => {
                self.reference_ns?.saturating_add(self.applied_ns(&first))
            }
        };
        let mut m = Mapping::constant(base_ns);
        if let (Some(i), Some(f)) = (self.init, self.finalize) {
            let drift = self.applied_ns(&f) - self.applied_ns(&i);
            let (from, until) = (self.moment(&i), self.moment(&f));
            if drift != 0 && until > from {
                m.from_ns = from;
                m.until_ns = until;
                m.drift_per_ns = drift as f64 / (until - from) as f64;
            }
        }
        let believed = base_ns.abs_diff(self.handshake_ns) <= MAX_DISAGREEMENT_NS;
        Some((m, believed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(phase: ClockPhase, local_ns: u64, offset: i64) -> ClockSync {
        ClockSync {
            phase,
            local_ns,
            reference_ns: local_ns.saturating_add_signed(offset),
            round_trip_ns: 20_000,
            reference: ClockReference::WorldRank0,
            relay_bound_ns: 0,
        }
    }

    fn with_server(phase: ClockPhase, local_ns: u64, offset: i64, round_trip_ns: u64) -> ClockSync {
        ClockSync {
            phase,
            local_ns,
            reference_ns: local_ns.saturating_add_signed(offset),
            round_trip_ns,
            reference: ClockReference::Server,
            relay_bound_ns: 0,
        }
    }

    /// A host offered the measurements `m`, in order.
    fn host_of(m: &[ClockSync]) -> HostClock {
        let mut host = HostClock::default();
        for s in m {
            host.offer(s);
        }
        host
    }

    #[test]
    fn a_forwarder_s_bound_adds_to_the_half_round_trip() {
        // Through the node's forwarder: 10 µs round trip to it, and the
        // forwarder's own alignment with hark good to 30 µs.
        let mut relayed = with_server(ClockPhase::Init, 100, 1_020_000, 10_000);
        relayed.relay_bound_ns = 30_000;
        assert_eq!(relayed.uncertainty_ns(), 35_000);
        // 20 µs from the handshake: within 35 µs, so the handshake's offset
        // is as consistent with it, and applied; the bound says both.
        let mut a = Alignment::new(1_000_000);
        a.measured(relayed);
        assert_eq!(a.applied_ns(&relayed), 1_000_000);
        assert_eq!(a.bound_ns(), 35_000 + 20_000);
        // Without the forwarder's bound the same reading is its own offset.
        let mut direct = Alignment::new(1_000_000);
        direct.measured(with_server(ClockPhase::Init, 100, 1_020_000, 10_000));
        assert_eq!(direct.bound_ns(), 5_000);
    }

    #[test]
    fn a_host_shares_its_best_measurement_when_it_agrees() {
        // The first measurement (round trip 30 µs), then a better one
        // (10 µs): the better one is the host's.
        let host = host_of(&[
            with_server(ClockPhase::Init, 50, 1_012_000, 30_000),
            with_server(ClockPhase::Init, 90, 1_000_000, 10_000),
            with_server(ClockPhase::Init, 95, 1_020_000, 20_000),
        ]);
        assert_eq!(host.best(ClockPhase::Init).unwrap().offset_ns, 1_000_000);
        assert_eq!(host.best(ClockPhase::Finalize), None);
        // 8 µs from the host's: within 5 + 5 µs, the host's offset.
        let mut a = Alignment::new(1_300_000);
        a.measured(with_server(ClockPhase::Init, 100, 1_008_000, 10_000));
        let a = a.with_host(host);
        assert_eq!(a.mapping().common(0), 1_000_000);
        // Its own bound would be 5 + 8 µs; the host's best bounds it to 5.
        assert_eq!(a.bound_ns(), 5_000);
        // A longer round trip of its own, 200 µs: still the host's 5 µs.
        let mut c = Alignment::new(1_300_000);
        c.measured(with_server(ClockPhase::Init, 100, 1_090_000, 200_000));
        assert_eq!(c.with_host(host).mapping().common(0), 1_000_000);
        assert_eq!(c.with_host(host).bound_ns(), 5_000);
        // 50 ms from it (a skewed clock): its own.
        let mut b = Alignment::new(1_300_000);
        b.measured(with_server(ClockPhase::Init, 100, 51_000_000, 10_000));
        let b = b.with_host(host);
        assert_eq!(b.mapping().common(0), 51_000_000);
        assert_eq!(b.bound_ns(), 5_000);
    }

    #[test]
    fn processes_of_one_host_map_their_clock_with_one_line() {
        // The pause program's case: two ranks measured at different
        // moments, each finalize estimate a few µs from the init one by
        // noise alone. Each used to interpolate over its own moments, so
        // that at one instant their offsets differed by a µs, more than a
        // message takes: receives completed before their sends.
        let host = host_of(&[
            with_server(ClockPhase::Init, 1_000_000, 5_000_000, 20_000),
            with_server(ClockPhase::Init, 4_800_000, 5_003_000, 40_000),
            with_server(ClockPhase::Finalize, 9_000_000, 4_996_000, 14_000),
            with_server(ClockPhase::Finalize, 9_800_000, 4_994_000, 38_000),
        ]);
        let rank = |init: ClockSync, fin: ClockSync| {
            let mut a = Alignment::new(5_100_000);
            a.measured(init);
            a.measured(fin);
            a.with_host(host)
        };
        let r0 = rank(
            with_server(ClockPhase::Init, 1_000_000, 5_000_000, 20_000),
            with_server(ClockPhase::Finalize, 9_000_000, 4_996_000, 14_000),
        );
        let r1 = rank(
            with_server(ClockPhase::Init, 4_800_000, 5_003_000, 40_000),
            with_server(ClockPhase::Finalize, 9_800_000, 4_994_000, 38_000),
        );
        // A drift within the measurements' noise is none: one offset.
        for t in [0, 2_000_000, 5_000_000, 9_500_000, 20_000_000] {
            assert_eq!(r0.mapping().common(t), t + 5_000_000);
            assert_eq!(r1.mapping().common(t), t + 5_000_000);
        }
        assert!(r0.mapping().is_offset() && r1.mapping().is_offset());
        // A drift beyond the noise (a long run): both interpolate between
        // the host's measurements, at the host's moments, alike.
        let host = host_of(&[
            with_server(ClockPhase::Init, 1_000_000, 5_000_000, 20_000),
            with_server(ClockPhase::Finalize, 9_000_000, 5_200_000, 14_000),
        ]);
        let rank = |init_at: u64, fin_at: u64| {
            let mut a = Alignment::new(5_100_000);
            a.measured(with_server(ClockPhase::Init, init_at, 5_004_000, 30_000));
            a.measured(with_server(ClockPhase::Finalize, fin_at, 5_195_000, 30_000));
            a.with_host(host)
        };
        let (r0, r1) = (rank(1_200_000, 9_100_000), rank(4_800_000, 9_800_000));
        for t in [0, 2_000_000, 5_000_000, 9_500_000] {
            assert_eq!(r0.mapping().common(t), r1.mapping().common(t), "at {t}");
        }
        assert_eq!(r0.mapping().common(5_000_000), 5_000_000 + 5_100_000);
    }

    #[test]
    fn a_measurement_against_the_server_needs_no_reference() {
        let mut a = Alignment::new(1_000_000);
        a.measured(with_server(ClockPhase::Init, 100_000, 51_000_000, 20_000));
        assert_eq!(a.method(), Method::PingPong);
        assert_eq!(a.mapping().common(5), 5 + 51_000_000);
        // Half the round trip.
        assert_eq!(a.bound_ns(), 10_000);
        // Within half the round trip of the handshake: the handshake, and
        // the bound covers the distance to the estimate.
        a.measured(with_server(ClockPhase::Init, 100_000, 1_004_000, 20_000));
        assert_eq!(a.mapping().common(5), 5 + 1_000_000);
        assert_eq!(a.bound_ns(), 14_000);
        // The drift since: on top of the finalize measurement's bound.
        a.measured(with_server(
            ClockPhase::Finalize,
            200_000,
            1_300_000,
            40_000,
        ));
        assert_eq!(a.bound_ns(), 20_000 + 300_000);
    }

    #[test]
    fn the_handshake_holds_until_both_the_reference_and_a_measurement_are_known() {
        let mut a = Alignment::new(1_000_000);
        assert_eq!(a.mapping().common(5), 1_000_005);
        a.measured(sync(ClockPhase::Init, 100_000, -50_000));
        assert_eq!(
            (a.method(), a.mapping().common(5)),
            (Method::Handshake, 1_000_005)
        );
        a.set_reference(2_000_000);
        assert_eq!(a.method(), Method::PingPong);
        assert_eq!(a.mapping().common(5), 2_000_000 + 5 - 50_000);
    }

    #[test]
    fn the_offset_is_interpolated_between_init_and_finalize_and_held_outside() {
        let mut a = Alignment::new(0);
        a.set_reference(0);
        a.measured(sync(ClockPhase::Init, 1_000_000, -40_000));
        // Online, before finalize: the init offset, everywhere.
        assert_eq!(a.mapping().common(3_000_000), 3_000_000 - 40_000);
        // 40 µs from the init offset: more than the two half round trips
        // (10 + 10 µs), a drift.
        a.measured(sync(ClockPhase::Finalize, 3_000_000, 0));
        let m = a.mapping();
        assert_eq!(m.common(1_000_000), 1_000_000 - 40_000);
        assert_eq!(m.common(2_000_000), 2_000_000 - 20_000);
        assert_eq!(m.common(2_500_000), 2_500_000 - 10_000);
        assert_eq!(m.common(3_000_000), 3_000_000);
        // Before init and after finalize the nearest measurement holds.
        assert_eq!(m.common(500_000), 500_000 - 40_000);
        assert_eq!(m.common(9_000_000), 9_000_000);
        // The drift on top of the finalize measurement's half round trip.
        assert_eq!(a.residual_ns(), 40_000 + 10_000);
        // Within the noise of the init offset: no drift, one offset.
        a.measured(sync(ClockPhase::Finalize, 3_000_000, -25_000));
        assert!(a.mapping().is_offset());
        assert_eq!(a.mapping().common(3_000_000), 3_000_000 - 40_000);
        assert_eq!(a.residual_ns(), 10_000 + 15_000);
    }

    #[test]
    fn an_offset_within_half_the_round_trip_of_zero_is_zero() {
        // `sync` measures with a round trip of 20 µs.
        let mut a = Alignment::new(0);
        a.set_reference(0);
        a.measured(sync(ClockPhase::Init, 1_000_000, 10_000));
        assert_eq!(a.mapping().common(2_000_000), 2_000_000);
        a.measured(sync(ClockPhase::Init, 1_000_000, -10_000));
        assert_eq!(a.mapping().common(2_000_000), 2_000_000);
        // Told apart from 0: as measured.
        a.measured(sync(ClockPhase::Init, 1_000_000, -10_001));
        assert_eq!(a.mapping().common(2_000_000), 2_000_000 - 10_001);
        // The drift is between the offsets applied.
        a.measured(sync(ClockPhase::Init, 1_000_000, 4_000));
        a.measured(sync(ClockPhase::Finalize, 3_000_000, 30_000));
        assert_eq!(a.mapping().common(2_000_000), 2_000_000 + 15_000);
        assert_eq!(a.residual_ns(), 30_000 + 10_000);
    }

    #[test]
    fn an_alignment_far_from_the_handshake_is_not_applied() {
        let mut a = Alignment::new(0);
        a.set_reference(0);
        a.measured(sync(ClockPhase::Init, 10, MAX_DISAGREEMENT_NS as i64 + 1));
        assert_eq!(a.method(), Method::Rejected);
        assert_eq!(a.mapping().common(10), 10);
    }

    #[test]
    fn extreme_values_saturate_instead_of_wrapping() {
        let m = Mapping::constant(i64::MAX);
        assert_eq!(m.common(u64::MAX - 1), u64::MAX);
        assert_eq!(Mapping::constant(i64::MIN).common(5), 0);
        let mut a = Alignment::new(0);
        a.set_reference(i64::MAX);
        a.measured(sync(ClockPhase::Init, 0, 1 << 62));
        a.measured(sync(ClockPhase::Finalize, 0, -(1 << 62)));
        // Finalize not after init: no interpolation, and no panic.
        let _ = a.mapping().common(u64::MAX);
    }
}
