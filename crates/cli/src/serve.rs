//! `hark serve`: the long-lived service ([`hark_server::Service`]) with its
//! control socket, writing each job's run directory under `--runs`.
//!
//! Two sockets: probes stream into `--listen`; `hark ctl` (and anything
//! else) asks questions on the control socket, one JSON line per request
//! and per answer (`docs/api.md`, "Control socket"). Both are Unix sockets
//! anyone may connect to: on each, the kernel's `SO_PEERCRED` says who is
//! asking, and the service shows and controls only that user's jobs (all
//! of them for root and the `--admin-group`).

use crate::output::print_stderr;
use crate::rundir;
use anyhow::{bail, Context, Result};
use clap::Args;
use hark_server::{
    Command, DumpInfo, ErrorKind, JobInfo, JobState, RunKind, Service, ServiceConfig, ServiceRun,
    Viewer,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub const SERVE_EXAMPLES: &str = "\
Examples:
  hark serve --listen unix:/run/hark/hark.sock --runs /var/lib/hark/runs
      A machine-wide service; users run `hark run --server unix:/run/hark/hark.sock -- ...`
      or a site module sets HARK_ADDR=unix:/run/hark/hark.sock and LD_PRELOAD.
  hark serve --listen tcp:127.0.0.1:7000 --token-file /etc/hark/token
      Over TCP: every stream must carry the site token (a file of mode 0600).
  hark serve --listen tls:0.0.0.0:7000 --remote --tls-cert hark.pem --tls-key hark.key --tokens /etc/hark/tokens
      Across a network, in TLS: each user's jobs are theirs by the token they give
      (hark run --server tls:HOST:7000 --token-file ~/.hark-token, with HARK_TLS_CA=ca.pem).";

/// Options of `hark serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where probes connect: unix:PATH, tcp:HOST:PORT or tls:HOST:PORT
    /// (TCP needs --token-file or --tokens, TLS --tls-cert and --tls-key,
    /// and a host other than localhost --remote).
    #[arg(long, value_name = "ADDR", default_value = "unix:/tmp/hark/hark.sock")]
    pub listen: String,

    /// Where run directories are written, one per job and per dump.
    #[arg(long, value_name = "DIR", default_value = "hark-runs")]
    pub runs: PathBuf,

    /// The run index every run is recorded in, and finished jobs are read
    /// back from at the next start (default: DIR/index.sqlite).
    #[arg(long, value_name = "FILE")]
    pub index: Option<PathBuf>,

    /// The control socket for `hark ctl` (default: the listen path with
    /// `.ctl` appended, or DIR/hark.ctl for TCP).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,

    /// The site token TCP streams must carry, in a file of mode 0600.
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// Per-user tokens for TCP: a file of `TOKEN USER` lines, owned by the
    /// service's user and of mode 0600. A stream or control request that
    /// proves a user's token is that user's.
    #[arg(long = "tokens", value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// The service's certificate chain (PEM): TCP is then TLS
    /// (tls:HOST:PORT), and a plaintext client is refused.
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The certificate's private key (PEM).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Allow a TCP listen address other than localhost.
    #[arg(long)]
    pub remote: bool,

    /// Members of this group (name or gid) see and control every job.
    #[arg(long = "admin-group", value_name = "GROUP")]
    pub admin_group: Option<String>,

    /// Jobs running at once; one more is refused (its processes run
    /// unmeasured, with a warning).
    #[arg(long = "max-jobs", value_name = "N", default_value_t = 64, value_parser = parse_limit)]
    pub max_jobs: usize,

    /// Streams (processes) per job.
    #[arg(long = "max-streams", value_name = "N", default_value_t = 4096, value_parser = parse_limit)]
    pub max_streams: usize,

    /// Jobs one user runs at once (a further job of theirs is refused;
    /// other users' jobs are not). Over TCP the site counts as one user.
    #[arg(long = "max-jobs-per-user", value_name = "N", default_value_t = 16, value_parser = parse_limit)]
    pub max_jobs_per_user: usize,

    /// Streams (processes) one user has open at once, over all their jobs.
    #[arg(long = "max-streams-per-user", value_name = "N", default_value_t = 4096, value_parser = parse_limit)]
    pub max_streams_per_user: usize,

    /// Megabytes of events one job may have waiting for analysis before
    /// its processes are slowed down (back-pressure to that job only).
    #[arg(long = "job-buffer-mb", value_name = "MB", default_value_t = 64, value_parser = parse_megabytes)]
    pub job_buffer_mb: u64,

    /// Megabytes of events all jobs together may have waiting.
    #[arg(long = "total-buffer-mb", value_name = "MB", default_value_t = 512, value_parser = parse_megabytes)]
    pub total_buffer_mb: u64,

    /// Connections open at once.
    #[arg(long = "max-connections", value_name = "N", default_value_t = 16384, value_parser = parse_limit)]
    pub max_connections: usize,

    /// Connections one user may hold open at once.
    #[arg(
        long = "max-connections-per-user",
        value_name = "N",
        default_value_t = 4096,
        value_parser = parse_limit
    )]
    pub max_connections_per_user: usize,

    /// Seconds a job whose processes all disconnected waits for more
    /// before its run directory is written.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = parse_linger)]
    pub linger: f64,

    /// Seconds a new connection has to send its handshake.
    #[arg(long = "hello-timeout", value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_hello_timeout)]
    pub hello_timeout: f64,

    /// Also serve the live view of every job and the HTTP API (the page,
    /// GET /api/runs..., POST /api/runs/{id}/control) on HOST:PORT
    /// (localhost only; each user sees their own jobs).
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<String>,

    /// Analyses to run, comma-separated (default: all).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub analyses: Vec<String>,
}

