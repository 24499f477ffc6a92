//! `hark run`'s live view is its user's: it is served under a random token
//! in the URL hark prints, and on this machine only to a client the kernel
//! names as that user. Another local user gets nothing of it (its command
//! line included), with or without the token; the owner gets nothing
//! without the token, and the page, the API and `hark query` with the URL
//! hark printed.

mod common;
mod served;

use common::*;
use served::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const USER: &str = "hark-t-eve";

#[test]
fn another_user_gets_nothing_and_the_owner_gets_the_printed_url() {
    if !root_or_skip() {
        return;
    }
    ensure_user(USER);
    probe();
    let dir = scratch("run-view");
    let stop = dir.join("stop");
    let secret = "a-secret-argument";
    let wait = format!(
        "while [ ! -e {} ]; do sleep 0.05; done # {secret}",
        stop.display()
    );
    let mut child = Command::new(hark())
        .current_dir(&dir)
        .args(["run", "-o"])
        .arg(dir.join("run"))
        .args(["--http", "127.0.0.1:0", "--", "sh", "-c", &wait])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
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
    let rest = url.trim_start_matches("http://");
    let (addr, token) = rest.split_once('/').unwrap();
    let token = token.trim_end_matches('/');
    assert_eq!(token.len(), 32, "a 128-bit token in {url}");
    let bare = format!("http://{addr}/");

    let get = |user: Option<&str>, url: &str| -> (String, String) {
        let out = as_user(user, "curl")
            .args(["-s", "-w", "\n%{http_code}", url])
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.to_string(), body.to_string())
    };
    for u in [
        url.clone(),
        format!("{url}api/runs"),
        format!("{url}api/runs/run/profile"),
        bare.clone(),
        format!("{bare}api/runs"),
    ] {
        let (code, body) = get(Some(USER), &u);
        assert_eq!(code, "403", "{USER} asked {u}: {body}");
        assert!(
            !body.contains(secret),
            "{USER} read the command line: {body}"
        );
    }
    for u in [
        bare.clone(),
        format!("{bare}api/runs"),
        format!("{bare}api/runs/run/profile"),
        format!("http://{addr}/{}/api/runs", "0".repeat(32)),
    ] {
        assert_eq!(get(None, &u).0, "404", "the owner without the token: {u}");
    }
    let (code, page) = get(None, &url);
    assert!(code == "200" && page.contains("<html"), "{code}");
    let (code, runs) = get(None, &format!("{url}api/runs"));
    assert!(
        code == "200" && runs.contains("\"id\":\"run\""),
        "{code}: {runs}"
    );
    let out = Command::new(hark())
        .args(["query", &url])
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    let profile: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(profile.is_object(), "{profile}");

    std::fs::write(&stop, "").unwrap();
    let out = wait_within(child, limit(), "hark run");
    assert!(out.status.success());
}
