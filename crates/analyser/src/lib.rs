//! Hark's MPI analyser runtime: the analyser ranks of an MPI job
//! (`hark run --analysers`, which starts them as the hidden
//! `hark mpi-analyser` subcommand; `docs/analysers.md`).
//!
//! Besnard et al., *Event Streaming for Online Performance Measurements
//! Reduction* (sections II and III-A): the analysers are one more context of
//! the program's MPMD job, the last `n` ranks of the real world. Each
//! receives the streams of its writers (the map is `hark_wire::partition::
//! job_map`, under `--map`) over MPI and feeds each stream's bytes, unchanged, into an
//! analysis server of its own through a local socket: the same Sink path as
//! `hark run` without analysers (Hello, frames, End, accounting). At the end
//! each rank's per-program partial results go to analyser rank 0, which
//! merges them (names, communicators and files unified) and writes the run
//! directory.
//!
//! At `MPI_Init` every probe of the job makes collective calls on the real
//! world; an analyser makes the same ones, in the same order, or the job
//! hangs: the split by `MPI_APPNUM` (virtualised worlds), the stream
//! communicator's duplicate, the `MPI_Allgather` of every process's node
//! and program on it (the map's input), then the clock's duplicate. The
//! clock's ping-pong on it involves the writers only
//! (`hark_wire::partition::clock_plan`): nothing of an analyser's is
//! measured, so it never pings.
//!
//! The rooms: [`run`] is one analyser rank (its receive loop is in this
//! file); `keeper` holds the rank's analysis server in a process that
//! outlives the rank, so that a job its launcher ended still leaves a run
//! ([`salvage`] merges what the keepers left); `merge` merges the ranks'
//! results (a binomial tree or a gather, [`Mode`]); `snapshots` merges the
//! live snapshots and [`Relay`] is `hark run`'s end of them; `exchange`
//! moves the cross-rank entries between analyser ranks while the job runs.
//! MPI is reached only through `hark_mpi`, opened at run time. Launching
//! the job (the `mpirun` command line with the analyser partition) is the
//! `hark` binary's.
//!
//! ```no_run
//! let options = hark_analyser::Options {
//!     mpi_lib: "libmpi.so.40".into(),
//!     analysers: 2,
//!     map: hark_wire::partition::Policy::parse("same-node").unwrap(),
//!     pack_size: 1 << 20,
//!     output: "hark-app-run".into(),
//!     analyses: Vec::new(),
//!     merge: hark_analyser::Mode::Tree,
//!     hark: None,
//!     live: false,
//!     verbose: false,
//! };
//! // Only inside an MPI job started with the analyser partition.
//! let status = hark_analyser::run(&options)?;
//! # Ok::<(), hark_analyser::Error>(())
//! ```

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod costs;
mod end;
mod error;
mod exchange;
mod keeper;
mod merge;
mod relay;
mod snapshots;

pub use error::{Error, ErrorKind, Result};
pub use keeper::{clean, salvage, Salvage};
pub use merge::Mode;
pub use relay::Relay;

use error::{bail, Context};
use hark_mpi::call as mpi_call;
use hark_mpi::Abi;
use hark_wire::partition::{job_map, stream_chunk, Policy, GIVE_UP_TAG, STREAM_RECVS, STREAM_TAG};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The analysers' colour in the split of the world into virtualised
/// worlds: above any `MPI_APPNUM`.
const ANALYSER_COLOUR: i32 = i32::MAX;

/// The tag of the partial results sent to analyser rank 0 (stream
/// communicator).
const PARTIAL_TAG: i32 = STREAM_TAG + 1;

/// The analyser's pause between polls when nothing arrived, doubling from
/// the first to the second while nothing does.
const IDLE_MIN: Duration = Duration::from_micros(20);
const IDLE_MAX: Duration = Duration::from_millis(2);

/// What one analyser rank is told (`hark mpi-analyser`'s options, which
/// `hark run --analysers` writes).
#[derive(Debug, Clone)]
pub struct Options {
    /// The MPI library to open (`libmpi.so.40`, `libmpich.so.12`).
    pub mpi_lib: String,
    /// Analyser ranks in the job (the last ones of the world).
    pub analysers: u32,
    /// How writers are mapped to analysers (the probes read the same
    /// choice from `HARK_MPI_MAP`).
    pub map: Policy,
    /// The probes' pack size in bytes.
    pub pack_size: usize,
    /// The run directory: where the keepers leave their partial results
    /// when it is on a file system their node shares, and where analyser
    /// rank 0 writes the run when it cannot reach `hark run`.
    pub output: PathBuf,
    /// Analyses to run (empty: all).
    pub analyses: Vec<String>,
    /// How the ranks' results merge.
    pub merge: Mode,
    /// Where analyser rank 0 reaches `hark run` ([`Relay::addresses`]):
    /// the merged model goes there, and the live snapshots with `live`.
    /// None: rank 0 writes the run directory into `output` itself.
    pub hark: Option<String>,
    /// Send live snapshots to `hark run` about once a second.
    pub live: bool,
    /// Say on stderr which writers this rank receives, its events and CPU
    /// time, and (analyser rank 0) how long the merge took (`hark run -v`).
    pub verbose: bool,
}

