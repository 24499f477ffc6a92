//! `hark serve` across a network: TLS with a site certificate and per-user
//! tokens. Two real users each run `hark run --server tls:...` with their
//! own token: each job is its user's (the run directory too), each sees
//! only their own over TLS (`hark ctl --server tls:`), over the HTTP API
//! (their token as bearer) and in `hark runs`, and each `hark run --server`
//! prints its job, the summary and the run directory as a local run does.
//! A plaintext client of the TLS service, a client holding another CA, and
//! a probe without a token are each refused with a line that says why.
//! On two emulated nodes (`docs/cluster.md`), the service on n1 and the
//! users' jobs on n1 and n2, each still sees only their own.

mod common;
mod served;

use common::*;
use served::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const USERS: [&str; 2] = ["hark-t-ann", "hark-t-bob"];

/// A CA, the service's certificate for `names` signed by it, and another
/// CA, as PEM files in `dir`.
fn make_pki(dir: &Path, names: &[&str]) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = rcgen::CertificateParams::new(names)
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
    std::fs::set_permissions(dir.join("key.pem"), PermissionsExt::from_mode(0o600)).unwrap();
}

/// A private file of `uid` holding `text`.
fn private_file(path: &Path, text: &str, uid: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, PermissionsExt::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(path, Some(uid), None).unwrap();
}

/// The TLS service, stopped (by its pid) when dropped.
struct Service {
    child: Child,
    addr: String,
    runs: PathBuf,
    log: PathBuf,
}