/// `--max-jobs`, `--max-streams`, `--max-connections` and
/// `--max-connections-per-user`: a limit of 0 would refuse everything.
fn parse_limit(v: &str) -> Result<usize, String> {
    whole(v, 1, u32::MAX as u64).map(|n| n as usize)
}

/// `--job-buffer-mb` and `--total-buffer-mb`: from 1 MB up to a TiB,
/// so that the bytes always fit a `u64`.
fn parse_megabytes(v: &str) -> Result<u64, String> {
    whole(v, 1, 1 << 20)
}

/// `--linger`: from no wait to a day.
fn parse_linger(v: &str) -> Result<f64, String> {
    seconds(v, 0.0, 86_400.0)
}

/// `--hello-timeout`: from 0.1 s to an hour.
fn parse_hello_timeout(v: &str) -> Result<f64, String> {
    seconds(v, 0.1, 3600.0)
}

/// A whole number from `lo` to `hi`, or an error saying that range.
fn whole(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match v.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("it must be a whole number from {lo} to {hi}")),
    }
}

/// A number of seconds from `lo` to `hi` (never NaN, never infinite: a
/// `Duration` cannot hold them), or an error saying that range.
fn seconds(v: &str, lo: f64, hi: f64) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if (lo..=hi).contains(&s) => Ok(s),
        _ => Err(format!("it must be a number of seconds from {lo} to {hi}")),
    }
}

