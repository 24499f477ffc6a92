//! Time series in a fixed number of slices that coarsen as the run grows,
//! shared by every knowledge source that reports over time.
//!
//! A slice starts `1 << slice_shift` ns wide. When an event falls beyond the
//! last slice, neighbouring slices are merged pairwise and the width doubles,
//! as many times as needed, so memory is `slices × metrics` per rank whatever
//! the run's length. Every rank of a program counts from the program's
//! origin with the same initial width, so slice edges agree at every width:
//! series of different ranks, and of different knowledge sources, are
//! brought to a common width by coarsening alone ([`publish`]).

use crate::analysis::Finish;
use crate::sat::Sat;
use hark_model::TimeSlices;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rank's series of one knowledge source; metrics are dense indices
/// chosen by the knowledge source, allocated on first use.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Series {
    shift: u32,
    /// Past this shift, slice edges would not fit in a u64: the last slice
    /// takes whatever lies beyond (only a corrupt clock gets there).
    max_shift: u32,
    slices: usize,
    metrics: Vec<Option<Box<[u64]>>>,
    /// How each metric's neighbouring slices merge (sum unless set).
    kinds: Vec<Combine>,
    /// [`Series::fit`] coarsens only for times at or past this, `slices <<
    /// shift` (`u64::MAX` at the widest): one comparison per event. Not
    /// saved; 0 until a `fit` sets it, and only ever too low.
    #[serde(skip)]
    fits_below: u64,
}

/// How two neighbouring slices of a metric merge when the width doubles.
///
/// Values are unsigned and 0 means "nothing in this slice", so a knowledge
/// source keeping a statistic other than a sum encodes it to fit: a maximum
/// of `v` as `v + 1`, a minimum as `!v` (the largest `!v` is the smallest
/// `v`), a last value as `v + 1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Combine {
    /// Counts, bytes, durations: the sum.
    #[default]
    Sum,
    /// The larger of the two.
    Max,
    /// The later one, unless it is empty (0).
    Last,
}

impl Combine {
    #[inline]
    fn apply(self, into: &mut u64, v: u64) {
        match self {
            Combine::Sum => into.sat(v),
            Combine::Max => *into = (*into).max(v),
            Combine::Last => {
                if v != 0 {
                    *into = v;
                }
            }
        }
    }
}

impl Series {
    /// Slices `1 << shift` ns wide, `slices` of them (rounded up to even).
    pub(crate) fn new(shift: u32, slices: usize) -> Series {
        // Pairwise merging needs an even count.
        let slices = (slices.max(2) + 1) & !1;
        let max_shift = 63 - slices.next_power_of_two().trailing_zeros();
        Series {
            shift: shift.min(max_shift),
            max_shift,
            slices,
            metrics: Vec::new(),
            kinds: Vec::new(),
            fits_below: 0,
        }
    }

    /// How many slices it has.
    pub(crate) fn len(&self) -> usize {
        self.slices
    }

    /// A slice is `1 << shift()` ns wide.
    pub(crate) fn shift(&self) -> u32 {
        self.shift
    }

    /// Slice `i` of `metric` (0 if never used).
    #[cfg(test)]
    pub(crate) fn get(&self, metric: usize, i: usize) -> u64 {
        self.metrics
            .get(metric)
            .and_then(Option::as_ref)
            .and_then(|m| m.get(i).copied())
            .unwrap_or(0)
    }

    /// An empty series of the same settings and width.
    pub(crate) fn empty_like(&self) -> Series {
        Series {
            metrics: Vec::new(),
            kinds: Vec::new(),
            ..*self
        }
    }

    /// Coarsens until `rel` (ns since the origin) falls inside the slices.
    #[inline]
    pub(crate) fn fit(&mut self, rel: u64) {
        if rel >= self.fits_below {
            self.refit(rel);
        }
    }

    #[cold]
    #[inline(never)]
    fn refit(&mut self, rel: u64) {
        while (rel >> self.shift) >= self.slices as u64 && self.shift < self.max_shift {
            self.coarsen();
        }
        // No overflow: `slices << max_shift` is at most 2^63.
        self.fits_below = if self.shift < self.max_shift {
            (self.slices as u64) << self.shift
        } else {
            u64::MAX
        };
    }

