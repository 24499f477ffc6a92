//! A long-lived, machine-wide analysis service (`hark serve`): many jobs
//! stream into one listener, each is analysed on its own board levels, and
//! each becomes a run directory of its own when it ends while the service
//! goes on.
//!
//! **Jobs.** A connection belongs to the job named by its `Hello` (the
//! probe takes it from `HARK_JOB`, PMIx, MPICH's PMI, Slurm, or its parent
//! pid; `hark run --server` sets `HARK_JOB` to a fresh token) *and* its
//! owner: the peer's uid from `SO_PEERCRED` on a Unix socket; on TCP the
//! user whose token the `Hello` proves ([`ServiceConfig::users`]), or the
//! site for the site token. Two users naming the same job get two jobs. A job registers at its
//! first accepted `Hello` and ends when its last stream has been closed for
//! [`ServiceConfig::linger`] (or at once when its launcher says it is done,
//! [`Service::finish_job`]); it is then folded, handed to the service's
//! `on_run` callback (which writes the run directory) and forgotten but for
//! a line in a bounded history.
//!
//! **Limits** (all in [`ServiceConfig`], each documented in `docs/api.md`):
//! jobs running at once, in total and per user (a further job is refused
//! at its first `Hello`, its connections cut, its probes run unmeasured
//! with a warning); streams per job and per user (further streams
//! refused); bytes per job waiting for analysis
//! (that job's readers stop reading: back-pressure to its probes only);
//! bytes waiting in total (the reader that would exceed it waits);
//! connections open at once, in total and per user (further ones cut at
//! accept); descriptors kept free for writing runs (a connection that
//! would take one of them is cut at accept); and the time a connection has
//! to deliver its `Hello`. The limits per user are what keeps one user,
//! holding idle streams, from locking every other user out.
//!
//! **Ownership.** [`Viewer`] is who asks: a user sees and controls only
//! jobs it owns; an admin (root, or the configured admin group) sees all.
//! Jobs that came over TCP with the site token belong to the site and only
//! admins see them. A TCP connection may also ask one control request
//! instead of streaming ([`Service::answer_requests`]).
//!
//! **Control.** [`Service::control`] writes [`hark_wire::Control`] frames
//! back on the job's connections: pause, resume, sampling, and dump-now
//! (the probes flush what they hold and answer; the job is then drained,
//! snapshotted and handed to `on_run` as a [`RunKind::Dump`], and goes on).

use crate::sink::{Counters, State};
use crate::{run_of, with_problems, Error, ErrorKind};
use hark_analyses::DynAnalysis;
use hark_board::Board;
use hark_engine::Config;
use hark_model::Run;
use hark_sync::lock;
use hark_transport::{Back, Closed, ConnId, Peer, ServeOptions, Sink};
use hark_wire::{Action, Control, Credential, Frame, Hello, NONCE_SIZE};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How to start a [`Service`]. Every limit is per service unless named
/// per job or per user.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Where probes connect: `unix:/path` or `tcp:host:port`.
    pub listen: String,
    /// Board worker threads, shared by every job.
    pub workers: usize,
    /// Analyses by spec name; `None`: all.
    pub analyses: Option<Vec<String>>,
    /// Time slices per program.
    pub slices: usize,
    /// Jobs running at once; the first `Hello` of one more is refused.
    pub max_jobs: usize,
    /// Streams (processes) per job; more are refused.
    pub max_streams_per_job: usize,
    /// Jobs one user runs at once (over TCP, the site counts as one
    /// user); a further job of theirs is refused, other users' are not.
    pub max_jobs_per_user: usize,
    /// Streams one user has open at once, over all their jobs.
    pub max_streams_per_user: usize,
    /// Descriptors kept free under `RLIMIT_NOFILE` for writing runs: a
    /// connection that would leave fewer is cut at accept, so that a job
    /// that ends can always be written.
    pub reserved_descriptors: usize,
    /// Bytes of events one job may have waiting for analysis before its
    /// readers stop reading (back-pressure to that job only).
    pub job_in_flight: u64,
    /// Bytes of events all jobs together may have waiting; a reader that
    /// finds more waits.
    pub total_in_flight: u64,
    /// Connections open at once; more are cut at accept.
    pub max_connections: usize,
    /// Connections one user may hold open at once.
    pub max_connections_per_user: usize,
    /// Time a new connection has to deliver its whole `Hello`.
    pub hello_timeout: Duration,
    /// How long a job whose streams all closed waits for another before it
    /// is folded (ranks of one job connect and close at different times).
    pub linger: Duration,
    /// Finished jobs remembered for [`Service::jobs`] (oldest forgotten).
    pub history: usize,
    /// The site token a TCP stream's `Hello.secret` may prove; its jobs
    /// have no owner. TCP connections are refused without it or `users`.
    pub token: Option<String>,
    /// Per-user tokens: a TCP stream whose `Hello` proves one is owned by
    /// its user, as a Unix socket's peer is.
    pub users: Vec<UserToken>,
    /// The certificate and key TCP connections are served with: every TCP
    /// connection is then TLS (`tls:host:port`), a plaintext one refused.
    pub tls: Option<Arc<hark_tls::rustls::ServerConfig>>,
    /// Finished jobs of the service's earlier lives (read back from its
    /// run index), oldest first: listed by [`Service::jobs`] as if they had
    /// just ended, and new jobs are numbered after them.
    pub past: Vec<JobInfo>,
    /// Dumps of the service's earlier lives, oldest first, listed by
    /// [`Service::dumps`] (the last `history` of them).
    pub past_dumps: Vec<DumpInfo>,
}