/// Runs `hark serve` until SIGTERM or SIGINT; every running job is then
/// folded (partial) and written.
pub fn serve(args: &ServeArgs) -> Result<i32> {
    let tcp = Tcp::read(args)?;
    prepare(args)?;
    let admin_gid = match &args.admin_group {
        Some(g) => Some(group_id(g)?),
        None => None,
    };
    let index = args
        .index
        .clone()
        .unwrap_or_else(|| args.runs.join(hark_index::SERVICE_FILE));
    let machine = Arc::new(crate::serve_machine::Feed::default());
    let service = start_service(args, tcp, &index, admin_gid, machine.clone())?;
    let (control, listener) = bind_control(args, &service)?;
    let pointer = point_runs_at(&args.runs, &control);
    let stop = hark_os::flag_on_signals(&[hark_os::SIGTERM, hark_os::SIGINT], false);
    print_stderr(&format!(
        "hark serve: Listening on {} (control: {}); runs go to {}.\n",
        service.addr(),
        control.display(),
        args.runs.display()
    ));
    let service = Arc::new(service);
    machine.attach(&service);
    service.answer_requests(crate::serve_tcp::answerer(
        Arc::downgrade(&service),
        admin_gid,
        index.clone(),
    ));
    let http = match &args.http {
        Some(addr) => match start_http(addr, &service, admin_gid, machine) {
            Ok(live) => Some(live),
            Err(e) => {
                // Nothing will answer on it: a client must not find it.
                let _ = std::fs::remove_file(&control);
                return Err(e);
            }
        },
        None => None,
    };
    answer_until_stopped(&listener, &service, admin_gid, &index, stop);
    let _ = std::fs::remove_file(&control);
    if let Some(p) = pointer {
        let _ = std::fs::remove_file(p);
    }
    if let Some(live) = http {
        // Its routes hold the service: they must be gone before it ends.
        live.stop();
    }
    print_stderr("hark serve: Stopping; running jobs are written as they are.\n");
    // The machine view's feed may hold it a moment, while a job it folds
    // is written: every other holder has ended.
    let mut service = service;
    loop {
        match Arc::try_unwrap(service) {
            Ok(s) => break s.shutdown(),
            Err(s) => service = s,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(0)
}

/// What a TCP service is given: the site token, the users' tokens, the
/// certificate.
struct Tcp {
    token: Option<String>,
    users: Vec<hark_server::UserToken>,
    tls: Option<Arc<hark_tls::rustls::ServerConfig>>,
}

impl Tcp {
    /// Read and checked: a TCP service needs a token of some kind, a
    /// `tls:` one a certificate, and one beyond localhost `--remote`.
    fn read(args: &ServeArgs) -> Result<Tcp> {
        let token = match &args.token_file {
            Some(f) => Some(read_token(f)?),
            None => None,
        };
        let users = match &args.tokens {
            Some(f) => crate::serve_tcp::read_tokens(f)?,
            None => Vec::new(),
        };
        let tls = crate::serve_tcp::tls_config(args.tls_cert.as_deref(), args.tls_key.as_deref())?;
        let hostport = args
            .listen
            .strip_prefix("tcp:")
            .or_else(|| args.listen.strip_prefix(hark_tls::SCHEME));
        let Some(hostport) = hostport else {
            if tls.is_some() {
                bail!("--tls-cert is for TCP: listen on tls:HOST:PORT");
            }
            return Ok(Tcp { token, users, tls });
        };
        if args.listen.starts_with(hark_tls::SCHEME) && tls.is_none() {
            bail!("{} is a TLS address: give the service's certificate and key (--tls-cert FILE --tls-key FILE)", args.listen);
        }
        if token.is_none() && users.is_empty() {
            bail!("a TCP service needs tokens: --tokens FILE (each user's) or --token-file FILE (the site's), mode 0600");
        }
        let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
        let local = matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1");
        if !local && !args.remote {
            let how = if tls.is_some() {
                "the streams are in TLS"
            } else {
                "the events cross the network unencrypted: give --tls-cert and --tls-key for TLS"
            };
            bail!("{host} is not localhost: pass --remote to listen there ({how})");
        }
        Ok(Tcp { token, users, tls })
    }
}

/// The runs directory checked, the socket's directory made, the process's
/// limits and allocator set for many connections.
fn prepare(args: &ServeArgs) -> Result<()> {
    crate::serve_files::check_runs_dir(&args.runs)?;
    if let Some(path) = args.listen.strip_prefix("unix:") {
        if let Some(dir) = Path::new(path)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
    }
    hark_os::raise_fd_limit();
    crate::alloc::cap_arenas();
    crate::alloc::fix_mmap_threshold();
    Ok(())
}

/// Starts the service over the run index `index` (its past jobs read back),
/// writing each finished job into the runs directory and recording it.
fn start_service(
    args: &ServeArgs,
    tcp: Tcp,
    index: &Path,
    admin_gid: Option<u32>,
    machine: Arc<crate::serve_machine::Feed>,
) -> Result<Service> {
    let keep = ServiceConfig::default().history;
    let past = crate::serve_index::open(&args.runs, index, keep)?;
    crate::serve_index::set_admins(index, admin_gid)?;
    let runs = args.runs.clone();
    let recorded = index.to_path_buf();
    let on_run = Arc::new(move |r: &ServiceRun| {
        let findings = machine.on_run(r);
        let flagged;
        let r = if findings.is_empty() {
            r
        } else {
            flagged = ServiceRun {
                id: r.id,
                job: r.job.clone(),
                owner: r.owner,
                kind: r.kind,
                info: r.info.clone(),
                run: crate::serve_machine::with_findings(&r.run, findings),
            };
            &flagged
        };
        let dir = write_service_run(&runs, r).map_err(|e| format!("{e:#}"))?;
        if let Err(e) = crate::serve_index::record(&recorded, r, &dir) {
            print_stderr(&format!(
                "hark serve: Run {} is not recorded in the run index: {e:#}.\n",
                dir.display()
            ));
        }
        Ok(dir)
    });
    let log = Arc::new(|line: &str| print_stderr(&format!("hark serve: {line}\n")));
    let service = Service::start(
        ServiceConfig {
            listen: args.listen.clone(),
            analyses: (!args.analyses.is_empty()).then(|| args.analyses.clone()),
            // Each within its range: the value parsers below refused the rest.
            max_jobs: args.max_jobs,
            max_streams_per_job: args.max_streams,
            max_jobs_per_user: args.max_jobs_per_user,
            max_streams_per_user: args.max_streams_per_user,
            job_in_flight: args.job_buffer_mb << 20,
            total_in_flight: args.total_buffer_mb << 20,
            max_connections: args.max_connections,
            max_connections_per_user: args.max_connections_per_user,
            linger: Duration::from_secs_f64(args.linger),
            hello_timeout: Duration::from_secs_f64(args.hello_timeout),
            token: tcp.token,
            users: tcp.users,
            tls: tcp.tls,
            past: past.jobs,
            past_dumps: past.dumps,
            ..ServiceConfig::default()
        },
        on_run,
        log,
    )
    .map_err(|e| anyhow::anyhow!("cannot start the service: {e}"))?;
    if let Some(path) = service.addr().strip_prefix("unix:") {
        // Anyone may connect; SO_PEERCRED says who did.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
            .with_context(|| format!("cannot open the socket {path} to every user"))?;
    }
    Ok(service)
}

/// Binds the control socket (`--control`, or beside the service's socket),
/// open to every user: the kernel says who connected.
fn bind_control(args: &ServeArgs, service: &Service) -> Result<(PathBuf, UnixListener)> {
    let control =
        args.control
            .clone()
            .unwrap_or_else(|| match service.addr().strip_prefix("unix:") {
                Some(p) => PathBuf::from(format!("{p}.ctl")),
                None => args.runs.join("hark.ctl"),
            });
    let _ = std::fs::remove_file(&control);
    let listener = UnixListener::bind(&control)
        .with_context(|| format!("cannot bind the control socket {}", control.display()))?;
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o666)).with_context(
        || {
            format!(
                "cannot open the control socket {} to every user",
                control.display()
            )
        },
    )?;
    listener.set_nonblocking(true)?;
    Ok((control, listener))
}

