//! The run index of `hark serve`: every run it writes (final or dump) is
//! recorded in one SQLite file beside the run directories,
//! `RUNS/index.sqlite` (`hark_index::SERVICE_FILE`), with the uid that
//! owns it, so that `hark runs --index RUNS` lists a user's own runs. A
//! service started again on the same directory reads its finished jobs
//! back from it: nothing finished is lost.
//!
//! The run directories stay the source of truth (`profile.json`, and
//! `service.json` for the job's number, name and owner). So a missing index
//! is rebuilt from them, and one that is damaged or not a database is
//! moved aside (`index.sqlite.corrupt`) and rebuilt, with a line on the
//! service's stderr; an index that cannot be used for another reason
//! (read-only, locked) stops the service from starting, with the reason.

use crate::output::print_stderr;
use anyhow::{Context, Result};
use hark_index::{Entry, Filter, Index};
use hark_server::{DumpInfo, JobInfo, JobState, RunKind, ServiceRun};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The service's `service.json`, written into each of its run directories.
pub const META_FILE: &str = "service.json";

/// The finished jobs and the dumps of a service's earlier lives.
pub struct Past {
    /// Finished jobs, oldest first.
    pub jobs: Vec<JobInfo>,
    /// Dumps, oldest first.
    pub dumps: Vec<DumpInfo>,
}

/// Opens (or rebuilds) the index at `file` for the runs under `runs`, and
/// returns the finished jobs and the dumps it holds, oldest first, the last
/// `keep` of each.
pub fn open(runs: &Path, file: &Path, keep: usize) -> Result<Past> {
    let existed = file.exists();
    let entries = match load(file) {
        Ok(entries) if existed => entries,
        Ok(_) => {
            let n = rebuild(runs, file)?;
            if n > 0 {
                print_stderr(&format!(
                    "hark serve: The run index {} was missing; rebuilt it from {n} run directories.\n",
                    file.display()
                ));
            }
            load(file)?
        }
        Err(e) if e.is_corrupt() => {
            let aside = PathBuf::from(format!("{}.corrupt", file.display()));
            std::fs::rename(file, &aside).with_context(|| {
                format!(
                    "the run index {} is damaged ({e}) and cannot be moved aside",
                    file.display()
                )
            })?;
            let n = rebuild(runs, file)?;
            print_stderr(&format!(
                "hark serve: The run index {} was damaged ({e}); moved it to {} and rebuilt it from {n} run directories.\n",
                file.display(),
                aside.display()
            ));
            load(file)?
        }
        Err(e) => return Err(e).context("the service cannot keep its run index"),
    };
    let served: Vec<(&Entry, Value)> = entries
        .iter()
        .filter(|e| e.served)
        .filter_map(|e| Some((e, read_meta(&e.run_dir)?)))
        .collect();
    Ok(Past {
        jobs: last(served.iter().filter_map(|(e, m)| past_job(e, m)), keep),
        dumps: last(served.iter().filter_map(|(e, m)| past_dump(e, m)), keep),
    })
}

/// The last `keep` items.
fn last<T>(items: impl Iterator<Item = T>, keep: usize) -> Vec<T> {
    let mut v: Vec<T> = items.collect();
    v.drain(..v.len().saturating_sub(keep));
    v
}

/// Records the service's admin group in its index, for `hark runs`.
pub fn set_admins(file: &Path, gid: Option<u32>) -> Result<()> {
    Index::open(file)?
        .set_admin_group(gid)
        .context("cannot record the admin group in the run index")
}

fn load(file: &Path) -> Result<Vec<Entry>, hark_index::Error> {
    Index::open(file)?.list(&Filter::default())
}

/// Records every run directory of the service under `runs` into a fresh
/// index at `file`; returns how many.
fn rebuild(runs: &Path, file: &Path) -> Result<usize> {
    let index = Index::open(file)?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .with_context(|| format!("cannot list the runs directory {}", runs.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.join(META_FILE).is_file())
        .collect();
    dirs.sort();
    let mut n = 0;
    for dir in dirs {
        let Ok((run, dir)) = crate::export::read_run(&dir) else {
            continue;
        };
        let meta = read_meta(&dir).unwrap_or_default();
        let date = std::fs::metadata(dir.join(hark_outputs::json::FILE_NAME))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        let entry = Entry {
            owner: meta["owner"].as_u64().and_then(|u| u32::try_from(u).ok()),
            served: true,
            ..crate::runs::entry(&run, &dir, date)
        };
        index.record(&entry)?;
        n += 1;
    }
    Ok(n)
}

/// Records a run the service has just written into `dir`.
pub fn record(file: &Path, r: &ServiceRun, dir: &Path) -> Result<()> {
    let index = Index::open(file)?;
    let date = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    index.record(&Entry {
        owner: r.owner,
        served: true,
        ..crate::runs::entry(&r.run, dir, date)
    })?;
    Ok(())
}

/// `service.json`: the job's number, name, owner and state, and what its
/// line in `hark ctl list` needs besides (when it started, its streams
/// and events), so that it is listed the same after a restart.
pub fn meta(r: &ServiceRun) -> Value {
    let run = &r.run;
    let partial = run.accounting.partial_ranks > 0 || run.accounting.partial_children > 0;
    serde_json::json!({
        "id": r.id.to_string(),
        "job": r.job,
        "owner": r.owner,
        "kind": match r.kind { RunKind::Final => "final", RunKind::Dump(_) => "dump" },
        "dump": match r.kind { RunKind::Final => None, RunKind::Dump(n) => Some(n) },
        "state": if partial { "partial" } else { "finished" },
        "started_ns": r.info.started_ns,
        "streams": r.info.streams,
        "events": r.info.events,
    })
}

fn read_meta(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(META_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// A dump of an earlier life of the service, from its run directory's
/// `service.json`; `None` for a final run.
fn past_dump(e: &Entry, meta: &Value) -> Option<DumpInfo> {
    if meta["kind"] != "dump" {
        return None;
    }
    let job: u64 = meta["id"].as_str()?.parse().ok()?;
    let seq = meta["dump"].as_u64()?;
    Some(DumpInfo {
        id: DumpInfo::id_of(job, seq),
        job,
        name: meta["job"].as_str().unwrap_or_default().to_string(),
        seq,
        owner: e.owner,
        programs: e.programs.clone(),
        started_ns: meta["started_ns"].as_u64().unwrap_or(0),
        streams: meta["streams"].as_u64().unwrap_or(e.ranks) as usize,
        events: meta["events"].as_u64().unwrap_or(0),
        dir: e.run_dir.clone(),
    })
}

/// A finished job of an earlier life of the service, from its run
/// directory's `service.json`; `None` for a dump.
fn past_job(e: &Entry, meta: &Value) -> Option<JobInfo> {
    if meta["kind"] != "final" {
        return None;
    }
    Some(JobInfo {
        id: meta["id"].as_str()?.parse().ok()?,
        job: meta["job"].as_str().unwrap_or_default().to_string(),
        owner: e.owner,
        state: if meta["state"] == "partial" {
            JobState::Partial
        } else {
            JobState::Finished
        },
        programs: e.programs.clone(),
        started_ns: meta["started_ns"].as_u64().unwrap_or(0),
        open: 0,
        streams: meta["streams"].as_u64().unwrap_or(e.ranks) as usize,
        events: meta["events"].as_u64().unwrap_or(0),
        dir: Some(e.run_dir.clone()),
    })
}
