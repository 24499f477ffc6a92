//! Streams that lie about who they are get nothing into a `hark serve`:
//! of a real two-rank job, a stream reusing a live rank's pid and host, one
//! claiming a rank beyond the world, and a second one for a held rank are
//! each refused, closed, with a logged reason, and the job's profile keeps
//! its two real ranks. Over TCP, the bytes a real probe sent, captured and
//! sent again, are refused as a replay. A service whose `--http` port is
//! taken leaves no control socket behind.

mod common;
mod served;

use common::*;
use served::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writing its length, less one for the NUL.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    let n = buf.iter().position(|&c| c == 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Whether the peer closes `s` (within 10 s) rather than keep it open.
fn closed_by_service(s: &mut impl Read) -> bool {
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() != std::io::ErrorKind::WouldBlock,
        }
    }
}

fn wait_for(what: &str, pred: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pred() {
        assert!(Instant::now() < deadline, "{what}: never");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_reused_pid_a_rank_beyond_the_world_and_a_held_rank_are_refused() {
    let dir = scratch("forged");
    let served = Served::start(&dir, &[]);
    let stop = dir.join("stop");
    let script = format!(
        "echo $$ > {d}/pid.$OMPI_COMM_WORLD_RANK; while [ ! -e {s} ]; do sleep 0.05; done",
        d = dir.display(),
        s = stop.display()
    );
    let argv: Vec<String> = ["mpirun", "--oversubscribe", "-np", "2", "sh", "-c", &script]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut job = served.run(None, &argv);
    // Both ranks have started (their loops' `sleep`s come and go as
    // streams of their own).
    wait_for("both ranks started", || {
        dir.join("pid.0").exists() && dir.join("pid.1").exists()
    });
    let jobs = served.wait_jobs("the job registered", |j| j.len() == 1);
    // Their shipping threads have said hello well before a second is out.
    std::thread::sleep(Duration::from_secs(1));
    let name = jobs[0]["job"].as_str().unwrap().to_string();
    let pid0: u32 = std::fs::read_to_string(dir.join("pid.0"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let forge = |pid: u32, rank: i32, size: i32| {
        let mut bytes = Vec::new();
        hark_wire::Hello {
            program: "sh".into(),
            argv: vec!["sh".into()],
            host: host(),
            pid,
            rank,
            size,
            job: name.clone(),
            clock: hark_wire::ClockSource::Monotonic,
            clock_ns: 1,
            realtime_ns: 1,
            pack_size: 1 << 20,
            secret: String::new(),
            parent: 0,
        }
        .encode(&mut bytes);
        let mut s =
            std::os::unix::net::UnixStream::connect(served.addr.strip_prefix("unix:").unwrap())
                .unwrap();
        s.write_all(&bytes).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    for (pid, rank, size, why) in [
        (pid0, 0, 2, "is already streaming in job"),
        (999_001, 5, 2, "claims world rank 5 of a world of 2"),
        (999_002, 1, 2, "world rank 1 is already streaming from pid"),
    ] {
        let mut s = forge(pid, rank, size);
        assert!(closed_by_service(&mut s), "{why}: kept open");
        let log = served.log();
        assert!(log.contains(why), "{why}: not in the log:\n{log}");
    }
    std::fs::write(&stop, "").unwrap();
    assert!(job.wait().unwrap().success());
    let jobs = served.wait_jobs("the job written", |j| {
        j.len() == 1 && j[0]["state"] != "running" && !j[0]["dir"].is_null()
    });
    let profile: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(jobs[0]["dir"].as_str().unwrap()).join("profile.json"))
            .unwrap(),
    )
    .unwrap();
    let sh = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "sh")
        .expect("the program sh");
    assert_eq!(sh["ranks"], 2, "{}", sh["rank_info"]);
    served.stop();
}

#[test]
fn a_tcp_stream_captured_and_sent_again_is_refused_as_a_replay() {
    let dir = scratch("replay");
    let token = token_file(&dir, "token", "0123456789abcdef-replay");
    let (mut serve, log, service) = tcp_service(&dir, &token);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    // A proxy that keeps what the probe sends.
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_addr = proxy.local_addr().unwrap();
    let upstream = service.clone();
    let captured = std::thread::spawn(move || {
        let (mut probe, _) = proxy.accept().unwrap();
        let mut up = TcpStream::connect(&upstream).unwrap();
        let mut down = up.try_clone().unwrap();
        let mut back = probe.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut down, &mut back);
        });
        let mut bytes = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match probe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    bytes.extend_from_slice(&buf[..n]);
                    let _ = up.write_all(&buf[..n]);
                }
            }
        }
        let _ = up.shutdown(std::net::Shutdown::Write);
        bytes
    });
    let out = Command::new("sh")
        .args(["-c", "true"])
        .env("LD_PRELOAD", probe())
        .env(
            "HARK_ADDR",
            format!("0123456789abcdef-replay@tcp:{proxy_addr}"),
        )
        .env("HARK_JOB", "replayed")
        .output_within()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bytes = captured.join().unwrap();
    wait_for("the real job written", || {
        read_log().contains("Job 1 (replayed) finished")
    });
    let mut again = TcpStream::connect(&service).unwrap();
    again.write_all(&bytes).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(closed_by_service(&mut again), "the replay was kept open");
    std::thread::sleep(Duration::from_millis(700));
    let text = read_log();
    assert!(
        text.contains("already accepted (a replayed stream)"),
        "{text}"
    );
    assert_eq!(text.matches("registered by").count(), 1, "{text}");
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(serve.0.id() as i32, libc::SIGTERM) };
    assert!(serve.0.wait().unwrap().success());
}

