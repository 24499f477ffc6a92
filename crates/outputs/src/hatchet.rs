//! The Hatchet and Thicket export: the region call tree with MPI functions
//! as leaves, as the "literal" graph `hatchet.GraphFrame.from_literal` and
//! `thicket.Thicket.from_literal` load, plus one flat record of metadata
//! per run for a Thicket ensemble. `docs/export.md` gives the schema.
//!
//! One root per program (its frame `type` is `program`), its children the
//! top-level regions and the MPI functions called outside any region; a
//! region's children are its nested regions and the MPI functions called
//! directly in it (`regions.mpi`). Every node carries, per rank and summed
//! over ranks, its calls, its inclusive time and its exclusive time:
//!
//! - program: inclusive = the rank's wall time, exclusive = what no child
//!   covers;
//! - region: inclusive as measured, exclusive = the region's exclusive time
//!   (nested regions taken out) minus its MPI children's time;
//! - MPI function: inclusive = exclusive = its time in that call path.
//!
//! So the leaves of a program sum to `mpi.<f>.time_ns`, and the tree adds up
//! exactly as Hatchet expects: inclusive = exclusive + children's inclusive.

use crate::{write_file, Error};
use hark_model::{Program, Run};
use serde_json::{json, Map, Value};
use std::path::Path;

/// The literal graph's file name in an export directory.
pub const LITERAL: &str = "hatchet.json";
/// The metadata file's name in an export directory.
pub const METADATA: &str = "thicket-metadata.json";

/// Metric names: summed over ranks, and per rank (`<name> rank <r>`).
/// Inclusive names contain `(inc)`, as Hatchet tells them apart by that.
const CALLS: &str = "calls";
const TIME: &str = "time_ns";
const TIME_INC: &str = "time_ns (inc)";

/// Per-rank calls, exclusive and inclusive time of one node.
struct Row {
    calls: Vec<u64>,
    exc: Vec<u64>,
    inc: Vec<u64>,
}

impl Row {
    /// A row of `n` ranks; `f(r)` gives rank `r`'s calls, inclusive and
    /// exclusive time.
    fn build(n: usize, f: impl Fn(usize) -> (u64, u64, u64)) -> Row {
        let (mut calls, mut inc, mut exc) = (vec![0; n], vec![0; n], vec![0; n]);
        for r in 0..n {
            (calls[r], inc[r], exc[r]) = f(r);
        }
        Row { calls, exc, inc }
    }

    /// Adds this row's inclusive times to `covered`, per rank.
    fn cover(&self, covered: &mut [u64]) {
        for (c, i) in covered.iter_mut().zip(&self.inc) {
            *c = c.saturating_add(*i);
        }
    }

    fn metrics(&self) -> Value {
        let mut m = Map::new();
        let sum = |v: &[u64]| v.iter().fold(0u64, |a, b| a.saturating_add(*b));
        m.insert(CALLS.into(), json!(sum(&self.calls)));
        m.insert(TIME.into(), json!(sum(&self.exc)));
        m.insert(TIME_INC.into(), json!(sum(&self.inc)));
        for r in 0..self.calls.len() {
            m.insert(format!("{CALLS} rank {r}"), json!(self.calls[r]));
            m.insert(format!("{TIME} rank {r}"), json!(self.exc[r]));
            m.insert(format!("{TIME_INC} rank {r}"), json!(self.inc[r]));
        }
        Value::Object(m)
    }
}

fn at(v: &[u64], r: usize) -> u64 {
    v.get(r).copied().unwrap_or(0)
}

fn node(name: &str, kind: &str, row: &Row, children: Vec<Value>) -> Value {
    json!({
        "frame": { "name": name, "type": kind },
        "metrics": row.metrics(),
        "children": children,
    })
}

/// The parent of a call path (`a/b` → `a`, `a` → `""`).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

/// The children of call path `path` (`""` is the program), with the sum of
/// their inclusive times per rank.
fn children(p: &Program, path: &str) -> (Vec<Value>, Vec<u64>) {
    let n = p.ranks;
    let mut covered = vec![0u64; n];
    let mut out = Vec::new();
    for (child, prof) in &p.regions.paths {
        if child.is_empty() || parent(child) != path {
            continue;
        }
        let (grand, _) = children(p, child);
        // MPI children are part of the region's own exclusive time.
        let row = Row::build(n, |r| {
            (
                at(&prof.calls, r),
                at(&prof.inclusive_ns, r),
                at(&prof.exclusive_ns, r).saturating_sub(mpi_time(p, child, r)),
            )
        });
        row.cover(&mut covered);
        let name = child.rsplit('/').next().unwrap_or(child);
        out.push(node(name, "region", &row, grand));
    }
    if let Some(funcs) = p.regions.mpi.get(path) {
        for (func, c) in funcs {
            let row = Row::build(n, |r| {
                (at(&c.calls, r), at(&c.time_ns, r), at(&c.time_ns, r))
            });
            row.cover(&mut covered);
            out.push(node(func, "function", &row, Vec::new()));
        }
    }
    (out, covered)
}

fn mpi_time(p: &Program, path: &str, r: usize) -> u64 {
    p.regions.mpi.get(path).map_or(0, |funcs| {
        funcs
            .values()
            .fold(0u64, |a, c| a.saturating_add(at(&c.time_ns, r)))
    })
}

/// The literal graph of `run`: a list of roots, one per program.
pub fn literal(run: &Run) -> Value {
    let roots = run
        .programs
        .iter()
        .map(|p| {
            let (kids, covered) = children(p, "");
            let row = Row::build(p.ranks, |r| {
                let wall = at(&p.rank_wall_ns, r);
                (1, wall, wall.saturating_sub(covered[r]))
            });
            node(&p.name, "program", &row, kids)
        })
        .collect();
    Value::Array(roots)
}

/// The run's metadata for a Thicket ensemble: one flat object of scalars
/// (Thicket's metadata table has one row per run, one column per key).
pub fn metadata(run: &Run) -> Value {
    let programs: Vec<&str> = run.programs.iter().map(|p| p.name.as_str()).collect();
    let ranks: usize = run.programs.iter().map(|p| p.ranks).sum();
    let first = run.programs.first();
    let host = first
        .and_then(|p| p.rank_info.first())
        .map_or("", |i| i.host.as_str());
    let command = first.map_or(String::new(), |p| p.command.join(" "));
    let wall = run.programs.iter().map(|p| p.wall_ns).max().unwrap_or(0);
    json!({
        "programs": programs.join(","),
        "ranks": ranks,
        "host": host,
        "command": command,
        "wall_ns": wall,
        "hark_version": run.hark_version,
    })
}

/// Writes [`LITERAL`] and [`METADATA`] for `run` into `dir`, which exists.
pub fn write(run: &Run, dir: &Path) -> Result<(), Error> {
    let text = |v: &Value| serde_json::to_string_pretty(v).expect("JSON values serialise");
    write_file(&dir.join(LITERAL), text(&literal(run)).as_bytes())?;
    write_file(&dir.join(METADATA), text(&metadata(run)).as_bytes())
}
