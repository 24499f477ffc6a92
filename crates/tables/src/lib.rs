//! The Parquet export of a Hark run: the model as flat tables that pandas,
//! polars, DuckDB and Spark read directly.
//!
//! | file                   | one row per                                   |
//! |------------------------|-----------------------------------------------|
//! | `functions.parquet`    | program × rank × function (MPI, and I/O operations) |
//! | `regions.parquet`      | program × rank × region call path             |
//! | `messages.parquet`     | program × sending rank × receiving rank (pairs that exchanged anything) |
//! | `one_sided.parquet`    | program × origin rank × target rank (pairs with any one-sided operation) |
//! | `timeslices.parquet`   | program × rank × time slice × metric (non-zero values) |
//! | `counters.parquet`     | program × rank × scope (rank, thread, region path, MPI function) × performance counter |
//!
//! Every table is a function of [`hark_model::Run`] ([`tables`]); [`write()`]
//! writes them into a directory. The columns are listed in `docs/export.md`.
//! A separate crate from `hark-outputs` because arrow and parquet weigh
//! about a minute of build time: only the `hark` binary needs them, and
//! every other crate's tests build without them.
//!
//! ```
//! use hark_model::{FunctionProfile, Program, Run};
//!
//! let mut p = Program { name: "app".into(), ranks: 2, ..Program::default() };
//! p.mpi.insert("MPI_Send".into(), FunctionProfile {
//!     calls: vec![3, 4], bytes: vec![30, 40], time_ns: vec![5, 6],
//!     ..FunctionProfile::default()
//! });
//! let run = Run { programs: vec![p], ..Run::default() };
//! let tables = hark_tables::tables(&run);
//! assert_eq!(tables[0].0, "functions.parquet");
//! assert_eq!(tables[0].1.num_rows(), 2);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use hark_model::{Program, Run};
use parquet::arrow::ArrowWriter;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A table could not be built or written.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    path: PathBuf,
}

