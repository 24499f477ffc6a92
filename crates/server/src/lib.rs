//! Hark's analysis server: probe streams in, a [`hark_model::Run`] out.
//!
//! [`Server::start`] binds a listener ([`hark_transport`]) and a parallel
//! blackboard ([`hark_board`]) with the knowledge sources of
//! [`hark_analyses`]. Each connection's reader thread hands its frames to the
//! server's sink, which routes them to their program's board level (one
//! level per program, created when the program's first process says hello);
//! the board's workers analyse them while the program runs. When the program
//! is over, [`Server::finish`] waits for the streams to close, drains the
//! board, folds every program and returns the run's model, accounting
//! included: events written (from each probe's end-of-stream record),
//! received, analysed and dropped, per rank and in total. A process that
//! dies without its end-of-stream record is kept with what arrived, marked
//! partial, and named in the report.
//!
//! The API: [`Server::start`] with a [`ServerConfig`]; [`Server::addr`] for
//! the probes' `HARK_ADDR`; [`Server::status`] for a live status line;
//! [`Server::snapshot`] for the model so far (a live view);
//! [`Server::finish`] for the final [`hark_model::Run`].
//!
//! A [`Server`] lives for one run. A [`Service`] (`hark serve`) lives on:
//! many jobs stream into it, each owned by the user the kernel names, each
//! analysed on board levels of its own and handed to a callback as a
//! [`ServiceRun`] when it ends or is dumped; [`Service::control`] pauses,
//! resumes or dumps a running job through its probes.
//!
//! ```
//! use hark_server::{Server, ServerConfig};
//! use hark_wire::{op, ClockSource, End, EndReason, Event, Hello, encode_pack};
//! use std::io::Write;
//! use std::time::Duration;
//!
//! let dir = std::env::temp_dir().join(format!("hark-server-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let server = Server::start(ServerConfig {
//!     addr: format!("unix:{}", dir.join("sock").display()),
//!     ..ServerConfig::default()
//! })
//! .unwrap();
//!
//! // What a probe sends: hello, one pack, end.
//! let mut bytes = Vec::new();
//! Hello { program: "demo".into(), argv: vec!["./demo".into()], host: "h".into(), pid: 7,
//!         rank: 0, size: 1, job: "j".into(), clock: ClockSource::Monotonic,
//!         clock_ns: 0, realtime_ns: 0, pack_size: 1 << 20, secret: String::new(), parent: 0 }.encode(&mut bytes);
//! encode_pack(0, &[Event::new(op::mpi_op("MPI_Barrier").unwrap(), 5, 25)], &mut bytes);
//! End { events_written: 1, events_dropped: 0, packs_sent: 1, reason: EndReason::Finalize }
//!     .encode(&mut bytes);
//! let path = dir.join("sock");
//! std::os::unix::net::UnixStream::connect(&path).unwrap().write_all(&bytes).unwrap();
//!
//! let run = server.finish(Duration::from_secs(10));
//! assert_eq!(run.programs[0].mpi["MPI_Barrier"].time_ns, vec![20]);
//! assert_eq!(run.accounting.events_analysed, 1);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod exchange;
mod place;
pub mod resolve;
mod service;
mod sink;
pub mod trace;

pub use error::{Error, ErrorKind};
pub use service::{
    check_sample, Command, DumpInfo, JobInfo, JobState, OnRequest, RunKind, Service, ServiceConfig,
    ServiceRun, ServiceStats, UserToken, Viewer,
};

