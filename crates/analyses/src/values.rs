//! Count, min, max and mean of a stream of integer values (counters, marks).

use hark_model::CounterStats;

/// Running statistics of `i64` values; the sum is kept in `i128` so that it
/// cannot overflow before 2^64 values.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Values {
    count: u64,
    min: i64,
    max: i64,
    sum: i128,
}

impl Default for Values {
    fn default() -> Values {
        Values {
            count: 0,
            min: i64::MAX,
            max: i64::MIN,
            sum: 0,
        }
    }
}

impl Values {
    /// Adds one value.
    #[inline]
    pub(crate) fn add(&mut self, v: i64) {
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as i128;
    }

    /// Adds every value `other` saw.
    pub(crate) fn merge(&mut self, other: &Values) {
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// The model's view.
    pub(crate) fn stats(&self) -> CounterStats {
        CounterStats {
            count: self.count,
            min: self.min,
            max: self.max,
            mean: self.sum as f64 / self.count.max(1) as f64,
        }
    }
}