/// The kinds of [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Writing the file failed.
    Io(std::io::Error),
    /// The Parquet writer refused the table.
    Parquet(parquet::errors::ParquetError),
}

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "cannot write {p}: {e}"),
            ErrorKind::Parquet(e) => write!(f, "cannot encode {p} as Parquet: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Columns being filled: one builder per column, by kind.
enum Col {
    Str(Vec<String>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

struct Table {
    names: Vec<&'static str>,
    cols: Vec<Col>,
}

impl Table {
    fn new(columns: &[(&'static str, DataType)]) -> Table {
        Table {
            names: columns.iter().map(|c| c.0).collect(),
            cols: columns
                .iter()
                .map(|c| match c.1 {
                    DataType::Utf8 => Col::Str(Vec::new()),
                    DataType::UInt32 => Col::U32(Vec::new()),
                    _ => Col::U64(Vec::new()),
                })
                .collect(),
        }
    }

    fn s(&mut self, i: usize, v: &str) {
        if let Col::Str(c) = &mut self.cols[i] {
            c.push(v.to_string());
        }
    }

    fn u32(&mut self, i: usize, v: usize) {
        if let Col::U32(c) = &mut self.cols[i] {
            c.push(v as u32);
        }
    }

    fn u64(&mut self, i: usize, v: u64) {
        if let Col::U64(c) = &mut self.cols[i] {
            c.push(v);
        }
    }

    fn batch(self) -> RecordBatch {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (name, col) in self.names.into_iter().zip(self.cols) {
            let (t, a): (DataType, ArrayRef) = match col {
                Col::Str(v) => (DataType::Utf8, Arc::new(StringArray::from(v))),
                Col::U32(v) => (DataType::UInt32, Arc::new(UInt32Array::from(v))),
                Col::U64(v) => (DataType::UInt64, Arc::new(UInt64Array::from(v))),
            };
            fields.push(Field::new(name, t, false));
            arrays.push(a);
        }
        // Columns of one table have equal lengths by construction: every row
        // pushes one value to each.
        RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("every row fills every column")
    }
}

fn at(v: &[u64], r: usize) -> u64 {
    v.get(r).copied().unwrap_or(0)
}

use DataType::{UInt32, UInt64, Utf8};

fn functions(run: &Run) -> RecordBatch {
    let mut t = Table::new(&[
        ("program", Utf8),
        ("rank", UInt32),
        ("kind", Utf8),
        ("function", Utf8),
        ("calls", UInt64),
        ("bytes", UInt64),
        ("time_ns", UInt64),
        ("min_ns", UInt64),
        ("max_ns", UInt64),
    ]);
    for p in &run.programs {
        for (name, f) in &p.mpi {
            for r in 0..p.ranks {
                row(&mut t, p, r, "mpi", name);
                for (i, v) in [&f.calls, &f.bytes, &f.time_ns, &f.min_ns, &f.max_ns]
                    .into_iter()
                    .enumerate()
                {
                    t.u64(4 + i, at(v, r));
                }
            }
        }
        for (r, ops) in p.io.per_rank.iter().enumerate().take(p.ranks) {
            for (name, x) in ops {
                row(&mut t, p, r, "io", name);
                for (i, v) in [x.calls, x.bytes, x.time_ns, 0, 0].into_iter().enumerate() {
                    t.u64(4 + i, v);
                }
            }
        }
    }
    t.batch()
}

fn row(t: &mut Table, p: &Program, r: usize, kind: &str, name: &str) {
    t.s(0, &p.name);
    t.u32(1, r);
    t.s(2, kind);
    t.s(3, name);
}

fn regions(run: &Run) -> RecordBatch {
    let mut t = Table::new(&[
        ("program", Utf8),
        ("rank", UInt32),
        ("path", Utf8),
        ("calls", UInt64),
        ("inclusive_ns", UInt64),
        ("exclusive_ns", UInt64),
    ]);
    for p in &run.programs {
        for (path, x) in &p.regions.paths {
            for r in 0..p.ranks {
                t.s(0, &p.name);
                t.u32(1, r);
                t.s(2, path);
                t.u64(3, at(&x.calls, r));
                t.u64(4, at(&x.inclusive_ns, r));
                t.u64(5, at(&x.exclusive_ns, r));
            }
        }
    }
    t.batch()
}

/// Rank × rank matrices of counts, bytes and ns.
type Traffic<'a> = [&'a Vec<Vec<u64>>; 3];

fn messages(run: &Run) -> RecordBatch {
    let columns = ["from_rank", "to_rank", "messages"];
    pairs(run, columns, |p| {
        [&p.p2p.messages, &p.p2p.bytes, &p.p2p.time_ns]
    })
}

fn one_sided(run: &Run) -> RecordBatch {
    let columns = ["origin_rank", "target_rank", "operations"];
    pairs(run, columns, |p| {
        let o = &p.p2p.one_sided;
        [&o.messages, &o.bytes, &o.time_ns]
    })
}

/// A row per pair of ranks with any traffic in `traffic`'s matrices.
fn pairs(
    run: &Run,
    [from, to, what]: [&'static str; 3],
    traffic: fn(&Program) -> Traffic<'_>,
) -> RecordBatch {
    let mut t = Table::new(&[
        ("program", Utf8),
        (from, UInt32),
        (to, UInt32),
        (what, UInt64),
        ("bytes", UInt64),
        ("time_ns", UInt64),
    ]);
    for p in &run.programs {
        let cell = |m: &Vec<Vec<u64>>, i: usize, j: usize| {
            m.get(i).and_then(|row| row.get(j)).copied().unwrap_or(0)
        };
        let [count, bytes, time_ns] = traffic(p);
        for i in 0..count.len() {
            for j in 0..count[i].len() {
                let (n, b, time) = (cell(count, i, j), cell(bytes, i, j), cell(time_ns, i, j));
                if n == 0 && b == 0 && time == 0 {
                    continue;
                }
                t.s(0, &p.name);
                t.u32(1, i);
                t.u32(2, j);
                t.u64(3, n);
                t.u64(4, b);
                t.u64(5, time);
            }
        }
    }
    t.batch()
}

fn timeslices(run: &Run) -> RecordBatch {
    let mut t = Table::new(&[
        ("program", Utf8),
        ("rank", UInt32),
        ("slice", UInt32),
        ("start_ns", UInt64),
        ("metric", Utf8),
        ("value", UInt64),
    ]);
    for p in &run.programs {
        let ts = &p.timeslices;
        for (metric, ranks) in &ts.metrics {
            for (r, slices) in ranks.iter().enumerate() {
                for (i, &v) in slices.iter().enumerate() {
                    if v == 0 {
                        continue;
                    }
                    t.s(0, &p.name);
                    t.u32(1, r);
                    t.u32(2, i);
                    t.u64(3, (i as u64).saturating_mul(ts.slice_ns));
                    t.s(4, metric);
                    t.u64(5, v);
                }
            }
        }
    }
    t.batch()
}

/// Performance counts: per rank (`scope` "rank"), per thread ("thread",
/// `thread` its number), per region call path ("region", `path`) and
/// inside each MPI function ("mpi", `path` the function's name, with
/// `--counters-in-mpi`).
fn counters(run: &Run) -> RecordBatch {
    let mut t = Table::new(&[
        ("program", Utf8),
        ("rank", UInt32),
        ("scope", Utf8),
        ("thread", UInt32),
        ("path", Utf8),
        ("counter", Utf8),
        ("count", UInt64),
    ]);
    let mut row =
        |p: &Program, r: usize, (scope, thread, path): (&str, usize, &str), c: &str, v| {
            t.s(0, &p.name);
            t.u32(1, r);
            t.s(2, scope);
            t.u32(3, thread);
            t.s(4, path);
            t.s(5, c);
            t.u64(6, v);
        };
    for p in &run.programs {
        for (r, counts) in p.counters.iter().enumerate() {
            for (c, &v) in counts {
                row(p, r, ("rank", 0, ""), c, v);
            }
        }
        for (r, threads) in p.counter_info.threads.iter().enumerate() {
            for (i, counts) in threads.iter().enumerate() {
                for (c, &v) in counts {
                    row(p, r, ("thread", i, ""), c, v);
                }
            }
        }
        for (path, x) in &p.regions.paths {
            for (c, per_rank) in &x.counters {
                for (r, &v) in per_rank.iter().enumerate() {
                    row(p, r, ("region", 0, path), c, v);
                }
            }
        }
        for (function, f) in &p.mpi {
            for (c, per_rank) in &f.counters {
                for (r, &v) in per_rank.iter().enumerate() {
                    row(p, r, ("mpi", 0, function), c, v);
                }
            }
        }
    }
    t.batch()
}

/// Every table of `run`, with its file name.
pub fn tables(run: &Run) -> Vec<(&'static str, RecordBatch)> {
    vec![
        ("functions.parquet", functions(run)),
        ("regions.parquet", regions(run)),
        ("messages.parquet", messages(run)),
        ("one_sided.parquet", one_sided(run)),
        ("timeslices.parquet", timeslices(run)),
        ("counters.parquet", counters(run)),
    ]
}

/// `batch` encoded as a Parquet file.
pub fn encode(batch: &RecordBatch) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), None)?;
    w.write(batch)?;
    w.close()?;
    Ok(out)
}

/// Writes every table of `run` into `dir` (which exists), each file whole
/// or not at all (written beside, then renamed). Returns the files written.
pub fn write(run: &Run, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for (name, batch) in tables(run) {
        let path = dir.join(name);
        let err = |kind| Error {
            kind,
            path: path.clone(),
        };
        let bytes = encode(&batch).map_err(|e| err(ErrorKind::Parquet(e)))?;
        let tmp = dir.join(format!("{name}.partial"));
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                err(ErrorKind::Io(e))
            })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{UInt32Type, UInt64Type};
    use hark_model::Matrices;

    #[test]
    fn one_sided_traffic_has_a_row_per_origin_and_target_that_moved_anything() {
        let mut p = Program {
            name: "ga".into(),
            ranks: 2,
            ..Program::default()
        };
        p.p2p.one_sided = Matrices {
            messages: vec![vec![5, 3], vec![0, 0]],
            bytes: vec![vec![40, 24], vec![0, 0]],
            time_ns: vec![vec![7, 9], vec![0, 0]],
        };
        let run = Run {
            programs: vec![p],
            ..Run::default()
        };
        let all = tables(&run);
        let (name, t) = all.iter().find(|t| t.0 == "one_sided.parquet").unwrap();
        assert_eq!(*name, "one_sided.parquet");
        let names: Vec<_> = t
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "program",
                "origin_rank",
                "target_rank",
                "operations",
                "bytes",
                "time_ns"
            ]
        );
        assert_eq!(t.num_rows(), 2, "rank 1 moved nothing");
        let u32s = |c: usize| t.column(c).as_primitive::<UInt32Type>().values().to_vec();
        let u64s = |c: usize| t.column(c).as_primitive::<UInt64Type>().values().to_vec();
        assert_eq!((u32s(1), u32s(2)), (vec![0, 0], vec![0, 1]));
        assert_eq!(
            (u64s(3), u64s(4), u64s(5)),
            (vec![5, 3], vec![40, 24], vec![7, 9])
        );
        // No message: an empty messages table, with its columns.
        let messages = &all.iter().find(|t| t.0 == "messages.parquet").unwrap().1;
        assert_eq!(messages.num_rows(), 0);
        assert!(encode(t).is_ok());
    }

    #[test]
    fn counts_per_thread_and_inside_mpi_functions_have_rows_of_their_own() {
        let mut p = Program {
            name: "app".into(),
            ranks: 2,
            ..Program::default()
        };
        let counts = |v: u64| [("page-faults".to_string(), v)].into_iter().collect();
        p.counters = vec![counts(10), counts(20)];
        p.counter_info.threads = vec![vec![counts(4), counts(6)], vec![counts(20)]];
        let mut recv = hark_model::FunctionProfile::default();
        recv.counters.insert("page-faults".into(), vec![0, 7]);
        p.mpi.insert("MPI_Recv".into(), recv);
        let run = Run {
            programs: vec![p],
            ..Run::default()
        };
        let all = tables(&run);
        let t = &all.iter().find(|t| t.0 == "counters.parquet").unwrap().1;
        let strings = |c: usize| -> Vec<String> {
            t.column(c)
                .as_string::<i32>()
                .iter()
                .map(|s| s.unwrap_or("").to_string())
                .collect()
        };
        let u32s = |c: usize| t.column(c).as_primitive::<UInt32Type>().values().to_vec();
        let u64s = |c: usize| t.column(c).as_primitive::<UInt64Type>().values().to_vec();
        let rows: Vec<(u32, String, u32, String, u64)> = (0..t.num_rows())
            .map(|i| {
                (
                    u32s(1)[i],
                    strings(2)[i].clone(),
                    u32s(3)[i],
                    strings(4)[i].clone(),
                    u64s(6)[i],
                )
            })
            .collect();
        let row = |r: u32, scope: &str, thread: u32, path: &str, v: u64| {
            (r, scope.to_string(), thread, path.to_string(), v)
        };
        assert_eq!(
            rows,
            [
                row(0, "rank", 0, "", 10),
                row(1, "rank", 0, "", 20),
                row(0, "thread", 0, "", 4),
                row(0, "thread", 1, "", 6),
                row(1, "thread", 0, "", 20),
                row(0, "mpi", 0, "MPI_Recv", 0),
                row(1, "mpi", 0, "MPI_Recv", 7),
            ]
        );
        assert!(encode(t).is_ok());
    }
}