/// Writes `text` on stderr, ignoring failures (there is nowhere left to
/// report them).
fn say(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Runs one analyser rank; returns its exit status.
pub fn run(args: &Options) -> Result<i32> {
    test_match_bound();
    // First, while this process has one thread and no MPI: the server's
    // process, which outlives this rank (keeper.rs).
    let keeper = start_keeper(args)?;
    let abi = hark_mpi::load(&args.mpi_lib)
        .map_err(|e| Error::caused_by(ErrorKind::Library, "an analyser rank cannot start", e))?;
    if !mpi_call::init() {
        bail!(Mpi, "MPI_Init failed in an analyser rank");
    }
    let (rank, size) = mpi_call::rank_size(abi.comm_world);
    let Joined {
        streams,
        places,
        clock,
    } = join_probes(abi, rank, size)?;

    let map = job_map(&places, args.analysers, args.map).context(
        ErrorKind::Job,
        "the job is smaller than its analyser partition",
    )?;
    let writers = map.writers_of(rank as u32);
    if args.verbose {
        say_writers(args, rank, &places, &writers);
    }
    let first = size - args.analysers as i32;

    keeper.set_index((rank - first) as u32);
    let routed = route_exchange(args, &keeper, &map, rank, first)?;
    let link = std::sync::Arc::new(std::sync::Mutex::new(match rank == first {
        true => end::link(args),
        false => None,
    }));
    let mut conns = connect_writers(&keeper, writers.len())?;
    let peers = Peers {
        analysers: (first..size).collect(),
        rank0_at: map.analyser_of(0).map_or(first, |a| a as i32),
        me: rank,
    };
    let group = merge::Group {
        peers: &peers,
        mode: args.merge,
    };
    let analyses = (!args.analyses.is_empty()).then(|| args.analyses.clone());
    let mut exchanger = if routed {
        Some(exchange::Exchanger::new(
            abi,
            streams,
            (rank - first) as u32,
            &peers.analysers,
            writers.len() as u64,
        )?)
    } else {
        None
    };
    // What the receive loop has to say for the run's diagnostics (streams
    // their writers gave up).
    let mut notes = Vec::new();
    let (took, ended_ns, given_up) = std::thread::scope(|scope| -> Result<_> {
        let mut snaps = args.live.then(|| {
            snapshots::Snapshots::new(
                abi,
                streams,
                &group,
                &keeper,
                scope,
                analyses.clone(),
                Some(link.clone()),
            )
        });
        let given_up = receive(Receive {
            abi,
            comm: streams,
            writers: &writers,
            conns: &mut conns,
            pack_size: args.pack_size,
            keeper: &keeper,
            peers: &peers,
            snaps: snaps.as_mut(),
            exchanger: exchanger.as_mut(),
            notes: &mut notes,
        })?;
        let ended_ns = realtime_ns();
        match snaps {
            Some(mut s) => {
                s.finish()?;
                Ok((std::mem::take(&mut s.took), ended_ns, given_up))
            }
            None => Ok((Vec::new(), ended_ns, given_up)),
        }
    })?;
    end::test_delay();
    let ended = std::time::Instant::now();
    drop(conns);
    let mine = rank_share(rank - first, exchanger, keeper, notes, ended_ns)?;
    let finished = ended.elapsed();
    if args.verbose {
        let (events, cpu) = (costs::events(&mine.programs), costs::cpu());
        say(&format!(
            "hark: analyser rank {rank}: {events} events from {} writer(s), {:.1} ms CPU (the rank and its keeper); {}\n",
            writers.len(),
            cpu.as_secs_f64() * 1e3,
            hark_os::cpu_rate(events, cpu)
        ));
    }
    let merged = merge::reduce(abi, streams, &group, mine, analyses.as_deref())?;
    // Analyser 0 delivers the run before anyone is released: the job's
    // end then means the model is with `hark run` (or written here).
    let delivered = match merged {
        Some(share) => {
            let mut link = hark_sync::lock(&link);
            let writers = first as u32;
            write_merged(args, share, writers, (&took, finished), link.as_mut())
        }
        None => Ok(()),
    };
    end::release(abi, streams, &peers, &writers, &given_up);
    if let Some(c) = clock {
        mpi_call::comm_free(c);
    }
    mpi_call::comm_free(streams);
    end::finalize_log(rank);
    mpi_call::finalize();
    delivered?;
    Ok(0)
}

/// The run's secret, from `HARK_ADDR` (`SECRET@mpi:`), when there is one.
fn run_secret() -> Option<String> {
    std::env::var(hark_settings::ADDR.name)
        .ok()
        .and_then(|a| a.split_once('@').map(|(s, _)| s.to_string()))
}

/// Starts the rank's keeper (the server's process, `keeper.rs`), with the
/// run's secret from `HARK_ADDR` when there is one.
fn start_keeper(args: &Options) -> Result<keeper::Keeper> {
    let secret = run_secret();
    keeper::Keeper::start(
        &args.output,
        (!args.analyses.is_empty()).then(|| args.analyses.clone()),
        secret,
    )
}

/// Whether the setting `k` is set to a false value.
fn setting_off(k: &str) -> bool {
    matches!(
        std::env::var(k).as_deref().map(str::trim),
        Ok("0" | "no" | "false" | "off")
    )
}

/// Whether the setting `k` is set to a true value.
fn setting_on(k: &str) -> bool {
    matches!(
        std::env::var(k).as_deref().map(str::trim),
        Ok("1" | "yes" | "true" | "on")
    )
}

/// What an analyser rank holds once it made the probes' init-time
/// collectives.
struct Joined {
    /// The stream communicator.
    streams: usize,
    /// Every process's node and program, in world ranks (the map's input).
    places: Vec<hark_wire::partition::Place>,
    /// The clock's communicator, unless `HARK_CLOCK_SYNC=0`.
    clock: Option<usize>,
}

/// Makes the probes' init-time collectives, in their order (see the module
/// documentation).
fn join_probes(abi: &Abi, rank: i32, size: i32) -> Result<Joined> {
    let world = abi.comm_world;
    // Virtualised, each program's colour is its MPI_APPNUM, and the
    // analysers take one no program has (under srun's --multi-prog every
    // task has MPI_APPNUM 0); under --no-virtualise, the partition
    // (writers 0, analysers 1).
    let colour = if setting_on(hark_settings::VIRTUALISE.name) {
        ANALYSER_COLOUR
    } else {
        1
    };
    mpi_call::comm_split(abi, world, colour, rank).context(
        ErrorKind::Mpi,
        "MPI_Comm_split of the world failed in an analyser rank",
    )?;
    let streams = mpi_call::comm_dup(abi, world).context(
        ErrorKind::Mpi,
        "MPI_Comm_dup of the world failed in an analyser rank",
    )?;
    // Errors on Hark's own communicators come back as errors (each call
    // below says which failed) instead of ending the job from inside MPI.
    mpi_call::errors_return(abi, streams);
    let places = mpi_call::gather_places(abi, streams, rank, size).context(
        ErrorKind::Mpi,
        "MPI_Allgather of the processes' nodes failed in an analyser rank",
    )?;
    let clock = if setting_off(hark_settings::CLOCK_SYNC.name) {
        None
    } else {
        let comm = mpi_call::comm_dup(abi, world).context(
            ErrorKind::Mpi,
            "MPI_Comm_dup of the world failed in an analyser rank",
        )?;
        mpi_call::errors_return(abi, comm);
        if rank == 0 {
            bail!(
                Job,
                "an analyser rank is world rank 0; the analysers must come after the programs"
            );
        }
        Some(comm)
    };
    Ok(Joined {
        streams,
        places,
        clock,
    })
}

/// `hark run -v`: which writers this rank receives.
fn say_writers(args: &Options, rank: i32, places: &[hark_wire::partition::Place], writers: &[u32]) {
    let list: Vec<String> = writers.iter().map(|w| w.to_string()).collect();
    say(&format!(
        "hark: analyser rank {rank} (node {:08x}) receives writers {} ({} map)\n",
        places[rank as usize].node,
        list.join(","),
        args.map.name()
    ));
}

/// Tells the keeper which analyser owns each world rank when several
/// analysers exchange the cross-rank entries whose key another one owns
/// (`exchange.rs`); returns whether they do. The owner of a world rank is
/// the analyser its stream goes to. Set up before any writer's stream
/// connects. `HARK_EXCHANGE=0` leaves every match to the end-of-run merge
/// (to measure what the exchange costs, docs/analysers.md).
fn route_exchange(
    args: &Options,
    keeper: &keeper::Keeper,
    map: &hark_wire::partition::Map,
    rank: i32,
    first: i32,
) -> Result<bool> {
    let routed = args.analysers > 1 && !setting_off(hark_settings::EXCHANGE.name);
    if routed {
        let owners: Vec<u32> = (0..first as u32)
            .map(|r| {
                map.analyser_of(r)
                    .map_or(rank - first, |a| a as i32 - first) as u32
            })
            .collect();
        keeper.exchange((rank - first) as u32, args.analysers, &owners)?;
    }
    Ok(routed)
}

/// One connection to the keeper's server per writer.
fn connect_writers(keeper: &keeper::Keeper, writers: usize) -> Result<Vec<Option<UnixStream>>> {
    let mut conns = Vec::new();
    for _ in 0..writers {
        conns.push(Some(UnixStream::connect(keeper.socket()).context(
            ErrorKind::Keeper,
            "cannot reach the analyser's own server",
        )?));
    }
    Ok(conns)
}

/// This rank's partial results once its streams ended: the keeper's, with
/// the exchange's problems and the receive loop's `notes`.
fn rank_share(
    index: i32,
    exchanger: Option<exchange::Exchanger<'_>>,
    keeper: keeper::Keeper,
    notes: Vec<String>,
    ended_ns: u64,
) -> Result<merge::Share> {
    let exchange_problems = exchanger.as_ref().map(|e| e.problems.clone());
    if let Some(e) = &exchanger {
        exchange_stats(index, e, &keeper);
    }
    drop(exchanger);
    let (programs, mut problems) = keeper::decode_partials(&keeper.finish()?)?;
    problems.extend(exchange_problems.into_iter().flatten());
    problems.extend(notes);
    Ok(merge::Share {
        programs,
        problems,
        ended_ns,
    })
}

/// Analyser rank 0: folds the merged results and sends the run to `hark
/// run` over `link`, or writes the run directory itself when it cannot.
///
/// `writers`: the job's processes less the analysers; those whose stream
/// never arrived are the run's missing ranks, as `hark run` says them
/// without analysers.
fn write_merged(
    args: &Options,
    share: merge::Share,
    writers: u32,
    (took, finished): (&[Duration], Duration),
    link: Option<&mut relay::Link>,
) -> Result<()> {
    let analyses = (!args.analyses.is_empty()).then_some(args.analyses.as_slice());
    let mut run = hark_server::fold_merged(share.programs, share.problems, analyses, false)
        .context(ErrorKind::Merge, "cannot merge the analysers' results")?;
    run.missing = hark_server::missing_writers(&run, job_name(), writers);
    if args.verbose {
        say_merge_times(args.analysers, args.merge, share.ended_ns, took, finished);
    }
    end::deliver(args, link, &run)
}

/// The job's name as its writers' handshakes give it, where the launcher
/// says it in every rank's environment (`HARK_JOB`'s list); empty
/// otherwise (a run under `--analysers` is one job: the name is shown only
/// beside another's).
fn job_name() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    var(hark_settings::JOB.name)
        .or_else(|| var("PMIX_NAMESPACE"))
        .or_else(|| var("PMI_KVSNAME"))
        .unwrap_or_default()
}

