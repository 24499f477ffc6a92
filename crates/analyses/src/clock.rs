//! One timeline across ranks: how a stream's probe clock maps onto the
//! run's common timeline (the server's `CLOCK_REALTIME`, ns since the epoch).
//!
//! Every stream starts with its handshake's estimate: `common = probe +
//! handshake offset`, good to about a millisecond. MPI processes then measure
//! their offset to world rank 0's probe clock by a ping-pong at `MPI_Init`
//! and again at `MPI_Finalize` (`Clock` frames, `docs/wire.md`). Once both
//! this stream's init measurement and the reference (world rank 0's
//! handshake offset) are known, the mapping becomes
//!
//! ```text
//! common(t) = t + reference + offset(t)
//! offset(t) = init offset                                   before the finalize measurement arrives
//!           = init offset + (t − t_init) × drift / (t_fin − t_init), t clamped to [t_init, t_fin], after
//! ```
//!
//! so all ranks share rank 0's handshake and differ from it only by what the
//! ping-pong measured. Events are analysed online, before the finalize
//! measurement exists: they are mapped with the init offset (drift not
//! corrected), and a batch analysed after the finalize frame arrived with the
//! interpolation. Each batch takes one [`Mapping`] when its analysis starts.
//! What the online mapping leaves uncorrected, |finalize offset − init
//! offset|, is reported as the rank's residual alignment error.
//!
//! Nothing here can corrupt time: readers bound every offset
//! (`hark_wire::MAX_CLOCK_OFFSET_NS`), arithmetic saturates, the interpolated
//! offset stays between the two measured ones, and an alignment that
//! disagrees with the stream's own handshake by more than
//! [`MAX_DISAGREEMENT_NS`] is not applied (the stream keeps its handshake and
//! the model says so).

use hark_wire::{ClockPhase, ClockSync};

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

/// The offset a measurement gives: Cristian's estimate, or 0 when the
/// estimate lies within half the round trip of 0. The true offset is
/// within half the round trip of the estimate, so 0 is then as consistent
/// with the measurement; and it is the truth on one host, whose processes
/// read one clock (`CLOCK_MONOTONIC`, or the TSC calibrated against it),
/// where all the estimate says is the ping-pong's noise (microseconds when
/// ranks share cores: enough to make receives complete before their
/// sends). Offsets that the measurement can tell from 0 are kept as
/// measured.
pub fn applied_offset_ns(s: &ClockSync) -> i64 {
    let offset = s.offset_ns();
    if offset.unsigned_abs() <= s.round_trip_ns / 2 {
        0
    } else {
        offset
    }
}

/// How a stream's clock was placed on the common timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The handshake's estimate alone (no MPI, alignment off or failed, or
    /// world rank 0's reference not known).
    Handshake,
    /// The MPI ping-pong with world rank 0.
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
}

impl Alignment {
    /// A stream whose handshake maps its clock by `handshake_ns`.
    pub fn new(handshake_ns: i64) -> Alignment {
        Alignment {
            handshake_ns,
            reference_ns: None,
            init: None,
            finalize: None,
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

    /// What the online mapping leaves uncorrected: |finalize offset − init
    /// offset|, 0 without both.
    pub fn residual_ns(&self) -> u64 {
        match (self.init, self.finalize) {
            (Some(i), Some(f)) => applied_offset_ns(&f).abs_diff(applied_offset_ns(&i)),
            _ => 0,
        }
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
        let reference = self.reference_ns?;
        let first = self.init.or(self.finalize)?;
        let base_ns = reference.saturating_add(applied_offset_ns(&first));
        let mut m = Mapping::constant(base_ns);
        if let (Some(i), Some(f)) = (self.init, self.finalize) {
            if f.local_ns > i.local_ns {
                let span = f.local_ns - i.local_ns;
                m.from_ns = i.local_ns;
                m.until_ns = f.local_ns;
                m.drift_per_ns =
                    (applied_offset_ns(&f) - applied_offset_ns(&i)) as f64 / span as f64;
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
        }
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
        assert_eq!(a.residual_ns(), 20_000);
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
        assert_eq!(a.residual_ns(), 30_000);
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
