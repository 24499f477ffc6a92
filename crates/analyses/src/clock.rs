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
}

/// The offset a measurement gives: Cristian's estimate, or the *expected*
/// offset when the estimate lies within half the round trip (plus the
/// expectation's own slack) of it. The true offset is within half the
/// round trip of the estimate, so the expected one is then as consistent
/// with the measurement.
///
/// Against world rank 0 the expected offset is 0. Against the server it
/// is the first measurement of the same job on the same host (`shared`,
/// with half its round trip as slack), else the stream's handshake. On one
/// host the processes read one clock (`CLOCK_MONOTONIC`, or the TSC
/// calibrated against it), so one offset is the truth for all of them,
/// and independent estimates differ only by the ping-pong's noise
/// (microseconds when ranks share cores: enough to make receives complete
/// before their sends). Offsets that the measurement can tell from the
/// expected one (another host, a skewed clock) are kept as measured.
pub fn applied_offset_ns(s: &ClockSync, expected: Expected) -> i64 {
    let offset = s.offset_ns();
    if offset.abs_diff(expected.offset_ns) <= s.uncertainty_ns().saturating_add(expected.slack_ns) {
        expected.offset_ns
    } else {
        offset
    }
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
    /// Per phase (init, finalize): the first server measurement of the
    /// same job on the same host, when the server keeps one.
    shared: [Option<Expected>; 2],
}

impl Alignment {
    /// A stream whose handshake maps its clock by `handshake_ns`.
    pub fn new(handshake_ns: i64) -> Alignment {
        Alignment {
            handshake_ns,
            reference_ns: None,
            init: None,
            finalize: None,
            shared: [None, None],
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

    /// A measurement arrived, with the first of its phase on the same host
    /// (see [`applied_offset_ns`]); the last one of each phase holds.
    pub fn measured_sharing(&mut self, sync: ClockSync, shared: Option<Expected>) {
        self.shared[phase_index(sync.phase)] = shared;
        self.measured(sync);
    }

    /// What measurement `s` is compared with (see [`applied_offset_ns`]).
    pub fn expected(&self, s: &ClockSync) -> Expected {
        let exact = |offset_ns| Expected {
            offset_ns,
            slack_ns: 0,
        };
        match s.reference {
            ClockReference::WorldRank0 => exact(0),
            ClockReference::Server => {
                self.shared[phase_index(s.phase)].unwrap_or(exact(self.handshake_ns))
            }
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
    /// [`measurement_bound_ns`]).
    pub fn measurement_bound_ns(&self, s: &ClockSync) -> u64 {
        measurement_bound_ns(s, self.expected(s))
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
            if f.local_ns > i.local_ns {
                let span = f.local_ns - i.local_ns;
                m.from_ns = i.local_ns;
                m.until_ns = f.local_ns;
                m.drift_per_ns = (self.applied_ns(&f) - self.applied_ns(&i)) as f64 / span as f64;
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
    fn a_host_shares_its_first_measurement_when_it_agrees() {
        let first = Expected {
            offset_ns: 1_000_000,
            slack_ns: 5_000,
        };
        let mut a = Alignment::new(1_300_000);
        // 8 µs from the host's first: within 5 + 5 µs, the host's offset.
        a.measured_sharing(
            with_server(ClockPhase::Init, 100, 1_008_000, 10_000),
            Some(first),
        );
        assert_eq!(a.mapping().common(0), 1_000_000);
        assert_eq!(a.bound_ns(), 5_000 + 8_000);
        // 50 ms from it (a skewed clock): its own.
        a.measured_sharing(
            with_server(ClockPhase::Init, 100, 51_000_000, 10_000),
            Some(first),
        );
        assert_eq!(a.mapping().common(0), 51_000_000);
        assert_eq!(a.bound_ns(), 5_000);
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
        a.measured(sync(ClockPhase::Finalize, 3_000_000, -20_000));
        let m = a.mapping();
        assert_eq!(m.common(1_000_000), 1_000_000 - 40_000);
        assert_eq!(m.common(2_000_000), 2_000_000 - 30_000);
        assert_eq!(m.common(2_500_000), 2_500_000 - 25_000);
        assert_eq!(m.common(3_000_000), 3_000_000 - 20_000);
        // Before init and after finalize the nearest measurement holds.
        assert_eq!(m.common(500_000), 500_000 - 40_000);
        assert_eq!(m.common(9_000_000), 9_000_000 - 20_000);
        // The drift on top of the finalize measurement's half round trip.
        assert_eq!(a.residual_ns(), 20_000 + 10_000);
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
