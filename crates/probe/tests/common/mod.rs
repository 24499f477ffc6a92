//! Shared helpers for tests that run real programs under the probe:
//! find `libhark.so`, compile a small program with any compiler command
//! (`cc`, `mpicc`, `mpif90`, ...), run it preloaded with a collector from
//! `hark_transport::collect` listening, and hand back the decoded streams.
//!
//! ```ignore
//! mod common;
//! let exe = common::compile("tests/programs/posix_bytes.c", &["cc"], &[]);
//! let run = common::Probed::new("posix").run(&exe, &["out.dat"]);
//! assert!(run.status.success(), "{}", run.stderr);
//! let s = run.only_stream();
//! ```
#![allow(dead_code)]

#[path = "../../../../tests/support/remove_at_exit.rs"]
mod remove_at_exit;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub use hark_transport::collect::{serve_collect_with, Collector, Options, Stream};

/// The crate's directory (where `tests/programs` lives).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `libhark.so`, built by cargo next to this test binary (cargo builds
/// every crate type of the library before its integration tests). Builds
/// it with `cargo build -p hark-probe` if it is somehow missing.
pub fn probe_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/<test>: the library cargo just built sits
        // next to it, and is also copied to target/<profile>/.
        let deps = exe.parent().expect("deps dir");
        let lib = [deps.join("libhark.so"), deps.join("../libhark.so")]
            .into_iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| deps.join("libhark.so"));
        if !lib.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let st = Command::new(cargo)
                .args(["build", "-p", "hark-probe"])
                .status()
                .expect("running cargo build");
            assert!(st.success(), "cargo build -p hark-probe failed");
        }
        assert!(lib.exists(), "no libhark.so at {}", lib.display());
        lib
    })
    .clone()
}

/// A fresh directory under the system temp dir for this test.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hark-probe-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    remove_at_exit::remove_at_exit(&d);
    d
}

/// Compiles `source` (relative to the crate, or absolute) with `compiler`
/// (a command and its first arguments, e.g. `["cc"]` or `["mpicc"]`) and
/// `flags` (after the source: libraries); returns the executable. Panics
/// with the compiler's output on failure.
pub fn compile(source: &str, compiler: &[&str], flags: &[&str]) -> PathBuf {
    compile_many(&[source], compiler, flags)
}