use hark_analyses::registry;
use hark_board::Board;
use hark_engine::Config;
use hark_model::{Accounting, Run};
use sink::{Counters, State};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start a [`Server`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen: `unix:/path` or `tcp:host:port` (port 0 picks one).
    pub addr: String,
    /// More addresses to listen on as well, served as one with `addr`
    /// (`hark run` adds a TCP socket for ranks on other nodes). Default
    /// none.
    pub also: Vec<String>,
    /// A connection that has not sent its whole `Hello` this long after it
    /// was accepted is cut off. `None` (the default): no limit, for a
    /// server whose only socket is private to the user; one that listens
    /// on TCP should have one, since anyone on the network can connect.
    pub hello_timeout: Option<Duration>,
    /// Board worker threads (at least 1). Default: the machine's cores.
    pub workers: usize,
    /// The analyses to run, by spec name (`mpi-profile`, ...); `None` runs
    /// every one in [`hark_analyses::registry`]. `summary` is always run.
    pub analyses: Option<Vec<String>>,
    /// Time slices per program (fixed whatever the run's length).
    pub slices: usize,
    /// Bytes of events a program may have waiting for analysis before its
    /// readers stop reading (back-pressure towards the probes). Default
    /// 16 MiB: small enough that a short run already fills it, so memory
    /// does not grow with a run's length (BENCHMARKS.md, "Server").
    pub max_in_flight: u64,
    /// The run's secret (see [`new_secret`]): a stream whose `Hello` does
    /// not carry it is refused and named in the diagnostics. Probes learn
    /// it from [`Server::probe_addr`]. `None`: every stream is accepted.
    pub secret: Option<String>,
    /// Per-process rows a program keeps for processes without an MPI rank
    /// (a shell loop, make, a Python tool): later ones are folded into one
    /// row of exact totals when they end, so that memory stays flat however
    /// many processes a run starts. MPI ranks always keep their rows.
    /// Default [`hark_engine::DEFAULT_ROWS`].
    pub rows: usize,
    /// Keep raw events in a trace store (`hark run --trace`); `None`
    /// keeps none.
    pub trace: Option<trace::TraceConfig>,
    /// Streams arrive late by queuing, not by clock disagreement (streams
    /// over MPI, held until `MPI_Init`): always map a probe clock through
    /// the probe's own realtime reading, never through the handshake's
    /// delay. Default false.
    pub probe_realtime: bool,
    /// Streams replayed from a trace store (`hark replay`): the offset each
    /// one's live handshake gave (`index.tsv`'s `handshake_ns`), by the
    /// `Hello`'s host and pid, used instead of this server's own: a
    /// program's time slices start at its first handshake, which a replay
    /// must place where the live run did. Empty by default.
    pub handshakes: std::collections::HashMap<(String, u32), i64>,
    /// This server is one analyser of several (`hark run --analysers`):
    /// the cross-rank entries whose key another analyser owns go to this
    /// exchange's outbox, and [`Server::inject`] takes in the other
    /// analysers' (`docs/analysers.md`). `None` (the default): every key is
    /// matched here.
    pub exchange: Option<Arc<hark_engine::exchange::Exchange>>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            addr: "tcp:127.0.0.1:0".into(),
            also: Vec::new(),
            hello_timeout: None,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            analyses: None,
            slices: Config::default().slices,
            max_in_flight: 16 << 20,
            secret: None,
            rows: Config::default().rows,
            trace: None,
            probe_realtime: false,
            handshakes: Default::default(),
            exchange: None,
        }
    }
}

/// A snapshot for the live status line.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Status {
    /// Connections accepted so far (processes that said hello).
    pub connections: u64,
    /// Connections still open.
    pub open: u64,
    /// Programs seen.
    pub programs: usize,
    /// Events received so far.
    pub events_received: u64,
    /// Events received per second since the previous call to `status`
    /// (since the start for the first call).
    pub events_per_s: f64,
    /// Bytes of events received and not yet analysed.
    pub bytes_in_flight: u64,
    /// Connections whose stream was malformed or cut.
    pub broken: u64,
    /// Streams refused: without the run's secret, or claiming a rank that
    /// another stream holds.
    pub refused: u64,
    /// Time readers spent waiting for the analyses to catch up, in ns.
    pub throttled_ns: u64,
    /// Processes ended and not yet folded into their program's row of
    /// other processes (`ServerConfig::rows`): the analyses still hold
    /// their last events. Each keeps its row until then.
    pub folding: u64,
}

/// A running analysis server. See the crate documentation.
pub struct Server {
    transport: hark_transport::Server,
    state: Arc<State>,
    started: Instant,
    last_status: Mutex<(Instant, u64)>,
}

/// The analyses to run, by spec name (`None`: every one); `summary` always
/// runs. Shared by [`Server`] and [`Service`].
pub(crate) fn select_analyses(
    names: Option<&[String]>,
) -> Result<Vec<Arc<dyn hark_analyses::DynAnalysis>>, Error> {
    let Some(names) = names else {
        return Ok(registry::all());
    };
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    if !names.contains(&"summary") {
        names.push("summary");
    }
    registry::select(&names).map_err(|e| Error::new(ErrorKind::Analyses(e)))
}

