//! The process's stream: its lifecycle (from load to `finish`), the thread
//! registry, the handshake, and what happens at `fork`.
//!
//! There is at most one live stream per process. It is created at load when
//! `HARK_ADDR` is set and the program is not a launcher, connects at once
//! (so a missing server costs its one warning at start), and ends at the
//! first `finish`. A forked child abandons its parent's stream without
//! touching it (its locks may be held by threads that do not exist in the
//! child) and gets a new, *lazy* one: it connects and sends its own `Hello`
//! only when the child records its first event or definition. A child that
//! just `exec`s therefore opens no stream at all.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use hark_wire::{Def, EndReason, Hello};

use super::config::{self, Config, Shm};
use super::counters;
use super::cpu::{Joining, Sampler, Thread};
use super::local::{self, Internal, Slot};
use super::park::{self, Shipper};
use super::sensors::{self, Sensors};
use super::{clock, defs, signals, warn_once};
use crate::ship::{control, forward, reach, shm, transport, Ship};

const LAZY: u8 = 0;
const RUNNING: u8 = 1;
const FINISHING: u8 = 2;
const DONE: u8 = 3;
const FAILED: u8 = 4;

/// How long the readings taken as the stream ends wait for a buffer
/// (`read_cpus`): the shipper frees one as soon as it sends a pack.
const LAST_READING_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// One stream to the server.
pub(crate) struct Stream {
    pub cfg: Config,
    pub ship: Arc<Ship>,
    registry: Mutex<Vec<&'static Slot>>,
    phase: AtomicU8,
    start_lock: Mutex<()>,
    socket: transport::SharedFd,
    /// The shipping thread (`core::park`).
    shipper: Shipper,
    /// The process this stream belongs to (a `vfork` child shares the
    /// parent's memory, and with it this stream, under another pid).
    pub pid: u32,
    /// For a forked child's stream, the pid of the process it was forked
    /// from; 0 otherwise. Sent in the `Hello`, so the server counts the
    /// child under its parent's rank instead of as a rank of its own.
    parent: u32,
    /// The job sent in the `Hello`; a forked child keeps its parent's
    /// (without a launcher's job variable it would be `ppid:<parent>`, a
    /// job of its own).
    job: String,
    /// The threads' CPU readings (`cpu.rs`): taken by the shipper, and once
    /// more by `finish`, never on a program's thread while it works.
    cpu: Mutex<Sampler>,
    /// The node's sensors (`sensors.rs`), read by the shipper when this
    /// process is its node's sampler.
    sensors: Mutex<Sensors>,
    /// Threads' CPU files opened on them, for the shipper to take.
    cpu_joining: Joining<Thread>,
    /// The node's forwarder's socket, when the stream goes through it: the
    /// clock's ping-pongs go there too (`ship::ping`), not to `hark`.
    pub forwarder: std::sync::OnceLock<String>,
    /// The performance counters' group of the thread that started the
    /// stream (`counters.rs`), once opened.
    counters: std::sync::OnceLock<counters::Group>,
    /// The shipper's readings of it and of the other threads' groups.
    slicer: Mutex<counters::Slicer>,
    /// Threads' counter groups opened on them, for the shipper to take.
    counters_joining: counters::Joining,
    /// Threads' counts inside MPI functions (`HARK_COUNTERS_IN_MPI`).
    in_mpi: counters::InMpiThreads,
}

/// When the shipper last read the threads' CPUs and the node's sensors,
/// and how often it does.
struct CpuTimer {
    every: Option<std::time::Duration>,
    last: std::cell::Cell<std::time::Instant>,
    sensors_every: Option<std::time::Duration>,
    sensors_last: std::cell::Cell<std::time::Instant>,
}

impl CpuTimer {
    /// The shipper's tick: `tick`, or more often if the readings need it.
    fn tick(&self, tick: std::time::Duration) -> std::time::Duration {
        [self.every, self.sensors_every]
            .into_iter()
            .flatten()
            .fold(tick, std::time::Duration::min)
    }
}

static CURRENT: AtomicPtr<Stream> = AtomicPtr::new(std::ptr::null_mut());
/// Hot gate of `enter`: a stream exists and recording is not paused.
pub(crate) static RECORDING: AtomicBool = AtomicBool::new(false);
/// Gate of `enter_always`: a stream exists, paused or not.
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);
static PAUSED: AtomicBool = AtomicBool::new(false);
/// The world rank sent in the `Rank` frame, -1 before `MPI_Init`.
static WORLD_RANK: AtomicI32 = AtomicI32::new(-1);

/// The last sampling filter a service sent, `keep << 32 | of`; 0 for none.
/// An atomic, not a lock: a forked child must never find it held.
static SAMPLE: AtomicU64 = AtomicU64::new(0);

/// Notes the world rank MPI gave this process; a sampling filter that came
/// before `MPI_Init` (at the `Hello`) is applied again with it.
pub(crate) fn set_world_rank(rank: i32) {
    WORLD_RANK.store(rank, Ordering::Relaxed);
    if let Some(s) = current() {
        s.apply_sample();
    }
}

/// This process's world rank: MPI's, or before `MPI_Init` the launcher's;
/// -1 when neither is known.
pub(crate) fn world_rank() -> i32 {
    match WORLD_RANK.load(Ordering::Relaxed) {
        -1 => env_i32(&[
            "OMPI_COMM_WORLD_RANK",
            "PMI_RANK",
            "PMIX_RANK",
            "SLURM_PROCID",
        ]),
        r => r,
    }
}
/// Whether I/O calls are recorded (`HARK_IO`).
pub(crate) static IO: AtomicBool = AtomicBool::new(false);

/// The live stream, if any.
pub(crate) fn current() -> Option<&'static Stream> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: streams are leaked; a non-null pointer stays valid.
    (!p.is_null()).then(|| unsafe { &*p })
}