impl Default for ServiceConfig {
    fn default() -> ServiceConfig {
        ServiceConfig {
            listen: "tcp:127.0.0.1:0".into(),
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            analyses: None,
            slices: Config::default().slices,
            max_jobs: 64,
            max_streams_per_job: 4096,
            max_jobs_per_user: 16,
            max_streams_per_user: 4096,
            reserved_descriptors: 64,
            job_in_flight: 64 << 20,
            total_in_flight: 512 << 20,
            max_connections: 16384,
            max_connections_per_user: 4096,
            hello_timeout: Duration::from_secs(10),
            linger: Duration::from_secs(2),
            history: 256,
            token: None,
            users: Vec::new(),
            tls: None,
            past: Vec::new(),
            past_dumps: Vec::new(),
        }
    }
}

/// A user's token for TCP (`hark serve --tokens`): whoever proves it acts
/// as that user.
#[derive(Clone)]
pub struct UserToken {
    /// The token, at least 16 characters.
    pub token: String,
    /// The user's id.
    pub uid: u32,
    /// The user's name, for the log.
    pub name: String,
}

impl std::fmt::Debug for UserToken {
    // Never the token itself: configurations get printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserToken({}, uid {})", self.name, self.uid)
    }
}

/// What answers control requests that come over TCP: the request line and
/// whether it came over TLS, to the answer line.
pub type OnRequest = dyn Fn(&str, bool) -> String + Send + Sync;

/// Who asks: a user id, and whether that user is an admin of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewer {
    /// The asker's uid (from `SO_PEERCRED`, or the process's own).
    pub uid: u32,
    /// Root or a member of the admin group: sees and controls every job.
    pub admin: bool,
}

impl Viewer {
    fn may(&self, owner: Option<u32>) -> bool {
        self.admin || owner == Some(self.uid)
    }
}

/// A control request ([`Service::control`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Stop recording events in every process of the job.
    Pause,
    /// Record again.
    Resume,
    /// Write a complete report of the job now, without stopping it.
    Dump,
    /// Detailed events from `keep` of every `of` ranks (by world rank).
    Sample {
        /// Ranks kept per period.
        keep: u32,
        /// The period, in ranks.
        of: u32,
    },
}

/// Refuses a sampling filter without ranks to sample from, or keeping
/// more than every rank. `keep == 0` keeps counts only, from every rank.
pub fn check_sample(keep: u32, of: u32) -> Result<(), Error> {
    if of == 0 || keep > of {
        return Err(Error::new(ErrorKind::Control(format!(
            "cannot keep {keep} of every {of} ranks: give 0 <= K <= N with N >= 1 (K = N is every rank in detail, K = 0 counts only)"
        ))));
    }
    Ok(())
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Streams still open, or lingering.
    Running,
    /// Folded; every stream ended with its totals.
    Finished,
    /// Folded; some stream ended without its totals (killed, cut).
    Partial,
}

impl JobState {
    /// `running`, `finished` or `partial`, as `docs/api.md` spells them.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Finished => "finished",
            JobState::Partial => "partial",
        }
    }
}

/// One job as [`Service::jobs`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// The service's number for the job, unique for the service's life.
    pub id: u64,
    /// The job's name from its `Hello` (`HARK_JOB`, the launcher's id, ...).
    pub job: String,
    /// The owning uid; `None` for a job that came over TCP.
    pub owner: Option<u32>,
    /// Where it is.
    pub state: JobState,
    /// Its programs' names, in order of first handshake.
    pub programs: Vec<String>,
    /// When its first stream said hello, ns since the epoch.
    pub started_ns: u64,
    /// Streams open now.
    pub open: usize,
    /// Streams accepted so far.
    pub streams: usize,
    /// Events received so far.
    pub events: u64,
    /// Its run directory, once written (and the last dump's, while running).
    pub dir: Option<PathBuf>,
}

/// A dump of a job ("dump now"), as [`Service::dumps`] lists it: a run of
/// its own, beside its job.
#[derive(Clone, Debug, PartialEq)]
pub struct DumpInfo {
    /// `N-dumpK`, the `K`-th dump of job `N` ([`DumpInfo::id_of`]): how
    /// `hark ctl` and the HTTP API name it.
    pub id: String,
    /// The dumped job's number.
    pub job: u64,
    /// The dumped job's name.
    pub name: String,
    /// Which dump of the job it is, from 1.
    pub seq: u64,
    /// The job's owner (`None`: TCP).
    pub owner: Option<u32>,
    /// The job's programs when the dump was taken.
    pub programs: Vec<String>,
    /// When the job started, ns since the epoch.
    pub started_ns: u64,
    /// The job's streams when the dump was taken.
    pub streams: usize,
    /// The job's events when the dump was taken.
    pub events: u64,
    /// Its run directory.
    pub dir: PathBuf,
}

impl DumpInfo {
    /// The name of the `seq`-th dump of job `job`.
    pub fn id_of(job: u64, seq: u64) -> String {
        format!("{job}-dump{seq}")
    }
}

/// What a [`ServiceRun`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// The job ended; this is its report.
    Final,
    /// A dump of a job that goes on (the `n`-th of the job).
    Dump(u64),
}

/// A job's run, handed to the service's `on_run` callback to be written.
#[derive(Debug)]
pub struct ServiceRun {
    /// The job's number.
    pub id: u64,
    /// The job's name.
    pub job: String,
    /// Its owner (`None`: TCP).
    pub owner: Option<u32>,
    /// Final or a dump.
    pub kind: RunKind,
    /// The job as [`Service::jobs`] lists it when the run was taken (its
    /// `dir` is the last dump's, or none yet).
    pub info: JobInfo,
    /// The model.
    pub run: Run,
}

/// What the callback that writes runs looks like: the run directory's path,
/// or why it could not be written.
pub type OnRun = dyn Fn(&ServiceRun) -> Result<PathBuf, String> + Send + Sync;
/// Where the service logs what it refused and cut off, one line each.
pub type OnLog = dyn Fn(&str) + Send + Sync;

