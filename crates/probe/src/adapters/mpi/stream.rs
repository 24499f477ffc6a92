//! Streams over MPI: the probe's bytes go to an analyser rank of the same
//! MPMD job instead of a socket (`HARK_ADDR=mpi:`, set by
//! `hark run --analysers`; `docs/analysers.md`).
//!
//! Besnard et al., *Event Streaming for Online Performance Measurements
//! Reduction* (sections II and III-A), stream each writer's packs to a
//! reader rank over MPI. Here the shipper thread encodes exactly what it
//! would write to a socket (Hello, definitions, packs, End) and hands the
//! bytes to [`MpiTransport`], which cuts them into chunks of at most one
//! pack and queues them. The chunks are sent **from the program's own MPI
//! calls**, never from the shipper: sending from a second thread needs
//! `MPI_THREAD_MULTIPLE`, which the program may not have asked for (and
//! which makes every MPI call of Open MPI and MPICH take locks). At the exit
//! of every recorded MPI call one relaxed load says whether there is work;
//! if so, [`progress`] tests the sends in flight and starts queued ones.
//! `MPI_Finalize` drains the stream before the real call.
//!
//! Sends are synchronous-mode (`MPI_Issend`): one completes only once the
//! analyser matched it to a receive it had pre-posted, so at most
//! [`STREAM_RECVS`] chunks per stream are unmatched at any time and the
//! analyser, which pre-posts that many receives, never holds more.
//! Back-pressure is the socket's: when the queue is full the shipper waits,
//! the pool empties, and the program drops (the default) or waits
//! (lossless, while it makes MPI calls: a waiting thread progresses the
//! sends itself when MPI allows it to, see [`progress_outside_a_call`]).
//!
//! The chunks travel on Hark's own duplicate of the real world, made at
//! `MPI_Init` by every process of the job (the analysers make the same
//! calls, in the same order: split, this duplicate, the gather of every
//! process's node and program on it, the clock's duplicate).

use super::abi::Abi;
use super::mpi_call;
use hark_wire::partition::{
    job_map, stream_chunk, ClockPlan, Policy, GIVE_UP_TAG, RELEASE_TAG, STREAM_RECVS, STREAM_TAG,
};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The stream goes over MPI (`HARK_ADDR=mpi:`), set at load.
static ON: AtomicBool = AtomicBool::new(false);
/// Chunks wait to be sent: the wrappers' cheap check. Sends in flight
/// alone do not set it: they complete through the progress the program's
/// own MPI calls make, and are tested only when the window is full.
static PENDING: AtomicBool = AtomicBool::new(false);
/// When (clock units, `core::stamp`) the wrappers last moved the stream on.
static LAST: AtomicU64 = AtomicU64::new(0);
/// Chunks the analyser took (sends known complete): the drain's sign that
/// the analyser is alive and moving.
static TAKEN: AtomicU64 = AtomicU64::new(0);
/// Least clock units between two progress calls from the wrappers: 50,000
/// (20 µs of a 2.5 GHz TSC, 50 µs of `CLOCK_MONOTONIC`). A test of a send
/// in flight enters MPI's progress engine, which costs microseconds, and
/// when ranks outnumber cores yields the processor: at every call of a
/// tight loop it would multiply the loop's time.
const INTERVAL: u64 = 50_000;
static OUT: Mutex<Out> = Mutex::new(Out::new());
static ROOM: Condvar = Condvar::new();

/// `MPI_THREAD_MULTIPLE`, the same in both libraries.
const THREAD_MULTIPLE: i32 = 3;

struct Out {
    /// The destination is known (after `MPI_Init`).
    ready: bool,
    comm: usize,
    dest: i32,
    /// Thread level granted, and the thread that initialised MPI.
    level: i32,
    init_thread: Option<libc::pthread_t>,
    waiting: VecDeque<Vec<u8>>,
    /// Sends started and not yet known to be complete, oldest first.
    flying: VecDeque<(usize, Vec<u8>)>,
    /// The zero-length chunk that ends the stream has been queued.
    closed: bool,
    /// Chunks whose send was started.
    started: u64,
    /// An MPI call failed: nothing more is sent.
    failed: bool,
}

