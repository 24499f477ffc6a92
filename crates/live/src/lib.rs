//! Hark's live view: an HTTP server over a list of runs, going on or
//! finished, with a page that redraws about once a second and a JSON API
//! that scripts, `hark query` and `hark top` read (`docs/api.md`).
//!
//! [`Runs`] is the list. A run going on is registered with a function that
//! returns its current model (`hark_server::Server::snapshot`); a finished
//! one with its model, read from its run directory. Snapshots are taken on
//! demand and shared for half a second ([`FRESH`]), so the cost for the
//! analysis does not grow with the number of viewers. [`router`] is the
//! service as an `axum::Router`, for a server that mounts it beside its own
//! routes; [`Live::start`] serves it on a thread of its own.
//!
//! [`Runs`] shows every run to whoever holds the URL (`hark run`, `hark
//! open`: [`Live::start`] serves under a random path token). A server whose
//! viewers must see only their own runs (`hark serve`) gives [`router_over`]
//! a [`Catalog`] of its own, and a middleware that tells who asks;
//! [`Live::serve`] serves any router under an [`Access`]: the user each
//! connection is from ([`Client`], and the client's address as
//! `axum::extract::ConnectInfo<SocketAddr>`), `Host`, `Origin` and CSRF
//! checks, and bounds on connections ([`Limits`]).
//!
//! The interval queries ([`interval`]) are functions of the model: they sum
//! time slices, so any interval of any run costs the same.
//!
//! ```
//! use hark_live::{Live, Runs};
//! use std::sync::Arc;
//!
//! let runs = Arc::new(Runs::default());
//! runs.add_finished("demo", hark_model::Run::default());
//! let live = Live::start("127.0.0.1:0", runs.clone()).unwrap();
//! let body = hark_live::client::get(&format!("{}api/runs", live.url())).unwrap();
//! assert!(body.contains("\"id\":\"demo\""));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
pub mod client;
mod http;
pub mod interval;
pub mod machine;

pub use access::{Access, Client, Identify, Limits};
pub use http::{router, router_over};

use hark_model::Run;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a snapshot is served again before a new one is taken.
pub const FRESH: Duration = Duration::from_millis(500);

/// Where a run's model comes from.
enum Source {
    /// A run going on: its model so far, on demand (`None`: none to be
    /// had just now, serve the last one).
    Live(Box<dyn Fn() -> Option<Run> + Send + Sync>),
    /// A finished run's model; `partial` when some rank's stream was cut.
    Finished(Arc<Run>),
}

struct Entry {
    id: String,
    source: Source,
    /// The last snapshot of a live run and when it was taken.
    cached: Mutex<Option<(Instant, Arc<Run>)>>,
    /// Registration time, ns since the epoch: the start of a run that has
    /// no program yet.
    registered_ns: u64,
}

impl Entry {
    fn model(&self) -> Arc<Run> {
        match &self.source {
            Source::Finished(run) => run.clone(),
            Source::Live(snapshot) => {
                let mut cached = hark_sync::lock(&self.cached);
                if let Some((at, run)) = &*cached {
                    if at.elapsed() < FRESH {
                        return run.clone();
                    }
                }
                // Held while the snapshot is taken: viewers arriving
                // meanwhile wait for it rather than take one each.
                match snapshot() {
                    Some(run) => {
                        let run = Arc::new(run);
                        *cached = Some((Instant::now(), run.clone()));
                        run
                    }
                    None => cached.as_ref().map(|c| c.1.clone()).unwrap_or_default(),
                }
            }
        }
    }
}

/// The state of a run, as `GET /api/runs` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Still receiving events.
    Running,
    /// Ended, every rank's stream complete.
    Finished,
    /// Ended, some rank's stream cut short (`accounting.partial_ranks`).
    Partial,
    /// A dump of a job that went on (`hark serve`'s "dump now"): a report
    /// of the job as it was when the dump was taken.
    Dump,
}

/// One line of `GET /api/runs`.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    /// The run's id, used in every other URL.
    pub id: String,
    /// Running, finished, partial or dump.
    pub state: State,
    /// The programs' names, in order of first connection.
    pub programs: Vec<String>,
    /// When it started, in ns since the epoch (see [`interval::start_ns`]).
    pub started_ns: u64,
    /// Whether `POST /api/runs/{id}/control` reaches it: a running job of
    /// `hark serve` (the page then shows its controls); `hark run` has no
    /// control route.
    pub control: bool,
}

/// What a live server shows: the runs a viewer may see, and their models.
/// [`Runs`] is one, where everyone sees everything.
pub trait Catalog: Send + Sync + 'static {
    /// Who asks. The server that mounts [`router_over`] says, by inserting
    /// it into each request's extensions (a middleware of its own); `None`
    /// when it does not.
    type Viewer: Clone + Send + Sync + 'static;

    /// The runs `viewer` may see, for `GET /api/runs`.
    fn list(&self, viewer: Option<&Self::Viewer>) -> Vec<RunInfo>;

    /// The model of run `id` now, if `viewer` may see it. `None`: no such
    /// run, or not this viewer's; both are answered 404, so that a viewer
    /// learns nothing of runs that are not theirs.
    fn model(&self, viewer: Option<&Self::Viewer>, id: &str) -> Option<Arc<Run>>;
}

impl Catalog for Runs {
    type Viewer = ();

    fn list(&self, _: Option<&()>) -> Vec<RunInfo> {
        Runs::list(self)
    }

