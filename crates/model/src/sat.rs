//! Saturating sums. Totals of bytes and nanoseconds come from the probes'
//! streams, and a corrupt stream can carry any value: adding must never
//! panic (debug builds check overflow) nor wrap to a small, believable
//! number. The analyses and the outputs both sum such values.

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

/// The saturating sum of `values`.
#[inline]
pub fn total(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_stop_at_the_largest_value() {
        assert_eq!(total([1, 2, 3]), 6);
        assert_eq!(total([u64::MAX - 1, 2, 5]), u64::MAX);
        assert_eq!(total([]), 0);
        let mut x = u64::MAX - 3;
        x.sat(10);
        assert_eq!(x, u64::MAX);
    }
}