/// `hark run --server tcp:` with a wrong token: the service cuts every
/// stream, and `hark run`, which cannot see that over TCP, never says the
/// service writes the job.
#[test]
fn a_wrong_tcp_token_is_not_reported_as_a_written_job() {
    let dir = scratch("wrong-token");
    let token = token_file(&dir, "token", "0123456789abcdef-right");
    let wrong = token_file(&dir, "wrong", "0123456789abcdef-wrong");
    let (mut serve, log, service) = tcp_service(&dir, &token);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    probe();
    let out = Command::new(hark())
        .args(["run", "--server", &format!("tcp:{service}"), "--token-file"])
        .arg(&wrong)
        .args(["--", "sh", "-c", "true"])
        .output_within()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.contains("writes job"), "{said}");
    assert!(
        said.contains("cannot see whether the service accepted it"),
        "{said}"
    );
    wait_for("the streams cut", || read_log().contains("Cut off"));
    assert!(!read_log().contains("registered by"), "{}", read_log());
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(serve.0.id() as i32, libc::SIGTERM) };
    assert!(serve.0.wait().unwrap().success());
}

/// A token file `name` in `dir` holding `token` (mode 0600, as required).
fn token_file(dir: &Path, name: &str, token: &str) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    f
}

/// A `hark serve` on a TCP port of localhost with site token `token`, its
/// runs in `dir`: the service (killed when dropped), its log and its
/// address, once it listens.
fn tcp_service(dir: &Path, token: &Path) -> (Killed, PathBuf, String) {
    let log = dir.join("serve.log");
    let serve = Killed(
        Command::new(hark())
            .args(["serve", "--listen", "tcp:127.0.0.1:0", "--linger", "0.5"])
            .arg("--token-file")
            .arg(token)
            .arg("--runs")
            .arg(dir.join("runs"))
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for("the service listening", || {
        read_log().contains("Listening on tcp:")
    });
    let addr = read_log()
        .lines()
        .find_map(|l| l.split("Listening on tcp:").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    (serve, log, addr)
}

/// A child killed when the test ends, passed or failed.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_service_whose_http_port_is_taken_leaves_no_control_socket() {
    let dir = scratch("http-taken");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = dir.join("h.sock");
    let out = Command::new(hark())
        .arg("serve")
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .arg("--runs")
        .arg(dir.join("runs"))
        .arg("--http")
        .arg(taken.local_addr().unwrap().to_string())
        .output_within()
        .unwrap();
    assert!(!out.status.success());
    let ctl = dir.join("h.sock.ctl");
    assert!(
        !ctl.exists(),
        "{} is left behind: {}",
        ctl.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
