//! The report's pictures, drawn as inline SVG: heatmaps, line charts with a
//! spread band or one line per series, per-rank bars, efficiency bars and a
//! circular graph. Everything is computed here; the page needs no script to
//! show them.

use super::{capitalised, esc};
use std::fmt::Write as _;

/// A sequential colour scale (viridis, five stops) for `t` in 0..=1.
pub(crate) fn colour(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |u: f64, v: f64| (u + (v - u) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Text colour readable on `colour(t)`.
fn ink(t: f64) -> &'static str {
    if t > 0.55 {
        "#111"
    } else {
        "#fff"
    }
}

/// Colour of a cell holding nothing, distinct from the smallest value.
const EMPTY: &str = "#eef0f3";

/// Largest number of rows or columns drawn one per rank; above it, ranks are
/// grouped into blocks whose values add up.
const MAX_CELLS: usize = 128;

/// What the rows and the columns of a rank × rank heatmap are: `from rank`
/// and `to rank` for traffic.
pub(crate) struct Axes<'a> {
    pub rows: &'a str,
    pub columns: &'a str,
}

/// A square rank × rank matrix as a heatmap, `m[row][column]`. `fmt`
/// prints a value for tooltips and the legend.
pub(crate) fn heatmap(
    title: &str,
    m: &[Vec<u64>],
    n: usize,
    axes: &Axes<'_>,
    fmt: &dyn Fn(u64) -> String,
) -> String {
    let block = n.div_ceil(MAX_CELLS).max(1);
    let cells = n.div_ceil(block);
    let mut grid = vec![vec![0u64; cells]; cells];
    for (i, row) in m.iter().enumerate().take(n) {
        for (j, &v) in row.iter().enumerate().take(n) {
            let cell = &mut grid[i / block][j / block];
            *cell = cell.saturating_add(v);
        }
    }
    let max = grid.iter().flatten().copied().max().unwrap_or(0);
    let size = (cells.max(1) as f64 * 64.0).clamp(160.0, 420.0);
    let c = size / cells.max(1) as f64;
    let (left, top) = (44.0, 34.0);
    let (w, h) = (left + size + 16.0, top + size + 56.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="heatmap" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="14" class="axis" text-anchor="middle">{} →</text><text x="12" y="{:.1}" class="axis" text-anchor="middle" transform="rotate(-90 12 {:.1})">{} →</text>"#,
        left + size / 2.0,
        esc(axes.columns),
        top + size / 2.0,
        top + size / 2.0,
        esc(axes.rows)
    );
    let label_every = (cells as f64 / 16.0).ceil().max(1.0) as usize;
    for k in (0..cells).step_by(label_every) {
        let label = block_label(k, block, n);
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{label}</text><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{label}</text>"#,
            left + (k as f64 + 0.5) * c,
            top - 6.0,
            left - 4.0,
            top + (k as f64 + 0.5) * c + 3.5
        );
    }
    let show_values = cells <= 8;
    // Empty cells are the background: a sparse matrix of many ranks (a
    // ring, a stencil) then costs a rectangle per pair that is there.
    let _ = write!(
        s,
        r#"<rect x="{left}" y="{top}" width="{size:.2}" height="{size:.2}" fill="{EMPTY}"/>"#
    );
    for (i, row) in grid.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            if v == 0 {
                continue;
            }
            let t = if max == 0 { 0.0 } else { v as f64 / max as f64 };
            let fill = colour(t);
            let (x, y) = (left + j as f64 * c, top + i as f64 * c);
            let _ = write!(
                s,
                r#"<rect x="{x:.2}" y="{y:.2}" width="{c:.2}" height="{c:.2}" fill="{fill}"><title>{} → {}: {}</title></rect>"#,
                block_label(i, block, n),
                block_label(j, block, n),
                esc(&fmt(v))
            );
            // A value is written in its cell only where it fits (about
            // 5.5 px per character at the cells' font size).
            let text = fmt(v);
            if show_values && text.chars().count() as f64 * 5.5 < c - 4.0 {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" class="cell" fill="{}" text-anchor="middle">{}</text>"#,
                    x + c / 2.0,
                    y + c / 2.0 + 4.0,
                    ink(t),
                    esc(&text)
                );
            }
        }
    }
    legend(&mut s, left, top + size + 14.0, size, &fmt(0), &fmt(max));
    s.push_str("</svg>");
    s
}