fn install(cfg: Config, parent: u32, job: String) -> &'static Stream {
    let ship = Arc::new(Ship::new(cfg.pack_size, cfg.buffers, cfg.lossless));
    let s: &'static Stream = Box::leak(Box::new(Stream {
        cfg,
        ship,
        registry: Mutex::new(Vec::new()),
        phase: AtomicU8::new(LAZY),
        start_lock: Mutex::new(()),
        socket: transport::SharedFd::new(),
        shipper: Shipper::new(),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        parent,
        job,
        cpu: Mutex::new(Sampler::new()),
        sensors: Mutex::new(Sensors::new()),
        cpu_joining: Joining::new(),
        forwarder: std::sync::OnceLock::new(),
        counters: std::sync::OnceLock::new(),
        slicer: Mutex::new(counters::Slicer::new()),
        counters_joining: counters::Joining::new(),
        in_mpi: Mutex::new(Vec::new()),
    }));
    IO.store(s.cfg.io, Ordering::Relaxed);
    super::callsite::set_depth(s.cfg.callsite_depth);
    CURRENT.store(s as *const Stream as *mut Stream, Ordering::Release);
    ACTIVE.store(true, Ordering::Relaxed);
    RECORDING.store(!PAUSED.load(Ordering::Relaxed), Ordering::Relaxed);
    s
}

fn set_off() {
    RECORDING.store(false, Ordering::Relaxed);
    ACTIVE.store(false, Ordering::Relaxed);
}

/// Runs at load: reads the configuration and, unless told not to measure
/// this program, opens the stream.
pub(crate) fn init() {
    let Some(cfg) = Config::from_env() else {
        return;
    };
    let argv = read_argv();
    let exe = std::fs::read_link("/proc/self/exe")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let has_rank = RANK_VARS.iter().any(|v| std::env::var_os(v).is_some());
    if cfg.skips(&program_name(&argv)) || cfg.skips(&exe) || config::is_agent(&argv, has_rank) {
        return;
    }
    // SAFETY: getppid has no preconditions.
    if !has_rank && config::helps_a_launcher(&argv_of(unsafe { libc::getppid() } as u32)) {
        return;
    }
    for (name, warning) in &cfg.warnings {
        warn_once(name, warning);
    }
    clock::init(&cfg.clock, cfg.clock_skew_ns, clock::host_file().as_deref());
    let ancestry = rank_ancestry();
    // Started (with `exec`) under the process the launcher started for
    // this rank, and under its name: that process holds the rank, and this
    // one is its child, as a forked one would be (a wrapper's nested
    // `bash`, a `multiprocessing` worker started by `spawn`). Over MPI
    // (`--analysers`) only processes that call `MPI_Init` stream: a
    // wrapper holds no rank there, and an MPI program below it is the rank.
    let parent = ancestry
        .root
        .filter(|_| !cfg.addr.starts_with("mpi:"))
        .filter(|&root| program_name(&argv_of(root)) == program_name(&argv))
        .unwrap_or(0);
    if ancestry.rank && parent == 0 {
        // This process holds its rank: its descendants may need to know
        // (before any thread starts, and before the program reads its
        // environment).
        hold_rank();
    }
    let s = install(cfg, parent, job_from_env(&ancestry));
    signals::install();
    // SAFETY: the handlers are plain functions that stay loaded.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        )
    };
    STARTING_AT_LOAD.store(true, Ordering::Relaxed);
    s.start();
    STARTING_AT_LOAD.store(false, Ordering::Relaxed);
}

/// Set while the stream starts at load: only then may this process start
/// its node's forwarder (a forked child's lazy start, on a program thread,
/// only looks for one).
static STARTING_AT_LOAD: AtomicBool = AtomicBool::new(false);

impl Stream {
    /// Connects and sends the handshake if this stream is still lazy; true
    /// when the stream is running.
    pub(crate) fn start(&'static self) -> bool {
        match self.phase.load(Ordering::Acquire) {
            RUNNING => return true,
            LAZY => {}
            _ => return false,
        }
        let _in = Internal::enter();
        let _g = hark_sync::lock(&self.start_lock);
        if self.phase.load(Ordering::Acquire) != LAZY {
            return self.phase.load(Ordering::Acquire) == RUNNING;
        }
        let cfg = &self.cfg;
        if cfg.addr.starts_with("mpi:") {
            return self.start_over_mpi();
        }
        let (fd, addr, tls) = match self.connect() {
            Ok(found) => found,
            Err(e) => {
                self.unreachable(&e);
                return false;
            }
        };
        self.socket.set(fd);
        let sock = transport::Socket::new(&self.socket, tls.clone());
        let hello = self.hello_frames();
        if !self.hand_over_ring(&hello, &addr) {
            self.ship.push_bytes(hello);
        }
        if self.phase.load(Ordering::Acquire) == FAILED {
            let mut sock = sock;
            transport::Transport::close(&mut sock);
            return false;
        }
        self.push_known_defs();
        let ship = self.ship.clone();
        let flush_every = cfg.flush_every;
        let this: &'static Stream = self;
        // Read here: the shipper opens no file while the program runs.
        let online = shm::online_cpus();
        let mut transport: Option<Box<dyn transport::Transport>> = Some(Box::new(sock));
        let control_in = std::cell::RefCell::new(control::ControlIn::new());
        self.spawn_shipper(move || {
            let Some(sock) = transport.take() else {
                return false;
            };
            shm::leave_the_programs_cores(&online);
            let lost = |e: &str| {
                warn_once(
                    "server-lost",
                    &format!(
                        "lost the connection to the Hark server at {addr} ({e}); \
                             the program runs on and undelivered events are counted as dropped"
                    ),
                )
            };
            // The shipper wakes at least every control poll; the
            // program's threads are asked to flush only as configured.
            let tick = flush_every.map_or(control::POLL, |f| f.min(control::POLL));
            let last_flush = std::cell::Cell::new(std::time::Instant::now());
            let look = |force: bool| {
                let mut c = control_in.borrow_mut();
                if force {
                    c.now();
                }
                if c.poll(this.socket(), tls.as_deref(), &mut |c| this.on_control(c)) {
                    this.refused_plaintext(&addr);
                }
            };
            // A service that refuses a stream says why before it cuts it:
            // read that first, so that the line says why, not only that
            // the connection was lost.
            let lost = |e: &str| {
                look(true);
                lost(e)
            };
            let cpu = this.start_cpu_readings();
            let tick = cpu.tick(tick);
            transport = ship.run(sock, &lost, Some(tick), &|| {
                look(false);
                this.ship_refined_clock();
                this.ship_cpu_readings(&cpu);
                if flush_every.is_some_and(|f| last_flush.get().elapsed() >= f) {
                    last_flush.set(std::time::Instant::now());
                    this.request_flushes();
                }
            });
            transport.is_some()
        })
    }

