//! Saturating sums. Totals of bytes and nanoseconds come from the streams,
//! and a corrupt stream can carry any value: adding must never panic (debug
//! builds check overflow) nor wrap to a small, believable number.

/// Saturating addition in place.
pub trait Sat {
    /// `*self += v`, stopping at the largest value.
    fn sat(&mut self, v: u64);
}

impl Sat for u64 {
    #[inline(always)]
    fn sat(&mut self, v: u64) {
        *self = self.saturating_add(v);
    }
}