/// As [`compile`], for several sources in order (a Fortran module first);
/// the executable is named after the last one. Module files go to the
/// output directory.
pub fn compile_many(sources: &[&str], compiler: &[&str], flags: &[&str]) -> PathBuf {
    let srcs: Vec<PathBuf> = sources.iter().map(|s| crate_dir().join(s)).collect();
    let last = srcs.last().expect("a source");
    let stem = last.file_stem().unwrap().to_string_lossy().into_owned();
    let out_dir = std::env::temp_dir().join(format!("hark-probe-bin-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    remove_at_exit::remove_at_exit(&out_dir);
    // Tests of one binary run in parallel and may build the same source:
    // every build gets its own file, never overwriting one being run.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exe = out_dir.join(format!("{stem}-{n}"));
    let out = Command::new(compiler[0])
        .args(&compiler[1..])
        .arg("-o")
        .arg(&exe)
        .args(&srcs)
        .args(flags)
        .current_dir(&out_dir)
        .output()
        .unwrap_or_else(|e| panic!("running {compiler:?}: {e}"));
    assert!(
        out.status.success(),
        "{compiler:?} failed on {sources:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What a probed run produced.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Every stream the collector saw, by connection.
    pub streams: Vec<Stream>,
}

impl Run {
    /// The one stream of a single-process run.
    pub fn only_stream(&self) -> &Stream {
        assert_eq!(
            self.streams.len(),
            1,
            "expected one stream, got {}: {:#?}\nstderr: {}",
            self.streams.len(),
            self.streams.iter().map(|s| &s.hello).collect::<Vec<_>>(),
            self.stderr
        );
        &self.streams[0]
    }
}

/// A collector plus the environment that points a program at it.
pub struct Probed {
    pub collector: Collector,
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
    /// How many streams to wait for after the program exits (default 1).
    pub streams: usize,
    pub timeout: Duration,
}

impl Probed {
    /// A collector on a Unix socket in a scratch directory named after `tag`.
    pub fn new(tag: &str) -> Probed {
        Probed::with_options(tag, Options::default())
    }

    /// As [`Probed::new`], with collector options (a slow server).
    pub fn with_options(tag: &str, options: Options) -> Probed {
        let dir = scratch(tag);
        let addr = format!("unix:{}", dir.join("hark.sock").display());
        Probed::at(dir, &addr, options)
    }

    /// A collector on TCP, loopback, on a free port.
    pub fn tcp(tag: &str) -> Probed {
        Probed::at(scratch(tag), "tcp:127.0.0.1:0", Options::default())
    }

    /// A collector in TLS on loopback, on a free port, with a certificate
    /// for 127.0.0.1 signed by the CA in `DIR/ca.pem` (and another CA in
    /// `DIR/other-ca.pem`); `HARK_TLS_CA` is the first.
    pub fn tls(tag: &str) -> Probed {
        let dir = scratch(tag);
        let config = make_pki(&dir);
        let collector = hark_transport::collect::serve_collect_tls("tls:127.0.0.1:0", config)
            .expect("collector");
        let ca = dir.join("ca.pem").display().to_string();
        Probed::around(dir, collector).env("HARK_TLS_CA", &ca)
    }

    fn at(dir: PathBuf, addr: &str, options: Options) -> Probed {
        let collector = serve_collect_with(addr, options).expect("collector");
        Probed::around(dir, collector)
    }

    fn around(dir: PathBuf, collector: Collector) -> Probed {
        Probed {
            env: vec![
                ("HARK_ADDR".into(), collector.addr().to_string()),
                ("LD_PRELOAD".into(), probe_lib().display().to_string()),
                // These tests check the program's own events one by one:
                // no CPU-availability readings among them (the readings
                // are checked by the CLI's CPU tests).
                ("HARK_CPU_MS".into(), "0".into()),
                // Nor node-sensor readings.
                ("HARK_SENSORS_MS".into(), "0".into()),
                // Nor counter readings after each region's end.
                ("HARK_COUNTERS".into(), "none".into()),
            ],
            collector,
            dir,
            streams: 1,
            timeout: Duration::from_secs(60),
        }
    }

    /// Adds an environment variable for the program.
    pub fn env(mut self, k: &str, v: &str) -> Probed {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Waits for this many streams instead of one.
    pub fn streams(mut self, n: usize) -> Probed {
        self.streams = n;
        self
    }

    /// Runs `program args` in the scratch directory with the probe, waits
    /// for the streams to close, and returns everything.
    /// The program starts with SIGINT and SIGQUIT at their defaults, as a
    /// terminal's shell starts it: a suite started in the background
    /// (`cmd &` without job control) ignores them, children inherit that,
    /// and the probe rightly keeps what it inherits.
    pub fn run(&self, program: &Path, args: &[&str]) -> Run {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.dir);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                Ok(())
            });
        }
        self.run_command(cmd)
    }

    /// As [`Probed::run`], for a prepared command (`mpirun ...`).
    pub fn run_command(&self, mut cmd: Command) -> Run {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = output_within(cmd, self.timeout);
        let streams = self
            .collector
            .wait_closed(self.streams, self.timeout)
            .unwrap_or_else(|e| {
                panic!(
                    "{e}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            streams,
        }
    }
}

/// Runs `cmd` to completion, killing it (and failing the test) if it takes
/// longer than `timeout`: a hung probe must fail a test, not hang the suite.
pub fn output_within(mut cmd: Command, timeout: Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the program");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the program did not finish within {timeout:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    std::process::Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

/// Sum of `bytes` over the events of `op` on file `path` in `s`.
pub fn bytes_on(s: &Stream, op: u16, path: &str) -> u64 {
    let id = s
        .file_id(path)
        .unwrap_or_else(|| panic!("no definition for {path}"));
    s.events_of(op)
        .filter(|e| e.obj.get() == id)
        .map(|e| e.bytes.get())
        .sum()
}

/// Number of events of `op` on file `path` in `s`.
pub fn count_on(s: &Stream, op: u16, path: &str) -> usize {
    let id = s
        .file_id(path)
        .unwrap_or_else(|| panic!("no definition for {path}"));
    s.events_of(op).filter(|e| e.obj.get() == id).count()
}

/// A CA (`dir/ca.pem`), another CA (`dir/other-ca.pem`), and a TLS
/// configuration for 127.0.0.1 with a certificate the first signed.
pub fn make_pki(dir: &Path) -> std::sync::Arc<hark_tls::rustls::ServerConfig> {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let mut other = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other = other.self_signed(&other_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    hark_tls::server_config(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap()
}
