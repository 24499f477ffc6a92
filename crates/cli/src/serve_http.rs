//! `hark serve --http HOST:PORT`: the live view of every job of the service
//! and the whole HTTP API (`docs/api.md`) on one router: `crates/live`'s
//! page and `GET` routes over [`Jobs`], the service's jobs (running ones
//! from snapshots, finished ones from their run directories), and
//! `POST /api/runs/{id}/control`.
//!
//! Who asks is found as on the Unix sockets, from the kernel: the server
//! listens on localhost only, and a localhost connection's client socket
//! is an `ESTABLISHED` line of `/proc/net/tcp` (or `tcp6`) whose `uid`
//! column is its owner ([`hark_transport::local_tcp_owner`]), read once as
//! the connection is accepted, while the client's socket is surely open
//! (`hark_live::Access`). A layer puts that user, as a [`Viewer`], into
//! every request; a connection whose user cannot be found is refused (403)
//! before any route sees it. A request may instead name its user by a
//! token of the service's `--tokens` file, `Authorization: Bearer TOKEN`
//! (a wrong one is refused, 403): the API then answers as that user. A user sees, queries and controls only their
//! own jobs; root and the admin group see all. `hark_live` also checks
//! `Host`, `Origin`, the JSON content type and the CSRF token of a `POST`,
//! and bounds HTTP connections per user and overall.

use crate::serve::command_of;
use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use hark_live::{Access, Catalog, Client, Live, RunInfo};
use hark_model::Run;
use hark_server::{JobInfo, JobState, Service, Viewer};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Finished runs' models kept parsed, so that a page polling a finished
/// run once a second does not read its `profile.json` each time.
const KEPT_FINISHED: usize = 8;

/// Binds `addr` (localhost only) and serves the page and the API over the
/// service's jobs on a thread of its own; stopped when dropped.
pub fn start(
    addr: &str,
    service: Arc<Service>,
    admin_gid: Option<u32>,
    machine: Arc<crate::serve_machine::Feed>,
) -> Result<Live> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("cannot bind the HTTP address {addr}"))?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        bail!("--http {addr} is not localhost: the HTTP API tells users apart only on localhost");
    }
    let who = Arc::new(Who {
        admin_gid,
        service: service.clone(),
    });
    let jobs = Arc::new(Jobs {
        service: service.clone(),
        snapshots: Mutex::default(),
        finished: Mutex::default(),
    });
    let app = hark_live::router_over(jobs)
        .merge(
            Router::new()
                .route("/api/runs/{id}/control", post(control))
                .with_state(service),
        )
        .merge(
            Router::new()
                .route("/api/machine", get(crate::serve_machine::api))
                .route("/machine", get(crate::serve_machine::page))
                .with_state(machine),
        )
        .layer(axum::middleware::from_fn_with_state(who, identify));
    let access = Access::identified(Arc::new(|peer, local| {
        hark_transport::local_tcp_owner(peer, local)
            .map(Some)
            .ok_or_else(|| {
                "cannot tell which user connected: only localhost clients whose connection \
                 is open are served"
                    .to_string()
            })
    }));
    Ok(Live::serve(listener, app, access)?)
}

/// What the identifying layer needs: who the admins are, and the
/// service's users' tokens.
struct Who {
    admin_gid: Option<u32>,
    service: Arc<Service>,
}

/// Puts the client's user, as the connection loop named it, into the
/// request as a [`Viewer`], or refuses it.
async fn identify(
    State(who): State<Arc<Who>>,
    client: Option<Extension<Client>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(mut uid) = client.and_then(|c| c.uid) else {
        return failure(
            StatusCode::FORBIDDEN,
            "cannot tell which user connected (only localhost clients are served)".into(),
        );
    };
    let bearer = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer {
        match who.service.user_of_token(token.trim()) {
            Some(user) => uid = user.uid,
            None => return failure(
                StatusCode::FORBIDDEN,
                "the bearer token is none of this service's users' tokens (hark serve --tokens)"
                    .into(),
            ),
        }
    }
    let admin = uid == 0
        || who
            .admin_gid
            .is_some_and(|g| crate::serve::user_in_group(uid, g));
    req.extensions_mut().insert(Viewer { uid, admin });
    next.run(req).await
}

fn failure(code: StatusCode, e: String) -> Response {
    (code, Json(json!({"ok": false, "error": e}))).into_response()
}

/// The most a control request's body may hold; a command is a few dozen
/// bytes.
const MAX_BODY: usize = 64 << 10;