impl Server {
    /// Binds `config.addr`, starts the board's workers and accepts probe
    /// connections on a background thread. Fails if the address cannot be
    /// bound or an analysis name is unknown.
    pub fn start(config: ServerConfig) -> Result<Server, Error> {
        // Call sites are named from the objects on this host's disk.
        hark_analyses::names::install(resolve::Resolver::get());
        let analyses = select_analyses(config.analyses.as_deref())?;
        let trace = config.trace.clone().map(trace::Store::new).transpose()?;
        let mut listener = hark_transport::Listener::bind(&config.addr)
            .map_err(|e| Error::new(ErrorKind::Listen(e)))?;
        for addr in &config.also {
            let more = hark_transport::Listener::bind(addr)
                .map_err(|e| Error::new(ErrorKind::Listen(e)))?;
            listener = listener.also(more);
        }
        let board = Board::new(config.workers.max(1));
        let state = Arc::new_cyclic(|me| State {
            me: me.clone(),
            placement: Arc::new(place::Placement::new(board.clone())),
            board,
            analyses,
            config: Config {
                slices: config.slices,
                rows: config.rows,
                ..Config::default()
            },
            max_in_flight: config.max_in_flight,
            programs: Mutex::default(),
            conns: Default::default(),
            counters: Counters::default(),
            problems: Mutex::default(),
            clock_references: Mutex::default(),
            host_clocks: Mutex::default(),
            ranks: Mutex::default(),
            pids: Mutex::default(),
            secret: config.secret.clone(),
            rejected: Mutex::default(),
            folding: Default::default(),
            trace,
            probe_realtime: config.probe_realtime,
            handshakes: config.handshakes.clone(),
            exchange: config.exchange.clone().map(Into::into).unwrap_or_default(),
            parked: Mutex::default(),
        });
        let options = hark_transport::ServeOptions {
            hello_timeout: config.hello_timeout,
            ..hark_transport::ServeOptions::default()
        };
        let transport = listener.serve_with(state.clone(), options);
        let now = Instant::now();
        Ok(Server {
            transport,
            state,
            started: now,
            last_status: Mutex::new((now, 0)),
        })
    }

    /// The address probes should be given (`HARK_ADDR`), with the actual
    /// port for TCP.
    pub fn addr(&self) -> &str {
        self.transport.addr()
    }

    /// Connections accepted so far: a node's forwarder counts once,
    /// however many streams it carries (`docs/cluster.md`).
    pub fn sockets(&self) -> u64 {
        self.transport.sockets()
    }

    /// Every address listened on: [`addr`](Server::addr) first, then those
    /// of [`ServerConfig::also`], TCP ones with their actual port.
    pub fn addrs(&self) -> &[String] {
        self.transport.addrs()
    }

    /// What the probes' `HARK_ADDR` must say: the address, preceded by the
    /// secret and an `@` when the server has one (`secret@unix:/path`).
    pub fn probe_addr(&self) -> String {
        self.probe_addr_for(&[self.addr()])
    }

    /// [`probe_addr`](Server::probe_addr) for a list of addresses the
    /// probes try in order (`secret@unix:/path,tcp:10.0.0.1:4000`): the
    /// addresses this server listens on, as other hosts reach them.
    pub fn probe_addr_for(&self, addrs: &[&str]) -> String {
        let list = addrs.join(",");
        match &self.state.secret {
            Some(secret) => format!("{secret}@{list}"),
            None => list,
        }
    }

    /// A snapshot of what is going on; cheap enough for a few calls a second.
    pub fn status(&self) -> Status {
        let c = &self.state.counters;
        let events = c.events.load(Ordering::Relaxed);
        let now = Instant::now();
        let mut last = hark_sync::lock(&self.last_status);
        let dt = now.duration_since(last.0).as_secs_f64();
        let rate = if dt > 0.0 {
            (events - last.1) as f64 / dt
        } else {
            0.0
        };
        *last = (now, events);
        let folding = self.state.folding() as u64;
        let programs = self
            .state
            .programs
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Status {
            connections: c.accepted.load(Ordering::Relaxed),
            open: c.open.load(Ordering::Relaxed),
            programs: programs.len(),
            events_received: events,
            events_per_s: rate,
            bytes_in_flight: programs.iter().map(|p| p.on.in_flight()).sum(),
            broken: c.broken.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            throttled_ns: c.throttled_ns.load(Ordering::Relaxed),
            folding,
        }
    }