    /// Connects to `hark`'s Unix socket on this node, or else to the
    /// node's forwarder (`ship::forward`, which finds that socket missing
    /// before it connects), or else to `hark`'s first address that answers
    /// (`ship::reach`); the socket and the address it reached.
    fn connect(&self) -> std::io::Result<reach::Linked> {
        let cfg = &self.cfg;
        let may_start = STARTING_AT_LOAD.load(Ordering::Relaxed);
        if let Some((fd, addr)) = forward::connect(cfg, may_start) {
            let _ = self.forwarder.set(addr.clone());
            return Ok((
                transport::tune(fd, cfg.send_timeout, cfg.socket_buffer),
                addr,
                None,
            ));
        }
        reach::connect_first(
            &cfg.addr,
            cfg.tls_ca.as_deref(),
            cfg.connect_timeout,
            cfg.send_timeout,
            cfg.socket_buffer,
        )
    }

    /// `HARK_ADDR=mpi:` (`hark run --analysers`): the stream goes to an
    /// analyser rank of the job, sent from the program's own MPI calls
    /// (`adapters::mpi::stream`). Called with the start lock held.
    fn start_over_mpi(&'static self) -> bool {
        use crate::adapters::mpi::stream as mpi;
        mpi::switch_on();
        self.ship.set_progress(mpi::progress_outside_a_call);
        self.ship.push_bytes(self.hello_frames());
        self.push_known_defs();
        let ship = self.ship.clone();
        let mut transport: Option<Box<dyn transport::Transport>> =
            Some(Box::new(mpi::MpiTransport::new(self.cfg.pack_size)));
        let flush_every = self.cfg.flush_every;
        let this: &'static Stream = self;
        self.spawn_shipper(move || {
            let Some(t) = transport.take() else {
                return false;
            };
            late_shipper_for_tests();
            let lost = |e: &str| {
                warn_once(
                    "server-lost",
                    &format!(
                        "lost the stream to the analyser rank ({e}); the program runs on \
                             and undelivered events are counted as dropped"
                    ),
                )
            };
            let tick = flush_every.unwrap_or(control::POLL);
            let cpu = this.start_cpu_readings();
            let tick = cpu.tick(tick);
            transport = ship.run(t, &lost, Some(tick), &|| {
                this.ship_refined_clock();
                this.ship_cpu_readings(&cpu);
                if flush_every.is_some() {
                    this.request_flushes();
                }
            });
            transport.is_some()
        })
    }

    /// On the program's thread that starts the stream: opens the files
    /// the CPU readings come from (`cpu.rs`) and takes the baseline.
    fn open_cpu_files(&self) {
        if self.cfg.cpu_every.is_some() {
            hark_sync::lock(&self.cpu).open(&self.cpu_joining, clock::stamp());
        }
        // A child's stream is analysed apart from its program's ranks
        // (`docs/analyses.md`): its readings would not reach the nodes,
        // and while it held the name no rank could sample. Children never
        // sample.
        if self.cfg.sensors_every.is_some() && self.parent == 0 {
            hark_sync::lock(&self.sensors).open(&self.job);
        }
    }

    /// On a program's thread as it first records, as thread `number`
    /// (`local::register`): the main thread's readings take its number;
    /// any other thread opens its own CPU files (`cpu.rs`) and counters
    /// (`counters.rs`).
    pub(crate) fn open_thread_cpu(&self, number: u16) {
        if self.cfg.cpu_every.is_none() {
            return;
        }
        if self.counters.get().is_some() {
            let to_open = (self.cfg.counters.as_slice(), self.pid);
            let opened = self
                .counters_joining
                .open_this_thread(to_open, number, clock::stamp());
            if let Err(e) = opened {
                warn_once("counter-threads", &e);
            }
        }
        // SAFETY: gettid and getpid have no preconditions.
        let (tid, pid) = unsafe { (libc::gettid(), libc::getpid()) };
        if tid == pid {
            // Never the sampler's lock: a shipper preempted while reading
            // would hold this thread up.
            self.cpu_joining.main_is(number);
        } else if let Err(e) = self.cpu_joining.open_this_thread(number, clock::stamp()) {
            warn_once("cpu-threads", &e);
        }
    }