/// `hark run -v`: how long the merge of the results, and of the live
/// snapshots, took.
fn say_merge_times(
    analysers: u32,
    mode: Mode,
    ended_ns: u64,
    took: &[Duration],
    finished: Duration,
) {
    let after = realtime_ns().saturating_sub(ended_ns);
    say(&format!(
        "hark: {} analyser(s) merged by {} in {:.1} ms after the last stream ended (this rank's own fold {:.1} ms)\n",
        analysers,
        mode.name(),
        after as f64 / 1e6,
        finished.as_secs_f64() * 1e3,
    ));
    if !took.is_empty() {
        let mut t = took.to_vec();
        t.sort();
        say(&format!(
            "hark: {} live snapshot(s) merged by {}, median {:.1} ms, longest {:.1} ms\n",
            t.len(),
            mode.name(),
            t[t.len() / 2].as_secs_f64() * 1e3,
            t[t.len() - 1].as_secs_f64() * 1e3,
        ));
    }
}

/// `CLOCK_REALTIME` in ns: the analysers of a job compare their ends by it.
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Request handles of the flavour's size, side by side, as `MPI_Waitany`
/// takes them.
struct Requests {
    bytes: Vec<u8>,
    size: usize,
}

impl Requests {
    fn new(abi: &Abi, n: usize) -> Requests {
        let mut r = Requests {
            bytes: vec![0; n * abi.handle_size],
            size: abi.handle_size,
        };
        for i in 0..n {
            r.set_null(abi, i);
        }
        r
    }