    #[cold]
    fn coarsen(&mut self) {
        let half = self.slices / 2;
        for (k, m) in self.metrics.iter_mut().enumerate() {
            let Some(m) = m else { continue };
            let kind = self.kinds.get(k).copied().unwrap_or_default();
            for i in 0..half {
                let mut v = m[2 * i];
                kind.apply(&mut v, m[2 * i + 1]);
                m[i] = v;
            }
            m[half..].fill(0);
        }
        self.shift += 1;
    }

    /// The slice holding `rel` (call [`Series::fit`] first).
    #[inline]
    pub(crate) fn index(&self, rel: u64) -> usize {
        ((rel >> self.shift) as usize).min(self.slices - 1)
    }

    #[inline]
    fn slot(&mut self, metric: usize) -> &mut [u64] {
        if self.metrics.len() <= metric {
            self.metrics.resize(metric + 1, None);
        }
        let n = self.slices;
        self.metrics[metric].get_or_insert_with(|| vec![0; n].into_boxed_slice())
    }

    /// Adds `v` to slice `i` of `metric`.
    #[inline]
    pub(crate) fn add(&mut self, metric: usize, i: usize, v: u64) {
        self.slot(metric)[i].sat(v);
    }

    /// Folds `v` into slice `i` of `metric`, which merges as `kind` (the
    /// same kind every time; see [`Combine`] for the encodings).
    #[inline]
    pub(crate) fn keep(&mut self, metric: usize, i: usize, v: u64, kind: Combine) {
        if self.kinds.len() <= metric {
            self.kinds.resize(metric + 1, Combine::Sum);
        }
        self.kinds[metric] = kind;
        kind.apply(&mut self.slot(metric)[i], v);
    }

    /// Adds another process's series to this one (see
    /// [`crate::RankState::absorb`]): both are brought to the wider width,
    /// and `other`'s metric `m` goes into metric `to(m)` of this one,
    /// combined as that metric merges.
    pub(crate) fn absorb(&mut self, other: &Series, to: impl Fn(usize) -> usize) {
        let mut other = other.clone();
        while self.shift < other.shift {
            self.coarsen();
        }
        while other.shift < self.shift {
            other.coarsen();
        }
        for (m, values) in other.metrics.iter().enumerate() {
            let Some(values) = values else { continue };
            let kind = other.kinds.get(m).copied().unwrap_or_default();
            let into = to(m);
            if kind != Combine::Sum {
                if self.kinds.len() <= into {
                    self.kinds.resize(into + 1, Combine::Sum);
                }
                self.kinds[into] = kind;
            }
            let kind = self.kinds.get(into).copied().unwrap_or_default();
            let slot = self.slot(into);
            for (a, &v) in slot.iter_mut().zip(values.iter()) {
                kind.apply(a, v);
            }
        }
    }

    /// Sets `metric` to the slice-by-slice sum of the metrics `parts`, which
    /// merge as sums; left as it is when none of them was used.
    pub(crate) fn set_sum(&mut self, metric: usize, parts: impl IntoIterator<Item = usize>) {
        let mut sum: Option<Box<[u64]>> = None;
        for p in parts {
            let Some(Some(row)) = self.metrics.get(p) else {
                continue;
            };
            let into = sum.get_or_insert_with(|| vec![0; row.len()].into_boxed_slice());
            for (a, &v) in into.iter_mut().zip(row.iter()) {
                a.sat(v);
            }
        }
        if let Some(sum) = sum {
            self.slot(metric);
            self.metrics[metric] = Some(sum);
        }
    }

    /// The sum of `metric` over all slices (0 if never used).
    pub(crate) fn total(&self, metric: usize) -> u64 {
        self.metrics
            .get(metric)
            .and_then(Option::as_ref)
            .map_or(0, |m| m.iter().fold(0u64, |a, &v| a.saturating_add(v)))
    }

    /// Adds the duration `[start, end)`, which lies in slices `a..=b`, to
    /// the slices it covers.
    #[inline(always)]
    pub(crate) fn add_span(&mut self, metric: usize, (a, b): (usize, usize), start: u64, end: u64) {
        // Nearly every call lies in one slice (calls are microseconds,
        // slices a millisecond or more): inlined without the spreading,
        // whose call would cost more than the addition.
        if a == b {
            self.add(metric, a, end - start);
        } else {
            self.spread(metric, (a, b), start, end);
        }
    }