    /// On a program's thread as it ends, before its buffer is shipped: its
    /// last CPU and counter readings, recorded into its own buffer, and
    /// its files closed (`cpu.rs`, `counters.rs`). Its own buffer, not a
    /// free one of the pool: as threads end together, the pool can be
    /// empty (each just queued its last pack), and a pthread's one reading
    /// was then lost.
    pub(crate) fn end_thread_cpu(&self) {
        if self.cfg.cpu_every.is_none() || !self.is_running() {
            return;
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let mut out = Vec::new();
        let cpu = hark_sync::lock(&self.cpu).ended(&self.cpu_joining, tid, clock::stamp());
        out.extend(cpu);
        hark_sync::lock(&self.slicer).ended(&self.counters_joining, tid, clock::stamp(), &mut out);
        for ev in out {
            super::local::record(ev);
        }
    }

    /// On the program's thread that starts the stream, after the probe's
    /// own threads started (`inherit` counts only threads started later,
    /// so theirs stay out of the program's counts): opens the counters.
    fn open_counters(&self) {
        let mut slicer = hark_sync::lock(&self.slicer);
        if let Some(g) = slicer.open(&self.cfg.counters, clock::stamp()) {
            self.counters_joining.admit();
            let _ = self.counters.set(g);
            if self.cfg.counters_in_mpi {
                counters::IN_MPI.store(true, Ordering::Relaxed);
            }
        }
    }

    /// At a region's begin or end on a program's thread: the counters'
    /// reading (`counters::at_region`); the counts of a region that ended
    /// go to `out`.
    pub(crate) fn region_counters(&self, at: (bool, u32, u64), out: &mut Vec<hark_wire::Event>) {
        if let Some(main) = self.counters.get() {
            counters::at_region((main, &self.cfg.counters, self.pid), at, out);
        }
    }

    /// At an MPI call's entry (`at`) or exit (`op`) on a program's thread,
    /// under `HARK_COUNTERS_IN_MPI`: the counters' reading
    /// (`counters::mpi_entry`, `mpi_exit`).
    pub(crate) fn mpi_counters(&self, exit: Option<u16>) {
        match exit {
            None => counters::mpi_entry((&self.cfg.counters, self.pid), &self.in_mpi),
            Some(op) => counters::mpi_exit(self.pid, op),
        }
    }

    /// On the shipping thread as it starts: when it reads the CPUs.
    fn start_cpu_readings(&self) -> CpuTimer {
        let every = self.cfg.cpu_every;
        CpuTimer {
            every,
            last: std::cell::Cell::new(std::time::Instant::now()),
            sensors_every: self.cfg.sensors_every,
            sensors_last: std::cell::Cell::new(std::time::Instant::now()),
        }
    }

    /// At a tick of the shipping thread: the threads' CPU readings, when
    /// `HARK_CPU_MS` has passed since the last ones.
    fn ship_cpu_readings(&self, t: &CpuTimer) {
        if t.every.is_some_and(|e| t.last.get().elapsed() >= e) {
            t.last.set(std::time::Instant::now());
            self.read_cpus(false);
        }
        if t.sensors_every
            .is_some_and(|e| t.sensors_last.get().elapsed() >= e)
        {
            t.sensors_last.set(std::time::Instant::now());
            self.read_sensors();
        }
    }

    /// Reads the node's sensors if this process is its node's sampler
    /// (`sensors.rs`) and queues them; a reading that finds no free
    /// buffer is taken back, and the next one covers its time.
    fn read_sensors(&self) {
        let Ok(mut s) = self.sensors.try_lock() else {
            return;
        };
        let out = s.tick(clock::stamp());
        if !out.is_empty() && !self.ship.push_events(&out) {
            s.unread();
        }
    }

    /// Reads the threads' CPU counters and queues what changed. On the
    /// shipper (`last` false), a lock held elsewhere (`finish`, or a
    /// thread ending) or no free buffer skips a reading: the next one
    /// covers its time. The last reading, as the stream ends, waits a
    /// while for the locks and for a buffer: nothing comes after it.
    /// (A while, not for ever: a fatal signal's flush must not hang on a
    /// lock its faulting thread holds.)
    fn read_cpus(&self, last: bool) {
        if self.cfg.cpu_every.is_none() {
            return;
        }
        let wait = if last {
            LAST_READING_WAIT
        } else {
            std::time::Duration::ZERO
        };
        let push = |evs: &[hark_wire::Event]| self.ship.push_events_within(evs, wait);
        let Some(mut s) = hark_sync::lock_within(&self.cpu, wait) else {
            return;
        };
        s.take_joining(&self.cpu_joining);
        let mut evs = Vec::new();
        s.sample(clock::stamp(), &mut evs);
        let fit = crate::ship::capacity(self.cfg.pack_size).max(1);
        let mut sent = 0;
        for c in evs.chunks(fit) {
            if !push(c) {
                s.unread(sent);
                break;
            }
            sent += c.len();
        }
        drop(s);
        let Some(mut c) = hark_sync::lock_within(&self.slicer, wait) else {
            return;
        };
        let mut out = Vec::new();
        let groups = (self.counters.get(), &self.counters_joining, &self.in_mpi);
        c.sample(groups, clock::stamp(), &mut out);
        for (i, chunk) in out.chunks(fit).enumerate() {
            if !push(chunk) {
                c.keep(&out[i * fit..]);
                break;
            }
        }
    }

    /// At each tick of the shipping thread: a refined TSC calibration when
    /// one is due (`clock::refine_due`), ahead of the packs it maps.
    fn ship_refined_clock(&self) {
        if let Some(scale) = super::refined_scale_frame() {
            self.ship.push_bytes(scale);
        }
    }

    /// The stream's opening frames: its `Hello`, and the process's CPUs
    /// when it is bound.
    fn hello_frames(&self) -> Vec<u8> {
        let mut hello = Vec::new();
        make_hello(&self.cfg, self.parent, &self.job).encode(&mut hello);
        let cpus = shm::process_cpus();
        if !cpus.is_empty() {
            hark_wire::encode_cpus(&cpus, &mut hello);
        }
        hello
    }

    /// Queues the definitions made before the stream started.
    fn push_known_defs(&self) {
        let known = defs::snapshot();
        if !known.is_empty() {
            let mut bytes = Vec::new();
            Def::encode_all(&known, &mut bytes);
            self.ship.push_bytes(bytes);
        }
    }

    /// Starts the shipping thread running `body` (handled signals blocked,
    /// inside the probe), and the stream with it, then opens the counters
    /// and the CPU readings' files; false, the process then
    /// running unmeasured, if the thread cannot start. `body` returns true
    /// when it parked (`core::park`), to be run again by the next thread.
    fn spawn_shipper(&'static self, body: impl FnMut() -> bool + Send + 'static) -> bool {
        if let Err(e) = self.shipper.start(body) {
            warn_once(
                "thread",
                &format!("cannot start the shipping thread ({e}); this process runs unmeasured"),
            );
            self.fail();
            return false;
        }
        self.phase.store(RUNNING, Ordering::Release);
        signals::start_helper();
        self.open_counters();
        // The CPU baseline last: what the probe's own start took on this
        // thread is not the program's time.
        self.open_cpu_files();
        true
    }

    /// On a Unix socket (`addr`, the one connected to) and unless
    /// `HARK_SHM=0`: sends the `Hello` and a shared-memory ring on the
    /// socket, and makes the pool's buffers the ring's slots. False if the
    /// stream stays on the socket (the `Hello` is then still to be sent); a
    /// socket that fails here fails the stream.
    fn hand_over_ring(&'static self, hello: &[u8], addr: &str) -> bool {
        let cfg = &self.cfg;
        if cfg.shm == Shm::Off || !addr.starts_with("unix:") {
            return false;
        }
        let slots = shm::slots(cfg.buffers, cfg.pack_size);
        match shm::RingOut::hand_over(&self.socket, hello, slots, cfg.pack_size, cfg.send_timeout) {
            Ok(ring) => {
                self.ship.use_ring(ring);
                true
            }
            Err(shm::HandOver::Unavailable(e)) => {
                if cfg.shm == Shm::On {
                    warn_once(
                        "shm",
                        &format!(
                            "cannot make a shared-memory ring ({e}); streaming over the socket"
                        ),
                    );
                }
                false
            }
            Err(shm::HandOver::Failed(e)) => {
                self.unreachable(&e);
                true
            }
        }
    }

    /// A TLS service answered this plaintext stream with its refusal: one
    /// line (the one the lost connection would have said, in its place),
    /// and the process runs on unmeasured.
    fn refused_plaintext(&self, addr: &str) {
        let tls = addr.strip_prefix("tcp:").unwrap_or(addr);
        warn_once(
            "server-lost",
            &format!(
                "the Hark server at {addr} takes TLS only and refused this plaintext stream: \
                 give HARK_ADDR=tls:{tls} and {}=its CA file; this process runs unmeasured",
                hark_settings::TLS_CA.name
            ),
        );
        set_off();
    }

    /// The server could not be reached: one warning, naming this process
    /// by its rank (or pid) and host, and the stream fails.
    fn unreachable(&self, e: &std::io::Error) {
        let rank = env_i32(&RANK_VARS);
        let who = if rank >= 0 {
            format!("rank {rank}")
        } else {
            format!("pid {}", self.pid)
        };
        let at = match reach::split(&self.cfg.addr).len() {
            1 => self.cfg.addr.as_str(),
            _ => "any of its addresses",
        };
        warn_once(
            "connect",
            &format!(
                "{who} on {} cannot reach the Hark server at {at} ({e}); this process runs unmeasured",
                hostname(),
            ),
        );
        self.fail();
    }

    fn fail(&self) {
        self.phase.store(FAILED, Ordering::Release);
        set_off();
    }

    /// Whether the stream has started and neither failed nor ended.
    pub(crate) fn is_running(&self) -> bool {
        self.phase.load(Ordering::Acquire) == RUNNING
    }

    /// Whether threads may take new buffers.
    pub(crate) fn recording_allowed(&self) -> bool {
        matches!(self.phase.load(Ordering::Acquire), LAZY | RUNNING)
    }

    /// Adds a thread; `make` builds its slot from its thread index.
    pub(crate) fn register(&self, make: impl FnOnce(u16) -> &'static Slot) -> &'static Slot {
        let mut r = hark_sync::lock(&self.registry);
        let slot = make(r.len().min(u16::MAX as usize) as u16);
        r.push(slot);
        self.ship.add_thread();
        slot
    }

    /// Queues encoded frames, starting the stream if it is lazy.
    pub(crate) fn send(&'static self, bytes: Vec<u8>) {
        if self.start() {
            self.ship.push_bytes(bytes);
        }
    }

    /// A service's control request, on the shipping thread.
    fn on_control(&self, c: hark_wire::Control) {
        use hark_wire::{Action, Control};
        match c.action {
            // Said back to the server with the time, in the stream: what
            // the probe records while paused is then known as such.
            Action::Pause | Action::Resume => {
                let pause = c.action == Action::Pause;
                // In nanoseconds, as the server reads events' stamps.
                let at = clock::now();
                set_paused(pause);
                let mut bytes = Vec::new();
                Control {
                    seq: at,
                    ..Control::new(c.action)
                }
                .encode(&mut bytes);
                self.ship.push_bytes(bytes);
            }
            Action::Dump => {
                // Threads that run ship their partial buffers at their next
                // event; a thread blocked for good (in `MPI_Recv`, say)
                // never records one, so what it still holds is taken from
                // here, as at the end of the stream.
                self.request_flushes();
                std::thread::sleep(std::time::Duration::from_millis(20));
                let slots = self
                    .registry
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                for slot in slots {
                    local::take_if_idle(slot);
                }
                let mut bytes = Vec::new();
                Control {
                    seq: c.seq,
                    ..Control::new(Action::Flushed)
                }
                .encode(&mut bytes);
                self.ship.push_bytes(bytes);
            }
            // K of every N ranks keep their events; the others send exact
            // totals in their place (`ship::counts`).
            Action::Sample => {
                SAMPLE.store((c.keep as u64) << 32 | c.of as u64, Ordering::Relaxed);
                self.apply_sample();
            }
            Action::Refused => {
                warn_once(
                    "server-lost",
                    &format!(
                        "the Hark server at {} refused this stream: it proves no token the service takes \
                         (give yours before the address, TOKEN@{0}, or hark run --token-file); \
                         this process runs unmeasured",
                        self.cfg.addr
                    ),
                );
                set_off();
            }
            // Never sent to a probe.
            Action::Flushed => {}
        }
    }

    /// Samples this process out, or back in, by the filter last received
    /// and its world rank as known now.
    fn apply_sample(&self) {
        let filter = SAMPLE.load(Ordering::Relaxed);
        let (keep, of) = ((filter >> 32) as u32, filter as u32);
        if of == 0 {
            return;
        }
        let keeps = crate::ship::counts::keeps_details(world_rank(), keep, of);
        self.ship
            .set_counting(!keeps, clock::source(), clock::stamp());
    }

    /// Asks every thread holding a partly filled buffer to ship it.
    fn request_flushes(&self) {
        let slots = self
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for slot in slots {
            local::request_flush(slot);
        }
    }

    /// The socket's descriptor, which the program must not close.
    pub(crate) fn socket(&self) -> i32 {
        self.socket.get()
    }

    /// Moves the socket off descriptor `fd` if it is there (before the
    /// program `dup2`s onto that number).
    pub(crate) fn move_socket_off(&self, fd: i32) {
        self.socket.move_off(fd)
    }
}

/// Stops the probe's threads for a call that needs this process to have
/// one thread (`core::park`); true if they ran and are to be started
/// again with [`resume_threads`].
pub(crate) fn park_threads() -> bool {
    let Some(s) = current() else {
        return false;
    };
    // SAFETY: getpid has no preconditions.
    let here = s.pid == unsafe { libc::getpid() } as u32;
    if !here || s.phase.load(Ordering::Acquire) != RUNNING {
        return false;
    }
    let wait = s.cfg.send_timeout.max(s.cfg.drain_timeout);
    if !park::park(&s.shipper, || s.ship.push_park(), wait) {
        warn_once(
            "park",
            &format!(
                "could not stop the probe's threads within {} ms for a call that needs this \
                 process to have one thread (setns, unshare); it runs with them",
                wait.as_millis()
            ),
        );
    }
    true
}

/// Starts the probe's threads again after [`park_threads`].
pub(crate) fn resume_threads() {
    let Some(s) = current() else {
        return;
    };
    if let Err(e) = park::resume(&s.shipper) {
        warn_once(
            "thread",
            &format!("cannot start the shipping thread again ({e}); this process runs unmeasured"),
        );
        s.fail();
    }
}

/// Whether recording is paused (`MPI_Pcontrol(0)`, `hark_pause`).
#[inline(always)]
pub(crate) fn paused() -> bool {
    PAUSED.load(Ordering::Relaxed)
}

/// Pauses or resumes recording.
pub(crate) fn set_paused(paused: bool) {
    PAUSED.store(paused, Ordering::Relaxed);
    if let Some(s) = current() {
        if s.recording_allowed() {
            RECORDING.store(!paused, Ordering::Relaxed);
        }
    }
}

/// Closes the stream: ships every thread's buffer, then the end frame, and
/// waits (bounded) for the shipper. Only the first call acts.
pub(crate) fn finish(reason: EndReason) {
    let Some(s) = current() else {
        return;
    };
    let _in = Internal::enter();
    if s.phase
        .compare_exchange(RUNNING, FINISHING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Lazy (nothing was ever sent), failed or already finished.
        let _ = s
            .phase
            .compare_exchange(LAZY, DONE, Ordering::AcqRel, Ordering::Acquire);
        set_off();
        return;
    }
    set_off();
    let slots: Vec<&'static Slot> = hark_sync::lock(&s.registry).clone();
    for slot in slots {
        local::take(slot);
    }
    if crate::adapters::mpi::stream::on() && !crate::adapters::mpi::stream::ready() {
        // Over MPI, but MPI was never initialised here (not a rank of the
        // job), is gone, or may not be called any more (the process leaves
        // from inside a call): nothing can be sent (docs/analysers.md).
        s.phase.store(DONE, Ordering::Release);
        return;
    }
    // The last stretch of CPU use, up to the end.
    s.read_cpus(true);
    s.ship.push_end(reason);
    if !s.ship.wait_done_progressing(s.cfg.drain_timeout) {
        warn_once(
            "drain",
            &format!(
                "the Hark server did not take the last events within {} ms; the stream ends without its totals",
                s.cfg.drain_timeout.as_millis()
            ),
        );
    }
    s.phase.store(DONE, Ordering::Release);
}

extern "C" fn before_fork() {
    // The call-site table first: it takes the definitions' lock inside.
    super::callsite::lock_for_fork();
    defs::lock_for_fork();
}

extern "C" fn after_fork_parent() {
    defs::unlock_after_fork();
    super::callsite::unlock_after_fork();
}

// The child has one thread, this one; everything of the parent's stream
// (its socket, locks, shipper) is left untouched.
extern "C" fn after_fork_child() {
    defs::unlock_after_fork();
    super::callsite::unlock_after_fork();
    sensors::forget_after_fork();
    let _ = std::panic::catch_unwind(|| {
        local::forget_slot();
        let Some(old) = current() else {
            return;
        };
        // A forked child cannot use its parent's MPI: over MPI it is not
        // measured (docs/analysers.md).
        if matches!(old.phase.load(Ordering::Acquire), FAILED) || old.cfg.addr.starts_with("mpi:") {
            set_off();
            CURRENT.store(std::ptr::null_mut(), Ordering::Release);
            return;
        }
        install(old.cfg.clone(), old.pid, old.job.clone());
    });
}

/// `/proc/self/cmdline`, split at NULs.
fn read_argv() -> Vec<String> {
    argv_of_path("/proc/self/cmdline")
}

/// The command line of process `pid` (empty if it cannot be read).
fn argv_of(pid: u32) -> Vec<String> {
    argv_of_path(&format!("/proc/{pid}/cmdline"))
}

fn argv_of_path(path: &str) -> Vec<String> {
    std::fs::read(path)
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn program_name(argv: &[String]) -> String {
    argv.first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default()
}

fn env_i32(names: &[&str]) -> i32 {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
        .unwrap_or(-1)
}

/// The job, the same for every rank on every node: `HARK_JOB`, else the
/// launcher's identity (the PMIx namespace of Open MPI and of `srun
/// --mpi=pmix`, a PMI-1 KVS name, Hydra's control port, Slurm's job and
/// step), else `ppid:<pid>` of the process that launched this one (see
/// [`Ancestry::launcher`]), which only ranks on one node share.
fn job_from_env(ancestry: &Ancestry) -> String {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    [hark_settings::JOB.name, "PMIX_NAMESPACE", "PMI_KVSNAME"]
        .iter()
        .find_map(|n| var(n))
        .or_else(|| hydra_job(&argv_of(ancestry.launcher)))
        .or_else(|| slurm_job(&var))
        .unwrap_or_else(|| format!("ppid:{}", ancestry.launcher))
}

/// MPICH's Hydra gives its ranks no job name (`PMI_KVSNAME` is not in
/// their environment), but each node's proxy, their launcher, is started
/// as `hydra_pmi_proxy --control-port HOST:PORT ... --pgid N`, the control
/// port being that of their `mpiexec`: the same on every node, and another
/// for another `mpiexec`. `--pgid` tells spawned worlds apart.
fn hydra_job(proxy_argv: &[String]) -> Option<String> {
    if program_name(proxy_argv) != "hydra_pmi_proxy" {
        return None;
    }
    let value = |option: &str| {
        let i = proxy_argv.iter().position(|a| a == option)?;
        proxy_argv.get(i + 1).filter(|v| !v.is_empty())
    };
    let port = value("--control-port")?;
    Some(match value("--pgid").filter(|g| *g != "0") {
        Some(group) => format!("hydra:{port}/{group}"),
        None => format!("hydra:{port}"),
    })
}

/// Slurm's job and step, as Slurm writes them (`1234.0`): every task of
/// a step shares them, on every node; two steps of one allocation differ.
/// The job alone outside a step (a program run in `salloc`'s shell).
fn slurm_job(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let job = var("SLURM_JOB_ID")?;
    Some(match var("SLURM_STEP_ID") {
        Some(step) => format!("{job}.{step}"),
        None => job,
    })
}

/// Set by the process that holds a rank, for its descendants: its pid. One
/// whose parent exited before it started (reparented: a daemon's double
/// fork, a helper whose spawner had already returned) has no way up
/// `/proc` to its rank, and would otherwise claim the rank as a process of
/// its own job.
const HOLDER_VAR: &str = hark_settings::RANK_HOLDER.name;

/// Tells this process's descendants that it holds its rank
/// ([`HOLDER_VAR`]).
fn hold_rank() {
    let value = std::ffi::CString::new(std::process::id().to_string()).expect("digits");
    let name = std::ffi::CString::new(HOLDER_VAR).expect("no NUL");
    // SAFETY: both strings are NUL-terminated; called at load, before this
    // probe starts a thread (a program's own constructors that run threads
    // read no environment while libraries load).
    unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) };
}

/// Variables through which a launcher gives a process its rank.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];

/// Where this process sits below its launcher, read from `/proc`.
struct Ancestry {
    /// The parent process, or, for a rank, the nearest ancestor that does
    /// not carry the same rank: the launcher (or its proxy), which all its
    /// ranks share. A wrapper script between the two (`mpirun ./run.sh`)
    /// carries the rank too; were it taken as the launcher, each rank of
    /// a launcher that names no job (MPICH's Hydra sets only `PMI_RANK`)
    /// would be a job, and a program, of its own.
    launcher: u32,
    /// For a rank started below another process of its rank (a wrapper's),
    /// the outermost of them: the process the launcher started.
    root: Option<u32>,
    /// Whether a launcher gave this process a rank.
    rank: bool,
}

fn rank_ancestry() -> Ancestry {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() } as u32;
    let Some((var, rank)) = RANK_VARS
        .iter()
        .find_map(|&v| Some((v, std::env::var(v).ok()?)))
    else {
        return Ancestry {
            launcher: parent,
            root: None,
            rank: false,
        };
    };
    let mine = format!("{var}={rank}");
    let (launcher, root) = match walk_up(parent, &mine) {
        // Cut off from its rank (reparented): the holder its ancestors
        // named, if it still holds this rank.
        (_, None) => match holder(&mine) {
            Some(holder) => {
                let (launcher, up) = walk_up(parent_of(holder).unwrap_or(1), &mine);
                (launcher, up.or(Some(holder)))
            }
            None => (parent, None),
        },
        found => found,
    };
    Ancestry {
        launcher,
        root,
        rank: true,
    }
}