    fn at(&mut self, i: usize) -> *mut u8 {
        self.bytes[i * self.size..].as_mut_ptr()
    }

    fn is_null(&self, abi: &Abi, i: usize) -> bool {
        let v = abi.request_null.to_le_bytes();
        self.bytes[i * self.size..(i + 1) * self.size] == v[..self.size]
    }

    fn set_null(&mut self, abi: &Abi, i: usize) {
        let v = abi.request_null.to_le_bytes();
        let size = self.size;
        self.bytes[i * size..(i + 1) * size].copy_from_slice(&v[..size]);
    }
}

/// The analyser partition, in world ranks.
struct Peers {
    analysers: Vec<i32>,
    /// The analyser that receives world rank 0's stream.
    rank0_at: i32,
    me: i32,
}

/// The tag of world rank 0's clock reference, sent by the analyser that
/// receives its stream to the others (stream communicator).
const REFERENCE_TAG: i32 = STREAM_TAG + 2;

/// Bytes of a reference message: the offset, then the job's name.
const REFERENCE_MAX: usize = 4096;

/// What the receive loop works on, given by [`run`].
struct Receive<'a, 'x, 'scope, 'env> {
    abi: &'a Abi,
    /// The stream communicator.
    comm: usize,
    /// The world ranks whose streams this rank receives.
    writers: &'a [u32],
    /// Per writer: its connection to the keeper's server.
    conns: &'a mut [Option<UnixStream>],
    /// The probes' pack size in bytes.
    pack_size: usize,
    keeper: &'a keeper::Keeper,
    peers: &'a Peers,
    snaps: Option<&'a mut snapshots::Snapshots<'scope, 'env>>,
    exchanger: Option<&'a mut exchange::Exchanger<'x>>,
    /// What the loop has to say for the run's diagnostics.
    notes: &'a mut Vec<String>,
}