impl Out {
    const fn new() -> Out {
        Out {
            ready: false,
            comm: 0,
            dest: -1,
            level: 0,
            init_thread: None,
            waiting: VecDeque::new(),
            flying: VecDeque::new(),
            closed: false,
            started: 0,
            failed: false,
        }
    }
}

fn lock() -> MutexGuard<'static, Out> {
    hark_sync::lock(&OUT)
}

/// Whether this process streams over MPI.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.load(Relaxed)
}

/// At load, for `HARK_ADDR=mpi:`.
pub(crate) fn switch_on() {
    ON.store(true, Relaxed);
}

/// The shipper's transport: chunks into the queue.
pub(crate) struct MpiTransport {
    chunk: usize,
}

impl MpiTransport {
    pub(crate) fn new(pack_size: usize) -> MpiTransport {
        MpiTransport {
            chunk: stream_chunk(pack_size),
        }
    }
}

impl crate::ship::transport::Transport for MpiTransport {
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        for part in bytes.chunks(self.chunk) {
            enqueue(part, self.chunk)?;
        }
        Ok(())
    }

    fn close(&mut self) {
        let _ = enqueue(&[], self.chunk);
    }
}

/// Queues `bytes`, appended to the last chunk not yet sent when the two fit
/// in `most` bytes, else as a chunk of its own, waiting while the queue is
/// full (the program's MPI calls empty it). The receiver reads the chunks
/// as one byte stream; appending keeps small writes (a new call site's
/// definitions, a CPU reading) from taking a queue place each, which on a
/// loaded machine filled the queue and made the program drop packs. Empty
/// `bytes` end the stream.
fn enqueue(bytes: &[u8], most: usize) -> io::Result<()> {
    let mut g = lock();
    if !bytes.is_empty() && !g.closed && !g.failed {
        if let Some(last) = g.waiting.back_mut() {
            if !last.is_empty() && last.len() + bytes.len() <= most {
                last.extend_from_slice(bytes);
                PENDING.store(true, Relaxed);
                return Ok(());
            }
        }
    }
    let chunk = bytes.to_vec();
    while g.waiting.len() >= STREAM_RECVS && !g.failed {
        g = ROOM
            .wait_timeout(g, Duration::from_millis(100))
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    if g.failed {
        return Err(io::Error::new(
            io::ErrorKind::BrokenPipe,
            "an MPI send to the analyser rank failed",
        ));
    }
    if g.closed {
        return Ok(());
    }
    g.closed = chunk.is_empty();
    g.waiting.push_back(chunk);
    PENDING.store(true, Relaxed);
    drop(g);
    // `at_init` may be waiting for the opening.
    ROOM.notify_all();
    Ok(())
}

/// At the end of `MPI_Init*`, on every process of the job, after the
/// world's split and before the clock's duplicate: makes the stream
/// communicator, gathers every process's node and program on it
/// (`MPI_Allgather`), and learns from the map which analyser this rank
/// streams to.
pub(super) fn at_init(abi: &Abi) {
    if !on() {
        return;
    }
    let comm = mpi_call::comm_dup(abi, abi.comm_world);
    let (rank, size) = mpi_call::rank_size(abi.comm_world);
    let analysers = std::env::var(hark_settings::MPI_ANALYSERS.name)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(0);
    // Every process's node and program, gathered on the new communicator
    // (the analysers make the same call right after their duplicate).
    let places = comm.and_then(|c| mpi_call::gather_places(abi, c, rank, size));
    if let Some(p) = &places {
        let _ = CLOCK_PLAN.set(hark_wire::partition::clock_plan(
            p,
            analysers,
            rank.max(0) as u32,
        ));
    }
    let dest = places
        .and_then(|p| job_map(&p, analysers, map_policy()))
        .and_then(|m| m.analyser_of(rank.max(0) as u32))
        .map(|d| d as i32);
    if let Some(c) = comm {
        // A failed send or test then stops the stream (`fail`) instead of
        // ending the program.
        mpi_call::errors_return(abi, c);
    }
    let (Some(comm), Some(dest)) = (comm, dest) else {
        crate::core::warn_once(
            "mpi-stream",
            "cannot stream to an analyser rank (no stream communicator, or this rank is not a \
             writer of the analyser map); this process's events are dropped",
        );
        lock().failed = true;
        ROOM.notify_all();
        return;
    };
    let mut g = lock();
    g.comm = comm;
    g.dest = dest;
    g.level = mpi_call::thread_level();
    // SAFETY: pthread_self has no preconditions.
    g.init_thread = Some(unsafe { libc::pthread_self() });
    g.ready = true;
    PENDING.store(true, Relaxed);
    // The stream's opening (Hello, definitions) goes out before MPI_Init
    // returns: a rank that then waits in one blocking call until the job
    // ends (a receive that an abort ends) sends nothing more, and without
    // its Hello it would be missing from the run instead of partial. The
    // shipper queues the opening from its own thread; on a crowded node
    // it may not have run yet. Whatever changes the condition wakes ROOM
    // (`enqueue`, `progress`, `fail`).
    if crate::core::stream_running() {
        g = ROOM
            .wait_timeout_while(g, OPENING_WAIT, |g| {
                g.waiting.is_empty() && g.started == 0 && !g.failed
            })
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    drop(g);
    progress();
}

/// Longest `MPI_Init` waits for the shipper to queue the stream's opening
/// (see [`at_init`]); it has normally done so long before.
const OPENING_WAIT: Duration = Duration::from_secs(2);

/// This rank's part in the clock alignment over MPI, from the places
/// gathered at `MPI_Init` (`align.rs`); `None` before, or if the gather
/// failed.
static CLOCK_PLAN: OnceLock<ClockPlan> = OnceLock::new();

/// See [`CLOCK_PLAN`].
pub(super) fn clock_plan() -> Option<&'static ClockPlan> {
    CLOCK_PLAN.get()
}

/// The map policy `hark run --analysers --map` chose (`HARK_MPI_MAP`), the
/// analysers' `--map`; same-node-first when unset.
fn map_policy() -> Policy {
    std::env::var(hark_settings::MPI_MAP.name)
        .ok()
        .and_then(|v| Policy::parse(&v).ok())
        .unwrap_or(Policy::SameNodeFirst)
}

/// At the exit of every recorded MPI call, which ended at `now` (clock
/// units): one relaxed load when there is nothing to send.
#[inline(always)]
pub(crate) fn progress_if_pending(now: u64) {
    if PENDING.load(Relaxed) {
        progress_at(now);
    }
}

// Runs while chunks wait: at most once per INTERVAL.
#[cold]
#[inline(never)]
fn progress_at(now: u64) {
    if now.wrapping_sub(LAST.load(Relaxed)) < INTERVAL {
        return;
    }
    LAST.store(now, Relaxed);
    progress();
}

/// Tests the sends in flight and starts queued ones, up to the window.
/// Called only where this thread may call MPI: at the exit of one of the
/// program's MPI calls, or in [`progress_outside_a_call`].
#[cold]
#[inline(never)]
pub(crate) fn progress() {
    if LEAVING.load(Relaxed) {
        return;
    }
    let Some(abi) = super::abi::get() else { return };
    let Ok(mut g) = OUT.try_lock() else { return };
    if !g.ready || g.failed {
        return;
    }
    // Completed sends are only looked for when the window is full.
    while g.flying.len() >= STREAM_RECVS || (g.waiting.is_empty() && !g.flying.is_empty()) {
        let Some(&(req, _)) = g.flying.front() else {
            break;
        };
        match mpi_call::test(abi, req) {
            Some(true) => {
                g.flying.pop_front();
                TAKEN.fetch_add(1, Relaxed);
            }
            Some(false) => break,
            None => {
                fail(&mut g);
                return;
            }
        }
    }
    while g.flying.len() < STREAM_RECVS {
        let Some(chunk) = g.waiting.pop_front() else {
            break;
        };
        match mpi_call::issend_bytes(abi, &chunk, g.dest, STREAM_TAG, g.comm) {
            Some(req) => {
                g.flying.push_back((req, chunk));
                g.started += 1;
            }
            None => {
                fail(&mut g);
                return;
            }
        }
    }
    PENDING.store(!g.waiting.is_empty(), Relaxed);
    drop(g);
    ROOM.notify_all();
}

fn fail(g: &mut Out) {
    g.failed = true;
    g.waiting.clear();
    PENDING.store(false, Relaxed);
    ROOM.notify_all();
    crate::core::warn_once(
        "mpi-stream",
        "an MPI send to the analyser rank failed; the program runs on and undelivered events are \
         counted as dropped",
    );
}

/// Progress from a thread that is not inside one of the program's MPI
/// calls (a lossless thread waiting for a buffer): only where MPI allows
/// it, that is under `MPI_THREAD_MULTIPLE`, or on the thread that
/// initialised MPI under `SINGLE`/`FUNNELED`. Returns the chunks the
/// analyser took so far, whoever moved them.
pub(crate) fn progress_outside_a_call() -> u64 {
    if LEAVING.load(Relaxed) {
        return TAKEN.load(Relaxed);
    }
    if IN_FINALIZE.with(|f| f.get()) {
        // Inside the program's MPI_Finalize: any thread may.
        progress();
        return TAKEN.load(Relaxed);
    }
    let allowed = {
        let g = lock();
        g.ready
            && (g.level >= THREAD_MULTIPLE
                || (g.level <= 1
                    && g.init_thread.is_some_and(|t| {
                        // SAFETY: pthread_self/pthread_equal have no preconditions.
                        let same = unsafe { libc::pthread_equal(t, libc::pthread_self()) };
                        same != 0
                    })))
    };
    if allowed {
        progress();
    }
    TAKEN.load(Relaxed)
}

thread_local! {
    /// This thread is inside the program's `MPI_Finalize` (see `at_finalize`).
    static IN_FINALIZE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the stream has a destination (`MPI_Init` was called) that may
/// still be reached: not once the process leaves from inside a call.
pub(crate) fn ready() -> bool {
    !LEAVING.load(Relaxed) && lock().ready
}

/// The process is leaving (`exit`) from inside one of the program's calls,
/// an MPI library's error path among them (MPICH over UCX ends a rank from
/// a callback of its progress when a peer aborted): MPI may be in the
/// middle of its own progress on this thread, and a `PMPI_Test` there
/// trips UCX's assertion against reentry. From then on nothing here calls
/// MPI (the stream ends partial, as the rank's death makes it), and the
/// exit path does not wait for a stream that cannot move.
static LEAVING: AtomicBool = AtomicBool::new(false);

/// See [`LEAVING`]; from the probe's destructor.
pub(crate) fn leaving_inside_a_call() {
    LEAVING.store(true, Relaxed);
}

/// At the start of `MPI_Finalize`, after the clock's last measurement:
/// records the call (at its start: afterwards MPI is gone), ends the
/// stream, sends everything and frees the stream communicator.
pub(super) fn at_finalize(g: &crate::core::Guard, op: u16) {
    if !on() {
        return;
    }
    let t = crate::core::stamp();
    super::emit(g, hark_wire::Event::new(op, t, t));
    crate::adapters::close_open_functions(g);
    IN_FINALIZE.with(|f| f.set(true));
    crate::core::finish(hark_wire::EndReason::Finalize);
    IN_FINALIZE.with(|f| f.set(false));
    drain(Release::Wait);
}

/// At the start of `MPI_Abort`, after its event: ends the stream, and over
/// MPI also sends it (bounded by the drain timeout) before the real call
/// ends the job, so that the aborting rank is whole in the run
/// (`docs/analysers.md`, "When a rank dies").
pub(super) fn at_abort() {
    if !on() {
        crate::core::finish(hark_wire::EndReason::Abort);
        return;
    }
    // As in MPI_Finalize, any thread may move the sends on meanwhile.
    IN_FINALIZE.with(|f| f.set(true));
    crate::core::finish(hark_wire::EndReason::Abort);
    IN_FINALIZE.with(|f| f.set(false));
    drain(Release::Skip);
}

/// The stream ended without the program's `MPI_Finalize` wrapper
/// (unentered, or a failed stream): sends the end marker so that the
/// analyser does not wait for this rank, then drains.
pub(super) fn at_finalize_unentered() {
    if !on() {
        return;
    }
    let _ = {
        let g = lock();
        (!g.closed && g.ready && !g.failed).then_some(())
    }
    .map(|()| enqueue(&[], usize::MAX));
    drain(Release::Wait);
}

/// Whether [`drain`] then waits for the analyser's release.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// At `MPI_Finalize`: the analysers end the job with the writers.
    Wait,
    /// At `MPI_Abort`: the job ends now.
    Skip,
}

/// Sends every queued chunk up to the end of the stream and waits for
/// the sends, then frees the communicator.
///
/// It waits until the zero-length chunk that ends the stream was queued
/// **and** every chunk was taken: an empty queue alone is not the end,
/// since the shipper may still be handing over the rest of the pool (it
/// had not finished in `core::finish`'s time, or is between two chunks).
/// Stopping there left the end unsent and the analyser waiting for it,
/// with every rank of the job in the real `MPI_Finalize` (the hang of
/// the hpcc test under load, `docs/analysers.md`, "Flow control").
///
/// The drain timeout counts from the last chunk the analyser took, not
/// from the start: an analyser that is alive but behind may take longer
/// than the timeout for all of a full pool. One that takes nothing for the
/// whole timeout is given up, and told so (see [`give_up`]). Time this
/// rank was not run does not count ([`Patience`]).
///
/// A stream that went out whole then waits for the analyser's release
/// ([`wait_for_release`]) when `release` says so.
fn drain(release: Release) {
    let mut patience = Patience::new(crate::core::drain_timeout(), Instant::now());
    let mut seen = TAKEN.load(Relaxed);
    // Slept, not spun: on a crowded node the analyser that must take these
    // chunks, and its server, need the cores that every writer of the job
    // spinning here at once would take.
    let mut pause = Duration::from_micros(50);
    loop {
        progress();
        let g = lock();
        if !g.ready || g.failed || (g.closed && g.waiting.is_empty() && g.flying.is_empty()) {
            break;
        }
        drop(g);
        let taken = TAKEN.load(Relaxed);
        let now = Instant::now();
        if taken != seen {
            seen = taken;
            patience.taken(now);
            pause = Duration::from_micros(50);
        }
        if patience.expired(now) {
            crate::core::warn_once(
                "drain",
                "the analyser rank did not take the last chunks of the stream in time",
            );
            give_up();
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
    if release == Release::Wait {
        wait_for_release();
    }
    finalize_log("writer");
    let mut g = lock();
    if g.ready && g.comm != 0 {
        mpi_call::comm_free(g.comm);
        g.comm = 0;
    }
    g.ready = false;
    PENDING.store(false, Relaxed);
}

/// Once the stream went out whole: waits until the analyser releases this
/// writer ([`RELEASE_TAG`]), which it does once the analysers merged and
/// the model reached `hark run`, so that every rank of the job calls the
/// real `MPI_Finalize` within moments of the others. MPICH over UCX hangs
/// across nodes when ranks finalize seconds apart (`docs/analysers.md`,
/// "Finalizing together"). Bounded by `HARK_RELEASE_TIMEOUT_MS`; a stream
/// that failed or was given up does not wait (its analyser may be gone).
fn wait_for_release() {
    let Some(abi) = super::abi::get() else { return };
    let (comm, dest) = {
        let g = lock();
        let whole = g.ready && !g.failed && g.closed && g.waiting.is_empty() && g.flying.is_empty();
        if !whole || g.comm == 0 {
            return;
        }
        (g.comm, g.dest)
    };
    let env = std::env::var(hark_settings::RELEASE_TIMEOUT_MS.name).ok();
    let timeout = Duration::from_millis(
        hark_settings::RELEASE_TIMEOUT_MS
            .number(env.as_deref())
            .value,
    );
    if timeout.is_zero() {
        return;
    }
    // Slept, not spun, as in the drain: the analysers merging need the
    // cores.
    if !mpi_call::wait_for_byte(abi, comm, dest, RELEASE_TAG, timeout) {
        crate::core::warn_once(
            "release",
            "the analyser rank did not release this rank at MPI_Finalize in time (HARK_RELEASE_TIMEOUT_MS); it finalizes without it",
        );
    }
}

/// `HARK_TEST_FINALIZE_LOG=FILE`, **for tests only** (a build with the
/// `test-hooks` feature): appends `ROLE WORLD_RANK CLOCK_REALTIME_NS` to
/// FILE as this process is about to call the real `MPI_Finalize`.
fn finalize_log(role: &str) {
    #[cfg(feature = "test-hooks")]
    if let Ok(path) = std::env::var("HARK_TEST_FINALIZE_LOG") {
        use std::io::Write;
        let rank = super::abi::get().map_or(-1, |a| mpi_call::rank_size(a.comm_world).0);
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
        {
            let _ = f.write_all(format!("{role} {rank} {ns}\n").as_bytes());
        }
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = role;
}

/// A gap between two turns of the drain loop longer than this is time the
/// rank was not run: the loop sleeps at most 1 ms a turn.
const NOT_RUN: Duration = Duration::from_millis(100);

/// How long [`drain`] waits for its analyser to take a chunk, counting only
/// the time this rank was run. On a crowded node the scheduler stops a
/// whole job at once, its analyser with it (seen for over 2 s on the
/// shared 2-core VM under load, `docs/analysers.md`): a writer that
/// counted such a stop would give up an analyser that is alive and was not
/// run either. What is not counted is bounded by twice the timeout, so a
/// dead analyser is still given up on a machine that keeps stopping the rank.
struct Patience {
    timeout: Duration,
    deadline: Instant,
    last: Instant,
    excused: Duration,
}

impl Patience {
    fn new(timeout: Duration, now: Instant) -> Patience {
        Patience {
            timeout,
            deadline: now + timeout,
            last: now,
            excused: Duration::ZERO,
        }
    }

    /// The analyser took a chunk at `now`: the wait starts again.
    fn taken(&mut self, now: Instant) {
        *self = Patience::new(self.timeout, now);
    }

    /// Whether the analyser has taken nothing for the whole timeout, at
    /// `now`, the loop's turn after the last one.
    fn expired(&mut self, now: Instant) -> bool {
        let gap = now.saturating_duration_since(self.last);
        self.last = now;
        if gap > NOT_RUN {
            let excuse = gap.min((2 * self.timeout).saturating_sub(self.excused));
            self.excused += excuse;
            self.deadline += excuse;
        }
        now >= self.deadline
    }
}

/// The stream is given up before its end went out: tells the analyser how
/// many chunks were started (those in flight may still arrive), so that it
/// ends the stream there, cut, instead of waiting for its end forever
/// ([`GIVE_UP_TAG`]). Chunks never started are dropped; the analyser's
/// server marks the rank partial. A small standard-mode send into a
/// receive the analyser posted at its start: it does not wait for the
/// analyser's loop.
fn give_up() {
    let Some(abi) = super::abi::get() else { return };
    let mut g = lock();
    if !g.ready || g.failed || g.comm == 0 {
        return;
    }
    g.waiting.clear();
    let notice = g.started.to_le_bytes();
    if !mpi_call::send_bytes(abi, &notice, g.dest, GIVE_UP_TAG, g.comm) {
        fail(&mut g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// Turns of the loop every millisecond, from `from` for `span`.
    fn turns(p: &mut Patience, from: Instant, span: Duration) -> Option<Duration> {
        let ms = Duration::from_millis(1);
        let mut t = Duration::ZERO;
        while t <= span {
            if p.expired(from + t) {
                return Some(t);
            }
            t += ms;
        }
        None
    }

    #[test]
    fn an_analyser_that_takes_nothing_is_given_up_after_the_timeout() {
        let t0 = Instant::now();
        let mut p = Patience::new(10 * S, t0);
        assert_eq!(turns(&mut p, t0, 20 * S), Some(10 * S));
    }

    #[test]
    fn a_chunk_taken_starts_the_wait_again() {
        let t0 = Instant::now();
        let mut p = Patience::new(10 * S, t0);
        assert_eq!(turns(&mut p, t0, 6 * S), None);
        p.taken(t0 + 6 * S);
        assert_eq!(turns(&mut p, t0 + 6 * S, 20 * S), Some(10 * S));
    }

    #[test]
    fn time_the_rank_was_not_run_does_not_count() {
        let t0 = Instant::now();
        let mut p = Patience::new(10 * S, t0);
        assert_eq!(turns(&mut p, t0, 5 * S), None);
        // The whole job stopped for 8 s: 5 + 8 = 13 s after the start,
        // but only 5 s of them run.
        let back = t0 + 13 * S;
        assert!(!p.expired(back));
        assert_eq!(turns(&mut p, back, 20 * S), Some(5 * S));
    }

    #[test]
    fn what_is_excused_is_bounded_by_twice_the_timeout() {
        let t0 = Instant::now();
        let mut p = Patience::new(S, t0);
        // A rank stopped for a second at every turn: 2 s are excused, then
        // the third stop ends the wait.
        assert!(!p.expired(t0 + S));
        assert!(!p.expired(t0 + 2 * S));
        assert!(p.expired(t0 + 3 * S));
    }
}