/// From `parent` up while processes carry `mine` (the rank variable and
/// its value): the first that does not (the launcher), and the outermost
/// that does.
fn walk_up(mut parent: u32, mine: &str) -> (u32, Option<u32>) {
    let mut root = None;
    // A bound on the walk: a process tree is never this deep.
    for _ in 0..64 {
        if !carries(parent, mine) {
            break;
        }
        root = Some(parent);
        match parent_of(parent) {
            Some(up) if up > 1 => parent = up,
            _ => break,
        }
    }
    (parent, root)
}

/// Whether process `pid`'s environment holds `var_value` (`NAME=value`).
fn carries(pid: u32, var_value: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == var_value.as_bytes()))
}

/// The process that [`HOLDER_VAR`] names, if it is another and holds
/// `mine` still.
fn holder(mine: &str) -> Option<u32> {
    let pid: u32 = std::env::var(HOLDER_VAR).ok()?.trim().parse().ok()?;
    (pid != std::process::id() && pid > 1 && carries(pid, mine)).then_some(pid)
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after
/// the state, itself after the command name's closing parenthesis).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// This host's name, as `gethostname` gives it.
fn hostname() -> String {
    let mut host = [0u8; 256];
    // SAFETY: `host` is writable for its length.
    unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
    let host_len = host.iter().position(|&c| c == 0).unwrap_or(0);
    String::from_utf8_lossy(&host[..host_len]).into_owned()
}

/// Variables through which a launcher gives the size of the job's world:
/// Open MPI, MPICH's Hydra (and other PMI launchers), Slurm's step.
pub(crate) const SIZE_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_NTASKS",
];