    fn model(&self, _: Option<&()>, id: &str) -> Option<Arc<Run>> {
        Runs::model(self, id)
    }
}

/// The runs a live server shows. Shared (`Arc`) between whoever registers
/// runs and the HTTP service.
#[derive(Default)]
pub struct Runs {
    entries: Mutex<Vec<Arc<Entry>>>,
}

impl Runs {
    /// Registers a run going on, whose model so far `snapshot` returns
    /// (called at most once per [`FRESH`] whatever the number of viewers;
    /// `None` when there is none to be had just now, as while the run is
    /// being folded: the last one is served again). Replaces a run of the
    /// same id.
    pub fn add_live(&self, id: &str, snapshot: impl Fn() -> Option<Run> + Send + Sync + 'static) {
        self.put(id, Source::Live(Box::new(snapshot)));
    }

    /// Registers a finished run (or marks a live one finished, replacing its
    /// snapshot function by the final model).
    pub fn add_finished(&self, id: &str, run: Run) {
        self.put(id, Source::Finished(Arc::new(run)));
    }

    /// Forgets a run; returns whether it was there.
    pub fn remove(&self, id: &str) -> bool {
        let mut entries = hark_sync::lock(&self.entries);
        let before = entries.len();
        entries.retain(|e| e.id != id);
        entries.len() != before
    }

    fn put(&self, id: &str, source: Source) {
        let entry = Arc::new(Entry {
            id: id.to_string(),
            source,
            cached: Mutex::new(None),
            registered_ns: now_ns(),
        });
        let mut entries = hark_sync::lock(&self.entries);
        match entries.iter_mut().find(|e| e.id == id) {
            Some(e) => *e = entry,
            None => entries.push(entry),
        }
    }

    fn get(&self, id: &str) -> Option<Arc<Entry>> {
        let entries = hark_sync::lock(&self.entries);
        entries.iter().find(|e| e.id == id).cloned()
    }

    /// Every run, in order of registration.
    pub fn list(&self) -> Vec<RunInfo> {
        let entries: Vec<Arc<Entry>> = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        entries
            .iter()
            .map(|e| {
                let run = e.model();
                let state = match e.source {
                    Source::Live(_) => State::Running,
                    Source::Finished(_) if run.accounting.partial_ranks > 0 => State::Partial,
                    Source::Finished(_) => State::Finished,
                };
                let started = interval::start_ns(&run);
                RunInfo {
                    id: e.id.clone(),
                    state,
                    programs: run.programs.iter().map(|p| p.name.clone()).collect(),
                    started_ns: if started > 0 {
                        started
                    } else {
                        e.registered_ns
                    },
                    control: false,
                }
            })
            .collect()
    }

    /// The model of run `id` now (`None`: no such run).
    pub fn model(&self, id: &str) -> Option<Arc<Run>> {
        self.get(id).map(|e| e.model())
    }
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = hark_sync::lock(&self.entries);
        f.debug_list()
            .entries(entries.iter().map(|e| &e.id))
            .finish()
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A live HTTP server on a thread of its own, stopped when dropped.
pub struct Live {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Why [`Live::start`] failed.
#[derive(Debug)]
pub struct Error {
    addr: String,
    source: std::io::Error,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot serve the live view on {}: {} (give another address, HOST:PORT, or turn it off)",
            self.addr, self.source
        )
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl Live {
    /// Binds `addr` (`HOST:PORT`; port 0 picks a free one) and serves
    /// [`router`] over `runs` on a new thread with a one-threaded runtime
    /// (the analysis keeps the machine's cores), under a random path token
    /// ([`Access::private`]): [`Live::url`] is the only way in.
    pub fn start(addr: &str, runs: Arc<Runs>) -> Result<Live, Error> {
        let err = |source| Error {
            addr: addr.to_string(),
            source,
        };
        let listener = std::net::TcpListener::bind(addr).map_err(err)?;
        Live::serve(listener, router(runs), Access::private().map_err(err)?)
    }

    /// Serves `app` (a [`router_over`] merged with the caller's own routes
    /// and layers) on `listener` under `access`, as [`Live::start`] does;
    /// handlers may extract the client ([`Client`]) and its address
    /// (`axum::extract::ConnectInfo<std::net::SocketAddr>`).
    pub fn serve(
        listener: std::net::TcpListener,
        app: axum::Router,
        access: Access,
    ) -> Result<Live, Error> {
        let addr = listener
            .local_addr()
            .map_or_else(|_| "?".into(), |a| a.to_string());
        let err = |source| Error {
            addr: addr.clone(),
            source,
        };
        listener.set_nonblocking(true).map_err(err)?;
        let local = listener.local_addr().map_err(err)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(err)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(err)?
        };
        let url = match access.token() {
            Some(token) => format!("http://{local}/{token}/"),
            None => format!("http://{local}/"),
        };
        let thread = std::thread::Builder::new()
            .name("hark-live".into())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Err(e) = access::serve(listener, app, access, stopped).await {
                        eprintln!("hark: the live view stopped: {e}");
                    }
                });
            })
            .map_err(err)?;
        Ok(Live {
            url,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The page's address, `http://HOST:PORT/`, or `http://HOST:PORT/TOKEN/`
    /// under a path token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops serving and waits until the server's thread has ended: idle
    /// connections are closed, requests under way are answered first. For
    /// a caller that must know the router, and what its state holds, is
    /// gone (dropping a `Live` does not wait).
    pub fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Open page connections are long-lived: do not wait for them.
        drop(self.thread.take());
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("url", &self.url).finish()
    }
}
