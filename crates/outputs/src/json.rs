//! `profile.json`: the whole model, as serde writes it. The schema is the
//! model's (`hark_model`), documented in `docs/profile-json.md`; `hark
//! report` reads it back with [`read`] to render the other outputs again.

use crate::{Error, Output};
use hark_model::Run;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;

/// The file name inside a run directory.
pub const FILE_NAME: &str = "profile.json";

/// `run` as pretty-printed JSON.
pub fn render(run: &Run) -> String {
    // Serialising plain data into memory cannot fail: the model has only
    // string keys and finite numbers.
    serde_json::to_string_pretty(run).expect("the model serialises to JSON")
}

/// Reads a `profile.json` as `hark run` writes it (directly, or a run directory's).
///
/// A profile that parses but contradicts itself is refused, as the outputs
/// index per-rank arrays by rank: a rank count no run can have, or a
/// per-rank array longer than the rank count.
pub fn read(path: &Path) -> Result<Run, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    read_open(file, path)
}

/// Reads a run from `file`, already opened (by a caller that checked what
/// it opened), naming `path` in errors; checked as [`read`] checks it.
pub fn read_open(file: File, path: &Path) -> Result<Run, Error> {
    let run: Run =
        serde_json::from_reader(BufReader::new(file)).map_err(|e| Error::json(path, e))?;
    check(&run).map_err(|what| Error::inconsistent(path, what))?;
    Ok(run)
}

/// More ranks than any machine runs (the largest have a few million).
pub const MAX_RANKS: usize = 1 << 26;

/// Checks that `run`'s per-rank data fits its rank counts.
fn check(run: &Run) -> Result<(), String> {
    for p in &run.programs {
        let n = p.ranks;
        let name = &p.name;
        if n > MAX_RANKS {
            return Err(format!(
                "program {name} claims {n} ranks, more than the {MAX_RANKS} Hark reads"
            ));
        }
        if p.rank_info.len() != n {
            return Err(format!(
                "program {name} has {n} ranks but describes {}",
                p.rank_info.len()
            ));
        }
        let fits = |what: &str, len: usize| {
            if len > n {
                Err(format!(
                    "program {name}: {what} has {len} per-rank values for {n} ranks"
                ))
            } else {
                Ok(())
            }
        };
        fits("mpi_time_ns", p.mpi_time_ns.len())?;
        fits("rank_wall_ns", p.rank_wall_ns.len())?;
        for (f, prof) in &p.mpi {
            for v in [
                &prof.calls,
                &prof.bytes,
                &prof.time_ns,
                &prof.min_ns,
                &prof.max_ns,
            ] {
                fits(&format!("mpi.{f}"), v.len())?;
            }
        }
        let o = &p.p2p.one_sided;
        for m in [
            &p.p2p.messages,
            &p.p2p.bytes,
            &p.p2p.time_ns,
            &o.messages,
            &o.bytes,
            &o.time_ns,
        ] {
            fits("p2p", m.len())?;
            for row in m {
                fits("a p2p row", row.len())?;
            }
        }
        fits("io.per_rank", p.io.per_rank.len())?;
        for f in &p.io.files {
            fits("io.files read_bytes", f.read_bytes.len())?;
            fits("io.files write_bytes", f.write_bytes.len())?;
            fits("io.files calls", f.calls.len())?;
        }
        for (r, prof) in &p.regions.paths {
            for v in [&prof.calls, &prof.inclusive_ns, &prof.exclusive_ns] {
                fits(&format!("regions.{r}"), v.len())?;
            }
        }
        if !p.cpu.ranks.is_empty() {
            fits("cpu.ranks", p.cpu.ranks.len())?;
        }
        for (m, rows) in &p.timeslices.metrics {
            fits(&format!("timeslices.{m}"), rows.len())?;
        }
        for (m, map) in &p.density {
            fits(&format!("density.{m}"), map.values.len())?;
        }
    }
    Ok(())
}

/// Writes `profile.json`.
pub(crate) struct Json;

impl Output for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn write(&self, run: &Run, dir: &Path) -> Result<(), Error> {
        let path = dir.join(FILE_NAME);
        crate::write_with(&path, |w| {
            serde_json::to_writer_pretty(&mut *w, run).map_err(|e| Error::json(&path, e))?;
            w.write_all(b"\n").map_err(|e| Error::io(&path, e))
        })
    }
}