    /// How long the server has been running.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Ends the run and returns its model.
    ///
    /// `grace` is one hard deadline, from this call, for every connection,
    /// old and new: until it passes, processes still connected (a daemon the
    /// program left behind) may finish and late ones may still connect; when
    /// it passes, no connection is accepted any more and those still open
    /// are cut and their ranks marked partial. Call it once the measured
    /// program has exited: its probes flush and close within moments. Then
    /// the board analyses everything received and each program is folded.
    /// Every program that connected is in the run, in order of first
    /// handshake.
    pub fn finish(self, grace: Duration) -> Run {
        self.finish_unless(grace, &AtomicBool::new(false))
    }

    /// [`finish`](Server::finish), cutting the grace period short as soon as
    /// `hurry` is set (by a signal handler, say): open connections are then
    /// cut at once, and the run is folded from what arrived.
    pub fn finish_unless(self, grace: Duration, hurry: &AtomicBool) -> Run {
        let stop_at = self.settle(grace, hurry);
        let cut = self.transport.shutdown_by(stop_at);
        let programs = self.state.fold();
        self.state.board.shutdown();
        let mut problems = closing_problems(&self.state, cut);
        if let Some(store) = &self.state.trace {
            let infos = self
                .state
                .conns
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(id, c)| (*id, c.info.clone()))
                .collect();
            problems.extend(store.close(&infos, &programs));
        }
        let mut run = with_problems(run_of(programs), problems);
        run.missing = self.state.missing_ranks();
        run
    }

    /// The run as analysed so far, while the programs run (for a live
    /// view). Nothing is marked partial; `events_analysed` trails
    /// `events_received` by what is still queued. No analysis waits for
    /// it: the states it reads are copied on write (`docs/analyses.md`).
    pub fn snapshot(&self) -> Run {
        run_of(self.state.snapshot())
    }

    /// How often the analyses' workers waited for a state, and copied one
    /// a snapshot was reading, summed over the programs so far.
    pub fn contention(&self) -> hark_engine::Contention {
        self.state.contention()
    }

    /// The board's counters: per knowledge source, the jobs it ran and
    /// the time they took (what the analyses cost, for benchmarks).
    pub fn board_stats(&self) -> hark_board::Stats {
        self.state.board.stats()
    }
}

impl Server {
    /// Gives the streams of `job` world rank 0's handshake offset as their
    /// clock reference (`docs/analyses.md`, "Time"), for a server that
    /// does not receive rank 0's stream itself: an analyser rank of an MPI
    /// job learns it from the analyser that does. The first reference of a
    /// job holds.
    pub fn set_clock_reference(&self, job: &str, reference_ns: i64) {
        self.state.set_clock_reference(job, reference_ns);
    }

    /// Ends the run as [`finish`](Server::finish) does, but returns each
    /// program's partial result (in order of first handshake) and the
    /// run's diagnostics instead of the folded run: an analyser rank of an
    /// MPI job (`hark run --analysers`) sends these to analyser rank 0,
    /// which merges them with [`merge_partials`].
    pub fn finish_partials(self, grace: Duration) -> (Vec<hark_engine::Partial>, Vec<String>) {
        let stop_at = self.settle(grace, &AtomicBool::new(false));
        let parked = self.parked_problems();
        let cut = self.transport.shutdown_by(stop_at);
        let (partials, mut problems) = self.state.fold_partials();
        problems.extend(parked);
        self.state.board.shutdown();
        problems.extend(closing_problems(&self.state, cut));
        (partials, problems)
    }

    /// Each program's partial result so far (in order of first handshake),
    /// while the programs run: an analyser rank's share of the live view,
    /// merged with the other ranks' by [`merge_programs`] and folded by
    /// [`fold_merged`] (`live`). Nothing is marked partial.
    pub fn snapshot_partials(&self) -> Vec<hark_engine::Partial> {
        self.state.snapshot_partials()
    }

