//! What the service's tests share: a service on a private socket that
//! keeps every run it is handed, and streams written as probes write them.

#![allow(dead_code)] // each test file uses a part

#[path = "../../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;
use hark_server::{Service, ServiceConfig, ServiceRun, Viewer};
use hark_wire::{op, ClockSource, End, EndReason, Event, Hello, RankInfo};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a test keeps of each run: job name, events analysed, partial ranks,
/// whether it is a dump.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    pub job: String,
    pub analysed: u64,
    pub received: u64,
    pub partial: u64,
    pub dump: bool,
    pub dir: PathBuf,
}

pub const ROOT: Viewer = Viewer {
    uid: 0,
    admin: true,
};

pub struct Setup {
    pub service: Service,
    pub runs: Arc<Mutex<Vec<Kept>>>,
    pub log: Arc<Mutex<Vec<String>>>,
    pub path: PathBuf,
}

/// A service on a fresh socket; `tweak` sets its limits. Runs are written
/// (every output) under the socket's directory when `write` is set.
pub fn start(name: &str, write: bool, tweak: impl FnOnce(&mut ServiceConfig)) -> Setup {
    // The allocator as `hark serve` sets it (crates/cli/src/alloc.rs): four
    // arenas, and blocks of 2 MiB and more mapped on their own.
    // SAFETY: mallopt only sets allocator parameters.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 4);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
    }
    let dir = std::env::temp_dir().join(format!("hark-svc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    remove_at_exit::remove_at_exit(&dir);
    let path = dir.join("sock");
    let mut config = ServiceConfig {
        listen: format!("unix:{}", path.display()),
        workers: 2,
        linger: std::time::Duration::from_millis(200),
        ..ServiceConfig::default()
    };
    tweak(&mut config);
    let runs: Arc<Mutex<Vec<Kept>>> = Arc::default();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (r, l) = (runs.clone(), log.clone());
    let counter = Arc::new(Mutex::new(0u64));
    let service = Service::start(
        config,
        Arc::new(move |run: &ServiceRun| {
            let mut n = counter.lock().unwrap();
            *n += 1;
            let out = dir.join(format!("run-{n}"));
            std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
            if write {
                hark_outputs::write_all(&run.run, &out, |_| true).map_err(|e| e.to_string())?;
            }
            r.lock().unwrap().push(Kept {
                job: run.job.clone(),
                analysed: run.run.accounting.events_analysed,
                received: run.run.accounting.events_received,
                partial: run.run.accounting.partial_ranks,
                dump: matches!(run.kind, hark_server::RunKind::Dump(_)),
                dir: out.clone(),
            });
            Ok(out)
        }),
        Arc::new(move |line: &str| l.lock().unwrap().push(line.to_string())),
    )
    .unwrap();
    Setup {
        service,
        runs,
        log,
        path,
    }
}

/// The handshake of world rank `rank` of `job`.
pub fn hello(job: &str, rank: i32, size: i32, pid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    Hello {
        program: "app".into(),
        argv: vec!["./app".into()],
        host: "node0".into(),
        pid,
        rank,
        size,
        job: job.into(),
        clock: ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns: 1_700_000_000_000_000_000,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut b);
    b
}

/// A rank frame and a pack of `n` barriers.
pub fn work(rank: i32, size: i32, n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    RankInfo {
        world_rank: rank,
        world_size: size,
        appnum: 0,
        thread_level: 0,
        flavour: hark_wire::Flavour::OpenMpi,
        library: "test".into(),
    }
    .encode(&mut b);
    let barrier = op::mpi_op("MPI_Barrier").unwrap();
    let events: Vec<Event> = (0..n)
        .map(|i| Event::new(barrier, 2_000 + i * 100, 2_050 + i * 100))
        .collect();
    hark_wire::encode_pack(0, &events, &mut b);
    b
}

pub fn end(n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    End {
        events_written: n,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(&mut b);
    b
}

pub fn connect(path: &Path) -> UnixStream {
    UnixStream::connect(path).unwrap()
}

/// A whole job of `ranks` ranks with `n` events each, sent and closed.
/// Every rank connects before any closes, as the ranks of a launch do (a
/// job whose streams all closed is folded after the service's linger).
pub fn whole_job(path: &Path, job: &str, ranks: i32, n: u64) {
    let mut streams: Vec<UnixStream> = (0..ranks)
        .map(|r| {
            let mut s = connect(path);
            s.write_all(&hello(job, r, ranks, 1000 + r as u32)).unwrap();
            s
        })
        .collect();
    for (r, s) in streams.iter_mut().enumerate() {
        let mut bytes = work(r as i32, ranks, n);
        bytes.extend(end(n));
        s.write_all(&bytes).unwrap();
    }
}

/// [`whole_job`], but the ends are sent only once the service has taken
/// every rank's `Hello`: on a loaded machine a reader thread can be
/// scheduled after another rank's stream has closed and lingered, which
/// splits the job (as it would for a launcher whose ranks start further
/// apart than the linger).
pub fn whole_job_seen(setup: &Setup, job: &str, ranks: i32, n: u64) {
    let mut streams: Vec<UnixStream> = (0..ranks)
        .map(|r| {
            let mut s = connect(&setup.path);
            s.write_all(&hello(job, r, ranks, 1000 + r as u32)).unwrap();
            s
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while setup
        .service
        .job(&ROOT, job)
        .map_or(true, |j| j.streams < ranks as usize)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "job {job}'s hellos never all arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    for (r, s) in streams.iter_mut().enumerate() {
        let mut bytes = work(r as i32, ranks, n);
        bytes.extend(end(n));
        s.write_all(&bytes).unwrap();
    }
}

/// The kept run of `job`, once it is there (waits up to 30 s).
pub fn run_of(setup: &Setup, job: &str) -> Kept {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(k) = setup
            .runs
            .lock()
            .unwrap()
            .iter()
            .find(|k| k.job == job && !k.dump)
        {
            return k.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {job} was never folded; log: {:?}",
            setup.log.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Open descriptors and threads of this process.
pub fn fds_and_threads() -> (usize, usize) {
    let n = |d: &str| std::fs::read_dir(d).unwrap().count();
    (n("/proc/self/fd"), n("/proc/self/task"))
}

/// This process's resident set, after the allocator has returned what it
/// holds free (`malloc_trim`): what is measured is memory in use, not the
/// free space per-thread arenas keep after many readers ran at once.
pub fn rss_kib() -> u64 {
    // SAFETY: malloc_trim only releases free memory; no preconditions.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