/// Receives every writer's stream into its connection. The analyser that receives
/// world rank 0's stream passes its clock reference (its Hello's mapping,
/// `docs/analyses.md` "Time") to the others, whose servers never see that
/// stream.
///
/// Returns the writers (world ranks) that gave up their streams.
fn receive(job: Receive<'_, '_, '_, '_>) -> Result<Vec<u32>> {
    let mut r = Receiver::new(job);
    r.post_notices()?;
    r.post_reference()?;
    r.post_streams()?;
    while r.busy() {
        r.step()?;
    }
    r.cancel_missing_notices();
    let writers = r.job.writers;
    Ok((r.gave_up.iter().zip(writers))
        .filter(|(g, _)| g.is_some())
        .map(|(_, &w)| w)
        .collect())
}

/// The receive loop's requests, buffers and per-writer progress.
///
/// The request slots: `STREAM_RECVS` per writer; one more: the reference
/// from the analyser of world rank 0; then one per writer: its notice that
/// it gave up its stream (`GIVE_UP_TAG`). Every buffer a posted receive writes
/// into is on the heap, so that the receiver may move.
struct Receiver<'a, 'x, 'scope, 'env> {
    job: Receive<'a, 'x, 'scope, 'env>,
    chunk: usize,
    slots: usize,
    reference: usize,
    notice: usize,
    total: usize,
    reqs: Requests,
    /// Leaked: a notice may come after its stream ended (its receive is
    /// then cancelled, which may fail once the notice matched), so its
    /// buffer must never be freed under MPI. 8 bytes per writer, once per
    /// run.
    notices: &'static mut [u8],
    // Per writer: chunks taken (the end included), whether its stream is
    // over, the chunks it started before it gave up, if it did, and
    // whether its notice came.
    taken: Vec<u64>,
    over: Vec<bool>,
    gave_up: Vec<Option<u64>>,
    noticed: Vec<bool>,
    reference_buf: Vec<u8>,
    reference_pending: bool,
    rank0_hello_seen: bool,
    bufs: Vec<Vec<u8>>,
    /// Writers whose streams are not over.
    open: usize,
    /// Per slot: the byte count of a receive completed and not yet used.
    done: Vec<Option<usize>>,
    /// Per writer: the slot its next chunk arrives in.
    next: Vec<usize>,
    status: Vec<u8>,
    idle: Duration,
    /// Requests handled since the snapshots and the exchange were last
    /// moved on. They are moved on once every request that had completed
    /// was handled (or after `total` in a row), not between two: a pass of
    /// the exchange may wait for the keeper (an injection), and a writer
    /// whose chunks came after another's then waited for one pass per
    /// chunk of the other (`MPI_Testany` returns the lowest completed
    /// index), with the time its analyser took none counting towards its
    /// drain timeout at `MPI_Finalize`.
    streak: usize,
}

impl<'a, 'x, 'scope, 'env> Receiver<'a, 'x, 'scope, 'env> {
    /// The loop's state, nothing posted yet.
    fn new(job: Receive<'a, 'x, 'scope, 'env>) -> Self {
        let n = job.writers.len();
        let chunk = stream_chunk(job.pack_size);
        let slots = n * STREAM_RECVS;
        let notice = slots + 1;
        let total = notice + n;
        Receiver {
            chunk,
            slots,
            reference: slots,
            notice,
            total,
            reqs: Requests::new(job.abi, total),
            notices: Box::leak(vec![0u8; 8 * n].into_boxed_slice()),
            taken: vec![0u64; n],
            over: vec![false; n],
            gave_up: vec![None; n],
            noticed: vec![false; n],
            reference_buf: vec![0u8; REFERENCE_MAX],
            reference_pending: job.peers.me != job.peers.rank0_at,
            rank0_hello_seen: false,
            bufs: (0..slots).map(|_| vec![0u8; chunk]).collect(),
            open: n,
            done: vec![None; slots],
            next: vec![0usize; n],
            status: vec![0u8; job.abi.status_size.max(32)],
            idle: IDLE_MIN,
            streak: 0,
            job,
        }
    }

    /// Posts the receive of every writer's give-up notice.
    fn post_notices(&mut self) -> Result<()> {
        let (abi, comm, writers) = (self.job.abi, self.job.comm, self.job.writers);
        for (w, buf) in self.notices.chunks_mut(8).enumerate() {
            // SAFETY: the buffer is never freed; the handle slot lives until
            // the request completes or is cancelled below.
            if !unsafe {
                mpi_call::irecv_bytes(
                    abi,
                    buf.as_mut_ptr(),
                    8,
                    writers[w] as i32,
                    GIVE_UP_TAG,
                    comm,
                    self.reqs.at(self.notice + w),
                )
            } {
                bail!(Mpi, "MPI_Irecv failed in an analyser rank");
            }
        }
        Ok(())
    }

    /// Posts the receive of world rank 0's clock reference, unless this
    /// rank receives its stream.
    fn post_reference(&mut self) -> Result<()> {
        let peers = self.job.peers;
        if peers.me == peers.rank0_at {
            return Ok(());
        }
        // SAFETY: the buffer lives until the request completes or is
        // cancelled at the end of `receive`.
        let posted = unsafe {
            mpi_call::irecv_bytes(
                self.job.abi,
                self.reference_buf.as_mut_ptr(),
                REFERENCE_MAX,
                peers.rank0_at,
                REFERENCE_TAG,
                self.job.comm,
                self.reqs.at(self.reference),
            )
        };
        if !posted {
            bail!(Mpi, "MPI_Irecv failed in an analyser rank");
        }
        Ok(())
    }