/// Rank label of block `k`: `5` or `128–255`.
fn block_label(k: usize, block: usize, n: usize) -> String {
    if block == 1 {
        k.to_string()
    } else {
        format!("{}–{}", k * block, ((k + 1) * block).min(n) - 1)
    }
}

/// A horizontal colour ramp from `lo` to `hi`.
fn legend(s: &mut String, x: f64, y: f64, width: f64, lo: &str, hi: &str) {
    let steps = 24;
    let w = width / steps as f64;
    for k in 0..steps {
        let _ = write!(
            s,
            r#"<rect x="{:.2}" y="{y:.1}" width="{:.2}" height="10" fill="{}"/>"#,
            x + k as f64 * w,
            w + 0.3,
            colour(k as f64 / (steps - 1) as f64)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{x:.1}" y="{:.1}" class="tick">{}</text><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
        y + 24.0,
        esc(lo),
        x + width,
        y + 24.0,
        esc(hi)
    );
}

/// One column of a density map.
pub(crate) struct Column {
    pub name: String,
    pub values: Vec<f64>,
    pub fmt: Box<dyn Fn(f64) -> String>,
}

/// How the columns of a [`density`] map are coloured.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    /// Each column against its own largest value (columns of different
    /// units).
    PerColumn,
    /// Every cell against the largest of all, with a legend (columns of
    /// one unit). Every column prints with the first one's format.
    Shared,
}

/// Ranks × metrics, coloured as `scale` says.
pub(crate) fn density(title: &str, ranks: usize, columns: &[Column], scale: Scale) -> String {
    let cw = 78.0;
    let rh = (420.0 / ranks.max(1) as f64).clamp(2.0, 22.0);
    let (left, top) = (52.0, 96.0);
    // Room on the right for the last column's slanted name.
    let w = left + cw * columns.len() as f64 + 60.0;
    let legend_h = if scale == Scale::Shared { 40.0 } else { 0.0 };
    let h = top + rh * ranks as f64 + 8.0 + legend_h;
    let overall = columns
        .iter()
        .flat_map(|c| c.values.iter().copied())
        .fold(0.0, f64::max);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="density" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    for (k, col) in columns.iter().enumerate() {
        let x = left + cw * (k as f64 + 0.5);
        let _ = write!(
            s,
            r#"<text class="tick" transform="translate({x:.1} {:.1}) rotate(-40)">{}</text>"#,
            top - 6.0,
            esc(&col.name)
        );
    }
    let label_every = ((ranks as f64 * 12.0) / (rh * ranks as f64))
        .ceil()
        .max(1.0) as usize;
    for r in (0..ranks).step_by(label_every) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">rank {r}</text>"#,
            left - 4.0,
            top + rh * (r as f64 + 0.5) + 3.5
        );
    }
    for (k, col) in columns.iter().enumerate() {
        let max = match scale {
            Scale::PerColumn => col.values.iter().copied().fold(0.0, f64::max),
            Scale::Shared => overall,
        };
        for r in 0..ranks {
            let v = col.values.get(r).copied().unwrap_or(0.0);
            let t = if max > 0.0 { v / max } else { 0.0 };
            let fill = if v == 0.0 {
                EMPTY.to_string()
            } else {
                colour(t)
            };
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.2}" width="{:.1}" height="{:.2}" fill="{fill}"><title>rank {r}, {}: {}</title></rect>"#,
                left + cw * k as f64 + 1.0,
                top + rh * r as f64,
                cw - 2.0,
                (rh - if rh > 4.0 { 1.0 } else { 0.0 }).max(1.0),
                esc(&col.name),
                esc(&(col.fmt)(v))
            );
        }
    }
    if let (Scale::Shared, Some(first)) = (scale, columns.first()) {
        let width = cw * columns.len() as f64 - 2.0;
        let y = top + rh * ranks as f64 + 10.0;
        legend(
            &mut s,
            left + 1.0,
            y,
            width,
            &(first.fmt)(0.0),
            &(first.fmt)(overall),
        );
    }
    s.push_str("</svg>");
    s
}

