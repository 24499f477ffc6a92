//! `hark runs`: the run history. Every run `hark run` writes is recorded in
//! the index (`hark-index`: `$HARK_INDEX`, else
//! `$XDG_DATA_HOME/hark/runs.sqlite`, else
//! `~/.local/share/hark/runs.sqlite`); `hark runs` lists and filters it, and
//! `hark runs --add RUN_DIR` records runs made elsewhere. `hark runs --index
//! RUNS` lists the runs a `hark serve --runs RUNS` recorded, showing a user
//! only their own (root and the service's `--admin-group`: all of them).
//! That index is the service's alone (mode 0600): whoever cannot read it
//! asks the service, through the control socket linked from RUNS, which
//! knows the caller from the kernel (`crate::serve_index::answer_runs`).

use crate::cli::RunsArgs;
use crate::output::print_stdout;
use anyhow::{anyhow, Context, Result};
use hark_index::{Entry, Filter, Index};
use hark_model::Run;
use std::path::{Path, PathBuf};

/// The index file: the option (or `HARK_INDEX`), else the default place.
/// A directory is a service's runs directory, holding its index.
pub fn index_path(option: Option<&Path>) -> Result<PathBuf> {
    option
        .map(|p| {
            if p.is_dir() {
                p.join(hark_index::SERVICE_FILE)
            } else {
                p.to_path_buf()
            }
        })
        .or_else(hark_index::default_path)
        .ok_or_else(|| {
            anyhow!("no place for the run index: set HARK_INDEX (or HOME, or XDG_DATA_HOME)")
        })
}