/// Counters of a [`Service`], for a status line and for tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceStats {
    /// Jobs running now.
    pub running: usize,
    /// Jobs folded so far.
    pub finished: u64,
    /// Connections open now (handshake included).
    pub open: usize,
    /// Connections cut at accept, at `Hello` or later, for any reason.
    pub cut: u64,
    /// Jobs refused at the job limit.
    pub refused_jobs: u64,
}

/// A running service. See the module documentation.
pub struct Service {
    transport: Option<hark_transport::Server>,
    router: Arc<Router>,
    reaper: Option<std::thread::JoinHandle<()>>,
}

struct Route {
    uid: Option<u32>,
    back: Option<Back>,
    job: Option<Arc<Job>>,
}

struct Job {
    id: u64,
    name: String,
    owner: Option<u32>,
    state: Arc<State>,
    started_ns: u64,
    live: Mutex<Live>,
}

#[derive(Default)]
struct Live {
    open: Vec<u64>,
    streams: usize,
    last_closed: Option<Instant>,
    /// The launcher said the job is done: fold it as soon as it is quiet.
    ending: bool,
    /// Settings every later stream of the job gets at its `Hello`.
    paused: bool,
    /// The sampling filter in force (`keep`, `of`), told to later streams
    /// at their `Hello`; `None` for every rank in detail.
    sample: Option<(u32, u32)>,
    /// Per connection, the last dump it answered.
    flushed: HashMap<u64, u64>,
    dumps: u64,
    last_dump: Option<PathBuf>,
}

struct Router {
    config: ServiceConfig,
    board: Board,
    /// Keeps the readers and workers off the cores bound ranks use, over
    /// every job's connections (connection ids are the service's).
    placement: Arc<crate::place::Placement>,
    analyses: Vec<Arc<dyn DynAnalysis>>,
    routes: Mutex<HashMap<u64, Route>>,
    running: Mutex<Vec<Arc<Job>>>,
    /// Jobs being folded: out of `running` (no stream joins them any
    /// more), not yet in `history`; listed meanwhile, so that a job never
    /// vanishes from `hark ctl list` while its run is written.
    leaving: Mutex<Vec<JobInfo>>,
    history: Mutex<VecDeque<JobInfo>>,
    /// Dumps, oldest first, as many as `history` jobs.
    dumps: Mutex<VecDeque<DumpInfo>>,
    /// Notified whenever a job is folded or a dump answer arrives.
    changed: Condvar,
    changed_lock: Mutex<()>,
    next_job: AtomicU64,
    /// The nonces of the TCP handshakes accepted within the replay window,
    /// with their dates: one seen again is a replay.
    nonces: Mutex<HashMap<[u8; NONCE_SIZE], u64>>,
    cut: AtomicU64,
    refused_jobs: AtomicU64,
    finished: AtomicU64,
    stopping: AtomicBool,
    requests: std::sync::OnceLock<Arc<OnRequest>>,
    on_run: Arc<OnRun>,
    log: Arc<OnLog>,
}

impl Service {
    /// Binds `config.listen` and starts serving. `on_run` writes each
    /// finished job and each dump (it runs on the service's own threads,
    /// one run at a time); `log` hears every refusal and cut-off.
    pub fn start(
        config: ServiceConfig,
        on_run: Arc<OnRun>,
        log: Arc<OnLog>,
    ) -> Result<Service, Error> {
        let analyses = crate::select_analyses(config.analyses.as_deref())?;
        let listener = match &config.tls {
            Some(tls) => hark_transport::Listener::bind_tls(&config.listen, tls.clone()),
            None => hark_transport::Listener::bind(&config.listen),
        }
        .map_err(|e| Error::new(ErrorKind::Listen(e)))?;
        let board = Board::new(config.workers.max(1));
        let router = Arc::new(Router {
            board: board.clone(),
            placement: Arc::new(crate::place::Placement::new(board)),
            analyses,
            routes: Mutex::default(),
            running: Mutex::default(),
            leaving: Mutex::default(),
            history: Mutex::new(
                config
                    .past
                    .iter()
                    .skip(config.past.len().saturating_sub(config.history.max(1)))
                    .cloned()
                    .collect(),
            ),
            dumps: Mutex::new(
                config
                    .past_dumps
                    .iter()
                    .skip(
                        config
                            .past_dumps
                            .len()
                            .saturating_sub(config.history.max(1)),
                    )
                    .cloned()
                    .collect(),
            ),
            changed: Condvar::new(),
            changed_lock: Mutex::new(()),
            next_job: AtomicU64::new(config.past.iter().map(|j| j.id + 1).max().unwrap_or(1)),
            nonces: Mutex::default(),
            cut: AtomicU64::new(0),
            refused_jobs: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            requests: std::sync::OnceLock::new(),
            on_run,
            log,
            config: config.clone(),
        });
        let transport = listener.serve_with(
            router.clone(),
            ServeOptions {
                hello_timeout: Some(config.hello_timeout),
                ..ServeOptions::default()
            },
        );
        let r = router.clone();
        let reaper = std::thread::Builder::new()
            .name("hark-reaper".into())
            .spawn(move || r.reap_loop())
            .map_err(|e| {
                Error::new(ErrorKind::Control(format!(
                    "cannot start the service's thread: {e}"
                )))
            })?;
        Ok(Service {
            transport: Some(transport),
            router,
            reaper: Some(reaper),
        })
    }

    /// The address probes are given (`HARK_ADDR`), with the port for TCP
    /// (`tls:` when the service has a certificate).
    pub fn addr(&self) -> &str {
        self.transport.as_ref().map_or("", |t| t.addr())
    }

