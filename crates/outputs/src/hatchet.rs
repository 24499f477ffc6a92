//! The Hatchet and Thicket export: the region call tree with MPI functions
//! and I/O operations as leaves, in the JSON form `hatchet.GraphFrame.to_json`
//! writes and `GraphFrame.from_json` loads, with a `(node, rank)` index as
//! Hatchet's Caliper and HPCToolkit readers give, plus one flat record of
//! metadata per run for a Thicket ensemble. `docs/export.md` gives the schema.
//!
//! One root per program (its frame `type` is `program`), its children the
//! top-level regions, the MPI functions called outside any region and the
//! program's I/O operations; a region's children are its nested regions and
//! the MPI functions called directly in it (`regions.mpi`). Every node has
//! one dataframe row per rank with its calls, inclusive and exclusive time:
//!
//! - program: inclusive = the rank's wall time, exclusive = what no region
//!   or MPI child covers;
//! - region: inclusive as measured, exclusive = the region's exclusive time
//!   (nested regions taken out) minus its MPI children's time;
//! - MPI function: inclusive = exclusive = its time in that call path;
//! - I/O operation (`io.per_rank`): inclusive = exclusive = its time, plus
//!   its bytes. The profile keeps I/O per rank, not per region, so I/O nodes
//!   hang under the program and their time, already inside the regions' and
//!   MPI functions' times, is not taken out of the program's exclusive time.
//!
//! So the MPI leaves of a program sum to `mpi.<f>.time_ns`, and without the
//! I/O nodes the tree adds up as Hatchet expects: inclusive = exclusive +
//! children's inclusive.

use crate::{write_file, Error};
use hark_model::{Program, Run};
use serde_json::{json, Map, Value};
use std::path::Path;

/// The graphframe's file name in an export directory.
pub const GRAPHFRAME: &str = "hatchet.json";
/// The metadata file's name in an export directory.
pub const METADATA: &str = "thicket-metadata.json";

/// Metric columns. Inclusive names end in ` (inc)`, as in Hatchet's readers.
const CALLS: &str = "calls";
const TIME: &str = "time";
const TIME_INC: &str = "time (inc)";
const BYTES: &str = "bytes";

/// Per-rank calls, exclusive and inclusive time (ns) and bytes of one node.
struct Row {
    calls: Vec<u64>,
    exc: Vec<u64>,
    inc: Vec<u64>,
    bytes: Vec<u64>,
}

impl Row {
    /// A row of `n` ranks; `f(r)` gives rank `r`'s calls, inclusive and
    /// exclusive time; no bytes.
    fn build(n: usize, f: impl Fn(usize) -> (u64, u64, u64)) -> Row {
        let (mut calls, mut inc, mut exc) = (vec![0; n], vec![0; n], vec![0; n]);
        for r in 0..n {
            (calls[r], inc[r], exc[r]) = f(r);
        }
        Row {
            calls,
            exc,
            inc,
            bytes: vec![0; n],
        }
    }

    /// Adds this row's inclusive times to `covered`, per rank.
    fn cover(&self, covered: &mut [u64]) {
        for (c, i) in covered.iter_mut().zip(&self.inc) {
            *c = c.saturating_add(*i);
        }
    }
}

/// One node before numbering: its frame, its row and its children.
struct Tree {
    name: String,
    kind: &'static str,
    row: Row,
    children: Vec<Tree>,
}

fn at(v: &[u64], r: usize) -> u64 {
    v.get(r).copied().unwrap_or(0)
}

fn tree(name: &str, kind: &'static str, row: Row, children: Vec<Tree>) -> Tree {
    Tree {
        name: name.to_string(),
        kind,
        row,
        children,
    }
}

/// The parent of a call path (`a/b` → `a`, `a` → `""`).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

/// The region and MPI children of call path `path` (`""` is the program),
/// with the sum of their inclusive times per rank.
fn children(p: &Program, path: &str) -> (Vec<Tree>, Vec<u64>) {
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
        out.push(tree(name, "region", row, grand));
    }
    if let Some(funcs) = p.regions.mpi.get(path) {
        for (func, c) in funcs {
            let row = Row::build(n, |r| {
                (at(&c.calls, r), at(&c.time_ns, r), at(&c.time_ns, r))
            });
            row.cover(&mut covered);
            out.push(tree(func, "function", row, Vec::new()));
        }
    }
    (out, covered)
}

/// The program's I/O operations (`io.per_rank`), one node each.
fn io_nodes(p: &Program) -> Vec<Tree> {
    let mut ops: Vec<&String> = p.io.per_rank.iter().flat_map(|m| m.keys()).collect();
    ops.sort();
    ops.dedup();
    ops.into_iter()
        .map(|op| {
            let get = |r: usize| {
                p.io.per_rank
                    .get(r)
                    .and_then(|m| m.get(op))
                    .copied()
                    .unwrap_or_default()
            };
            let mut row = Row::build(p.ranks, |r| {
                let t = get(r);
                (t.calls, t.time_ns, t.time_ns)
            });
            row.bytes = (0..p.ranks).map(|r| get(r).bytes).collect();
            tree(op, "io", row, Vec::new())
        })
        .collect()
}

fn mpi_time(p: &Program, path: &str, r: usize) -> u64 {
    p.regions.mpi.get(path).map_or(0, |funcs| {
        funcs
            .values()
            .fold(0u64, |a, c| a.saturating_add(at(&c.time_ns, r)))
    })
}