/// The index row of `run`, written into `dir`, ended `date` (seconds since
/// the epoch).
pub fn entry(run: &Run, dir: &Path, date: i64) -> Entry {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let first = run.programs.first();
    Entry {
        run_dir: dir,
        programs: run.programs.iter().map(|p| p.name.clone()).collect(),
        host: first
            .and_then(|p| p.rank_info.first())
            .map(|i| i.host.clone())
            .unwrap_or_default(),
        date,
        ranks: run.programs.iter().map(|p| p.ranks as u64).sum(),
        wall_ns: run.programs.iter().map(|p| p.wall_ns).max().unwrap_or(0),
        command: first.map(|p| p.command.join(" ")).unwrap_or_default(),
        hark_version: run.hark_version.clone(),
        owner: None,
        served: false,
        status: hark_outputs::ending::status_word(run),
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Records a finished run in the index at `index` (or the default place).
pub fn record(run: &Run, dir: &Path, index: Option<&Path>) -> Result<()> {
    let path = index_path(index)?;
    let index = Index::open(&path)?;
    index.record(&entry(run, dir, now()))?;
    Ok(())
}

/// Whose runs the caller sees: all (`None`) for root and for the admin
/// group of the service that keeps `index` (`hark serve --admin-group`,
/// recorded in its index), as the service itself shows them; else the
/// caller's own.
fn viewer(index: &Index) -> Result<Option<u32>> {
    let uid = hark_os::uid();
    if uid == 0 {
        return Ok(None);
    }
    let admin = match index.admin_group()? {
        Some(gid) => hark_os::in_my_groups(gid) || crate::serve::user_in_group(uid, gid),
        None => false,
    };
    Ok((!admin).then_some(uid))
}

/// Runs `hark runs`; returns the process exit status.
pub fn runs(args: &RunsArgs) -> Result<i32> {
    if let Some(addr) = &args.server {
        let token = match &args.token_file {
            Some(f) => Some(crate::serve::read_token(f)?),
            None => None,
        };
        return from_service(args, addr, token.as_deref(), Path::new(addr));
    }
    let path = index_path(args.index.as_deref())?;
    if let Some(runs) = args.index.as_deref().filter(|p| p.is_dir()) {
        let private = std::fs::File::open(&path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
        if private && args.add.is_empty() {
            let link = runs.join(crate::serve_index::CONTROL_LINK);
            return from_service(args, &link.display().to_string(), None, runs);
        }
    }
    let index = Index::open(&path)?;
    for dir in &args.add {
        let (run, dir) = crate::export::read_run(dir)?;
        // A run made elsewhere: its date is when its profile was written.
        let date = std::fs::metadata(dir.join(hark_outputs::json::FILE_NAME))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(now, |d| d.as_secs() as i64);
        index
            .record(&entry(&run, &dir, date))
            .with_context(|| format!("cannot record {}", dir.display()))?;
    }
    let date = |d: &Option<String>| d.as_deref().map(|d| index.parse_date(d)).transpose();
    let filter = Filter {
        program: args.program.clone(),
        host: args.host.clone(),
        since: date(&args.since)?,
        // `--until 2026-11-24` includes that day.
        until: date(&args.until)?.map(|u| {
            if args.until.as_deref().is_some_and(|d| d.trim().len() == 10) {
                u + 86_400
            } else {
                u
            }
        }),
        viewer: viewer(&index)?,
    };
    let mut found = Vec::new();
    for e in index.list(&filter)? {
        found.push((index.format_date(e.date)?, e));
    }
    print_stdout(&table(&found, &path))?;
    Ok(0)
}

/// Lists the caller's runs of the service at `addr` (its control socket,
/// or `tls:` with the caller's `token`), whose runs are in `runs` (or the
/// address itself, across a network), for a caller who may not read its
/// index.
fn from_service(args: &RunsArgs, addr: &str, token: Option<&str>, runs: &Path) -> Result<i32> {
    let answer = crate::ctl::request_as(
        addr,
        token,
        &serde_json::json!({
            "op": "runs",
            "program": args.program,
            "host": args.host,
            "since": args.since,
            "until": args.until,
        }),
    )
    .with_context(|| {
        format!(
            "the run index of {} is the service's alone, and the service could not be asked",
            runs.display()
        )
    })?;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let found: Vec<(String, Entry)> = answer["runs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let entry = Entry {
                run_dir: PathBuf::from(text(&r["run_dir"])),
                programs: r["programs"]
                    .as_array()
                    .map(|p| p.iter().map(text).collect())
                    .unwrap_or_default(),
                host: text(&r["host"]),
                date: r["date"].as_i64().unwrap_or(0),
                ranks: r["ranks"].as_u64().unwrap_or(0),
                wall_ns: r["wall_ns"].as_u64().unwrap_or(0),
                command: text(&r["command"]),
                hark_version: text(&r["hark_version"]),
                owner: r["owner"].as_u64().and_then(|u| u32::try_from(u).ok()),
                served: r["served"].as_bool().unwrap_or(true),
                status: text(&r["status"]),
            };
            (text(&r["when"]), entry)
        })
        .collect();
    print_stdout(&table(&found, runs))?;
    Ok(0)
}

/// The listing of `found` (each with its date written out), recorded in
/// `source`.
fn table(found: &[(String, Entry)], source: &Path) -> String {
    let mut text = String::new();
    if found.is_empty() {
        text.push_str(&format!(
            "No runs recorded in {} match.\n",
            source.display()
        ));
    } else {
        text.push_str(&format!(
            "{:<19}  {:<16} {:>5} {:>11}  {:<14} {:<20} {}\n",
            "date (UTC)", "host", "ranks", "wall", "status", "programs", "run directory"
        ));
    }
    for (when, e) in found {
        let owner = e.owner.map_or(String::new(), |u| format!("  (uid {u})"));
        // A directory the caller may not enter (an admin listing others'
        // runs) is not a deleted one.
        let gone = match e.run_dir.join(hark_outputs::json::FILE_NAME).try_exists() {
            Ok(false) => "  (deleted)",
            _ => "",
        };
        text.push_str(&format!(
            "{:<19}  {:<16} {:>5} {:>11}  {:<14} {:<20} {}{gone}{owner}\n",
            when,
            e.host,
            e.ranks,
            hark_outputs::units::duration(e.wall_ns as f64),
            if e.status.is_empty() { "?" } else { &e.status },
            e.programs.join(","),
            e.run_dir.display()
        ));
    }
    text
}
