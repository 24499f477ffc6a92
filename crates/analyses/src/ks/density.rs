//! Density maps: every per-rank metric the other knowledge sources produced,
//! laid out as a grid of ranks with its spread, for spotting spatial
//! imbalance at a glance (*Event Streaming for Online Performance
//! Measurements Reduction*, figure 18).
//!
//! Names: `mpi_time_ns`, `outside_mpi_ns`, `<MPI function>.calls|time_ns|bytes`,
//! `p2p.sent_messages|sent_bytes|received_messages|received_bytes`,
//! `io:<operation>.calls|time_ns|bytes`, `region:<path>.calls|inclusive_ns|exclusive_ns`.
//!
//! It has no per-rank state: it runs last and reads the profiles already in
//! the model. Metrics that are zero on every rank are left out.

use crate::analysis::{Analysis, Finish, NoState, Sensitivity, Spec};
use crate::sat::Sat;
use hark_model::{DensityMap, Program, Spread};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct Density;

static SPEC: Spec = Spec {
    name: "density",
    description: "Every per-rank metric as a grid of ranks with its spread and imbalance (runs last, over the other results).",
    sensitivities: &[Sensitivity::ProgramEnd],
    fills: &["density"],
};

/// The density map of one per-rank metric, or `None` when it is all zero.
fn map(values: Vec<u64>, columns: usize) -> Option<DensityMap> {
    if values.iter().all(|&v| v == 0) {
        return None;
    }
    let as_f64: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    let spread = Spread::of(&as_f64);
    let imbalance = if spread.mean > 0.0 {
        spread.max / spread.mean
    } else {
        0.0
    };
    Some(DensityMap {
        columns,
        values,
        spread,
        imbalance,
    })
}

impl Analysis for Density {
    type Rank = NoState;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> NoState {
        NoState
    }
    fn finish(&self, cx: &Finish<'_>, _: &[&NoState], out: &mut Program) {
        let n = cx.len();
        if n == 0 {
            return;
        }
        let columns = (n as f64).sqrt().ceil() as usize;
        let mut metrics: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        metrics.insert("mpi_time_ns".into(), out.mpi_time_ns.clone());
        metrics.insert(
            "outside_mpi_ns".into(),
            out.rank_wall_ns
                .iter()
                .zip(&out.mpi_time_ns)
                .map(|(w, m)| w.saturating_sub(*m))
                .collect(),
        );
        for (name, f) in &out.mpi {
            metrics.insert(format!("{name}.calls"), f.calls.clone());
            metrics.insert(format!("{name}.time_ns"), f.time_ns.clone());
            metrics.insert(format!("{name}.bytes"), f.bytes.clone());
        }
        let row_sums = |m: &Vec<Vec<u64>>| {
            m.iter()
                .map(|r| r.iter().fold(0u64, |a, &v| a.saturating_add(v)))
                .collect::<Vec<u64>>()
        };
        let col_sums = |m: &Vec<Vec<u64>>| {
            (0..n)
                .map(|j| {
                    m.iter()
                        .map(|r| r.get(j).copied().unwrap_or(0))
                        .fold(0u64, |a, v| a.saturating_add(v))
                })
                .collect::<Vec<u64>>()
        };
        if out.p2p.messages.len() == n {
            metrics.insert("p2p.sent_messages".into(), row_sums(&out.p2p.messages));
            metrics.insert("p2p.sent_bytes".into(), row_sums(&out.p2p.bytes));
            metrics.insert("p2p.received_messages".into(), col_sums(&out.p2p.messages));
            metrics.insert("p2p.received_bytes".into(), col_sums(&out.p2p.bytes));
        }
        for (r, ops) in out.io.per_rank.iter().enumerate() {
            for (name, t) in ops {
                for (what, v) in [
                    ("calls", t.calls),
                    ("time_ns", t.time_ns),
                    ("bytes", t.bytes),
                ] {
                    metrics
                        .entry(format!("io:{name}.{what}"))
                        .or_insert_with(|| vec![0; n])[r]
                        .sat(v);
                }
            }
        }
        for (path, p) in &out.regions.paths {
            metrics.insert(format!("region:{path}.calls"), p.calls.clone());
            metrics.insert(
                format!("region:{path}.inclusive_ns"),
                p.inclusive_ns.clone(),
            );
            metrics.insert(
                format!("region:{path}.exclusive_ns"),
                p.exclusive_ns.clone(),
            );
        }
        for (name, values) in metrics {
            if values.len() != n {
                continue;
            }
            if let Some(m) = map(values, columns) {
                out.density.insert(name, m);
            }
        }
    }
}