    /// Posts the first receives of every writer's stream.
    fn post_streams(&mut self) -> Result<()> {
        for j in 0..self.slots {
            self.post_chunk(j / STREAM_RECVS, j)?;
        }
        Ok(())
    }

    /// Posts the receive of slot `j`, one of writer `w`'s ring.
    #[inline]
    fn post_chunk(&mut self, w: usize, j: usize) -> Result<()> {
        let w = self.job.writers[w] as i32;
        // SAFETY: the buffer and the handle slot live until the request
        // completes or is cancelled.
        if !unsafe {
            mpi_call::irecv_bytes(
                self.job.abi,
                self.bufs[j].as_mut_ptr(),
                self.chunk,
                w,
                STREAM_TAG,
                self.job.comm,
                self.reqs.at(j),
            )
        } {
            bail!(Mpi, "MPI_Irecv failed in an analyser rank");
        }
        Ok(())
    }

    /// Whether anything is still to come: a stream, the reference or the
    /// exchange.
    #[inline]
    fn busy(&self) -> bool {
        self.open > 0
            || self.reference_pending
            || self.job.exchanger.as_ref().is_some_and(|e| !e.done())
    }

    /// One pass of the loop: moves the snapshots and the exchange on when
    /// a streak ended, then handles one completed request, if any.
    #[inline]
    fn step(&mut self) -> Result<()> {
        if self.streak == 0 {
            self.move_on()?;
        }
        let peers = self.job.peers;
        if self.open == 0 && peers.me == peers.rank0_at && !self.rank0_hello_seen {
            // World rank 0's stream ended without a Hello: the others must
            // not wait for its reference.
            self.rank0_hello_seen = true;
            pass_reference(self.job.abi, &[], self.job.comm, peers);
        }
        let Some(i) = self.completed()? else {
            return Ok(());
        };
        if i == self.reference {
            self.take_reference()
        } else if i >= self.notice {
            self.take_notice(i - self.notice)
        } else {
            self.take_chunk(i)
        }
    }

    /// Polls the live snapshots and moves the exchange on.
    fn move_on(&mut self) -> Result<()> {
        if let Some(s) = self.job.snaps.as_deref_mut() {
            s.poll()?;
        }
        if let Some(e) = self.job.exchanger.as_deref_mut() {
            if e.progress(self.job.keeper, self.open == 0)? {
                self.idle = IDLE_MIN;
            }
        }
        Ok(())
    }

    /// The slot of a completed request, its status in `status`; none when
    /// nothing completed (after a pause, unless a streak just ended).
    #[inline]
    fn completed(&mut self) -> Result<Option<usize>> {
        // While the exchange holds back the streams, only the reference's
        // request is tested: the writers' chunks stay in
        // their receives (see `Exchanger::holds_back`).
        let held = self
            .job
            .exchanger
            .as_deref_mut()
            .is_some_and(|e| e.holds_back());
        let first = if held { self.slots } else { 0 };
        // Polled with a growing pause rather than waited for: a blocking
        // MPI_Waitany spins a core the programs' ranks need.
        // SAFETY: `reqs` holds `total` handles, `status` one status.
        match unsafe {
            mpi_call::testany(
                self.total - first,
                self.reqs.at(first),
                self.status.as_mut_ptr(),
            )
        } {
            Some(Some(i)) => {
                self.idle = IDLE_MIN;
                self.streak = (self.streak + 1) % self.total;
                Ok(Some(first + i))
            }
            Some(None) => {
                if self.streak > 0 {
                    // Everything that had completed was handled.
                    self.streak = 0;
                    return Ok(None);
                }
                std::thread::sleep(self.idle);
                self.idle = (self.idle * 2).min(IDLE_MAX);
                Ok(None)
            }
            None => bail!(Mpi, "MPI_Testany failed in an analyser rank"),
        }
    }

    /// The byte count of the completed receive whose status is in `status`.
    #[inline]
    fn received(&mut self) -> usize {
        // SAFETY: MPI wrote a whole status.
        let (_, _, n) = unsafe { self.job.abi.read_status(self.status.as_mut_ptr() as usize) };
        n as usize
    }

    /// World rank 0's clock reference arrived: the keeper's server takes it.
    fn take_reference(&mut self) -> Result<()> {
        self.reference_pending = false;
        let n = self.received();
        let msg = &self.reference_buf[..n.min(REFERENCE_MAX)];
        if msg.len() >= 8 {
            let r = i64::from_le_bytes(msg[..8].try_into()?);
            self.job
                .keeper
                .set_clock_reference(&String::from_utf8_lossy(&msg[8..]), r);
        }
        Ok(())
    }

    /// Writer `w` gave up its stream: it ends once every chunk it started
    /// arrived.
    fn take_notice(&mut self, w: usize) -> Result<()> {
        let n = u64::from_le_bytes(self.notices[8 * w..8 * w + 8].try_into()?);
        self.noticed[w] = true;
        if !self.over[w] {
            self.gave_up[w] = Some(n);
            self.end_given_up(w);
        }
        Ok(())
    }