    /// Waits up to `grace` (less once `hurry` is set) for every connection
    /// to close; when the transport is to stop, cutting what is still open.
    fn settle(&self, grace: Duration, hurry: &AtomicBool) -> Instant {
        let deadline = Instant::now() + grace;
        // Open means accepted and not closed: a connection still in the
        // accept backlog is not counted yet, so it must look settled twice,
        // a few milliseconds apart.
        let open = || {
            self.transport
                .connections()
                .saturating_sub(self.state.counters.closed.load(Ordering::Relaxed))
        };
        let hurried = || hurry.load(Ordering::Relaxed);
        let mut settled = 0;
        while settled < 2 && Instant::now() < deadline && !hurried() {
            settled = if open() == 0 { settled + 1 } else { 0 };
            std::thread::sleep(Duration::from_millis(5));
        }
        if hurried() {
            Instant::now()
        } else {
            deadline
        }
    }
}

/// The run's own diagnostics once it ended: what the server noted, the
/// `cut` connections, and the streams it refused.
fn closing_problems(state: &State, cut: usize) -> Vec<String> {
    let mut problems = std::mem::take(&mut *hark_sync::lock(&state.problems));
    if cut > 0 {
        problems.push(format!(
            "{cut} connection(s) were still open when the run ended and were cut; their ranks are partial"
        ));
    }
    problems.extend(state.rejections());
    problems
}

/// Merges the partial results of several analysers (each from
/// [`Server::finish_partials`], in analyser order) program by program,
/// unifying names, communicators and files, and folds them into one run;
/// `problems` go to the first program's diagnostics. `analyses` is the
/// selection every analyser ran with (`None`: every one).
pub fn merge_partials(
    parts: Vec<Vec<hark_engine::Partial>>,
    problems: Vec<String>,
    analyses: Option<&[String]>,
) -> Result<Run, Error> {
    fold_merged(merge_programs(parts, analyses)?, problems, analyses, false)
}

/// Merges the partial results of several analysers program by program
/// (a program's partials merge in the order given), without folding: what
/// an inner node of a reduction tree sends on. Programs keep their order
/// of first appearance.
pub fn merge_programs(
    parts: Vec<Vec<hark_engine::Partial>>,
    analyses: Option<&[String]>,
) -> Result<Vec<hark_engine::Partial>, Error> {
    let analyses = select_analyses(analyses)?;
    let mut merged: Vec<hark_engine::Partial> = Vec::new();
    for part in parts.into_iter().flatten() {
        match merged.iter_mut().find(|m| m.name == part.name) {
            Some(into) => into
                .merge(part, &analyses)
                .map_err(|e| Error::new(ErrorKind::Analyses(e)))?,
            None => merged.push(part),
        }
    }
    Ok(merged)
}

/// Folds merged programs (from [`merge_programs`]) into one run;
/// `problems` go to the first program's diagnostics. `live`: a snapshot
/// of a run going on (nothing is marked partial), as [`Server::snapshot`].
pub fn fold_merged(
    merged: Vec<hark_engine::Partial>,
    problems: Vec<String>,
    analyses: Option<&[String]>,
    live: bool,
) -> Result<Run, Error> {
    let analyses = select_analyses(analyses)?;
    let programs: Vec<hark_model::Program> = merged
        .into_iter()
        .flat_map(|p| p.finish(&analyses, live))
        .collect();
    Ok(with_problems(run_of(programs), problems))
}

/// The ranks of job `job`, of world size `size`, that are not in `seen`
/// (world ranks that connected); `None` when none is missing.
pub fn missing_of(
    job: String,
    size: u32,
    seen: &std::collections::BTreeSet<u32>,
) -> Option<hark_model::MissingRanks> {
    let measured = seen.range(..size).count() as u32;
    (size > measured).then(|| hark_model::MissingRanks {
        job,
        world_size: size,
        measured,
        ranks: (0..size)
            .filter(|r| !seen.contains(r))
            .take(hark_model::MAX_MISSING_LISTED)
            .collect(),
        unreached: Vec::new(),
    })
}