/// One metric's density map: ranks laid out on a `columns`-wide grid (rank
/// `r` at row `r / columns`, column `r % columns`), coloured by value.
pub(crate) fn density_grid(
    title: &str,
    values: &[u64],
    columns: usize,
    fmt: &dyn Fn(u64) -> String,
) -> String {
    let n = values.len();
    let columns = columns.clamp(1, n.max(1));
    let rows = n.div_ceil(columns).max(1);
    let c = (150.0 / columns.max(rows) as f64).clamp(2.0, 36.0);
    let (w, h) = (c * columns as f64 + 2.0, c * rows as f64 + 2.0);
    let max = values.iter().copied().max().unwrap_or(0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="grid" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    for (r, &v) in values.iter().enumerate() {
        let t = if max == 0 { 0.0 } else { v as f64 / max as f64 };
        let fill = if v == 0 { EMPTY.to_string() } else { colour(t) };
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>rank {r}: {}</title></rect>"#,
            1.0 + c * (r % columns) as f64,
            1.0 + c * (r / columns) as f64,
            (c - if c > 4.0 { 1.0 } else { 0.0 }).max(1.0),
            (c - if c > 4.0 { 1.0 } else { 0.0 }).max(1.0),
            esc(&fmt(v))
        );
    }
    s.push_str("</svg>");
    s
}

/// A line chart of the mean over ranks, with the band between the smallest
/// and largest rank at each point. `series[rank][slice]`.
pub(crate) fn spread_chart(
    title: &str,
    series: &[Vec<f64>],
    axis: &TimeAxis,
    x_end_label: &str,
    fmt: &dyn Fn(f64) -> String,
) -> String {
    let slices = series.iter().map(Vec::len).max().unwrap_or(0);
    let (w, h) = (560.0, 200.0);
    let (left, right, top, bottom) = (70.0, 12.0, 26.0, 26.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let mut lo = vec![f64::INFINITY; slices];
    let mut hi = vec![0.0f64; slices];
    let mut mean = vec![0.0f64; slices];
    for row in series {
        for k in 0..slices {
            let v = row.get(k).copied().unwrap_or(0.0);
            lo[k] = lo[k].min(v);
            hi[k] = hi[k].max(v);
            mean[k] += v / series.len().max(1) as f64;
        }
    }
    let max = hi.iter().copied().fold(0.0, f64::max);
    let x = |k: usize| axis.x(k, left, pw);
    let y = |v: f64| top + ph - if max > 0.0 { ph * v / max } else { 0.0 };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}"><title>{t}</title><text x="{left}" y="15" class="charttitle">{t}</text>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{b}" x2="{r}" y2="{b}" class="axisline"/><line x1="{left}" y1="{top}" x2="{left}" y2="{b}" class="axisline"/><text x="{lx}" y="{ty}" class="tick" text-anchor="end">{maxl}</text><text x="{lx}" y="{b}" class="tick" text-anchor="end">{zero}</text><text x="{left}" y="{xl}" class="tick">0 s</text><text x="{r}" y="{xl}" class="tick xend" text-anchor="end" data-ns="{e}">{xe}</text>"##,
        e = axis.end_ns,
        b = top + ph,
        r = left + pw,
        lx = left - 4.0,
        ty = top + 4.0,
        maxl = esc(&fmt(max)),
        zero = esc(&fmt(0.0)),
        xl = h - 8.0,
        xe = esc(x_end_label)
    );
    if slices > 0 && series.len() > 1 {
        let mut pts = String::new();
        for (k, v) in hi.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(k), y(*v));
        }
        for (k, v) in lo.iter().enumerate().rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(k), y(*v));
        }
        let _ = write!(s, r#"<polygon points="{}" class="band"/>"#, pts.trim_end());
    }
    if slices > 0 {
        let mut pts = String::new();
        for (k, v) in mean.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(k), y(*v));
        }
        let _ = write!(s, r#"<polyline points="{}" class="line"/>"#, pts.trim_end());
    }
    s.push_str("</svg>");
    s
}