    /// [`Series::add_span`] over more than one slice.
    #[inline(never)]
    fn spread(&mut self, metric: usize, (a, b): (usize, usize), start: u64, end: u64) {
        let shift = self.shift;
        let slot = self.slot(metric);
        slot[a].sat(((a as u64 + 1) << shift) - start);
        for s in &mut slot[a + 1..b] {
            s.sat(1 << shift);
        }
        slot[b].sat(end.saturating_sub((b as u64) << shift));
    }
}

/// Merges every rank's series into the model's time slices, under the names
/// `name(rank, metric)` gives (`None` skips a metric; metrics of one rank with
/// one name are summed). `series` gives each rank's, in program-rank order
/// (`None` for a rank that sent nothing).
///
/// Whatever is already in `out` (another knowledge source's metrics) and the
/// new series are brought to the widest width either reached, and every
/// metric is cut to the same number of slices: after the last slice holding
/// anything in any metric.
pub(crate) fn publish<'a>(
    cx: &Finish<'_>,
    out: &mut TimeSlices,
    series: impl Iterator<Item = Option<&'a Series>>,
    name: impl Fn(usize, usize) -> Option<String>,
) {
    let ranks = filled(cx, series);
    merge(out, cx.origin_ns, ranks, name);
}

/// Every rank's series, an empty one for a rank that has none.
fn filled<'a>(cx: &Finish<'_>, series: impl Iterator<Item = Option<&'a Series>>) -> Vec<Series> {
    let mut ranks: Vec<Series> = series
        .map(|s| s.cloned().unwrap_or_else(|| empty(cx)))
        .collect();
    ranks.resize_with(cx.len(), || empty(cx));
    ranks
}

fn empty(cx: &Finish<'_>) -> Series {
    Series::new(cx.slice_shift, cx.slices)
}

/// Every rank's series brought to the width of the model's time slices
/// `out` (or wider, if a series is; the caller then has slices of another
/// width than the model's: it is told the width), as rows per rank per
/// metric, each `slices.len()` long.
pub(crate) fn at_width<'a>(
    cx: &Finish<'_>,
    out: &TimeSlices,
    series: impl Iterator<Item = Option<&'a Series>>,
) -> (u64, Vec<Vec<Vec<u64>>>) {
    let mut ranks = filled(cx, series);
    let mut shift = ranks
        .iter()
        .map(|s| s.shift)
        .max()
        .unwrap_or(cx.slice_shift);
    if out.slice_ns.is_power_of_two() && !out.metrics.is_empty() {
        shift = shift.max(out.slice_ns.trailing_zeros());
    }
    let rows = ranks
        .iter_mut()
        .map(|s| {
            while s.shift < shift {
                s.coarsen();
            }
            s.metrics
                .iter()
                .map(|m| m.as_deref().map_or_else(Vec::new, <[u64]>::to_vec))
                .collect()
        })
        .collect();
    (1u64 << shift, rows)
}

/// `from` absorbed into `into` metric for metric ([`Series::absorb`]),
/// either of them possibly absent: a rank's series when its partial
/// results merge.
pub(crate) fn absorb_series(into: &mut Option<Series>, from: &Option<Series>) {
    match (into.as_mut(), from) {
        (Some(a), Some(b)) => a.absorb(b, |m| m),
        (None, Some(b)) => *into = Some(b.clone()),
        _ => {}
    }
}

/// The sum over ranks of every rank's series, per metric, at the model's
/// width (see [`at_width`]); rows are cut to the model's number of slices.
pub(crate) fn publish_series<'a>(
    cx: &Finish<'_>,
    out: &TimeSlices,
    series: impl Iterator<Item = Option<&'a Series>>,
) -> Vec<Vec<u64>> {
    let (_, ranks) = at_width(cx, out, series);
    let used = out
        .metrics
        .values()
        .flatten()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    let mut sum: Vec<Vec<u64>> = Vec::new();
    for rank in ranks {
        for (m, row) in rank.into_iter().enumerate() {
            if sum.len() <= m {
                sum.resize(m + 1, Vec::new());
            }
            let into = &mut sum[m];
            if into.len() < row.len() {
                into.resize(row.len(), 0);
            }
            for (a, v) in into.iter_mut().zip(row) {
                a.sat(v);
            }
        }
    }
    for row in &mut sum {
        if used > 0 {
            row.resize(used, 0);
        }
    }
    sum
}