    /// Slot `i`'s chunk arrived. The writer's receives match its chunks in
    /// the order they were posted (a ring of `STREAM_RECVS` slots), but
    /// complete in any order: the bytes go out in posting order.
    #[inline]
    fn take_chunk(&mut self, i: usize) -> Result<()> {
        let w = i / STREAM_RECVS;
        self.done[i] = Some(self.received());
        while let Some(n) = self.done[w * STREAM_RECVS + self.next[w]].take() {
            let j = w * STREAM_RECVS + self.next[w];
            self.taken[w] += 1;
            if n == 0 {
                self.end_stream(w, j);
                break;
            }
            self.pass_on(w, j, n);
            self.post_chunk(w, j)?;
            self.next[w] = (self.next[w] + 1) % STREAM_RECVS;
        }
        self.end_given_up(w);
        Ok(())
    }

    /// Writer `w`'s chunk in slot `j`, `n` bytes, goes to its connection
    /// (and, world rank 0's first, gives the clock reference).
    #[inline]
    fn pass_on(&mut self, w: usize, j: usize, n: usize) {
        if self.job.writers[w] == 0 && !self.rank0_hello_seen {
            self.rank0_hello_seen = true;
            pass_reference(
                self.job.abi,
                &self.bufs[j][..n],
                self.job.comm,
                self.job.peers,
            );
        }
        if let Some(c) = &mut self.job.conns[w] {
            if c.write_all(&self.bufs[j][..n]).is_err() {
                // The local server refused the stream: it says why in
                // the run's diagnostics; the rest is received and dropped.
                self.job.conns[w] = None;
            }
        }
    }

    /// Writer `w`'s end of stream arrived in slot `j`: its other receives
    /// are cancelled and its connection shut.
    fn end_stream(&mut self, w: usize, j: usize) {
        let abi = self.job.abi;
        for k in 0..STREAM_RECVS {
            let o = w * STREAM_RECVS + k;
            if o != j && !self.reqs.is_null(abi, o) {
                // SAFETY: a live receive request of this rank.
                unsafe { mpi_call::cancel(abi, self.reqs.at(o)) };
            }
            self.reqs.set_null(abi, o);
        }
        if let Some(c) = self.job.conns[w].take() {
            let _ = c.shutdown(std::net::Shutdown::Write);
        }
        self.open -= 1;
        self.over[w] = true;
    }

    /// Ends writer `w`'s stream as cut once it gave up (its notice, see
    /// `GIVE_UP_TAG`) and every chunk it started arrived: its other
    /// receives are cancelled and its connection shut without an end, so
    /// that the server marks the rank partial, as it does a killed rank's;
    /// the run's diagnostics say why.
    #[inline]
    fn end_given_up(&mut self, w: usize) {
        let Some(started) = self.gave_up[w] else {
            return;
        };
        if self.over[w] || self.taken[w] < started {
            return;
        }
        let abi = self.job.abi;
        for k in 0..STREAM_RECVS {
            let o = w * STREAM_RECVS + k;
            // Every chunk it started was taken, so each receive is posted
            // again and none can match any more; a completed one (null) is
            // left alone (MPI_Cancel refuses a null request).
            if !self.reqs.is_null(abi, o) {
                // SAFETY: a live receive request of this rank; its buffer
                // lives until `receive` returns.
                unsafe { mpi_call::cancel(abi, self.reqs.at(o)) };
            }
            self.reqs.set_null(abi, o);
        }
        self.job.conns[w] = None;
        self.open -= 1;
        self.over[w] = true;
        self.job.notes.push(format!(
            "world rank {} gave up its stream at MPI_Finalize after {started} chunk(s): its analyser took none for the drain timeout (HARK_DRAIN_TIMEOUT_MS); what it had not sent is lost and its rank is partial",
            self.job.writers[w]
        ));
    }

    /// Cancels the receives of the notices that never came.
    fn cancel_missing_notices(&mut self) {
        for w in 0..self.noticed.len() {
            if !self.noticed[w] {
                // SAFETY: a live receive request of this rank (its buffer is
                // leaked).
                unsafe { mpi_call::cancel(self.job.abi, self.reqs.at(self.notice + w)) };
            }
        }
    }
}

/// World rank 0's first chunk, which starts with its Hello: sends the clock
/// reference it gives (what `timeline_offset` computes for a server that
/// trusts the probe's realtime reading) to every other analyser.
/// An empty message says there is none.
fn pass_reference(abi: &Abi, first_chunk: &[u8], comm: usize, peers: &Peers) {
    let mut frames = hark_wire::FrameReader::new(first_chunk);
    let mut msg = Vec::new();
    if let Ok(Some(hark_wire::Frame::Hello(h))) = frames.next_frame() {
        msg.extend(
            (h.realtime_ns as i64)
                .saturating_sub(h.clock_ns as i64)
                .to_le_bytes(),
        );
        msg.extend(h.job.as_bytes());
    }
    msg.truncate(REFERENCE_MAX);
    for &a in peers.analysers.iter().filter(|&&a| a != peers.me) {
        // Small, and the peer's receive is posted from its start.
        mpi_call::send_bytes(abi, &msg, a, REFERENCE_TAG, comm);
    }
}

