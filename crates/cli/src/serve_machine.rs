//! `hark serve`'s machine view: the service's jobs fed into one
//! [`hark_live::machine::Machine`], `GET /api/machine` and the page
//! `/machine` over it (`docs/api.md`), and the interference findings a
//! finished job's run is written with.
//!
//! Fed on demand, never by polling: a job's final model when it is folded
//! (with a fresh snapshot of every job still running, so that the jobs it
//! overlapped are there), and snapshots of the running jobs when someone
//! asks for the view (at most one round per [`hark_live::FRESH`]).

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use hark_live::machine::{JobMeta, Machine};
use hark_model::{Finding, Run};
use hark_server::{JobState, RunKind, Service, ServiceRun, Viewer};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Instant;

/// Seconds a view spans when the question does not say.
const DEFAULT_SPAN_S: u64 = 300;

/// The fold and what feeds it.
#[derive(Default)]
pub struct Feed {
    machine: Mutex<Machine>,
    service: OnceLock<Weak<Service>>,
    refreshed: Mutex<Option<Instant>>,
}

const ADMIN: Viewer = Viewer {
    uid: 0,
    admin: true,
};

impl Feed {
    /// Gives the feed the service whose running jobs it snapshots.
    pub fn attach(&self, service: &Arc<Service>) {
        let _ = self.service.set(Arc::downgrade(service));
    }

    /// Records a snapshot of every running job but `except`, unless that
    /// was done within [`hark_live::FRESH`] and `force` is false.
    fn refresh(&self, except: Option<u64>, force: bool) {
        {
            let mut last = hark_sync::lock(&self.refreshed);
            if !force && last.is_some_and(|t| t.elapsed() < hark_live::FRESH) {
                return;
            }
            *last = Some(Instant::now());
        }
        let Some(service) = self.service.get().and_then(Weak::upgrade) else {
            return;
        };
        for job in service.jobs(&ADMIN) {
            if job.state != JobState::Running || Some(job.id) == except {
                continue;
            }
            // Taken outside the fold's lock: a snapshot waits for no analysis,
            // but it is the costly part.
            let Ok(run) = service.snapshot(&ADMIN, &job.id.to_string()) else {
                continue;
            };
            let meta = JobMeta {
                id: job.id,
                name: job.job.clone(),
                owner: job.owner,
                running: true,
            };
            hark_sync::lock(&self.machine).record(meta, &run, now_s());
        }
    }

    /// Records a job's run (final, or a dump as a snapshot) and returns the
    /// findings its report gains: its interference, naming another job
    /// only when it has the same owner.
    pub fn on_run(&self, r: &ServiceRun) -> Vec<Finding> {
        let last = r.kind == RunKind::Final;
        self.refresh(Some(r.id), last);
        let meta = JobMeta {
            id: r.id,
            name: r.job.clone(),
            owner: r.owner,
            running: !last,
        };
        let mut machine = hark_sync::lock(&self.machine);
        machine.record(meta, &r.run, now_s());
        if !last {
            return Vec::new();
        }
        let rank_ns = r.run.programs.iter().flat_map(|p| &p.rank_wall_ns).sum();
        machine.findings(r.id, &|owner| owner == r.owner, rank_ns)
    }
}

/// `run` with `findings` in its first program's digest, costliest first,
/// at most five as the digest always is.
pub fn with_findings(run: &Run, findings: Vec<Finding>) -> Run {
    let mut run = run.clone();
    if let Some(p) = run.programs.first_mut() {
        p.digest.extend(findings);
        p.digest.sort_by_key(|f| std::cmp::Reverse(f.time_ns));
        p.digest.truncate(5);
    }
    run
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `GET /api/machine?from=&to=&figure=`: seconds since the epoch, `to`
/// past the last second; by default `to` is the service's next second and
/// `from` `span` seconds (300 unless given) before it; the figure `cpus`.
pub async fn api(
    State(feed): State<Arc<Feed>>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let number = |key: &str| -> Result<Option<u64>, String> {
        q.get(key)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    format!("{key}={v:?} is not a number: give seconds since the epoch")
                })
            })
            .transpose()
    };
    let (from, to, span) = match (number("from"), number("to"), number("span")) {
        (Ok(f), Ok(t), Ok(s)) => (f, t, s.unwrap_or(DEFAULT_SPAN_S)),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return failure(StatusCode::BAD_REQUEST, e)
        }
    };
    let figure = q.get("figure").cloned().unwrap_or_else(|| "cpus".into());
    let answer = tokio::task::spawn_blocking(move || {
        feed.refresh(None, false);
        let to = to.unwrap_or_else(|| now_s() + 1);
        let from = from.unwrap_or(to.saturating_sub(span));
        let may = |owner: Option<u32>| viewer.admin || owner == Some(viewer.uid);
        hark_sync::lock(&feed.machine).view(from, to, &figure, &may)
    })
    .await;
    match answer {
        Ok(Ok(view)) => Json(view).into_response(),
        Ok(Err(e)) => failure(StatusCode::BAD_REQUEST, e),
        Err(e) => failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `GET /machine`: the page.
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        hark_live::machine::PAGE,
    )
        .into_response()
}

fn failure(code: StatusCode, e: String) -> Response {
    (code, Json(json!({"ok": false, "error": e}))).into_response()
}
