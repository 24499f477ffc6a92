//! `hark serve` across a network: TLS with a site certificate and per-user
//! tokens. Two real users each run `hark run --server tls:...` with their
//! own token: each job is its user's (the run directory too), each sees
//! only their own over TLS (`hark ctl --server tls:`), over the HTTP API
//! (their token as bearer) and in `hark runs`, and each `hark run --server`
//! prints its job, the summary and the run directory as a local run does.
//! A plaintext client of the TLS service, a client holding another CA, and
//! a probe without a token are each refused with a line that says why.

mod common;
mod served;

use common::*;
use served::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const USERS: [&str; 2] = ["hark-t-ann", "hark-t-bob"];

/// A CA, the service's certificate for 127.0.0.1 signed by it, and another
/// CA, as PEM files in `dir`.
fn make_pki(dir: &Path) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
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
    make_pki(&dir);
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
    for ((u, t), uid) in USERS.iter().zip(&tokens).zip(&uids) {
        private_file(&dir.join(format!("{u}.token")), t, *uid);
    }
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
    each_lists_their_own_runs(&service);
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
        let seen: Vec<&str> = runs
            .as_array()
            .unwrap()
            .iter()
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

/// `hark runs --index RUNS`: each user lists their own run only.
fn each_lists_their_own_runs(service: &Service) {
    let deadline = Instant::now() + Duration::from_secs(30);
    for user in USERS {
        loop {
            let out = as_user(Some(user), hark())
                .args(["runs", "--index"])
                .arg(&service.runs)
                .output_within()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let rows = text.lines().filter(|l| l.contains("/hark-sh-job")).count();
            if rows == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{user} lists {rows} runs: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