impl Service {
    fn start(dir: &Path) -> Service {
        let runs = dir.join("runs");
        let log = dir.join("serve.log");
        let child = Command::new(hark())
            .args(["serve", "--listen", "tls:127.0.0.1:0", "--linger", "0.5"])
            .args(["--http", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(dir.join("key.pem"))
            .arg("--tokens")
            .arg(dir.join("tokens"))
            .arg("--runs")
            .arg(&runs)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut s = Service {
            child,
            addr: String::new(),
            runs,
            log,
        };
        s.addr = s.printed("hark serve: Listening on ", |rest| {
            rest.split(' ').next().map(str::to_string)
        });
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the service printed after `prefix`, once it has.
    fn printed(&self, prefix: &str, take: impl Fn(&str) -> Option<String>) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if let Some(v) = log
                .lines()
                .find_map(|l| l.strip_prefix(prefix).and_then(&take))
            {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "hark serve printed no {prefix:?}: {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        self.printed("hark serve: Live view at ", |u| Some(u.to_string()))
    }

    /// `hark ctl --json` as `user` over TLS with their token.
    fn ctl(&self, dir: &Path, user: &str, args: &[&str]) -> Output {
        as_user(Some(user), hark())
            .env("HARK_TLS_CA", dir.join("ca.pem"))
            .args(["ctl", "--json", "--server", &self.addr, "--token-file"])
            .arg(dir.join(format!("{user}.token")))
            .args(args)
            .output_within()
            .unwrap()
    }

    fn jobs_of(&self, dir: &Path, user: &str) -> Vec<serde_json::Value> {
        let out = self.ctl(dir, user, &["list"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["jobs"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hark run --server ADDR` as `user`, with their token and `ca`.
fn run_as(dir: &Path, user: &str, addr: &str, ca: &str, command: &[&str]) -> Command {
    let mut cmd = as_user(Some(user), hark());
    cmd.env("HARK_TLS_CA", dir.join(ca))
        .args(["run", "--server", addr, "--token-file"])
        .arg(dir.join(format!("{user}.token")))
        .arg("--probe")
        .arg(probe())
        .arg("--")
        .args(command);
    cmd
}

#[test]
fn two_users_over_tls_see_only_their_own_and_bad_clients_are_told_why() {
    if !root_or_skip() {
        return;
    }
    let uids = local_users(&USERS);
    let dir = scratch("tls-users");
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
    make_pki(&dir, &["127.0.0.1", "localhost"]);
    let tokens = give_tokens(&dir, &uids);
    let service = Service::start(&dir);

    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let jobs: Vec<Child> = USERS
        .iter()
        .map(|u| {
            run_as(&dir, u, &service.addr, "ca.pem", &["sh", "-c", &wait])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mine = |user: &str| -> Vec<serde_json::Value> {
        service
            .jobs_of(&dir, user)
            .into_iter()
            .filter(|j| j["state"] == "running")
            .collect()
    };
    while USERS.iter().any(|u| mine(u).is_empty()) {
        assert!(
            Instant::now() < deadline,
            "jobs never registered: {}",
            service.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let ids: Vec<String> = USERS
        .iter()
        .zip(&uids)
        .map(|(u, uid)| {
            let seen = service.jobs_of(&dir, u);
            assert_eq!(seen.len(), 1, "{u} sees {seen:?}");
            assert_eq!(seen[0]["owner"], *uid, "{u}'s job is theirs: {seen:?}");
            seen[0]["id"].as_str().unwrap().to_string()
        })
        .collect();
    let refused = service.ctl(&dir, USERS[1], &[&ids[0], "pause"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("belongs to another user"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    control_frames_reach_the_probe_through_tls(&dir, &service, &ids[0]);
    each_sees_their_own_over_http(&service, &tokens, &ids);
    bad_clients_are_told_why(&dir, &service);

    std::fs::write(&stop, "").unwrap();
    for (child, (user, uid)) in jobs.into_iter().zip(USERS.iter().zip(&uids)) {
        let out = wait_within(child, limit(), "hark run --server");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{user}: {err}");
        assert!(
            err.contains("hark: job ") && err.contains(&service.addr),
            "{user}: {err}"
        );
        assert!(err.contains("live view at http://"), "{user}: {err}");
        assert!(
            err.contains("Hark ") && err.contains("== sh"),
            "{user}: no summary: {err}"
        );
        let dir_line = err
            .lines()
            .find_map(|l| l.strip_prefix("Run directory: "))
            .unwrap_or_else(|| panic!("{user}: no run directory: {err}"));
        let run_dir = PathBuf::from(dir_line.split(' ').next().unwrap());
        assert_eq!(
            std::fs::metadata(&run_dir).unwrap().uid(),
            *uid,
            "{}",
            run_dir.display()
        );
    }
    each_lists_their_own_runs(&dir, &service);
}

/// The service's tokens file (root's) and each user's own token file in
/// `dir`; the tokens.
fn give_tokens(dir: &Path, uids: &[u32]) -> Vec<String> {
    let tokens: Vec<String> = USERS
        .iter()
        .map(|u| format!("{u}-token-{}", std::process::id()))
        .collect();
    let lines: String = USERS
        .iter()
        .zip(&tokens)
        .map(|(u, t)| format!("{t} {u}\n"))
        .collect();
    private_file(&dir.join("tokens"), &lines, 0);
    for ((u, t), uid) in USERS.iter().zip(&tokens).zip(uids) {
        private_file(&dir.join(format!("{u}.token")), t, *uid);
    }
    tokens
}

/// A dump asked over TLS: the service writes its request to the probe
/// inside the stream's TLS session, and the probe's answer comes back in
/// its stream; a probe that never read it would be named as silent.
fn control_frames_reach_the_probe_through_tls(dir: &Path, service: &Service, job: &str) {
    let out = service.ctl(dir, USERS[0], &[job, "dump"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dump = PathBuf::from(v["dir"].as_str().expect("the dump's run directory"));
    let p = profile(&dump);
    assert!(
        !p.to_string().contains("did not answer"),
        "a probe did not hear the dump: {}",
        p["programs"][0]["diagnostics"]
    );
    for action in ["pause", "resume"] {
        let out = service.ctl(dir, USERS[0], &[job, action]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The HTTP API, asked by root's connection with each user's token as
/// bearer, answers as that user; a token not of the service is refused.
fn each_sees_their_own_over_http(service: &Service, tokens: &[String], ids: &[String]) {
    let get = |token: &str, path: &str| -> (String, String) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-H"])
            .arg(format!("Authorization: Bearer {token}"))
            .arg(format!("{}{path}", service.url()))
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (body.to_string(), code.to_string())
    };
    for (i, token) in tokens.iter().enumerate() {
        let (body, code) = get(token, "api/runs");
        assert_eq!(code, "200", "{body}");
        let runs: serde_json::Value = serde_json::from_str(&body).unwrap();
        // Without ann's dump (its own line, `N-dump1`).
        let seen: Vec<&str> = runs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["state"] != "dump")
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(seen, [ids[i].as_str()], "{body}");
        let other = &ids[1 - i];
        assert_eq!(get(token, &format!("api/runs/{other}/profile")).1, "404");
    }
    assert_eq!(get("not-a-token-of-this-service", "api/runs").1, "403");
}

/// A plaintext client of the TLS service, a client with another CA, and a
/// probe without a token: each is refused, and says why.
fn bad_clients_are_told_why(dir: &Path, service: &Service) {
    let hostport = service.addr.strip_prefix("tls:").unwrap();
    let plain = format!("tcp:{hostport}");
    let out = run_as(dir, USERS[0], &plain, "ca.pem", &["true"])
        .output_within()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_exit(&out, 2);
    assert!(err.contains("takes TLS only"), "{err}");

    // A probe given the plaintext address by hand (a site module's
    // mistake): its process runs unmeasured, and says so.
    let token = std::fs::read_to_string(dir.join(format!("{}.token", USERS[0]))).unwrap();
    let out = Command::new("sh")
        .args(["-c", "sleep 0.5; echo ran"])
        .env("LD_PRELOAD", probe())
        .env("HARK_ADDR", format!("{token}@{plain}"))
        .output_within()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("takes TLS only and refused this plaintext stream"),
        "{err}"
    );

    let out = run_as(dir, USERS[0], &service.addr, "other-ca.pem", &["true"])
        .output_within()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_exit(&out, 2);
    assert!(
        err.contains("not one the CA (HARK_TLS_CA) vouches for"),
        "{err}"
    );

    let out = Command::new("sh")
        .args(["-c", "sleep 0.5; echo ran"])
        .env("LD_PRELOAD", probe())
        .env("HARK_ADDR", &service.addr)
        .env("HARK_TLS_CA", dir.join("ca.pem"))
        .output_within()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused this stream: it proves no token"),
        "{err}"
    );
    let log = service.log();
    assert!(log.contains("spoke plaintext to a TLS service"), "{log}");
    assert!(log.contains("without a user's token"), "{log}");
}

/// `hark runs --index RUNS` on the service's host, and `hark runs --server
/// tls:...` with their token: each user lists their own run only.
fn each_lists_their_own_runs(dir: &Path, service: &Service) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for (user, remote) in USERS.iter().flat_map(|u| [(*u, false), (*u, true)]) {
        loop {
            let mut cmd = as_user(Some(user), hark());
            cmd.arg("runs");
            if remote {
                cmd.env("HARK_TLS_CA", dir.join("ca.pem"))
                    .args(["--server", &service.addr, "--token-file"])
                    .arg(dir.join(format!("{user}.token")));
            } else {
                cmd.arg("--index").arg(&service.runs);
            }
            let out = cmd.output_within().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let rows = text
                .lines()
                .filter(|l| l.contains("/hark-sh-job") && !l.contains("-dump"))
                .count();
            if rows == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{user} (over TLS: {remote}) lists {rows} runs: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A TLS-only `hark serve` on emulated node n1 at `tls:0.0.0.0:PORT`, its
/// certificate for `n1` and the tokens of [`USERS`] (uids `uids`) in
/// `dir`; the service, once it listens, and its log.
fn serve_on_n1(
    cluster: &common::cluster::Cluster,
    dir: &Path,
    uids: &[u32],
    port: u16,
) -> (Child, PathBuf) {
    make_pki(dir, &["n1", "10.77.0.1"]);
    give_tokens(dir, uids);
    let log = dir.join("serve.log");
    let listen = format!("tls:0.0.0.0:{port}");
    let mut serve = cluster.command(
        "n1",
        &[
            hark().display().to_string(),
            "serve".into(),
            "--listen".into(),
        ],
    );
    let serve = serve
        .args([listen.as_str(), "--remote", "--linger", "0.5"])
        .arg("--tls-cert")
        .arg(dir.join("cert.pem"))
        .arg("--tls-key")
        .arg(dir.join("key.pem"))
        .arg("--tokens")
        .arg(dir.join("tokens"))
        .arg("--runs")
        .arg(dir.join("runs"))
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !read_log().contains("Listening on tls:") {
        assert!(
            Instant::now() < deadline,
            "hark serve did not start on n1: {}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (serve, log)
}

/// The service on emulated node n1, a job of ann's and one of bob's on each
/// of n1 and n2 (each through `hark run --server tls:n1:PORT`): each job is
/// its user's, each user sees only their own two from either node, and
/// each `hark run` prints its summary and run directory.
#[test]
fn across_two_emulated_nodes_each_user_sees_only_their_own_job() {
    if !root_or_skip() {
        return;
    }
    let Some(cluster) = common::cluster::Cluster::up(2) else {
        return;
    };
    let uids = local_users(&USERS);
    let dir = common::cluster::shared_scratch("tls-nodes");
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o755)).unwrap();
    let (mut serve, log) = serve_on_n1(&cluster, &dir, &uids, 7400);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let addr = "tls:n1:7400";
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let on = |node: &str, user: &str, args: &[String]| -> Command {
        let mut cmd = cluster.command(node, &["runuser", "-u", user, "--"]);
        cmd.arg(hark())
            .args(args)
            .arg("--token-file")
            .arg(dir.join(format!("{user}.token")))
            .env("HARK_TLS_CA", dir.join("ca.pem"));
        cmd
    };
    let run = |node: &str, user: &str| -> Child {
        on(node, user, &["run".into(), "--server".into(), addr.into()])
            .arg("--probe")
            .arg(probe())
            .args(["--", "sh", "-c", &wait])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let placed = [
        ("n1", USERS[0], uids[0]),
        ("n2", USERS[0], uids[0]),
        ("n1", USERS[1], uids[1]),
        ("n2", USERS[1], uids[1]),
    ];
    let jobs: Vec<Child> = placed
        .iter()
        .map(|(node, user, _)| run(node, user))
        .collect();
    // Each user asks from the other node.
    let list = |user: &str, node: &str| -> Vec<serde_json::Value> {
        let args = ["ctl", "--json", "--server", addr].map(String::from);
        let out = on(node, user, &args).arg("list").output_within().unwrap();
        assert!(
            out.status.success(),
            "{user} on {node}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["jobs"].as_array().cloned().unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ann, bob) = (list(USERS[0], "n2"), list(USERS[1], "n1"));
        assert!(
            ann.iter().all(|j| j["owner"] == uids[0]),
            "ann sees another's: {ann:?}"
        );
        assert!(
            bob.iter().all(|j| j["owner"] == uids[1]),
            "bob sees another's: {bob:?}"
        );
        if ann.len() == 2 && bob.len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs never registered: {}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::write(&stop, "").unwrap();
    for (child, (node, user, uid)) in jobs.into_iter().zip(placed) {
        let uid = &uid;
        let out = wait_within(child, limit(), &format!("hark run --server on {node}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{user}: {err}");
        assert!(
            err.contains("hark: job ") && err.contains("== sh"),
            "{user}: {err}"
        );
        let dir_line = err
            .lines()
            .find_map(|l| l.strip_prefix("Run directory: "))
            .unwrap_or_else(|| panic!("{user}: no run directory: {err}"));
        let run_dir = PathBuf::from(dir_line.split(' ').next().unwrap());
        assert_eq!(
            std::fs::metadata(&run_dir).unwrap().uid(),
            *uid,
            "{}",
            run_dir.display()
        );
    }
    let log = read_log();
    assert!(log.contains(" on n1.") && log.contains(" on n2."), "{log}");
    // The cluster's teardown would end it too.
    let _ = serve.kill();
    let _ = serve.wait();
}

/// A TLS-only service on emulated node n1 and a job of ann's on n2: the
/// probes of n2 find no Unix socket of the service's, so they stream
/// through n2's forwarder (`HARK_FORWARD=auto`), whose one connection to
/// the service is TLS, checked against `HARK_TLS_CA` (`docs/cluster.md`,
/// "The forwarder"). The forwarder carries every process of the job, a
/// dump asked of the service reaches them through it and comes back, and
/// `hark run --server` prints its summary.
#[test]
fn a_node_s_forwarder_streams_to_a_tls_only_service() {
    if !root_or_skip() {
        return;
    }
    let Some(cluster) = common::cluster::Cluster::up(2) else {
        return;
    };
    let uids = local_users(&USERS);
    let dir = common::cluster::shared_scratch("tls-forwarder");
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o777)).unwrap();
    let (mut serve, log) = serve_on_n1(&cluster, &dir, &uids, 7401);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let stats = dir.join("forwarders");
    let stop = dir.join("stop");
    // The shell, and its `sleep`s until the test says stop.
    let wait = format!("while [ ! -e {} ]; do sleep 0.2; done", stop.display());
    let ann = |args: &[&str]| -> Command {
        let mut cmd = cluster.command("n2", &["runuser", "-u", USERS[0], "--"]);
        cmd.arg(hark())
            .args(args)
            .arg("--token-file")
            .arg(dir.join(format!("{}.token", USERS[0])))
            .env("HARK_TLS_CA", dir.join("ca.pem"));
        cmd
    };
    let job = ann(&["run", "--server", "tls:n1:7401"])
        .arg("--probe")
        .arg(probe())
        .args(["--", "sh", "-c", &wait])
        .env("HARK_FORWARD_STATS", &stats)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ctl = |args: &[&str]| -> serde_json::Value {
        let mut line = vec!["ctl", "--json", "--server", "tls:n1:7401"];
        line.extend(args);
        let out = ann(&line).output_within().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "hark {line:?}: {err}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let jobs = ctl(&["list"])["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(j) = jobs.iter().find(|j| j["open"].as_u64() > Some(0)) {
            break j["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no job: {}", read_log());
        std::thread::sleep(Duration::from_millis(200));
    };
    // A dump asked of the service reaches the probes through the
    // forwarder, inside its TLS session, and their answers come back up.
    let dump = ctl(&[&id, "dump"]);
    let p = profile(Path::new(
        dump["dir"].as_str().expect("the dump's directory"),
    ));
    assert!(
        !p.to_string().contains("did not answer"),
        "a probe did not hear the dump: {}",
        p["programs"][0]["diagnostics"]
    );
    // Stop once the shell and two of its `sleep`s have reached the service:
    // on a loaded machine all of the above can take less than one sleep
    // (CI saw the shell and one `sleep`).
    let streams = |id: &str| -> u64 {
        let jobs = ctl(&["list"])["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let job = jobs.iter().find(|j| j["id"].as_str() == Some(id));
        job.and_then(|j| j["streams"].as_u64()).unwrap_or(0)
    };
    while streams(&id) < 3 {
        assert!(
            Instant::now() < deadline,
            "fewer than 3 streams: {}",
            read_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "hark run --server through a forwarder");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}\n{}", read_log());
    assert!(
        !err.contains("node's forwarder") && !err.contains("hark forward:"),
        "a forwarder failed: {err}"
    );
    assert!(err.contains("Run directory: "), "{err}");
    let lines = forwarder_stats(&stats, 1);
    // The shell and at least two of its `sleep`s.
    assert!(
        forwarder_field(&lines[0], "streams") >= 3,
        "the forwarder did not carry the job's processes: {lines:?}\n{err}"
    );
    assert!(forwarder_field(&lines[0], "events") > 0, "{lines:?}");
    let serve_log = read_log();
    assert!(serve_log.contains(" on n2."), "{serve_log}");
    let _ = serve.kill();
    let _ = serve.wait();
}