/// The programs' trees, one root each.
fn trees(run: &Run) -> Vec<Tree> {
    run.programs
        .iter()
        .map(|p| {
            let (mut kids, covered) = children(p, "");
            let row = Row::build(p.ranks, |r| {
                let wall = at(&p.rank_wall_ns, r);
                (1, wall, wall.saturating_sub(covered[r]))
            });
            kids.extend(io_nodes(p));
            tree(&p.name, "program", row, kids)
        })
        .collect()
}

/// Numbers `t` and its subtree in pre-order from `next`, adding each node
/// to `graph` (id → frame and children's ids) and its rows to `rows`.
fn number(
    t: &Tree,
    next: &mut usize,
    graph: &mut Map<String, Value>,
    rows: &mut Vec<Value>,
) -> usize {
    let id = *next;
    *next += 1;
    for r in 0..t.row.calls.len() {
        rows.push(json!({
            "node": id,
            "rank": r,
            "name": t.name,
            "type": t.kind,
            CALLS: t.row.calls[r],
            TIME: t.row.exc[r],
            TIME_INC: t.row.inc[r],
            BYTES: t.row.bytes[r],
        }));
    }
    let kids: Vec<usize> = t
        .children
        .iter()
        .map(|c| number(c, next, graph, rows))
        .collect();
    graph.insert(
        id.to_string(),
        json!({ "data": { "name": t.name, "type": t.kind }, "children": kids }),
    );
    id
}

/// The graphframe of `run` as `GraphFrame.to_json` writes one: the graph
/// (every program's nodes in one id map, so ids are unique across roots)
/// and one dataframe row per node and rank, indexed by `(node, rank)`.
pub fn graphframe(run: &Run) -> Value {
    let (mut next, mut graph, mut rows) = (0, Map::new(), Vec::new());
    for t in trees(run) {
        number(&t, &mut next, &mut graph, &mut rows);
    }
    json!({
        "graph": [Value::Object(graph)],
        "dataframe_indices": ["node", "rank"],
        "dataframe": rows,
        "exclusive_metrics": [TIME, CALLS, BYTES],
        "inclusive_metrics": [TIME_INC],
    })
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

/// Writes [`GRAPHFRAME`] and [`METADATA`] for `run` into `dir`, which exists.
pub fn write(run: &Run, dir: &Path) -> Result<(), Error> {
    let text = |v: &Value| serde_json::to_string_pretty(v).expect("JSON values serialise");
    write_file(&dir.join(GRAPHFRAME), text(&graphframe(run)).as_bytes())?;
    write_file(&dir.join(METADATA), text(&metadata(run)).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{PathCalls, RegionProfile, Totals};
    use std::collections::BTreeMap;

    fn program(name: &str, ranks: usize) -> Program {
        let mut p = Program {
            name: name.into(),
            ranks,
            rank_wall_ns: (0..ranks as u64).map(|r| 1000 + r).collect(),
            ..Default::default()
        };
        p.regions.paths.insert(
            "solve".into(),
            RegionProfile {
                calls: vec![1; ranks],
                inclusive_ns: vec![500; ranks],
                exclusive_ns: vec![500; ranks],
                counters: BTreeMap::new(),
            },
        );
        let send = PathCalls {
            calls: vec![2; ranks],
            time_ns: vec![100; ranks],
        };
        p.regions.mpi.insert(
            "solve".into(),
            BTreeMap::from([("MPI_Send".to_string(), send)]),
        );
        // Only the last rank writes.
        p.io.per_rank = vec![BTreeMap::new(); ranks];
        p.io.per_rank[ranks - 1].insert(
            "write".into(),
            Totals {
                calls: 3,
                bytes: 4096,
                time_ns: 7,
            },
        );
        p
    }

    #[test]
    fn one_row_per_node_and_rank_with_ids_unique_across_programs() {
        let run = Run {
            programs: vec![program("a", 2), program("b", 3)],
            ..Default::default()
        };
        let gf = graphframe(&run);
        let graph = gf["graph"][0].as_object().unwrap();
        // Each program: root, region, MPI function, I/O operation.
        assert_eq!(graph.len(), 8);
        let rows = gf["dataframe"].as_array().unwrap();
        assert_eq!(rows.len(), 4 * 2 + 4 * 3);
        for row in rows {
            assert!(graph.contains_key(&row["node"].to_string()), "{row}");
        }
        let row = |name: &str, rank: u64| {
            rows.iter()
                .filter(|r| r["name"] == name && r["rank"] == rank)
                .map(|r| {
                    (
                        r["calls"].clone(),
                        r["bytes"].clone(),
                        r["time (inc)"].clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
        // The region's exclusive time leaves out its MPI child.
        let solve = rows.iter().find(|r| r["name"] == "solve").unwrap();
        assert_eq!(
            (solve["time"].as_u64(), solve["time (inc)"].as_u64()),
            (Some(400), Some(500))
        );
        // I/O nodes in both programs; a rank that did no I/O has a zero row.
        assert_eq!(row("write", 2), vec![(json!(3), json!(4096), json!(7))]);
        assert_eq!(row("write", 0).len(), 2);
        assert!(row("write", 0).iter().all(|r| r.1 == json!(0)));
        // The program's exclusive time: wall minus the region (I/O not taken out).
        let root = rows
            .iter()
            .find(|r| r["name"] == "b" && r["rank"] == 2)
            .unwrap();
        assert_eq!(root["time"].as_u64(), Some(1002 - 500));
    }
}