/// Per rank, a bar of its wall time with the part spent in MPI coloured.
pub(crate) fn rank_bars(wall: &[u64], mpi: &[u64], fmt: &dyn Fn(f64) -> String) -> String {
    let n = wall.len();
    let bh = 14.0;
    let (left, width) = (64.0, 440.0);
    let h = 22.0 + bh * n as f64 + 4.0;
    let max = wall.iter().copied().max().unwrap_or(0).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="bars" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="Time per rank"><title>Time per rank: MPI and the rest</title><rect x="{left}" y="2" width="10" height="10" class="mpi"/><text x="{:.0}" y="11" class="tick">MPI</text><rect x="{:.0}" y="2" width="10" height="10" class="comp"/><text x="{:.0}" y="11" class="tick">outside MPI</text>"#,
        left + 14.0,
        left + 50.0,
        left + 64.0,
        w = left + width + 80.0,
    );
    for (r, &wall_r) in wall.iter().enumerate() {
        let y = 18.0 + bh * r as f64;
        let wall_w = width * wall_r as f64 / max;
        let m = mpi.get(r).copied().unwrap_or(0).min(wall_r);
        let mpi_w = width * m as f64 / max;
        let _ = write!(
            s,
            r#"<text x="{:.0}" y="{:.1}" class="tick" text-anchor="end">rank {r}</text><rect x="{left}" y="{y:.1}" width="{wall_w:.2}" height="{:.1}" class="comp"><title>rank {r}: wall {}</title></rect><rect x="{left}" y="{y:.1}" width="{mpi_w:.2}" height="{:.1}" class="mpi"><title>rank {r}: MPI {}</title></rect><text x="{:.1}" y="{:.1}" class="tick">{}</text>"#,
            left - 4.0,
            y + bh - 4.0,
            bh - 2.0,
            esc(&fmt(wall_r as f64)),
            bh - 2.0,
            esc(&fmt(m as f64)),
            left + wall_w + 4.0,
            y + bh - 4.0,
            esc(&fmt(wall_r as f64)),
        );
    }
    s.push_str("</svg>");
    s
}

/// How an efficiency reads: `good` from 80 %, `fair` from 60 %, else
/// `poor`; `unknown` when it is not a number (a CSS class of the report).
pub(crate) fn grade(v: f64) -> &'static str {
    if !v.is_finite() {
        "unknown"
    } else if v >= 0.8 {
        "good"
    } else if v >= 0.6 {
        "fair"
    } else {
        "poor"
    }
}

/// Horizontal bars from 0 to 100 % for efficiencies: `(name, depth, value)`,
/// each name indented by its depth in the tree of factors.
pub(crate) fn efficiency_bars(title: &str, rows: &[(&str, usize, f64)]) -> String {
    let bh = 22.0;
    let (left, width, top) = (170.0, 360.0, 18.0);
    let (w, h) = (left + width + 64.0, top + bh * rows.len() as f64 + 22.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="effbars" viewBox="0 0 {w:.0} {h:.0}" width="{w:.0}" height="{h:.0}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(title)
    );
    // Tracks, then the grid over them, then the bars over both.
    for k in 0..rows.len() {
        let _ = write!(
            s,
            r#"<rect x="{left}" y="{:.1}" width="{width}" height="{:.0}" class="track"/>"#,
            top + bh * k as f64 + 2.0,
            bh - 6.0
        );
    }
    let base = top + bh * rows.len() as f64;
    for (k, label) in ["0 %", "50 %", "100 %"].iter().enumerate() {
        let x = left + width * k as f64 / 2.0;
        let anchor = ["start", "middle", "end"][k];
        let _ = write!(
            s,
            r#"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{base:.1}" class="grid"/><text x="{x:.1}" y="{:.1}" class="tick" text-anchor="{anchor}">{label}</text>"#,
            base + 14.0
        );
    }
    for (k, &(name, depth, v)) in rows.iter().enumerate() {
        let y = top + bh * k as f64;
        let shown = if v.is_finite() {
            v.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let _ = write!(
            s,
            r#"<text x="{:.0}" y="{:.1}" class="axis">{}</text><rect x="{left}" y="{:.1}" width="{:.2}" height="{:.0}" class="{}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}" class="axis">{}</text>"#,
            8.0 + 14.0 * depth as f64,
            y + bh - 8.0,
            esc(name),
            y + 2.0,
            width * shown,
            bh - 6.0,
            grade(v),
            esc(name),
            crate::units::fraction(v),
            left + width + 6.0,
            y + bh - 8.0,
            crate::units::fraction(v)
        );
    }
    s.push_str("</svg>");
    s
}

/// One line of a [`lines_chart`]: its name, its CSS class and its values,
/// `None` where there is nothing to draw (the line breaks there).
pub(crate) struct Line<'a> {
    pub name: &'a str,
    pub class: &'a str,
    pub values: Vec<Option<f64>>,
}

/// The values of `line` averaged over a centred window of `width` slices;
/// a slice without a value stays without one, so gaps stay gaps.
fn smoothed(values: &[Option<f64>], width: usize) -> Vec<Option<f64>> {
    let half = width / 2;
    (0..values.len())
        .map(|k| {
            values[k].filter(|v| v.is_finite())?;
            let window = &values[k.saturating_sub(half)..(k + half + 1).min(values.len())];
            let known: Vec<f64> = window
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            Some(known.iter().sum::<f64>() / known.len() as f64)
        })
        .collect()
}

