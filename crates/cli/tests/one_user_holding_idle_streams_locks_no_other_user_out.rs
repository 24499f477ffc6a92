//! One user of a machine-wide `hark serve` (as root) holds idle streams —
//! valid handshakes, then nothing — as many as the service's whole job
//! limit, or as many as its descriptors allow. Another user's job is still
//! measured and its run written: the limits per user stop the first user
//! short of the service's own, and the service keeps descriptors free for
//! writing runs, refusing connections that would take them, with why.

mod common;
mod served;

use common::*;
use served::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const USERS: [&str; 2] = ["hark-t-ann", "hark-t-bob"];

/// Opens one connection per `Hello` frame in the file, sends the frame,
/// says how many it holds, and holds them.
const HOLDER: &str = r#"
import socket, sys, time
data = open(sys.argv[2], "rb").read()
held, i = [], 0
while i < len(data):
    n = int.from_bytes(data[i + 4:i + 8], "little")
    frame, i = data[i:i + 8 + n], i + 8 + n
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
        s.sendall(frame)
        held.append(s)
    except OSError:
        pass
print("held", len(held), flush=True)
time.sleep(600)
"#;

/// `(job, pid, rank, size)` per stream, as `Hello` frames.
fn hellos(streams: &[(String, u32, i32, i32)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (job, pid, rank, size) in streams {
        hark_wire::Hello {
            program: "idle".into(),
            argv: vec!["./idle".into()],
            host: "node0".into(),
            pid: *pid,
            rank: *rank,
            size: *size,
            job: job.clone(),
            clock: hark_wire::ClockSource::Monotonic,
            clock_ns: 1,
            realtime_ns: 1,
            pack_size: 1 << 20,
            secret: String::new(),
            parent: 0,
        }
        .encode(&mut bytes);
    }
    bytes
}

/// `user` holds a connection per stream until the child is killed;
/// returns once they are all open (or refused).
fn hold(dir: &Path, served: &Served, user: &str, streams: &[(String, u32, i32, i32)]) -> Child {
    let script = dir.join("hold.py");
    let frames = dir.join(format!("hellos-{user}"));
    std::fs::write(&script, HOLDER).unwrap();
    std::fs::write(&frames, hellos(streams)).unwrap();
    let mut child = Command::new("runuser")
        .args(["-u", user, "--", "/usr/bin/python3"])
        .arg(&script)
        .arg(served.addr.strip_prefix("unix:").unwrap())
        .arg(&frames)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("held"), "the holder said {line:?}");
    child
}

/// Bob's job, measured and written while Ann holds her streams.
fn bobs_job_is_written(dir: &Path, served: &Served, bob: u64) {
    let (mut job, stop) = bobs_running_job(dir, served, bob);
    std::fs::write(&stop, "").unwrap();
    assert!(job.wait().unwrap().success());
    let jobs = served.wait_jobs("bob's job written", |j| {
        j.iter()
            .any(|j| j["owner"] == bob && j["state"] == "finished" && !j["dir"].is_null())
    });
    let log = served.log();
    assert!(!log.contains("Could not write"), "{log}");
    let dir = jobs.iter().find(|j| j["owner"] == bob).unwrap()["dir"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(Path::new(&dir).join("profile.json").exists(), "{dir}");
}

/// Root, with the test's users made; the uids of Ann and Bob.
fn as_root() -> Option<[u64; 2]> {
    if !root_or_skip() {
        return None;
    }
    let uids = local_users(&USERS);
    Some([uids[0] as u64, uids[1] as u64])
}

/// Bob's job started, and seen running by the service: the job and the
/// file whose creation ends it.
fn bobs_running_job(dir: &Path, served: &Served, bob: u64) -> (Child, std::path::PathBuf) {
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let job = served.run(Some(USERS[1]), &["sh".into(), "-c".into(), wait]);
    served.wait_jobs("bob's job registered", |j| {
        j.iter()
            .any(|j| j["owner"] == bob && j["state"] == "running")
    });
    (job, stop)
}

#[test]
fn a_user_holding_the_services_job_limit_in_idle_streams_leaves_another_users_job_measured() {
    let Some([ann_uid, bob]) = as_root() else {
        return;
    };
    let dir = scratch("idle-jobs");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let served = Served::start(&dir, &["--max-jobs", "8", "--max-jobs-per-user", "4"]);
    let streams: Vec<_> = (0..8)
        .map(|i| (format!("idle-{i}"), 1000 + i, -1, -1))
        .collect();
    let mut ann = hold(&dir, &served, USERS[0], &streams);
    served.wait_jobs("ann's jobs registered", |j| {
        j.iter().filter(|j| j["owner"] == ann_uid).count() == 4
    });
    assert!(
        served
            .log()
            .contains("already runs 4 jobs, the limit per user (--max-jobs-per-user)"),
        "{}",
        served.log()
    );
    bobs_job_is_written(&dir, &served, bob);
    let _ = ann.kill();
    let _ = ann.wait();
    served.stop();
}

#[test]
fn a_user_holding_the_services_descriptors_cannot_keep_another_users_run_from_being_written() {
    let Some([_, bob]) = as_root() else {
        return;
    };
    let dir = scratch("idle-fds");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let served = Served::start_under(&dir, &[], Some(256));
    // One job of Ann's, 400 ranks: more streams than the service has
    // descriptors.
    let streams: Vec<_> = (0..400)
        .map(|r| ("wide".to_string(), 1000 + r as u32, r, 400))
        .collect();
    let (mut job, stop) = bobs_running_job(&dir, &served, bob);
    let mut ann = hold(&dir, &served, USERS[0], &streams);
    std::fs::write(&stop, "").unwrap();
    assert!(job.wait().unwrap().success());
    let jobs = served.wait_jobs("bob's job written", |j| {
        j.iter()
            .any(|j| j["owner"] == bob && j["state"] != "running" && !j["dir"].is_null())
    });
    let log = served.log();
    assert!(!log.contains("Could not write"), "{log}");
    assert!(
        log.contains("keeps the last 64 for writing runs"),
        "no connection was refused for descriptors: {log}"
    );
    let written = jobs.iter().find(|j| j["owner"] == bob).unwrap()["dir"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(Path::new(&written).join("profile.json").exists());
    let _ = ann.kill();
    let _ = ann.wait();
    served.stop();
}