/// `HARK_TEST_MATCH_BOUND=N`, **for tests only** (`hark run` calls it too): each matching key holds
/// at most N unmatched operations instead of 65 536, so that a short test
/// run exceeds the bound (`docs/analysers.md`).
/// Does nothing unless built with the `test-hooks` feature.
pub fn test_match_bound() {
    #[cfg(feature = "test-hooks")]
    if let Some(n) = std::env::var("HARK_TEST_MATCH_BOUND")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        hark_engine::matching::set_held_bound_for_tests(n);
    }
}

/// With `HARK_EXCHANGE_STATS=1`, one line on stderr of what this analyser
/// exchanged with the others (for `BENCHMARKS.md`).
fn exchange_stats(index: i32, e: &exchange::Exchanger, keeper: &keeper::Keeper) {
    if std::env::var(hark_settings::EXCHANGE_STATS.name).as_deref() != Ok("1") {
        return;
    }
    // One write, so that two ranks' lines do not interleave mid-line.
    say(&format!(
        "hark exchange: analyser {index} sent {} messages, {} bytes ({}); received {} messages, {} bytes, injected in {} requests; at most {} bytes waited to reach a peer; streams held back {} ms ({} holds cut at their longest); longest pass {} ms\n",
        e.sent.messages,
        e.sent.bytes,
        keeper.exchange_traffic(),
        e.received.messages,
        e.received.bytes,
        e.injects,
        e.peak_backlog,
        e.held_back.as_millis(),
        e.breaths,
        e.longest_pass.as_millis()
    ));
}

/// A private directory for the rank's server socket.
pub(crate) fn tempdir() -> Result<PathBuf> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let d = base.join(format!("hark-analyser-{}-{i}", std::process::id()));
        if std::fs::create_dir(&d).is_ok() {
            return Ok(d);
        }
    }
    bail!(Io, "cannot create a directory under {}", base.display())
}

/// A rank's partial results and diagnostics as one message.
pub(crate) fn encode(partials: &[Vec<u8>], problems: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend((partials.len() as u64).to_le_bytes());
    for p in partials {
        out.extend((p.len() as u64).to_le_bytes());
        out.extend(p);
    }
    out.extend((problems.len() as u64).to_le_bytes());
    for p in problems {
        out.extend((p.len() as u64).to_le_bytes());
        out.extend(p.as_bytes());
    }
    out
}

/// Reverses [`encode`].
pub(crate) fn decode(bytes: &[u8]) -> Result<(Vec<Vec<u8>>, Vec<String>)> {
    struct Cursor<'a>(&'a [u8]);
    impl<'a> Cursor<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8]> {
            if self.0.len() < n {
                bail!(Message, "a partial result message is truncated");
            }
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Ok(head)
        }
        fn len(&mut self) -> Result<usize> {
            Ok(u64::from_le_bytes(self.take(8)?.try_into()?) as usize)
        }
    }
    let mut c = Cursor(bytes);
    let n = c.len()?;
    let mut partials = Vec::new();
    for _ in 0..n {
        let l = c.len()?;
        partials.push(c.take(l)?.to_vec());
    }
    let m = c.len()?;
    let mut problems = Vec::new();
    for _ in 0..m {
        let l = c.len()?;
        problems.push(String::from_utf8_lossy(c.take(l)?).into_owned());
    }
    Ok((partials, problems))
}

/// Sends a message of any length: its length, then its bytes.
fn send_message(abi: &Abi, bytes: &[u8], to: i32, comm: usize) -> Result<()> {
    if !mpi_call::send_bytes(
        abi,
        &(bytes.len() as u64).to_le_bytes(),
        to,
        PARTIAL_TAG,
        comm,
    ) {
        bail!(
            Mpi,
            "sending a partial result to analyser world rank {to} failed"
        );
    }
    for part in bytes.chunks(1 << 30) {
        if !mpi_call::send_bytes(abi, part, to, PARTIAL_TAG, comm) {
            bail!(
                Mpi,
                "sending a partial result to analyser world rank {to} failed"
            );
        }
    }
    Ok(())
}

/// Receives a message from [`send_message`].
fn recv_message(abi: &Abi, from: i32, comm: usize) -> Result<Vec<u8>> {
    let mut len = [0u8; 8];
    if !mpi_call::recv_bytes(abi, &mut len, from, PARTIAL_TAG, comm) {
        bail!(
            Mpi,
            "receiving a partial result from analyser world rank {from} failed"
        );
    }
    let mut out = vec![0u8; u64::from_le_bytes(len) as usize];
    for part in out.chunks_mut(1 << 30) {
        if !mpi_call::recv_bytes(abi, part, from, PARTIAL_TAG, comm) {
            bail!(
                Mpi,
                "receiving a partial result from analyser world rank {from} failed"
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_messages_decode_to_what_was_encoded() {
        let parts = vec![b"one".to_vec(), Vec::new(), vec![7u8; 1000]];
        let problems = vec!["a".to_string(), "bé".to_string()];
        let bytes = encode(&parts, &problems);
        assert!(decode(&bytes[..20]).is_err());
        assert_eq!(decode(&bytes).unwrap(), (parts, problems));
    }
}