/// An SVG path through `values`; consecutive values join, a missing one
/// starts a new stroke.
fn path_through(
    values: &[Option<f64>],
    x: &dyn Fn(usize) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    for (k, v) in values.iter().enumerate() {
        match v {
            Some(v) if v.is_finite() => {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if pen_down { "L" } else { "M" },
                    x(k),
                    y(*v)
                );
                pen_down = true;
            }
            _ => pen_down = false,
        }
    }
    d
}

/// Where a time axis ends and how wide its slices are, so that points sit
/// at their time and the axis stops at the run's end, not at the capacity
/// of the slices.
pub(crate) struct TimeAxis {
    pub slice_ns: u64,
    pub end_ns: u64,
}

impl TimeAxis {
    /// The x of slice `k`'s centre on a plot from `left` `width` wide.
    fn x(&self, k: usize, left: f64, width: f64) -> f64 {
        let t = (k as f64 + 0.5) * self.slice_ns as f64 / self.end_ns.max(1) as f64;
        left + width * t.min(1.0)
    }
}

/// Small multiples of lines over time on a 0 to 100 % scale (values are
/// fractions of 1): a panel per line, each with its name, mean and its own
/// axes, the slices drawn faintly and a moving average over them boldly.
/// Five lines on one chart cross too often to be read.
pub(crate) fn line_panels(
    title: &str,
    lines: &[Line<'_>],
    axis: &TimeAxis,
    end_label: &str,
) -> String {
    let slices = lines.iter().map(|l| l.values.len()).max().unwrap_or(0);
    // About twenty windows over the run: short dips stay visible.
    let width = (slices / 20) | 1;
    let (w, h) = (300.0, 140.0);
    let (left, right, top, bottom) = (38.0, 10.0, 24.0, 20.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let x = |k: usize| axis.x(k, left, pw);
    let y = |v: f64| top + ph * (1.0 - v.clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<div class="panels" role="group" aria-label="{t}">"#,
        t = esc(title)
    );
    for line in lines {
        let known: Vec<f64> = line
            .values
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let mean = if known.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.1} %",
                100.0 * known.iter().sum::<f64>() / known.len() as f64
            )
        };
        let _ = write!(
            s,
            r#"<svg class="chart panel" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{n}"><title>{n}</title><text x="{left}" y="14" class="charttitle">{n}<tspan class="tick" dx="8">mean over slices {mean}</tspan></text>"#,
            n = esc(&capitalised(line.name)),
        );
        for v in [0.0, 0.5, 1.0] {
            let _ = write!(
                s,
                r#"<line x1="{left}" y1="{yv:.1}" x2="{r}" y2="{yv:.1}" class="{c}"/><text x="{lx}" y="{ty:.1}" class="tick" text-anchor="end">{p:.0} %</text>"#,
                yv = y(v),
                r = left + pw,
                c = if v == 0.0 { "axisline" } else { "grid" },
                lx = left - 4.0,
                ty = y(v) + 3.5,
                p = 100.0 * v
            );
        }
        let _ = write!(
            s,
            r#"<text x="{left}" y="{xl}" class="tick">0 s</text><text x="{r}" y="{xl}" class="tick xend" text-anchor="end" data-ns="{e}">{xe}</text>"#,
            r = left + pw,
            xl = h - 6.0,
            e = axis.end_ns,
            xe = esc(end_label)
        );
        let raw = path_through(&line.values, &x, &y);
        if !raw.is_empty() {
            let _ = write!(
                s,
                r#"<path d="{raw}" class="{c} raw"><title>{n}, per slice</title></path><path d="{smooth}" class="{c}"><title>{n}, moving average over {width} slices</title></path>"#,
                c = esc(line.class),
                n = esc(line.name),
                smooth = path_through(&smoothed(&line.values, width), &x, &y),
            );
        }
        s.push_str("</svg>");
    }
    s.push_str("</div>");
    s
}

/// An edge of a graph drawn by [`circle_graph`].
pub(crate) struct Edge {
    pub from: usize,
    pub to: usize,
    pub weight: u64,
    pub label: String,
}

