//! Histograms: log2 bins for message sizes, linear bins over ranks for times.

use hark_model::Histogram;

/// Number of log2 size bins: bin 0 holds 0 bytes, bin `k` holds `[2^(k-1), 2^k)`.
pub(crate) const SIZE_BINS: usize = 65;

/// The log2 bin of `bytes`.
#[inline]
pub(crate) fn size_bin(bytes: u64) -> usize {
    (64 - bytes.leading_zeros()) as usize
}

/// A size histogram from log2 bin counts, cut after the last non-empty bin.
pub(crate) fn size_histogram(bins: &[u64; SIZE_BINS]) -> Histogram {
    let Some(last) = bins.iter().rposition(|&c| c > 0) else {
        return Histogram::default();
    };
    let edge = |k: usize| {
        if k == 0 {
            0.0
        } else {
            (1u128 << (k - 1)) as f64
        }
    };
    Histogram {
        edges: (0..=last + 1)
            .map(|k| if k == 0 { 0.0 } else { edge(k) })
            .collect(),
        counts: bins[..=last].to_vec(),
    }
}

/// A histogram of one value per rank over `min(ranks, 20)` equal bins
/// between the smallest and the largest value (TAUmon's view of a function's
/// time across ranks). The largest value falls in the last bin.
pub(crate) fn rank_histogram(values: &[f64]) -> Histogram {
    if values.is_empty() {
        return Histogram::default();
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let bins = values.len().clamp(1, 20);
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    for &v in values {
        let b = if width > 0.0 {
            (((v - lo) / width) as usize).min(bins - 1)
        } else {
            0
        };
        counts[b] += 1;
    }
    Histogram {
        edges: (0..=bins)
            .map(|i| if i == bins { hi } else { lo + width * i as f64 })
            .collect(),
        counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_power_of_two_bins() {
        assert_eq!(size_bin(0), 0);
        assert_eq!(size_bin(1), 1);
        assert_eq!(size_bin(2), 2);
        assert_eq!(size_bin(3), 2);
        assert_eq!(size_bin(4096), 13);
        assert_eq!(size_bin(u64::MAX), 64);
        let mut bins = [0u64; SIZE_BINS];
        bins[size_bin(3)] += 1;
        let h = size_histogram(&bins);
        assert_eq!(h.edges, vec![0.0, 1.0, 2.0, 4.0]);
        assert_eq!(h.counts, vec![0, 0, 1]);
    }

    #[test]
    fn rank_histogram_puts_the_largest_value_in_the_last_bin() {
        let h = rank_histogram(&[0.0, 5.0, 10.0]);
        assert_eq!(h.counts, vec![1, 1, 1]);
        assert_eq!(h.edges.len(), 4);
        assert_eq!(rank_histogram(&[7.0, 7.0]).counts, vec![2, 0]);
    }
}
