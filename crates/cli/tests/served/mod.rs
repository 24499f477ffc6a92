//! A `hark serve` for one test: started on a private socket, asked through
//! `hark ctl --json`, and stopped (by its pid) when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Served {
    child: Child,
    pub addr: String,
    pub runs: PathBuf,
    pub log: PathBuf,
}

impl Served {
    /// Starts `hark serve` with its socket and runs under `dir`.
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        Served::start_under(dir, extra, None)
    }

    /// Starts `hark serve` as [`Served::start`] does, with its descriptors
    /// limited to `nofile` (soft and hard) when given.
    pub fn start_under(dir: &Path, extra: &[&str], nofile: Option<u64>) -> Served {
        let sock = dir.join("hark.sock");
        let runs = dir.join("runs");
        let log = dir.join("serve.log");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}"))
                    .arg("--")
                    .arg(super::common::hark());
                c
            }
            None => Command::new(super::common::hark()),
        };
        let child = cmd
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", sock.display()))
            .arg("--runs")
            .arg(&runs)
            .args(["--linger", "0.5"])
            .args(extra)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let ctl = PathBuf::from(format!("{}.ctl", sock.display()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ctl.exists() {
            assert!(Instant::now() < deadline, "hark serve did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Served {
            child,
            addr: format!("unix:{}", sock.display()),
            runs,
            log,
        }
    }

    /// `hark ctl --server ADDR --json ARGS...`, as root or as `user`.
    pub fn ctl(&self, user: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = match user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--"]).arg(super::common::hark());
                c
            }
            None => Command::new(super::common::hark()),
        };
        cmd.args(["ctl", "--json", "--server", &self.addr])
            .args(args)
            .output()
            .unwrap()
    }

    /// The answer of a `hark ctl` that must succeed, as JSON.
    pub fn ask(&self, user: Option<&str>, args: &[&str]) -> serde_json::Value {
        let out = self.ctl(user, args);
        assert!(
            out.status.success(),
            "hark ctl {args:?} as {user:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The jobs `user` sees (`hark ctl list` without the dumps).
    pub fn jobs(&self, user: Option<&str>) -> Vec<serde_json::Value> {
        self.listed(user)
            .into_iter()
            .filter(|j| j["state"] != "dump")
            .collect()
    }

    /// The dumps `user` sees.
    pub fn dumps(&self, user: Option<&str>) -> Vec<serde_json::Value> {
        self.listed(user)
            .into_iter()
            .filter(|j| j["state"] == "dump")
            .collect()
    }

    /// Everything `hark ctl list` gives `user`.
    pub fn listed(&self, user: Option<&str>) -> Vec<serde_json::Value> {
        self.ask(user, &["list"])["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until `pred` holds of the jobs root sees.
    pub fn wait_jobs(
        &self,
        what: &str,
        pred: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let jobs = self.jobs(None);
            if pred(&jobs) {
                return jobs;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: never; jobs {jobs:?}; log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `hark run --server ADDR -- COMMAND` in a session of its own (so the
    /// whole job can be killed as one group), as root or as `user`.
    pub fn run(&self, user: Option<&str>, command: &[String]) -> Child {
        self.run_env(user, command, &[])
    }

    /// [`Served::run`] with more environment variables for the job.
    pub fn run_env(&self, user: Option<&str>, command: &[String], env: &[(&str, &str)]) -> Child {
        let mut cmd = Command::new("setsid");
        cmd.envs(env.iter().copied());
        if let Some(u) = user {
            cmd.args(["runuser", "-u", u, "--"]);
        }
        cmd.arg(super::common::hark())
            .args(["run", "--server", &self.addr, "--probe"])
            .arg(super::common::probe())
            .arg("--")
            .args(command);
        super::common::mpi_env(&mut cmd);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the service as an operator would (SIGTERM), waits for it, and
    /// returns its log.
    pub fn stop(mut self) -> String {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let log = self.log();
        assert!(status.success(), "hark serve ended with {status}: {log}");
        log
    }

    /// The body of `GET {url}{path}` as root; the test fails on an error
    /// status.
    pub fn get(&self, path: &str) -> String {
        let out = Command::new("curl")
            .args(["-s", "-f", "-S"])
            .arg(format!("{}{path}", self.url()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "GET {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The CSRF token `user` (root: `None`) sends with a POST to the live
    /// view (`X-Hark-Csrf`), from `GET /api/session`.
    pub fn csrf(&self, user: Option<&str>) -> String {
        let out = as_user(user, "curl")
            .args(["-s", "-f", "-S"])
            .arg(format!("{}api/session", self.url()))
            .output()
            .unwrap();
        let session: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("GET api/session as {user:?}: {e}: {out:?}"));
        session["csrf"].as_str().expect("a CSRF token").to_string()
    }

    /// `POST {url}{path}` of the JSON `body` as `user` (root: `None`), as
    /// the page sends it (its content type, its CSRF token), with `extra`
    /// curl arguments: the status and the answer.
    pub fn post(
        &self,
        user: Option<&str>,
        path: &str,
        body: &str,
        extra: &[&str],
    ) -> (String, String) {
        let csrf = self.csrf(user);
        let out = as_user(user, "curl")
            .args(["-s", "-w", "\n%{http_code}", "-X", "POST"])
            .args(["-H", "Content-Type: application/json"])
            .arg("-H")
            .arg(format!("X-Hark-Csrf: {csrf}"))
            .args(extra)
            .args(["-d", body])
            .arg(format!("{}{path}", self.url()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (answer, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.to_string(), answer.to_string())
    }

    /// The live view's address, `http://HOST:PORT/`, when started with
    /// `--http`.
    pub fn url(&self) -> String {
        // Printed just after the control socket that `start` waits for.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log();
            if let Some(url) = log
                .lines()
                .find_map(|l| l.strip_prefix("hark serve: Live view at "))
            {
                return url.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "hark serve printed no live view address: {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates the local user `name` unless it exists (it stays for later
/// runs), and returns its uid. Needs root.
pub fn ensure_user(name: &str) -> u32 {
    let id = || Command::new("id").args(["-u", name]).output().unwrap();
    if !id().status.success() {
        let out = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", name])
            .output()
            .unwrap();
        assert!(
            out.status.success() || id().status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&id().stdout)
        .trim()
        .parse()
        .unwrap()
}

/// Whether this test runs as root; if not, says the test is skipped.
pub fn root_or_skip() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: creating users and switching to them needs root");
    }
    root
}

/// `program`, run as `user` (`runuser`) or as root.
pub fn as_user(user: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// Kills a session started by [`Served::run`], every process in it.
pub fn kill_session(child: &mut Child) {
    // SAFETY: kill has no memory preconditions; the group is the session
    // `setsid` made, led by the child's pid.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}

/// The uids of local users `names`, created (without a home) where missing;
/// they stay for later runs.
pub fn local_users(names: &[&str]) -> Vec<u32> {
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let uid = |name: &str| -> Option<u32> {
        let out = Command::new("id").args(["-u", name]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    names
        .iter()
        .map(|name| {
            uid(name).unwrap_or_else(|| {
                let out = Command::new("useradd")
                    .args(["--no-create-home", "--shell", "/bin/sh", name])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "useradd {name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                uid(name).unwrap()
            })
        })
        .collect()
}