/// Serves the live view and the HTTP API on `addr`, and says where.
fn start_http(
    addr: &str,
    service: &Arc<Service>,
    admin_gid: Option<u32>,
    machine: Arc<crate::serve_machine::Feed>,
) -> Result<hark_live::Live> {
    let live = crate::serve_http::start(addr, service.clone(), admin_gid, machine)?;
    let _ = LIVE_URL.set(live.url().to_string());
    print_stderr(&format!(
        "hark serve: Live view at {url}\nhark serve: Control over HTTP: POST {url}api/runs/ID/control\nhark serve: Machine view at {url}machine\n",
        url = live.url()
    ));
    Ok(live)
}

/// Answers the control socket, a thread per request, until `stop` is set.
fn answer_until_stopped(
    listener: &UnixListener,
    service: &Arc<Service>,
    admin_gid: Option<u32>,
    index: &Path,
    stop: &std::sync::atomic::AtomicBool,
) {
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let service = service.clone();
                    // Each request lives as long as its answer takes (a
                    // dump: seconds); none is kept for the service's life.
                    s.spawn(move || answer(&service, stream, admin_gid, index));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    print_stderr(&format!("hark serve: Control socket accept failed: {e}.\n"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    });
}

/// Reads the site token, refusing a file others may read.
pub fn read_token(path: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        bail!(
            "the token file {} has mode {:o}: make it readable by its owner only (chmod 600)",
            path.display(),
            meta.mode() & 0o777
        );
    }
    let token = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the token file {}", path.display()))?
        .trim()
        .to_string();
    if token.len() < 16 || token.contains('@') {
        bail!(
            "the token in {} must be at least 16 characters and hold no `@`",
            path.display()
        );
    }
    Ok(token)
}