    /// Answers control requests that come on the TCP listener (a line
    /// starting `{` instead of a stream) with `answer`; without it they are
    /// refused. Set once; a second call is ignored.
    pub fn answer_requests(&self, answer: Arc<OnRequest>) {
        let _ = self.router.requests.set(answer);
    }

    /// Whether `token` is the site token ([`ServiceConfig::token`]).
    pub fn is_site_token(&self, token: &str) -> bool {
        self.router
            .config
            .token
            .as_deref()
            .is_some_and(|t| hark_wire::same_secret(t.as_bytes(), token.as_bytes()))
    }

    /// The user whose token `token` is ([`ServiceConfig::users`]), compared
    /// in time independent of where a wrong one differs.
    pub fn user_of_token(&self, token: &str) -> Option<&UserToken> {
        self.router
            .config
            .users
            .iter()
            .find(|u| hark_wire::same_secret(u.token.as_bytes(), token.as_bytes()))
    }

    /// The jobs `viewer` may see: running ones first (those being folded
    /// among them), then the remembered finished ones, oldest first.
    pub fn jobs(&self, viewer: &Viewer) -> Vec<JobInfo> {
        // Read in the order a fold writes in reverse (`Router::fold`), so
        // that a job moving on is seen at least once; seen twice, it is
        // kept where it was seen last.
        let mut out: Vec<JobInfo> = self.router.running().iter().map(|j| j.info()).collect();
        out.extend(lock(&self.router.leaving).iter().cloned());
        out.extend(lock(&self.router.history).iter().cloned());
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<JobInfo> = out
            .into_iter()
            .rev()
            .filter(|j| seen.insert(j.id))
            .filter(|j| viewer.may(j.owner))
            .collect();
        kept.reverse();
        kept
    }

    /// The dumps `viewer` may see, oldest first.
    pub fn dumps(&self, viewer: &Viewer) -> Vec<DumpInfo> {
        lock(&self.router.dumps)
            .iter()
            .filter(|d| viewer.may(d.owner))
            .cloned()
            .collect()
    }

    /// One dump by its id (`N-dumpK`), if `viewer` may see it.
    pub fn dump(&self, viewer: &Viewer, id: &str) -> Result<DumpInfo, Error> {
        match lock(&self.router.dumps).iter().find(|d| d.id == id) {
            Some(d) if viewer.may(d.owner) => Ok(d.clone()),
            Some(_) => Err(Error::new(ErrorKind::NotYours(id.into()))),
            None => Err(Error::new(ErrorKind::NoSuchJob(id.into()))),
        }
    }

    /// One job by number or name, if `viewer` may see it.
    pub fn job(&self, viewer: &Viewer, id: &str) -> Result<JobInfo, Error> {
        match self.router.find(viewer, id) {
            Ok(job) => return Ok(job.info()),
            Err(e) if matches!(e.kind(), ErrorKind::NotYours(_)) => return Err(e),
            Err(_) => {}
        }
        let history = lock(&self.router.history);
        match history
            .iter()
            .rev()
            .find(|j| j.id.to_string() == id || j.job == id)
        {
            Some(j) if viewer.may(j.owner) => Ok(j.clone()),
            Some(_) => Err(Error::new(ErrorKind::NotYours(id.into()))),
            None => Err(Error::new(ErrorKind::NoSuchJob(id.into()))),
        }
    }

    /// Carries out `command` on the running job `id` (its number or name)
    /// for `viewer`. Pause, resume and sampling return at once with the
    /// streams told (the job's later streams are told at their `Hello`);
    /// a dump returns when its run directory is written, with its path.
    /// This is what `hark ctl` and `POST /api/runs/{id}/control` call.
    pub fn control(
        &self,
        viewer: &Viewer,
        id: &str,
        command: Command,
    ) -> Result<Option<PathBuf>, Error> {
        let job = self.router.find(viewer, id)?;
        match command {
            Command::Pause | Command::Resume => {
                let pause = command == Command::Pause;
                lock(&job.live).paused = pause;
                let action = if pause { Action::Pause } else { Action::Resume };
                self.router.tell(&job, Control::new(action));
                Ok(None)
            }
            // Ranks left out keep exact per-function counts in their probe
            // (`docs/wire.md`, "Counts"); `keep == of` is every rank again.
            Command::Sample { keep, of } => {
                check_sample(keep, of)?;
                lock(&job.live).sample = (keep < of).then_some((keep, of));
                let c = Control {
                    keep,
                    of,
                    ..Control::new(Action::Sample)
                };
                self.router.tell(&job, c);
                Ok(None)
            }
            Command::Dump => self.router.dump(&job).map(Some),
        }
    }

