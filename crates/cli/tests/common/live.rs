//! A job watched while it runs: `hark run` of `live_phases.c` (or any command) in the background,
//! its live view's URL read off its stderr. Included by path by the live
//! tests (next to `common`).
#![allow(dead_code)]

use super::common;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `hark run` going on.
pub struct Job {
    pub child: Child,
    /// The live view, `http://127.0.0.1:PORT/`.
    pub url: String,
    /// The run directory it will write.
    pub run_dir: PathBuf,
    /// The program's stdout, captured to a file.
    pub stdout: PathBuf,
    /// Hark's stderr lines after the URL's.
    pub stderr: mpsc::Receiver<String>,
}

/// Starts `hark run` of `live_phases P2P TOTAL` on 4 ranks (Open MPI) in `dir`.
pub fn start(dir: &Path, p2p_s: u32, total_s: u32) -> Job {
    start_with(dir, p2p_s, total_s, &[])
}

/// [`start`], with more options for `hark run` (`--analysers 2`, say).
pub fn start_with(dir: &Path, p2p_s: u32, total_s: u32, hark_args: &[&str]) -> Job {
    common::probe();
    let exe = common::compile(common::OPEN_MPI.cc, Path::new("live_phases.c"), dir, &[]);
    let mut argv = common::launcher(common::OPEN_MPI, 4);
    argv.extend([
        exe.display().to_string(),
        p2p_s.to_string(),
        total_s.to_string(),
    ]);
    start_argv(dir, &argv, hark_args, &[])
}

/// `hark run` of any command `argv` in `dir`, with `env` set for it.
pub fn start_argv(dir: &Path, argv: &[String], hark_args: &[&str], env: &[(&str, &str)]) -> Job {
    common::probe();
    let run_dir = dir.join("run");
    let stdout = dir.join("stdout");
    let mut cmd = Command::new(common::hark());
    cmd.current_dir(dir)
        .args(["run", "-o"])
        .arg(&run_dir)
        .args(["--http", "127.0.0.1:0"])
        .args(hark_args)
        .arg("--")
        .args(argv)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::piped());
    common::mpi_env(&mut cmd);
    let mut child = cmd.spawn().expect("cannot run hark");
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("hark printed no live view address within 60 s");
        if let Some(url) = line.strip_prefix("hark: live view at ") {
            break url.to_string();
        }
    };
    Job {
        child,
        url,
        run_dir,
        stdout,
        stderr: rx,
    }
}

impl Job {
    /// GETs `path` (relative to the live view's address).
    pub fn get(&self, path: &str) -> Result<String, hark_live::client::Error> {
        hark_live::client::get(&format!("{}{path}", self.url))
    }

    /// The run's profile so far, as JSON.
    pub fn profile(&self, query: &str) -> serde_json::Value {
        serde_json::from_str(&self.get(&format!("api/runs/run/profile{query}")).unwrap()).unwrap()
    }

    /// Waits until the run has received more than `events` events.
    pub fn wait_for_events(&self, events: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let now = self.profile("")["accounting"]["events_received"]
                .as_u64()
                .unwrap();
            if now > events {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "no events after {events} within 120 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the run is `seconds` old on its own clock (the time
    /// slices' extent).
    pub fn wait_for_length(&self, seconds: f64) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let t: serde_json::Value =
                serde_json::from_str(&self.get("api/runs/run/timeline?bins=1").unwrap()).unwrap();
            if t["to_ns"].as_u64().unwrap_or(0) as f64 >= seconds * 1e9 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the run did not reach {seconds} s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for hark to end; its exit code.
    pub fn wait(mut self) -> i32 {
        let status = self.child.wait().unwrap();
        status.code().unwrap_or(-1)
    }

    /// Ends the job early: SIGTERM to hark, which passes it on.
    pub fn stop(mut self) {
        terminate(self.child.id());
        let _ = self.child.wait();
    }
}

/// `hark open` of the finished run in `run_dir` on a free port: the server
/// and its address, `http://127.0.0.1:PORT/`.
pub fn open(run_dir: &Path) -> (Child, String) {
    let mut open = Command::new(common::hark())
        .args(["open", "--http", "127.0.0.1:0"])
        .arg(run_dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(open.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (open, url)
}

fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}
