//! Shared helpers of the MPI integration tests: build a test program with an
//! MPI flavour's compiler wrapper, run it under real `mpirun` with the probe
//! preloaded and a collector listening, and render what arrived as text that
//! a test compares with what the program did.
#![allow(dead_code)]

use hark_transport::collect::{self, Stream};
use hark_wire::{
    op, ClockPhase, ClockReference, Def, Event, EXTRA_NONE, PEER_ANY, PEER_NONE, PEER_NULL,
    PEER_ROOT,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// An MPI installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mpi {
    OpenMpi,
    Mpich,
}

impl Mpi {
    fn suffix(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "openmpi",
            Mpi::Mpich => "mpich",
        }
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `libhark.so` cargo built with this test binary: `cargo test` leaves
/// the fresh one next to it in `deps/` (and only `cargo build` copies it up).
pub fn libhark() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        let lib = dir.join("libhark.so");
        if lib.exists() {
            return lib;
        }
    }
    panic!(
        "libhark.so not found near {}; build the probe first",
        deps.display()
    );
}

fn work_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("hark-mpi-tests");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `tests/programs/mpi/<src>` with `mpi`'s wrapper for its
/// language (by extension: `.c`, `.cc`, `.f`/`.f90`), with `flags`.
pub fn build(mpi: Mpi, src: &str, flags: &[&str]) -> PathBuf {
    let path = repo().join("tests/programs/mpi").join(src);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let cc = match ext {
        "c" => "mpicc",
        "cc" | "cpp" => "mpicxx",
        _ => "mpif90",
    };
    let stem = path.file_stem().unwrap().to_str().unwrap();
    // One executable per (source, flags, library): tests run in parallel.
    let tag: String = flags
        .iter()
        .flat_map(|f| f.chars())
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let name = format!("{stem}{tag}-{}", mpi.suffix());
    let out = work_dir().join(&name);
    let moddir = work_dir().join(format!("mod-{name}"));
    std::fs::create_dir_all(&moddir).unwrap();
    let mut cmd = Command::new(format!("{cc}.{}", mpi.suffix()));
    cmd.arg("-O1").arg("-o").arg(&out).arg(&path).args(flags);
    if cc == "mpif90" {
        cmd.arg("-J").arg(&moddir);
    } else {
        cmd.arg("-pthread");
    }
    let res = cmd.output().expect("run the MPI compiler wrapper");
    assert!(
        res.status.success(),
        "compiling {src} with {cc}.{} failed:\n{}",
        mpi.suffix(),
        String::from_utf8_lossy(&res.stderr)
    );
    out
}

/// What a job left behind.
pub struct Job {
    pub streams: Vec<Stream>,
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
}

/// Runs `exe args` on `np` ranks under `mpi`'s `mpirun`, with the probe
/// preloaded (unless `probe` is false) and a collector listening; waits for
/// `np` streams to close.
pub fn run_with(
    mpi: Mpi,
    np: usize,
    exe: &Path,
    args: &[&str],
    probe: bool,
    env: &[(&str, &str)],
) -> Job {
    run_in_dir(mpi, np, exe, args, probe, env, None)
}