/// `run.missing` for a run whose streams came over MPI (`hark run
/// --analysers`): of the job's `writers` (its processes less the analyser
/// ranks, which come after them), those whose stream never reached an
/// analyser, by the world ranks of the run's programs. Several programs of
/// an MPMD launch each number their ranks from 0 in a virtualised world:
/// then only how many are missing is known, not which.
pub fn missing_writers(run: &Run, job: String, writers: u32) -> Vec<hark_model::MissingRanks> {
    let ranks: Vec<i32> = (run.programs.iter())
        .flat_map(|p| p.rank_info.iter().map(|r| r.world_rank))
        .filter(|&r| r >= 0)
        .collect();
    let seen: std::collections::BTreeSet<u32> = ranks.iter().map(|&r| r as u32).collect();
    if seen.len() == ranks.len() {
        return missing_of(job, writers, &seen).into_iter().collect();
    }
    let measured = (ranks.len() as u32).min(writers);
    (measured < writers)
        .then(|| hark_model::MissingRanks {
            job,
            world_size: writers,
            measured,
            ranks: Vec::new(),
            unreached: Vec::new(),
        })
        .into_iter()
        .collect()
}

/// A fresh secret for a run: 32 hex digits from the kernel's random source
/// (`/dev/urandom`), for [`ServerConfig::secret`].
pub fn new_secret() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The run of `programs`, with the totals of every rank's and child's
/// accounting: those of one MPMD launch in the order of its command line
/// (the launcher numbers world ranks in it), others in the order given (of
/// first handshake). Processes connect in whatever order they start, so
/// that order alone would swap the programs of one launch from run to run.
///
/// Of programs starting at the same world rank, those that called MPI come
/// first: a wrapper script the launcher started (`mpirun ./run.sh`)
/// carries the ranks' world ranks too, and connects before the program it
/// runs, which is the one the reader came for.
pub(crate) fn run_of(mut programs: Vec<hark_model::Program>) -> Run {
    // A stable sort: programs without a world rank, or starting at the
    // same one (two launches), keep their order.
    programs.sort_by_key(|p| {
        let first = (p.rank_info.iter().map(|r| r.world_rank))
            .filter(|&r| r >= 0)
            .min()
            .unwrap_or(i32::MAX);
        (first, p.mpi.is_empty())
    });
    let mut accounting = Accounting::default();
    for p in &programs {
        accounting += &p.accounting();
    }
    Run {
        hark_version: env!("CARGO_PKG_VERSION").to_string(),
        accounting,
        programs,
        missing: Vec::new(),
        exit: None,
        command_pid: None,
    }
}