/// The link `RUNS/hark.ctl` to the control socket (unless the socket is
/// there already), by which `hark runs --index RUNS` reaches the service
/// to list a user's runs without reading the private index. Made by the
/// service in its own directory: no user can replace it.
fn point_runs_at(runs: &Path, control: &Path) -> Option<PathBuf> {
    let link = runs.join(crate::serve_index::CONTROL_LINK);
    if link == control {
        return None;
    }
    let target = std::fs::canonicalize(control).unwrap_or_else(|_| control.to_path_buf());
    let _ = std::fs::remove_file(&link);
    match std::os::unix::fs::symlink(&target, &link) {
        Ok(()) => Some(link),
        Err(e) => {
            print_stderr(&format!(
                "hark serve: Cannot link {} to the control socket ({e}): `hark runs --index {}` will not reach the service.\n",
                link.display(),
                runs.display()
            ));
            None
        }
    }
}

/// One control request: one JSON line in, one JSON line out.
fn answer(service: &Service, stream: UnixStream, admin_gid: Option<u32>, index: &Path) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Some(hark_transport::Cred { uid, gid, pid }) = hark_transport::cred_of(&stream) else {
        return;
    };
    let admin = uid == 0 || admin_gid.is_some_and(|g| g == gid || in_group(pid, g));
    let viewer = Viewer { uid, admin };
    let mut line = String::new();
    let reply = {
        let mut reader = BufReader::new((&stream).take_limit(64 << 10));
        match reader.read_line(&mut line) {
            Ok(_) if crate::serve_index::is_runs_request(&line) => {
                crate::serve_index::answer_runs(index, &viewer, &line)
            }
            Ok(_) => handle(service, &viewer, &line),
            Err(e) => json!({"ok": false, "error": format!("cannot read the request: {e}")}),
        }
    };
    let mut out = serde_json::to_vec(&reply).unwrap_or_default();
    out.push(b'\n');
    let _ = (&stream).write_all(&out);
}

trait TakeLimit: std::io::Read + Sized {
    fn take_limit(self, n: u64) -> std::io::Take<Self> {
        self.take(n)
    }
}
impl<R: std::io::Read> TakeLimit for R {}