/// [`run_with`] in working directory `cwd` (the ranks start there).
pub fn run_in_dir(
    mpi: Mpi,
    np: usize,
    exe: &Path,
    args: &[&str],
    probe: bool,
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Job {
    run_job(mpi, np, np, exe, args, probe, env, cwd)
}

/// [`run_with`] for a job of which only `streams` processes reach the
/// collector (the others' probes are off or cannot connect).
pub fn run_reaching(
    mpi: Mpi,
    np: usize,
    streams: usize,
    exe: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Job {
    run_job(mpi, np, streams, exe, args, true, env, None)
}

/// [`run_with`] for a job that starts more processes than its `np` ranks
/// (`MPI_Comm_spawn`): waits for `streams` streams.
pub fn run_spawning(mpi: Mpi, np: usize, streams: usize, exe: &Path) -> Job {
    run_job(mpi, np, streams, exe, &[], true, &[], None)
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    mpi: Mpi,
    np: usize,
    streams: usize,
    exe: &Path,
    args: &[&str],
    probe: bool,
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Job {
    run_contexts(mpi, &[(np, exe, args)], streams, probe, env, cwd)
}

/// Runs an MPMD job, one context per `(np, exe)` (`mpirun -np 2 a : -np 2
/// b`), with the probe preloaded (unless `probe` is false) and `env` set in
/// every context; waits for every process's stream.
pub fn run_mpmd(mpi: Mpi, programs: &[(usize, &Path)], probe: bool, env: &[(&str, &str)]) -> Job {
    let contexts: Vec<(usize, &Path, &[&str])> = programs
        .iter()
        .map(|&(np, exe)| (np, exe, &[][..]))
        .collect();
    let streams = programs.iter().map(|(np, _)| np).sum();
    run_contexts(mpi, &contexts, streams, probe, env, None)
}

fn run_contexts(
    mpi: Mpi,
    contexts: &[(usize, &Path, &[&str])],
    streams: usize,
    probe: bool,
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Job {
    // One job at a time: MPI ranks busy-poll, and several jobs at once on a
    // small machine slow each other down past any timeout.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let sock = std::env::temp_dir().join(format!("hark-mpi-{}-{n}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let addr = format!("unix:{}", sock.display());
    let collector = collect::serve_collect(&addr).expect("collector listens");
    let mut cmd = Command::new(format!("mpirun.{}", mpi.suffix()));
    let scratch = work_dir().join(format!("run-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut vars: Vec<(String, String)> = vec![
        ("HARK_IO".into(), "0".into()),
        ("HARK_LOSSLESS".into(), "1".into()),
        // Where test programs may write files.
        ("HARK_TEST_DIR".into(), scratch.display().to_string()),
    ];
    if probe {
        vars.push(("LD_PRELOAD".into(), libhark().display().to_string()));
        vars.push(("HARK_ADDR".into(), addr.clone()));
    }
    for (k, v) in env {
        vars.push((k.to_string(), v.to_string()));
    }
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    if mpi == Mpi::OpenMpi {
        cmd.arg("--oversubscribe");
    }
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    for (i, (np, exe, args)) in contexts.iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        // Open MPI's `-x` applies to the context it is given in; Hydra
        // passes its own environment to every context.
        if mpi == Mpi::OpenMpi {
            for (k, _) in &vars {
                cmd.arg("-x").arg(k);
            }
        }
        cmd.arg("-np").arg(np.to_string()).arg(exe).args(*args);
    }
    let out = output_within(cmd, Duration::from_secs(120));
    // A failed job may still have streams (a killed rank); one that never
    // started has none, so it is not waited for long.
    let n = streams;
    let streams = if probe && out.status.success() {
        collector
            .wait_closed(n, Duration::from_secs(30))
            .unwrap_or_else(|e| {
                panic!(
                    "{n} streams did not arrive: {e:?}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    } else if probe {
        collector
            .wait_closed(n, Duration::from_secs(5))
            .unwrap_or_else(|_| collector.streams())
    } else {
        Vec::new()
    };
    // The collector wakes its accept loop through the socket: drop it
    // before removing the socket file.
    drop(collector);
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_dir_all(&scratch);
    Job {
        streams,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        success: out.status.success(),
    }
}

/// Runs `cmd` to completion, or kills it (and fails the test) after `limit`:
/// a job that hangs must not hang the test suite.
fn output_within(mut cmd: Command, limit: Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mpirun");
    // Drain the pipes on threads so a chatty job cannot block on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for mpirun") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the job did not finish within {limit:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// [`run_with`] with the probe and no extra environment.
pub fn run(mpi: Mpi, np: usize, exe: &Path, args: &[&str]) -> Job {
    run_with(mpi, np, exe, args, true, &[])
}

impl Job {
    /// The stream of world rank `r`.
    pub fn rank(&self, r: i32) -> &Stream {
        self.streams
            .iter()
            .find(|s| s.ranks.first().map(|i| i.world_rank) == Some(r))
            .unwrap_or_else(|| panic!("no stream says it is rank {r}"))
    }
}

fn peer(p: i32) -> String {
    match p {
        PEER_ANY => "any".into(),
        PEER_NULL => "null".into(),
        PEER_ROOT => "root".into(),
        PEER_NONE => "-".into(),
        p => p.to_string(),
    }
}

/// One line per MPI event and detail of `s`, in order: the function, the
/// communicator as its members' world ranks (`[0 1 2 3]`), and the fields
/// that apply. `keep` decides which events to show.
pub fn render_with(s: &Stream, keep: impl Fn(&Event) -> bool) -> Vec<String> {
    let mut comms: HashMap<u32, String> = HashMap::new();
    for d in &s.defs {
        if let Def::Comm {
            id,
            members,
            remote,
        } = d
        {
            let m: Vec<String> = members.iter().map(|r| r.to_string()).collect();
            let mut text = format!("[{}]", m.join(" "));
            if !remote.is_empty() {
                let r: Vec<String> = remote.iter().map(|r| r.to_string()).collect();
                text = format!("{text}<>[{}]", r.join(" "));
            }
            comms.insert(*id, text);
        }
        if let Def::File { id, path } = d {
            let name = Path::new(path)
                .file_name()
                .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
            comms.insert(*id, format!("file:{name}"));
        }
    }
    let mut out = Vec::new();
    for e in &s.events {
        let code = e.op();
        if !matches!(op::kind(code), op::OpKind::Mpi(_) | op::OpKind::Detail) || !keep(e) {
            continue;
        }
        let obj = e.obj.get();
        let obj = if obj == 0 {
            "-".to_string()
        } else {
            comms
                .get(&obj)
                .cloned()
                .unwrap_or_else(|| format!("#{obj}"))
        };
        let extra = match e.extra() {
            EXTRA_NONE => "-".to_string(),
            x => x.to_string(),
        };
        out.push(format!(
            "{} {} peer={} tag={} bytes={} extra={}",
            op::name(code),
            obj,
            peer(e.peer.get()),
            e.tag.get(),
            e.bytes.get(),
            extra
        ));
    }
    out
}

/// [`render_with`], leaving out `MPI_Test*` calls that completed nothing
/// and `MPI_Iprobe`/`MPI_Improbe` calls that found nothing (how often a
/// program polls is not deterministic).
pub fn render(s: &Stream) -> Vec<String> {
    render_with(s, |e| {
        let name = op::name(e.op());
        let idle_test = name.starts_with("MPI_Test") && e.bytes.get() == 0;
        let idle_probe = matches!(name, "MPI_Iprobe" | "MPI_Improbe") && e.extra() == 0;
        !(idle_test || idle_probe)
    })
}

/// Asserts that `got` equals `want` (a block of lines; blank lines and
/// leading spaces ignored), printing both on failure.
pub fn assert_lines(what: &str, got: &[String], want: &str) {
    let want: Vec<String> = want
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if got != want.as_slice() {
        panic!(
            "{what}: recorded events differ.\n--- got ---\n{}\n--- want ---\n{}\n",
            got.join("\n"),
            want.join("\n")
        );
    }
}

/// The expected lines of each rank, from `tests/programs/mpi/<name>`:
/// blocks headed `== rank N`, `#` lines are comments.
pub fn expected(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("tests/programs/mpi").join(name)).unwrap();
    let mut ranks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with("== rank") {
            ranks.push(String::new());
        } else if let Some(r) = ranks.last_mut() {
            r.push_str(line);
            r.push('\n');
        }
    }
    ranks
}

/// Builds `src` with `flags`, runs it on as many ranks as `expected` has
/// blocks, and asserts every rank's stream renders as expected. With
/// `HARK_BLESS=1` in the environment it rewrites the expected file from what
/// was recorded instead (review the diff before committing it).
pub fn check_program(mpi: Mpi, src: &str, flags: &[&str], expected_file: &str) {
    let exe = build(mpi, src, flags);
    let want = expected(expected_file);
    let job = run(mpi, want.len(), &exe, &[]);
    assert!(job.success, "the job failed: {}", job.stderr);
    if std::env::var_os("HARK_BLESS").is_some() {
        let path = repo().join("tests/programs/mpi").join(expected_file);
        let old = std::fs::read_to_string(&path).unwrap();
        let mut text: String = old
            .lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        for r in 0..want.len() {
            text.push_str(&format!("== rank {r}\n"));
            for line in render(job.rank(r as i32)) {
                text.push_str(&line);
                text.push('\n');
            }
        }
        std::fs::write(&path, text).unwrap();
        return;
    }
    for (r, want) in want.iter().enumerate() {
        let s = job.rank(r as i32);
        assert!(s.is_clean(), "rank {r}: {:?}", s.closed);
        // Every init path (C, each Fortran binding) aligns the clock at
        // MPI_Init and at MPI_Finalize, each rank with the server's clock.
        let phases: Vec<_> = s.clocks.iter().map(|c| c.phase).collect();
        assert_eq!(
            phases,
            [ClockPhase::Init, ClockPhase::Finalize],
            "{src} {flags:?} on {mpi:?}, rank {r}: clock alignments"
        );
        assert!(
            s.clocks
                .iter()
                .all(|c| c.reference == ClockReference::Server && c.round_trip_ns > 0),
            "rank {r}: {:?}",
            s.clocks
        );
        assert_lines(
            &format!("{src} {flags:?} on {mpi:?}, rank {r}"),
            &render(s),
            want,
        );
    }
}

/// [`render`] split by the thread that recorded each line: one sequence per
/// thread, sorted (thread numbers follow first use, which races).
pub fn render_by_thread(s: &Stream) -> Vec<Vec<String>> {
    let threads: std::collections::BTreeSet<u16> =
        s.events.iter().map(|e| e.thread.get()).collect();
    let mut out: Vec<Vec<String>> = threads
        .into_iter()
        .map(|t| render_with(s, |e| e.thread.get() == t))
        .filter(|l| !l.is_empty())
        .collect();
    out.sort();
    out
}