/// The probe clock and `CLOCK_REALTIME` read together: of a few tries the
/// one whose probe readings bracket the realtime one tightest, so that a
/// preemption between the two readings (a loaded node) does not put the
/// handshake milliseconds off, which the clock alignment would then take
/// for a difference between clocks.
fn clock_and_realtime() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = clock::now();
        let rt = clock::clock_ns(libc::CLOCK_REALTIME);
        let b = clock::now();
        if b.saturating_sub(a) < best.0 {
            best = (b.saturating_sub(a), a + b.saturating_sub(a) / 2, rt);
        }
    }
    (best.1, best.2)
}

/// `HARK_TEST_SHIPPER_DELAY_MS=MS`, **for tests only** (a build with the
/// `test-hooks` feature): the shipper over MPI sleeps MS before it hands
/// anything over, as on a node so crowded that it is not run for that long.
fn late_shipper_for_tests() {
    #[cfg(feature = "test-hooks")]
    if let Some(ms) = std::env::var("HARK_TEST_SHIPPER_DELAY_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

fn make_hello(cfg: &Config, parent: u32, job: &str) -> Hello {
    let argv = read_argv();
    let rank = env_i32(&RANK_VARS);
    let size = env_i32(&SIZE_VARS);
    // Under a test skew the events and the realtime reading are late, the
    // reference reading is not: the handshake's own check (the server's
    // realtime against ours) takes back the realtime part, and what is left
    // is a skew only the clock alignment can see (`core::clock`).
    let (clock_ns, realtime_ns) = clock_and_realtime();
    let clock_ns = clock_ns.wrapping_sub(clock::skew() as u64);
    let realtime_ns = realtime_ns.wrapping_add(clock::skew() as u64);
    let mut hello = Hello {
        program: program_name(&argv),
        argv,
        host: hostname(),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        rank,
        size,
        job: job.to_string(),
        clock: clock::source(),
        clock_ns,
        realtime_ns,
        pack_size: cfg.pack_size as u32,
        secret: String::new(),
        parent,
    };
    // The secret never crosses the wire: a proof of it does, under a
    // nonce of this stream, so that its bytes sent again are refused.
    if !cfg.secret.is_empty() {
        hello.prove(&cfg.secret, nonce());
    }
    hello
}

/// A fresh random nonce for a stream's proof of its secret, from the
/// kernel (no descriptor opened); should that fail, the clock and the pid,
/// which still differ between streams.
fn nonce() -> [u8; hark_wire::NONCE_SIZE] {
    let mut n = [0u8; hark_wire::NONCE_SIZE];
    // SAFETY: `n` is valid for writing `n.len()` bytes.
    let got = unsafe { libc::getrandom(n.as_mut_ptr().cast(), n.len(), 0) };
    if got != n.len() as isize {
        let t = clock::clock_ns(libc::CLOCK_REALTIME);
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u64;
        n[..8].copy_from_slice(&t.to_le_bytes());
        n[8..].copy_from_slice(&pid.to_le_bytes());
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn hydra_ranks_on_every_node_share_their_mpiexec_s_control_port() {
        let proxy = |id: u32, pgid: u32| {
            words(&format!(
                "/usr/bin/hydra_pmi_proxy --control-port n1:41211 --rmk user --launcher ssh \
                 --demux poll --pgid {pgid} --retries 10 --usize -2 --pmi-port 0 --proxy-id {id}"
            ))
        };
        assert_eq!(hydra_job(&proxy(0, 0)), Some("hydra:n1:41211".into()));
        assert_eq!(hydra_job(&proxy(1, 0)), hydra_job(&proxy(0, 0)));
        assert_eq!(hydra_job(&proxy(1, 2)), Some("hydra:n1:41211/2".into()));
        assert_eq!(hydra_job(&words("orted --control-port x:1")), None);
        assert_eq!(hydra_job(&words("hydra_pmi_proxy --pgid 0")), None);
        assert_eq!(hydra_job(&[]), None);
    }

    #[test]
    fn slurm_tasks_share_their_job_and_step() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let step = env(&[("SLURM_JOB_ID", "77"), ("SLURM_STEP_ID", "3")]);
        assert_eq!(slurm_job(&step), Some("77.3".into()));
        assert_eq!(
            slurm_job(&env(&[("SLURM_JOB_ID", "77")])),
            Some("77".into())
        );
        assert_eq!(slurm_job(&env(&[("SLURM_STEP_ID", "3")])), None);
    }

    #[test]
    fn a_process_s_parent_is_read_from_proc_whatever_its_name() {
        // SAFETY: getpid and getppid have no preconditions.
        let (me, parent) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
        assert_eq!(parent_of(me), Some(parent));
        assert_eq!(parent_of(u32::MAX), None);
    }
}