/// The live view's address (`--http`), which `show` gives each job's
/// page under.
static LIVE_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The summary of a finished job, for `hark run --server`: its run
/// directory's `summary.txt`, read only as [`crate::serve_files::open_owned`]
/// allows.
fn summary_of(dir: &Path) -> Option<String> {
    use std::io::Read;
    let owner = crate::serve_files::dir_owner(dir).ok()?;
    let f = crate::serve_files::open_owned(dir, "summary.txt", Some(owner)).ok()?;
    let mut text = String::new();
    f.take(1 << 20).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Carries out one request (see `docs/api.md`, "Control socket").
pub fn handle(service: &Service, viewer: &Viewer, line: &str) -> Value {
    let fail = |e: String| json!({"ok": false, "error": e});
    let req: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => return fail(format!("the request is not JSON: {e}")),
    };
    let run = req["run"]
        .as_str()
        .map(str::to_string)
        .or_else(|| req["run"].as_u64().map(|n| n.to_string()));
    match req["op"].as_str() {
        Some("list") => {
            let (running, ended): (Vec<JobInfo>, Vec<JobInfo>) = service
                .jobs(viewer)
                .into_iter()
                .partition(|j| j.state == JobState::Running);
            let jobs: Vec<Value> = running
                .iter()
                .map(job_json)
                .chain(service.dumps(viewer).iter().map(dump_json))
                .chain(ended.iter().map(job_json))
                .collect();
            json!({"ok": true, "jobs": jobs})
        }
        Some("show") => match run.as_deref().map(|id| (id, service.job(viewer, id))) {
            Some((_, Ok(j))) => {
                let live = LIVE_URL.get().map(|u| format!("{u}#run={}", j.id));
                json!({"ok": true, "job": job_json(&j), "live": live})
            }
            Some((id, Err(e))) if matches!(e.kind(), ErrorKind::NoSuchJob(_)) => {
                match service.dump(viewer, id) {
                    Ok(d) => json!({"ok": true, "job": dump_json(&d)}),
                    Err(e) => fail(e.to_string()),
                }
            }
            Some((_, Err(e))) => fail(e.to_string()),
            None => fail("`show` needs \"run\"".into()),
        },
        Some("control") => {
            let Some(id) = run else {
                return fail("`control` needs \"run\"".into());
            };
            match command_of(&req) {
                Ok(cmd) => match service.control(viewer, &id, cmd) {
                    Ok(dir) => json!({"ok": true, "dir": dir.map(|d| d.display().to_string())}),
                    Err(e) => fail(e.to_string()),
                },
                Err(e) => fail(e),
            }
        }
        Some("finish") => {
            let Some(id) = run else {
                return fail("`finish` needs \"run\"".into());
            };
            let grace =
                Duration::from_secs_f64(req["grace_s"].as_f64().unwrap_or(10.0).clamp(0.0, 3600.0));
            match service.finish_job(viewer, &id, grace) {
                Ok(dir) => json!({
                    "ok": true,
                    "dir": dir.display().to_string(),
                    "summary": summary_of(&dir),
                }),
                Err(e) => fail(e.to_string()),
            }
        }
        other => fail(format!(
            "unknown op {other:?}: expected list, show, control or finish"
        )),
    }
}

/// The `{"action": ...}` of a control request, as `POST
/// /api/runs/{id}/control` takes it too.
pub fn command_of(req: &Value) -> Result<Command, String> {
    Ok(match req["action"].as_str() {
        Some("pause") => Command::Pause,
        Some("resume") => Command::Resume,
        Some("dump") => Command::Dump,
        Some("sample") => {
            let n = |k: &str| {
                req[k]
                    .as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| format!("`sample` needs \"{k}\", a whole number"))
            };
            Command::Sample {
                keep: n("keep")?,
                of: n("of")?,
            }
        }
        other => {
            return Err(format!(
                "unknown action {other:?}: expected pause, resume, dump or sample"
            ))
        }
    })
}

/// A dump as `list` and `show` give it: a line like a job's, with state
/// `dump`, its own id (`N-dumpK`), and its job's number and its own.
fn dump_json(d: &DumpInfo) -> Value {
    json!({
        "id": d.id,
        "job": d.name,
        "job_id": d.job.to_string(),
        "dump": d.seq,
        "owner": d.owner,
        "state": "dump",
        "programs": d.programs,
        "started_ns": d.started_ns,
        "open": 0,
        "streams": d.streams,
        "events": d.events,
        "dir": d.dir.display().to_string(),
    })
}