/// `problems` in the diagnostics of the run's first program.
pub(crate) fn with_problems(mut run: Run, problems: Vec<String>) -> Run {
    if let (Some(first), false) = (run.programs.first_mut(), problems.is_empty()) {
        first.diagnostics.extend(problems);
    }
    run
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{Program, RankInfo};

    fn program(name: &str, ranks: &[i32]) -> Program {
        Program {
            name: name.into(),
            rank_info: ranks
                .iter()
                .map(|&world_rank| RankInfo {
                    world_rank,
                    ..RankInfo::default()
                })
                .collect(),
            ..Program::default()
        }
    }

    #[test]
    fn under_analysers_the_writers_whose_streams_never_came_are_missing() {
        // Writers 0–3 (the analysers, ranks 4 and 5, are not counted); 2
        // never arrived.
        let run = run_of(vec![program("ring", &[0, 1, 3])]);
        let m = missing_writers(&run, "j".into(), 4);
        assert_eq!(
            m,
            [hark_model::MissingRanks {
                job: "j".into(),
                world_size: 4,
                measured: 3,
                ranks: vec![2],
                unreached: Vec::new(),
            }]
        );
        let all = run_of(vec![program("ring", &[0, 1, 2, 3])]);
        assert!(missing_writers(&all, "j".into(), 4).is_empty());
        // Two programs, each numbering its ranks from 0 (virtualised):
        // how many are missing is known, not which.
        let mpmd = run_of(vec![program("a", &[0, 1]), program("b", &[0])]);
        let m = missing_writers(&mpmd, "j".into(), 4);
        assert_eq!((m[0].measured, m[0].ranks.len()), (3, 0), "{m:?}");
    }

    #[test]
    fn an_mpmd_launch_s_programs_come_in_command_line_order_whoever_connected_first() {
        // atmos's ranks connected first; ocean's world ranks come first.
        let run = run_of(vec![
            program("atmos", &[3, 2, 4]),
            program("serial", &[-1]),
            program("ocean", &[1, 0]),
        ]);
        let names: Vec<&str> = run.programs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ocean", "atmos", "serial"]);
        // Two launches both starting at world rank 0 keep their order.
        let run = run_of(vec![program("second", &[0]), program("first", &[0, 1])]);
        assert_eq!(run.programs[0].name, "second");
        let run = with_problems(run, vec!["a problem".into()]);
        assert_eq!(run.programs[0].diagnostics, ["a problem"]);
    }

    #[test]
    fn the_program_a_wrapper_script_runs_comes_before_the_script() {
        // `mpirun -np 2 ./run.sh`, the script running `hostname` and then
        // the MPI program: all three carry world ranks 0 and 1, and the
        // script and its tools connect first.
        let mpi = |name: &str| {
            let mut p = program(name, &[0, 1]);
            p.mpi.insert("MPI_Init".into(), Default::default());
            p
        };
        let run = run_of(vec![
            program("sh", &[0, 1]),
            program("hostname", &[1, 0]),
            mpi("ring"),
            mpi("later"),
        ]);
        let names: Vec<&str> = run.programs.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ring", "later", "sh", "hostname"]);
    }

    /// A server keeping one row of its own (the second process folds into
    /// the row of others) and its socket's directory.
    fn one_row_server(name: &str) -> (Server, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("hark-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let server = Server::start(ServerConfig {
            addr: format!("unix:{}", dir.join("sock").display()),
            workers: 1,
            rows: 1,
            ..ServerConfig::default()
        })
        .unwrap();
        (server, dir)
    }

    fn until(server: &Server, what: &str, done: impl Fn(&Status) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(30);
        while !done(&server.status()) {
            assert!(Instant::now() < give_up, "{what}: {:?}", server.status());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs a rankless process `pid` (hello, end, close) through `server`,
    /// the `pid`th to connect; with `hold`, its record is returned held
    /// across its close, as a board job holding its last events holds it.
    fn short_process(
        server: &Server,
        dir: &std::path::Path,
        pid: u32,
        hold: bool,
    ) -> Option<Arc<sink::Conn>> {
        use hark_wire::{End, EndReason, Hello};
        use std::io::Write;
        let mut s = std::os::unix::net::UnixStream::connect(dir.join("sock")).unwrap();
        let mut bytes = Vec::new();
        Hello {
            pid,
            rank: -1,
            size: -1,
            ..sink::tests::hello(1_000, 1_700_000_000_000_000_000)
        }
        .encode(&mut bytes);
        s.write_all(&bytes).unwrap();
        until(server, "hello", |st| st.connections == u64::from(pid));
        let held = hold.then(|| {
            let conns = hark_sync::read(&server.state.conns);
            let held = conns.values().find(|c| c.info.hello().pid == pid).cloned();
            held.expect("the process's record")
        });
        bytes.clear();
        End {
            events_written: 0,
            events_dropped: 0,
            packs_sent: 0,
            reason: EndReason::Exit,
        }
        .encode(&mut bytes);
        s.write_all(&bytes).unwrap();
        drop(s);
        until(server, "close", |st| st.open == 0);
        held
    }

    #[test]
    fn a_process_the_analyses_still_held_at_its_close_is_folded_without_another_close() {
        let (server, dir) = one_row_server("fold");
        short_process(&server, &dir, 1, false);
        let held = short_process(&server, &dir, 2, true);
        assert_eq!(server.status().folding, 1, "held at its close");
        drop(held);
        // No further close comes; the retrying thread folds it.
        until(&server, "folded", |st| st.folding == 0);
        let run = server.finish(Duration::from_secs(10));
        let others = run.programs[0].rank_info.last().unwrap();
        assert_eq!((run.programs[0].rank_info.len(), others.folded), (2, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nothing_is_folded_once_the_run_s_end_has_taken_the_programs() {
        let (server, dir) = one_row_server("fold-end");
        short_process(&server, &dir, 1, false);
        let held = short_process(&server, &dir, 2, true);
        // The end folds the programs while the process is still held: it
        // keeps a row of its own there, and no pass may fold it after.
        let programs = server.state.fold();
        let rows: Vec<u32> = programs[0].rank_info.iter().map(|r| r.pid).collect();
        assert_eq!(rows, [1, 2]);
        drop(held);
        std::thread::sleep(sink::FOLD_RETRY * 5);
        assert_eq!(server.status().folding, 1, "a pass folded it after the end");
        assert!(server.finish(Duration::from_secs(10)).programs.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
