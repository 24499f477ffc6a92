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
//! service's stderr, and so is an empty one (zero bytes: no database at
//! all, though SQLite would take it for a new one and forget every run);
//! an index that cannot be used for another reason (read-only, locked)
//! stops the service from starting, with the reason.
//!
//! The index holds every user's command lines, so it is the service's
//! alone: mode 0600 (`Index::open_private`), and so is a damaged copy moved
//! aside. Users list their own runs through the service instead: `hark
//! runs --index RUNS` finds the control socket through the link
//! `RUNS/hark.ctl` ([`CONTROL_LINK`]) and asks `{"op": "runs"}`
//! ([`answer_runs`]); the kernel's `SO_PEERCRED` on that socket says whose
//! runs to list. What the service reads back from run directories, which
//! their owners may change, goes through `crate::serve_files`.

use crate::output::print_stderr;
use anyhow::{Context, Result};
use hark_index::{Entry, Filter, Index};
use hark_server::{DumpInfo, JobInfo, JobState, RunKind, ServiceRun, Viewer};
use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The service's `service.json`, written into each of its run directories.
pub const META_FILE: &str = "service.json";

/// The link in the runs directory to the service's control socket.
pub const CONTROL_LINK: &str = "hark.ctl";

/// The largest `service.json` read back: a few hundred bytes are written.
const META_MAX: u64 = 1 << 16;

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
    if std::fs::symlink_metadata(file).is_ok_and(|m| m.len() == 0) {
        let aside = move_aside(file, "it is empty")?;
        let n = rebuild(runs, file)?;
        print_stderr(&format!(
            "hark serve: The run index {} was empty; moved it to {} and rebuilt it from {n} run directories.\n",
            file.display(),
            aside.display()
        ));
    }
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
            let aside = move_aside(file, &format!("it is damaged ({e})"))?;
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
        .filter_map(|e| Some((e, read_meta(&e.run_dir, e.owner)?)))
        .collect();
    Ok(Past {
        jobs: last(served.iter().filter_map(|(e, m)| past_job(e, m)), keep),
        dumps: last(served.iter().filter_map(|(e, m)| past_dump(e, m)), keep),
    })
}

/// Moves the index at `file` aside (`FILE.corrupt`, the service's alone),
/// saying `why` if it cannot.
fn move_aside(file: &Path, why: &str) -> Result<PathBuf> {
    let aside = PathBuf::from(format!("{}.corrupt", file.display()));
    std::fs::rename(file, &aside).with_context(|| {
        format!(
            "the run index {} cannot be moved aside ({why})",
            file.display()
        )
    })?;
    std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o600)).with_context(
        || {
            format!(
                "cannot make {} readable by the service alone",
                aside.display()
            )
        },
    )?;
    Ok(aside)
}

/// The last `keep` items.
fn last<T>(items: impl Iterator<Item = T>, keep: usize) -> Vec<T> {
    let mut v: Vec<T> = items.collect();
    v.drain(..v.len().saturating_sub(keep));
    v
}

/// Records the service's admin group in its index, for `hark runs`.
pub fn set_admins(file: &Path, gid: Option<u32>) -> Result<()> {
    Index::open_private(file)?
        .set_admin_group(gid)
        .context("cannot record the admin group in the run index")
}

fn load(file: &Path) -> Result<Vec<Entry>, hark_index::Error> {
    Index::open_private(file)?.list(&Filter::default())
}

/// Records every run directory of the service under `runs` into a fresh
/// index at `file`; returns how many.
///
/// A run directory's owner is who owns it, not what its `service.json`
/// (which that owner may have rewritten) says, unless the service never
/// gave it away.
fn rebuild(runs: &Path, file: &Path) -> Result<usize> {
    let index = Index::open_private(file)?;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .with_context(|| format!("cannot list the runs directory {}", runs.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let mut n = 0;
    for dir in dirs {
        let Ok(holder) = crate::serve_files::dir_owner(&dir) else {
            continue;
        };
        let Some(meta) = read_meta(&dir, Some(holder)) else {
            continue;
        };
        let owner = if holder == crate::serve_files::service_uid() {
            meta["owner"].as_u64().and_then(|u| u32::try_from(u).ok())
        } else {
            Some(holder)
        };
        let Ok(run) = crate::serve_files::read_run(&dir, owner) else {
            continue;
        };
        let date = crate::serve_files::open_owned(&dir, hark_outputs::json::FILE_NAME, owner)
            .and_then(|f| f.metadata())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        let entry = Entry {
            owner,
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
    let index = Index::open_private(file)?;
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

/// The `service.json` of a run directory of a job owned by `owner`, read
/// as `crate::serve_files` reads a user's files.
fn read_meta(dir: &Path, owner: Option<u32>) -> Option<Value> {
    let mut text = String::new();
    crate::serve_files::open_owned(dir, META_FILE, owner)
        .ok()?
        .take(META_MAX)
        .read_to_string(&mut text)
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// Whether a control request asks for `runs` (answered from the index).
pub fn is_runs_request(line: &str) -> bool {
    serde_json::from_str::<Value>(line.trim()).is_ok_and(|v| v["op"] == "runs")
}

/// Answers `{"op": "runs", "program", "host", "since", "until"}` (each
/// optional; dates as `hark runs` takes them): the rows of the index at
/// `file` that `viewer` may see (their own; every row for an admin), each
/// with its date written out (`when`).
pub fn answer_runs(file: &Path, viewer: &Viewer, line: &str) -> Value {
    let fail = |e: String| json!({"ok": false, "error": e});
    let req: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => return fail(format!("the request is not JSON: {e}")),
    };
    let listed = || -> Result<Value, hark_index::Error> {
        let index = Index::open_private(file)?;
        let text = |k: &str| req[k].as_str().map(str::to_string);
        let date = |k: &str| text(k).map(|d| index.parse_date(&d)).transpose();
        // `until` a day (YYYY-MM-DD) includes that day.
        let day = text("until").is_some_and(|d| d.trim().len() == 10);
        let filter = Filter {
            program: text("program"),
            host: text("host"),
            since: date("since")?,
            until: date("until")?.map(|u| if day { u + 86_400 } else { u }),
            viewer: (!viewer.admin).then_some(viewer.uid),
        };
        let mut rows = Vec::new();
        for e in index.list(&filter)? {
            rows.push(json!({
                "run_dir": e.run_dir,
                "programs": e.programs,
                "host": e.host,
                "date": e.date,
                "when": index.format_date(e.date)?,
                "ranks": e.ranks,
                "wall_ns": e.wall_ns,
                "command": e.command,
                "hark_version": e.hark_version,
                "owner": e.owner,
                "served": e.served,
                "status": e.status,
            }));
        }
        Ok(json!({"ok": true, "runs": rows}))
    };
    listed().unwrap_or_else(|e| fail(e.to_string()))
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