fn job_json(j: &JobInfo) -> Value {
    json!({
        "id": j.id.to_string(),
        "job": j.job,
        "owner": j.owner,
        "state": j.state.as_str(),
        "programs": j.programs,
        "started_ns": j.started_ns,
        "open": j.open,
        "streams": j.streams,
        "events": j.events,
        "dir": j.dir.as_ref().map(|d| d.display().to_string()),
    })
}

/// Writes a job's run (or dump) under `runs` and gives it to its owner.
fn write_service_run(runs: &Path, r: &ServiceRun) -> Result<PathBuf> {
    let program = r.run.programs.first().map_or("job", |p| p.name.as_str());
    let name = match r.kind {
        RunKind::Final => format!("{program}-job{}", r.id),
        RunKind::Dump(n) => format!("{program}-job{}-dump{n}", r.id),
    };
    let dir = rundir::create_new(runs, &name, &rundir::timestamp())?;
    // Closed before anything is written in it; its owner gets it last of
    // all (`serve_files`).
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot close {} to other users", dir.display()))?;
    hark_outputs::write_all(&r.run, &dir, |_| true)
        .with_context(|| format!("cannot write the run directory {}", dir.display()))?;
    let meta = crate::serve_index::meta(r);
    let file = dir.join(crate::serve_index::META_FILE);
    std::fs::write(&file, format!("{meta:#}\n"))
        .with_context(|| format!("cannot write {}", file.display()))?;
    if let Some(uid) = r.owner {
        if let Err(e) = crate::serve_files::give_to(&dir, uid) {
            print_stderr(&format!(
                "hark serve: Run {} stays the service's, closed to its owner: {e:#}.\n",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// Whether process `pid` has `gid` among its supplementary groups.
fn in_group(pid: u32, gid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Groups:"))
            .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
    })
}

/// Whether user `uid` is in group `gid`, as its primary group
/// (`/etc/passwd`) or a supplementary one (`/etc/group`).
pub fn user_in_group(uid: u32, gid: u32) -> bool {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some((name, primary)) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[2].parse() == Ok(uid))
            .then(|| (f[0].to_string(), f[3].parse::<u32>().ok()))
    }) else {
        return false;
    };
    if primary == Some(gid) {
        return true;
    }
    std::fs::read_to_string("/etc/group").is_ok_and(|g| {
        g.lines().any(|l| {
            let f: Vec<&str> = l.split(':').collect();
            f.len() > 3 && f[2].parse() == Ok(gid) && f[3].split(',').any(|m| m == name)
        })
    })
}

/// A group's id from its name (`/etc/group`) or number.
fn group_id(group: &str) -> Result<u32> {
    if let Ok(n) = group.parse() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group").context("cannot read /etc/group")?;
    text.lines()
        .find_map(|l| {
            let mut f = l.split(':');
            (f.next() == Some(group)).then(|| f.nth(1).and_then(|g| g.parse().ok()))?
        })
        .with_context(|| format!("no group {group:?} in /etc/group"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_others_may_read_is_refused() {
        let dir = std::env::temp_dir().join(format!("hark-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("token");
        std::fs::write(&f, "0123456789abcdef-site\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_token(&f).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token(&f).unwrap(), "0123456789abcdef-site");
        std::fs::write(&f, "short").unwrap();
        assert!(read_token(&f).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn control_requests_are_checked_before_anything_is_done() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(command_of(&v(r#"{"action":"pause"}"#)), Ok(Command::Pause));
        assert_eq!(
            command_of(&v(r#"{"action":"sample","keep":1,"of":4}"#)),
            Ok(Command::Sample { keep: 1, of: 4 })
        );
        assert!(command_of(&v(r#"{"action":"sample","keep":1}"#)).is_err());
        assert!(command_of(&v(r#"{"action":"explode"}"#)).is_err());
    }
}