async fn control(
    State(service): State<Arc<Service>>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    // A client that sends its head and then holds back the body would
    // hold its connection for ever: it has as long as it may idle.
    let idle = hark_live::Limits::default().idle;
    let body = match tokio::time::timeout(idle, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body (at most {MAX_BODY} bytes): {e}"),
            )
        }
        Err(_) => {
            return failure(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {} s", idle.as_secs()),
            )
        }
    };
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        }
    };
    let cmd = match command_of(&req) {
        Ok(c) => c,
        Err(e) => return failure(StatusCode::BAD_REQUEST, e),
    };
    let done = tokio::task::spawn_blocking(move || service.control(&viewer, &id, cmd)).await;
    match done {
        Ok(Ok(dir)) => (
            StatusCode::OK,
            Json(json!({"ok": true, "dir": dir.map(|d| d.display().to_string())})),
        )
            .into_response(),
        Ok(Err(e)) => {
            let code = match e.kind() {
                hark_server::ErrorKind::NoSuchJob(_) => StatusCode::NOT_FOUND,
                hark_server::ErrorKind::NotYours(_) => StatusCode::FORBIDDEN,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            };
            failure(code, e.to_string())
        }
        Err(e) => failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The service's jobs as the live view shows them: a job's id is its
/// number; a running job's model is a snapshot, shared for
/// [`hark_live::FRESH`]; a finished one's is its run directory's
/// `profile.json` (so jobs of the service's earlier lives are served too).
/// While a job is being folded and written it is neither running nor
/// finished: its last snapshot is served meanwhile.
struct Jobs {
    service: Arc<Service>,
    snapshots: Mutex<HashMap<u64, Snapshot>>,
    finished: Mutex<Vec<(PathBuf, Arc<Run>)>>,
}

/// A running job's last snapshot, when it was taken, and the job then.
struct Snapshot {
    at: Instant,
    job: JobInfo,
    run: Arc<Run>,
}

impl Jobs {
    fn snapshot(&self, viewer: &Viewer, job: &JobInfo) -> Option<Arc<Run>> {
        // Held while the snapshot is taken: viewers arriving meanwhile wait
        // for it rather than take one each.
        let mut snapshots = hark_sync::lock(&self.snapshots);
        if let Some(s) = snapshots.get(&job.id) {
            if s.at.elapsed() < hark_live::FRESH {
                return Some(s.run.clone());
            }
        }
        let run = Arc::new(self.service.snapshot(viewer, &job.id.to_string()).ok()?);
        // Jobs no longer running need their last snapshot no more.
        let admin = Viewer {
            uid: 0,
            admin: true,
        };
        let running = self.service.jobs(&admin);
        snapshots.retain(|id, _| {
            running
                .iter()
                .any(|j| j.id == *id && j.state == JobState::Running)
        });
        snapshots.insert(
            job.id,
            Snapshot {
                at: Instant::now(),
                job: job.clone(),
                run: run.clone(),
            },
        );
        Some(run)
    }

    /// The last snapshot of job `id`, if `viewer` may see it: for a job
    /// between running and finished.
    fn last_snapshot(&self, viewer: &Viewer, id: &str) -> Option<Arc<Run>> {
        let snapshots = hark_sync::lock(&self.snapshots);
        let s = snapshots.get(&id.parse().ok()?)?;
        (viewer.admin || s.job.owner == Some(viewer.uid)).then(|| s.run.clone())
    }

    /// The model of a finished job or dump of `owner`, from its run
    /// directory, which that owner may have changed: read only through
    /// `crate::serve_files` (never through a link, never another's file).
    fn finished(&self, dir: &std::path::Path, owner: Option<u32>) -> Option<Arc<Run>> {
        let mut kept = hark_sync::lock(&self.finished);
        if let Some(i) = kept.iter().position(|(d, _)| d == dir) {
            let hit = kept.remove(i);
            kept.push(hit.clone());
            return Some(hit.1);
        }
        let run = Arc::new(crate::serve_files::read_run(dir, owner).ok()?);
        if kept.len() >= KEPT_FINISHED {
            kept.remove(0);
        }
        kept.push((dir.to_path_buf(), run.clone()));
        Some(run)
    }
}

impl Catalog for Jobs {
    type Viewer = Viewer;

    fn list(&self, viewer: Option<&Viewer>) -> Vec<RunInfo> {
        let Some(viewer) = viewer else {
            return Vec::new();
        };
        let mut jobs = self.service.jobs(viewer);
        // A job being folded is in neither list: still running for a viewer
        // who watched it.
        let snapshots = hark_sync::lock(&self.snapshots);
        let folding: Vec<JobInfo> = snapshots
            .values()
            .map(|s| &s.job)
            .filter(|j| viewer.admin || j.owner == Some(viewer.uid))
            .filter(|j| !jobs.iter().any(|k| k.id == j.id))
            .cloned()
            .collect();
        drop(snapshots);
        jobs.extend(folding);
        // Running jobs, then dumps, then ended jobs (as `hark ctl list`).
        let (running, ended): (Vec<JobInfo>, Vec<JobInfo>) =
            jobs.into_iter().partition(|j| j.state == JobState::Running);
        let job = |j: JobInfo| RunInfo {
            id: j.id.to_string(),
            state: match j.state {
                JobState::Running => hark_live::State::Running,
                JobState::Finished => hark_live::State::Finished,
                JobState::Partial => hark_live::State::Partial,
            },
            programs: j.programs,
            started_ns: j.started_ns,
            control: j.state == JobState::Running,
        };
        let dumps = self.service.dumps(viewer).into_iter().map(|d| RunInfo {
            id: d.id,
            state: hark_live::State::Dump,
            programs: d.programs,
            started_ns: d.started_ns,
            control: false,
        });
        running
            .into_iter()
            .map(job)
            .chain(dumps)
            .chain(ended.into_iter().map(job))
            .collect()
    }

    fn model(&self, viewer: Option<&Viewer>, id: &str) -> Option<Arc<Run>> {
        let viewer = viewer?;
        if let Ok(dump) = self.service.dump(viewer, id) {
            return self.finished(&dump.dir, dump.owner);
        }
        if let Ok(job) = self.service.job(viewer, id) {
            if job.state == JobState::Running {
                if let Some(run) = self.snapshot(viewer, &job) {
                    return Some(run);
                }
            }
        }
        // Finished, being folded, or it ended between the two questions.
        match self.service.job(viewer, id) {
            Ok(job) if job.state != JobState::Running => {
                self.finished(job.dir.as_deref()?, job.owner)
            }
            _ => self.last_snapshot(viewer, id),
        }
    }
}