/// Ranks on a circle, edges as arrows whose width and colour grow with their
/// weight. Used when Graphviz is not installed.
pub(crate) fn circle_graph(title: &str, n: usize, edges: &[Edge]) -> String {
    let size = if n <= 16 { 420.0 } else { 560.0 };
    let c = size / 2.0;
    let radius = c - 40.0;
    let node_r = if n <= 32 { 14.0 } else { 4.0 };
    let pos = |k: usize| {
        let a = std::f64::consts::TAU * k as f64 / n.max(1) as f64 - std::f64::consts::FRAC_PI_2;
        (c + radius * a.cos(), c + radius * a.sin())
    };
    let max = edges.iter().map(|e| e.weight).max().unwrap_or(0).max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg class="graph" viewBox="0 0 {size} {size}" width="{size}" height="{size}" role="img" aria-label="{t}"><title>{t}</title><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="5" markerHeight="5" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#2f5d8a"/></marker></defs>"##,
        t = esc(title)
    );
    for e in edges {
        let t = e.weight as f64 / max;
        let ((x1, y1), (x2, y2)) = (pos(e.from), pos(e.to));
        if e.from == e.to {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="{:.1}" class="edge" stroke-width="{:.2}"><title>{}</title></circle>"#,
                x1 + (x1 - c) * 0.12,
                y1 + (y1 - c) * 0.12,
                node_r * 0.9,
                0.6 + 4.0 * t,
                esc(&e.label)
            );
            continue;
        }
        // Bend each arrow a little to its right so i→j and j→i stay apart,
        // and stop it at the node's rim.
        let (dx, dy) = (x2 - x1, y2 - y1);
        let len = (dx * dx + dy * dy).sqrt().max(1e-9);
        let (ux, uy) = (dx / len, dy / len);
        let (sx, sy) = (x1 + ux * node_r, y1 + uy * node_r);
        let (ex, ey) = (x2 - ux * (node_r + 1.0), y2 - uy * (node_r + 1.0));
        let bend = 0.12 * len;
        let (mx, my) = ((sx + ex) / 2.0 - uy * bend, (sy + ey) / 2.0 + ux * bend);
        let _ = write!(
            s,
            r#"<path d="M{sx:.1},{sy:.1}Q{mx:.1},{my:.1} {ex:.1},{ey:.1}" class="edge" stroke="{}" stroke-width="{:.2}" marker-end="url(#arrow)"><title>{}</title></path>"#,
            colour(0.15 + 0.6 * t),
            0.6 + 4.0 * t,
            esc(&e.label)
        );
    }
    for k in 0..n {
        let (x, y) = pos(k);
        let _ = write!(
            s,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="{node_r}" class="node"><title>rank {k}</title></circle>"#
        );
        if n <= 32 {
            let _ = write!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" class="nodelabel" text-anchor="middle">{k}</text>"#,
                y + 4.0
            );
        }
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_scale_runs_from_dark_purple_to_yellow_and_clamps() {
        assert_eq!(colour(0.0), "#440154");
        assert_eq!(colour(1.0), "#fde725");
        assert_eq!(colour(-3.0), colour(0.0));
        assert_eq!(colour(f64::NAN), colour(0.0));
        assert_eq!(colour(7.0), colour(1.0));
    }

    #[test]
    fn empty_cells_of_a_heatmap_are_its_background() {
        let m = vec![vec![0, 5, 0], vec![0, 0, 7], vec![0, 0, 0]];
        let axes = Axes {
            rows: "from",
            columns: "to",
        };
        let svg = heatmap("t", &m, 3, &axes, &|v| v.to_string());
        // The background, two cells, the legend's 24 steps.
        assert_eq!(svg.matches("<rect").count(), 1 + 2 + 24);
        assert!(svg.contains("<title>0 → 1: 5</title>") && svg.contains("<title>1 → 2: 7</title>"));
    }

    #[test]
    fn large_matrices_are_drawn_in_blocks_that_add_up() {
        let n = 300;
        let m: Vec<Vec<u64>> = (0..n)
            .map(|i| (0..n).map(|j| (i + j) as u64 % 3).collect())
            .collect();
        let axes = Axes {
            rows: "from",
            columns: "to",
        };
        let svg = heatmap("t", &m, n, &axes, &|v| v.to_string());
        // 300 ranks in blocks of 3: 100 × 100 cells, not 90,000, on one
        // background.
        assert_eq!(svg.matches("<rect").count(), 1 + 100 * 100 + 24);
        assert!(svg.contains("0–2 → 0–2"));
    }
}