    /// For a launcher (`hark run --server`) whose command has ended: folds
    /// the job `id` as soon as its streams have closed, cutting those still
    /// open after `grace`, and returns its run directory. Waits for it.
    pub fn finish_job(&self, viewer: &Viewer, id: &str, grace: Duration) -> Result<PathBuf, Error> {
        let job = self.router.find(viewer, id)?;
        lock(&job.live).ending = true;
        let deadline = Instant::now() + grace;
        let mut cut = false;
        let mut g = lock(&self.router.changed_lock);
        loop {
            if let Some(done) = lock(&self.router.history)
                .iter()
                .rev()
                .find(|j| j.id == job.id)
            {
                return done.dir.clone().ok_or_else(|| {
                    Error::new(ErrorKind::Control(format!(
                        "job {} was folded but its run directory could not be written (see the service's log)",
                        job.id
                    )))
                });
            }
            if !cut && Instant::now() >= deadline {
                cut = true;
                self.router
                    .cut_job(&job, "its launcher ended and the grace period passed");
            }
            g = self
                .router
                .changed
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The model so far of the running job `id` (number or name), if
    /// `viewer` may see it: a snapshot, taken while the analyses go on,
    /// without making the analysis wait (as [`crate::Server::snapshot`]).
    pub fn snapshot(&self, viewer: &Viewer, id: &str) -> Result<Run, Error> {
        let job = self.router.find(viewer, id)?;
        Ok(run_of(job.state.snapshot()))
    }

    /// Counters, for a status line and for tests.
    pub fn stats(&self) -> ServiceStats {
        ServiceStats {
            running: self.router.running().len(),
            finished: self.router.finished.load(Ordering::Relaxed),
            open: lock(&self.router.routes).len(),
            cut: self.router.cut.load(Ordering::Relaxed),
            refused_jobs: self.router.refused_jobs.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting, cuts every open stream, and folds every running job
    /// (partial where streams were cut) through `on_run`.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(transport) = self.transport.take() else {
            return;
        };
        transport.shutdown_by(Instant::now() + Duration::from_millis(200));
        self.router.stopping.store(true, Ordering::Release);
        if let Some(r) = self.reaper.take() {
            let _ = r.join();
        }
        for job in self.router.running() {
            self.router.fold(&job);
        }
        self.router.board.shutdown();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("addr", &self.addr())
            .finish_non_exhaustive()
    }
}

/// How far a TCP handshake's date may be from the service's clock; its
/// nonce is remembered as long.
const REPLAY_WINDOW: Duration = Duration::from_secs(300);

/// The descriptors the process has open (its accepted connection
/// included) and its soft `RLIMIT_NOFILE`; `None` if either is unknown.
fn descriptors() -> Option<(usize, usize)> {
    // The soft limit, as the kernel states it (no unsafe code in the
    // server): "Max open files  SOFT  HARD  files", or "unlimited".
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // Counted, not estimated: other threads (the control socket, HTTP,
    // runs being written) hold descriptors too. One more is the listing's.
    let open = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .count()
        .saturating_sub(1);
    Some((open, soft))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Job {
    fn info(&self) -> JobInfo {
        let live = lock(&self.live);
        let programs = self.state.in_order(|p| p.name.clone());
        JobInfo {
            id: self.id,
            job: self.name.clone(),
            owner: self.owner,
            state: JobState::Running,
            programs,
            started_ns: self.started_ns,
            open: live.open.len(),
            streams: live.streams,
            events: self.state.counters.events.load(Ordering::Relaxed),
            dir: live.last_dump.clone(),
        }
    }

    fn in_flight(&self) -> u64 {
        lock(&self.state.programs)
            .iter()
            .map(|p| p.on.in_flight())
            .sum()
    }
}

impl Router {
    fn running(&self) -> Vec<Arc<Job>> {
        lock(&self.running).clone()
    }

    fn find(&self, viewer: &Viewer, id: &str) -> Result<Arc<Job>, Error> {
        let running = lock(&self.running);
        let job = running
            .iter()
            .find(|j| j.id.to_string() == id)
            .or_else(|| running.iter().find(|j| j.name == id && viewer.may(j.owner)))
            .or_else(|| running.iter().find(|j| j.name == id));
        match job {
            Some(j) if viewer.may(j.owner) => Ok(j.clone()),
            Some(_) => Err(Error::new(ErrorKind::NotYours(id.into()))),
            None => Err(Error::new(ErrorKind::NoSuchJob(id.into()))),
        }
    }

    fn log(&self, line: &str) {
        (self.log)(line)
    }

    /// Cuts a connection off: the reader sees its end, the sink its close.
    fn cut_conn(&self, conn: ConnId, why: &str) {
        self.cut.fetch_add(1, Ordering::Relaxed);
        let routes = lock(&self.routes);
        let uid = routes.get(&conn.0).and_then(|r| r.uid);
        // Logged first: whoever sees the connection closed finds why.
        self.log(&format!(
            "Cut off {conn} ({}): {why}.",
            uid.map_or("tcp".into(), |u| format!("uid {u}"))
        ));
        if let Some(back) = routes.get(&conn.0).and_then(|r| r.back.as_ref()) {
            back.cut();
        }
    }

    fn cut_job(&self, job: &Job, why: &str) {
        let open = lock(&job.live).open.clone();
        for c in open {
            self.cut_conn(ConnId(c), why);
        }
    }

    /// Writes `control` to every open stream of `job`; returns how many
    /// took it. A stream that cannot take it (a probe that does not read
    /// its socket and let it fill) is skipped and logged, never waited on.
    fn tell(&self, job: &Job, control: Control) -> usize {
        let mut bytes = Vec::new();
        control.encode(&mut bytes);
        let open = lock(&job.live).open.clone();
        let routes = lock(&self.routes);
        let mut told = 0;
        for c in open {
            let Some(back) = routes.get(&c).and_then(|r| r.back.as_ref()) else {
                continue;
            };
            match back.send(&bytes) {
                Ok(()) => told += 1,
                Err(e) => self.log(&format!(
                    "Could not send {:?} to connection {c} of job {}: {e}.",
                    control.action, job.id
                )),
            }
        }
        told
    }

    fn total_in_flight(&self) -> u64 {
        self.running().iter().map(|j| j.in_flight()).sum()
    }

    /// Dump now: every probe flushes and answers, the job's levels drain,
    /// and a snapshot goes to `on_run`.
    fn dump(&self, job: &Arc<Job>) -> Result<PathBuf, Error> {
        let seq = {
            let mut live = lock(&job.live);
            live.dumps += 1;
            live.dumps
        };
        let waiting: Vec<u64> = lock(&job.live).open.clone();
        self.tell(
            job,
            Control {
                seq,
                ..Control::new(Action::Dump)
            },
        );
        // Each probe answers from its shipping thread within a tenth of a
        // second; a probe that does not (an old probe, a wedged process) is
        // not waited for beyond the deadline and the dump says so.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut g = lock(&self.changed_lock);
        let silent = loop {
            let live = lock(&job.live);
            let silent: Vec<u64> = waiting
                .iter()
                .copied()
                .filter(|c| live.open.contains(c) && live.flushed.get(c) != Some(&seq))
                .collect();
            drop(live);
            if silent.is_empty() || Instant::now() >= deadline {
                break silent;
            }
            g = self
                .changed
                .wait_timeout(g, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(g);
        let levels: Vec<_> = lock(&job.state.programs)
            .iter()
            .flat_map(|p| {
                std::iter::once(p.on.level()).chain(p.children.as_ref().map(|c| c.level()))
            })
            .collect();
        for level in levels {
            self.board.drain_level(level);
        }
        let mut run = run_of(job.state.snapshot());
        if let Some(p) = run.programs.first_mut() {
            p.diagnostics.insert(
                0,
                format!(
                    "This is dump {seq} of job {} ({}), taken at {} ns since the epoch while it ran: \
                     it holds what the processes had recorded by then; the job went on.",
                    job.id,
                    job.name,
                    now_ns()
                ),
            );
            if !silent.is_empty() {
                p.diagnostics.push(format!(
                    "{} process(es) did not answer the dump's flush request within 5 s; \
                     their events since their last shipped buffer are missing from it",
                    silent.len()
                ));
            }
        }
        let out = ServiceRun {
            id: job.id,
            job: job.name.clone(),
            owner: job.owner,
            kind: RunKind::Dump(seq),
            info: job.info(),
            run,
        };
        let dir = (self.on_run)(&out).map_err(|e| Error::new(ErrorKind::Control(e)))?;
        lock(&job.live).last_dump = Some(dir.clone());
        let mut dumps = lock(&self.dumps);
        dumps.push_back(DumpInfo {
            id: DumpInfo::id_of(job.id, seq),
            job: job.id,
            name: job.name.clone(),
            seq,
            owner: job.owner,
            programs: out.info.programs.clone(),
            started_ns: out.info.started_ns,
            streams: out.info.streams,
            events: out.info.events,
            dir: dir.clone(),
        });
        while dumps.len() > self.config.history.max(1) {
            dumps.pop_front();
        }
        Ok(dir)
    }

    fn reap_loop(&self) {
        while !self.stopping.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
            let due: Vec<Arc<Job>> = self
                .running()
                .into_iter()
                .filter(|j| {
                    let live = lock(&j.live);
                    live.open.is_empty()
                        && live
                            .last_closed
                            .is_some_and(|t| live.ending || t.elapsed() >= self.config.linger)
                })
                .collect();
            for job in due {
                self.fold(&job);
            }
        }
    }

    /// Folds a job, hands it to `on_run`, and moves it to the history.
    fn fold(&self, job: &Arc<Job>) {
        lock(&self.leaving).push(job.info());
        lock(&self.running).retain(|j| !Arc::ptr_eq(j, job));
        let mut info = job.info();
        let programs = job.state.fold();
        let mut problems = std::mem::take(&mut *lock(&job.state.problems));
        problems.extend(job.state.rejections());
        let mut run = with_problems(run_of(programs), problems);
        run.missing = job.state.missing_ranks();
        info.state = if run.accounting.partial_ranks > 0 || run.accounting.partial_children > 0 {
            JobState::Partial
        } else {
            JobState::Finished
        };
        let out = ServiceRun {
            id: job.id,
            job: job.name.clone(),
            owner: job.owner,
            kind: RunKind::Final,
            info: info.clone(),
            run,
        };
        info.dir = match (self.on_run)(&out) {
            Ok(dir) => Some(dir),
            Err(e) => {
                self.log(&format!("Could not write the run of job {}: {e}.", job.id));
                None
            }
        };
        info.open = 0;
        self.log(&format!(
            "Job {} ({}) {}: {} stream(s), {} events; run directory {}.",
            job.id,
            job.name,
            info.state.as_str(),
            info.streams,
            info.events,
            info.dir
                .as_ref()
                .map_or("not written".into(), |d| d.display().to_string())
        ));
        {
            let mut history = lock(&self.history);
            history.push_back(info);
            while history.len() > self.config.history.max(1) {
                history.pop_front();
            }
        }
        lock(&self.leaving).retain(|j| j.id != job.id);
        self.finished.fetch_add(1, Ordering::Relaxed);
        let _g = lock(&self.changed_lock);
        self.changed.notify_all();
    }

    fn new_job(&self, owner: Option<u32>, hello: &Hello) -> Arc<Job> {
        let state = Arc::new_cyclic(|me| State {
            me: me.clone(),
            board: self.board.clone(),
            analyses: self.analyses.clone(),
            config: Config {
                slices: self.config.slices,
                ..Config::default()
            },
            max_in_flight: self.config.job_in_flight,
            programs: Mutex::default(),
            conns: Default::default(),
            counters: Counters::default(),
            problems: Mutex::default(),
            clock_references: Mutex::default(),
            host_clocks: Mutex::default(),
            ranks: Mutex::default(),
            pids: Mutex::default(),
            secret: None,
            rejected: Mutex::default(),
            folding: Default::default(),
            placement: self.placement.clone(),
            trace: None,
            probe_realtime: false,
            handshakes: Default::default(),
            exchange: Default::default(),
            parked: Mutex::default(),
        });
        Arc::new(Job {
            id: self.next_job.fetch_add(1, Ordering::Relaxed),
            name: hello.job.clone(),
            owner,
            state,
            started_ns: now_ns(),
            live: Mutex::default(),
        })
    }

    /// The job a `Hello` joins, created if new; `Err` says why it may not.
    fn join(&self, conn: ConnId, owner: Option<u32>, hello: &Hello) -> Result<Arc<Job>, String> {
        let mut running = lock(&self.running);
        let found = running
            .iter()
            .find(|j| j.owner == owner && j.name == hello.job)
            .cloned();
        let who = owner.map_or("the TCP site".into(), |u| format!("uid {u}"));
        let job = match found {
            Some(j) => j,
            None => {
                let theirs = running.iter().filter(|j| j.owner == owner).count();
                if theirs >= self.config.max_jobs_per_user {
                    self.refused_jobs.fetch_add(1, Ordering::Relaxed);
                    return Err(format!(
                        "{who} already runs {theirs} jobs, the limit per user (--max-jobs-per-user); job {:?} is refused and runs unmeasured",
                        hello.job
                    ));
                }
                if running.len() >= self.config.max_jobs {
                    self.refused_jobs.fetch_add(1, Ordering::Relaxed);
                    return Err(format!(
                        "the service already runs {} jobs, its limit (--max-jobs); job {:?} is refused and runs unmeasured",
                        running.len(),
                        hello.job
                    ));
                }
                let j = self.new_job(owner, hello);
                self.log(&format!(
                    "Job {} ({:?}, {}) registered by pid {} on {}.",
                    j.id,
                    hello.job,
                    owner.map_or("tcp".into(), |u| format!("uid {u}")),
                    hello.pid,
                    hello.host
                ));
                running.push(j.clone());
                j
            }
        };
        // Counted under the jobs' lock, so that two streams of one user
        // cannot both take the last one.
        let streams: usize = running
            .iter()
            .filter(|j| j.owner == owner)
            .map(|j| lock(&j.live).open.len())
            .sum();
        if streams >= self.config.max_streams_per_user {
            return Err(format!(
                "{who} already has {streams} streams open, the limit per user (--max-streams-per-user)"
            ));
        }
        let mut live = lock(&job.live);
        if live.open.len() >= self.config.max_streams_per_job {
            return Err(format!(
                "job {} already has {} streams open, its limit (--max-streams)",
                job.id,
                live.open.len()
            ));
        }
        live.open.push(conn.0);
        live.streams += 1;
        drop(live);
        drop(running);
        Ok(job)
    }

    /// Whether a TCP `Hello` proves a user's token or the site token under
    /// a nonce not seen before and is dated within [`REPLAY_WINDOW`] of
    /// now: `Ok` with the user it proves (`None` for the site). The error
    /// completes "came over TCP ...".
    fn fresh_proof(&self, hello: &Hello) -> Result<Option<u32>, String> {
        let site = self.config.token.as_deref().map(|t| (t, None));
        let users = self
            .config
            .users
            .iter()
            .map(|u| (u.token.as_str(), Some(u.uid)));
        // Which token came in clear instead of proved: the site's, or a user's.
        let mut plain = None;
        let mut proved = None;
        for (token, uid) in users.chain(site) {
            match hello.check_secret(token) {
                Credential::Proof(n) => {
                    proved = Some((n, uid));
                    break;
                }
                Credential::Plain => {
                    plain = Some(if uid.is_some() {
                        "a user's"
                    } else {
                        "the site"
                    })
                }
                Credential::Wrong => {}
            }
        }
        let Some((nonce, uid)) = proved else {
            return Err(match (plain, self.config.token.is_some(), self.config.users.is_empty()) {
                (Some(whose), _, _) => format!("with {whose} token in clear, not a proof of it (a probe of an older release?)"),
                (None, false, true) => "and the service has no token to check it by (--token-file, --tokens)".into(),
                (None, true, true) => "without the site token".into(),
                (None, false, false) => "without a user's token (this service takes only the tokens of its --tokens file: give yours before the address, TOKEN@tls:HOST:PORT, or hark run --token-file)".into(),
                (None, true, false) => "without the site token or a user's token".into(),
            });
        };
        let now = now_ns();
        let window = REPLAY_WINDOW.as_nanos() as u64;
        if hello.realtime_ns.abs_diff(now) > window {
            return Err(format!(
                "dated {:.0} s from the service's clock, beyond the {} s a handshake may be old or early (a replayed stream, or clocks far apart)",
                (hello.realtime_ns as f64 - now as f64) / 1e9,
                REPLAY_WINDOW.as_secs()
            ));
        }
        let mut seen = lock(&self.nonces);
        if seen.len() >= 4096 && seen.len().is_power_of_two() {
            seen.retain(|_, &mut at| at.abs_diff(now) <= window);
        }
        if seen.insert(nonce, hello.realtime_ns).is_some() {
            return Err(
                "with a handshake the service has already accepted (a replayed stream)".into(),
            );
        }
        Ok(uid)
    }

    fn route_job(&self, conn: ConnId) -> Option<Arc<Job>> {
        lock(&self.routes).get(&conn.0).and_then(|r| r.job.clone())
    }

    /// Whether the job's own sink took the stream (it refuses a second
    /// stream of a rank).
    fn held(job: &Job, conn: ConnId) -> bool {
        job.state
            .conns
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&conn.0)
    }
}

impl Sink for Router {
    fn on_accept(&self, conn: ConnId, peer: &Peer) -> Result<(), String> {
        let uid = peer.cred.map(|c| c.uid);
        let mut routes = lock(&self.routes);
        if routes.len() >= self.config.max_connections {
            self.cut.fetch_add(1, Ordering::Relaxed);
            let why = format!(
                "the service holds {} connections, its limit (--max-connections)",
                routes.len()
            );
            self.log(&format!("Refused {conn}: {why}."));
            return Err(why);
        }
        if let Some((open, limit)) = descriptors() {
            if open + self.config.reserved_descriptors >= limit {
                self.cut.fetch_add(1, Ordering::Relaxed);
                let why = format!(
                    "the service has {open} of its {limit} descriptors open (RLIMIT_NOFILE) and keeps the last {} for writing runs",
                    self.config.reserved_descriptors
                );
                self.log(&format!("Refused {conn}: {why}."));
                return Err(why);
            }
        }
        if let Some(u) = uid {
            let mine = routes.values().filter(|r| r.uid == Some(u)).count();
            if mine >= self.config.max_connections_per_user {
                self.cut.fetch_add(1, Ordering::Relaxed);
                let why = format!(
                    "uid {u} holds {mine} connections, the limit per user (--max-connections-per-user)"
                );
                self.log(&format!("Refused {conn}: {why}."));
                return Err(why);
            }
        }
        let back = match peer.back() {
            Ok(b) => Some(b),
            Err(e) => {
                self.log(&format!(
                    "No control channel to {conn}: cannot duplicate its socket ({e})."
                ));
                None
            }
        };
        routes.insert(
            conn.0,
            Route {
                uid,
                back,
                job: None,
            },
        );
        Ok(())
    }

    fn on_hello(&self, conn: ConnId, hello: &Hello, clock_offset_ns: i64) {
        let mut uid = lock(&self.routes).get(&conn.0).and_then(|r| r.uid);
        if uid.is_none() {
            match self.fresh_proof(hello) {
                Ok(user) => {
                    uid = user;
                    if let Some(r) = lock(&self.routes).get_mut(&conn.0) {
                        r.uid = user;
                    }
                }
                Err(why) => {
                    // Told first, so that the probe can say why its
                    // process runs unmeasured.
                    if let Some(back) = lock(&self.routes)
                        .get(&conn.0)
                        .and_then(|r| r.back.as_ref())
                    {
                        let mut bytes = Vec::new();
                        Control {
                            seq: hark_wire::REFUSED_TOKEN,
                            ..Control::new(Action::Refused)
                        }
                        .encode(&mut bytes);
                        let _ = back.send(&bytes);
                    }
                    self.cut_conn(
                        conn,
                        &format!("pid {} on {} came over TCP {why}", hello.pid, hello.host),
                    );
                    return;
                }
            }
        }
        let job = match self.join(conn, uid, hello) {
            Ok(j) => j,
            Err(why) => {
                self.cut_conn(conn, &why);
                return;
            }
        };
        job.state.on_hello(conn, hello, clock_offset_ns);
        if let Some(r) = lock(&self.routes).get_mut(&conn.0) {
            r.job = Some(job.clone());
        }
        if !Router::held(&job, conn) {
            let why = lock(&job.state.problems)
                .last()
                .cloned()
                .unwrap_or_else(|| "its job refused it".into());
            self.cut_conn(conn, &why);
            return;
        }
        // A stream joining a paused job starts paused.
        if lock(&job.live).paused {
            let routes = lock(&self.routes);
            if let Some(back) = routes.get(&conn.0).and_then(|r| r.back.as_ref()) {
                let mut bytes = Vec::new();
                Control::new(Action::Pause).encode(&mut bytes);
                let _ = back.send(&bytes);
            }
        }
        // ... and sampled, if a filter is in force.
        let sample = lock(&job.live).sample;
        if let Some((keep, of)) = sample {
            let routes = lock(&self.routes);
            if let Some(back) = routes.get(&conn.0).and_then(|r| r.back.as_ref()) {
                let mut bytes = Vec::new();
                Control {
                    keep,
                    of,
                    ..Control::new(Action::Sample)
                }
                .encode(&mut bytes);
                let _ = back.send(&bytes);
            }
        }
    }

    fn on_frame(&self, conn: ConnId, frame: Frame<'_>) {
        let Some(job) = self.route_job(conn) else {
            return;
        };
        match &frame {
            Frame::Pack { .. } => {
                // The bound over all jobs; each job's own bound is its
                // sink's.
                while self.total_in_flight() > self.config.total_in_flight
                    && !self.stopping.load(Ordering::Relaxed)
                {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
            Frame::Control(c) if c.action == Action::Flushed => {
                lock(&job.live).flushed.insert(conn.0, c.seq);
                let _g = lock(&self.changed_lock);
                self.changed.notify_all();
                return;
            }
            _ => {}
        }
        let rank = matches!(frame, Frame::Rank(_));
        job.state.on_frame(conn, frame);
        if rank && !Router::held(&job, conn) {
            self.cut_conn(
                conn,
                "it claimed a rank that another stream of its job holds",
            );
        }
    }

    fn on_request(&self, _conn: ConnId, line: &str, secure: bool) -> String {
        match self.requests.get() {
            Some(answer) => answer(line, secure),
            None => r#"{"ok": false, "error": "this service takes no control requests over TCP"}"#
                .into(),
        }
    }

    fn on_lost(&self, conn: ConnId, events: u64, packs: u64) {
        if let Some(job) = self.route_job(conn) {
            job.state.on_lost(conn, events, packs);
        }
    }

    fn on_close(&self, conn: ConnId, outcome: Closed) {
        let route = lock(&self.routes).remove(&conn.0);
        if let Closed::Broken(why) = &outcome {
            // Refusals at accept were logged there.
            if route.is_some() {
                self.log(&format!(
                    "Closed {conn} ({}): {why}.",
                    route
                        .as_ref()
                        .and_then(|r| r.uid)
                        .map_or("tcp".into(), |u| format!("uid {u}"))
                ));
            }
        }
        let Some(job) = route.and_then(|r| r.job) else {
            return;
        };
        job.state.on_close(conn, outcome);
        let mut live = lock(&job.live);
        live.open.retain(|&c| c != conn.0);
        live.flushed.remove(&conn.0);
        live.last_closed = Some(Instant::now());
        drop(live);
        let _g = lock(&self.changed_lock);
        self.changed.notify_all();
    }
}