/// [`publish`] once the series are in hand.
fn merge(
    out: &mut TimeSlices,
    origin_ns: u64,
    mut ranks: Vec<Series>,
    name: impl Fn(usize, usize) -> Option<String>,
) {
    let n = ranks.len();
    let Some(mut shift) = ranks.iter().map(|s| s.shift).max() else {
        return;
    };
    if !out.metrics.is_empty() && out.slice_ns.is_power_of_two() {
        shift = shift.max(out.slice_ns.trailing_zeros());
    }
    for s in &mut ranks {
        while s.shift < shift {
            s.coarsen();
        }
    }
    // What is there already, at the new width.
    let old_shift = out.slice_ns.trailing_zeros();
    if !out.metrics.is_empty() && old_shift < shift {
        let k = shift - old_shift;
        for rows in out.metrics.values_mut() {
            for row in rows.iter_mut() {
                let mut wide = vec![0u64; row.len().div_ceil(1 << k)];
                for (i, v) in row.iter().enumerate() {
                    wide[i >> k].sat(*v);
                }
                *row = wide;
            }
        }
    }
    let mut new: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
    for (r, s) in ranks.iter().enumerate() {
        for (m, values) in s.metrics.iter().enumerate() {
            // Named only when used: most metric indices below the highest
            // used one never are, and a name is a `format!`.
            let Some(values) = values else { continue };
            let Some(name) = name(r, m) else { continue };
            let rows = new.entry(name).or_insert_with(|| vec![Vec::new(); n]);
            let row = &mut rows[r];
            if row.len() < values.len() {
                row.resize(values.len(), 0);
            }
            for (into, v) in row.iter_mut().zip(values.iter()) {
                into.sat(*v);
            }
        }
    }
    out.metrics.extend(new);
    let used = out
        .metrics
        .values()
        .flatten()
        .filter_map(|row| row.iter().rposition(|&v| v > 0))
        .max()
        .map_or(0, |last| last + 1);
    for rows in out.metrics.values_mut() {
        for row in rows.iter_mut() {
            row.resize(used, 0);
        }
    }
    out.slice_ns = 1u64 << shift;
    out.origin_ns = origin_ns;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsening_merges_each_metric_its_own_way() {
        // (kind, values kept in slices 0..4) → slices 0 and 1 once the
        // width doubles.
        let cases: [(Combine, [u64; 4], [u64; 2]); 4] = [
            (Combine::Sum, [1, 2, 3, 4], [3, 7]),
            (Combine::Max, [5, 2, 0, 9], [5, 9]),
            (Combine::Last, [5, 2, 7, 0], [2, 7]),
            (Combine::Last, [0, 0, 0, 3], [0, 3]),
        ];
        for (kind, before, after) in cases {
            let mut s = Series::new(4, 4);
            for (i, v) in before.into_iter().enumerate() {
                if v > 0 {
                    s.keep(0, i, v, kind);
                }
            }
            s.fit(64);
            assert_eq!(s.shift, 5, "{kind:?}");
            let m = s.metrics[0].as_deref().unwrap_or(&[0; 4]);
            assert_eq!(m[..2], after, "{kind:?} {before:?}");
            assert_eq!(m[2..], [0, 0], "{kind:?}");
        }
    }

    #[test]
    fn publishing_a_wider_series_coarsens_what_is_already_there() {
        let mut out = TimeSlices::default();
        let mut narrow = Series::new(4, 8);
        narrow.fit(40);
        let at = narrow.index(40);
        narrow.add(0, at, 5);
        merge(&mut out, 0, vec![narrow], |_, _| Some("a".into()));
        assert_eq!((out.slice_ns, &out.metrics["a"][0]), (16, &vec![0, 0, 5]));
        let mut wide = Series::new(4, 8);
        wide.fit(1000);
        let at = wide.index(1000);
        wide.add(0, at, 7);
        merge(&mut out, 0, vec![wide], |_, _| Some("b".into()));
        // 1000 ns needs 8 slices of 128 ns.
        assert_eq!(out.slice_ns, 128);
        assert_eq!(out.metrics["a"][0], vec![5, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(out.metrics["b"][0], vec![0, 0, 0, 0, 0, 0, 0, 7]);
    }
}
