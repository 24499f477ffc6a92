//! What the machine view's tests share: `GET /api/machine` as a user, a
//! run's digest, and what the test programs print of themselves.
#![allow(dead_code)]

use super::common::{profile, OutputWithin};
use super::served::as_user;
use super::served::Served;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The body of `GET {url}api/machine?{query}` as `user` (root: `None`).
pub fn machine(user: Option<&str>, url: &str, query: &str) -> Value {
    let out = as_user(user, "curl")
        .args(["-s", "-f", "-S"])
        .arg(format!("{url}api/machine?{query}"))
        .output_within()
        .unwrap();
    assert!(out.status.success(), "GET api/machine as {user:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The first program's digest of the run directory `dir`, as text.
pub fn digest(dir: &Value) -> String {
    let p = profile(dir.as_str().unwrap().as_ref());
    p["programs"][0]["digest"].to_string()
}

/// A test program's `span FROM_NS TO_NS` line, in whole seconds, and its
/// `TAG SECOND A B` lines as (second, A / B).
pub fn spun(stdout: &[u8], tag: &str) -> ((u64, u64), Vec<(u64, f64)>) {
    let text = String::from_utf8_lossy(stdout);
    let mut span = None;
    let mut seconds = Vec::new();
    for line in text.lines() {
        let w: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        match line.split_whitespace().next() {
            Some("span") => span = Some((w[0] / 1_000_000_000, w[1] / 1_000_000_000)),
            Some(t) if t == tag && w[2] > 0 => seconds.push((w[0], w[1] as f64 / w[2] as f64)),
            _ => {}
        }
    }
    (
        span.unwrap_or_else(|| panic!("no span in: {text}")),
        seconds,
    )
}

/// The seconds of the inclusive ranges `[[from, to], ...]` of a flag, each
/// checked to lie within `span` (inclusive).
pub fn flagged_within(flag: &Value, span: (u64, u64)) -> Vec<u64> {
    let mut seconds = Vec::new();
    for r in flag["seconds"].as_array().unwrap() {
        let (a, b) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
        assert!(
            span.0 <= a && b <= span.1,
            "flagged {a}–{b}, outside the other job's span {}–{}: {flag}",
            span.0,
            span.1
        );
        seconds.extend(a..=b);
    }
    seconds
}

/// The mean of a program's own per-second figure over the `flagged`
/// seconds, and over its seconds outside `span` (the other job's).
pub fn own_means(own: &[(u64, f64)], flagged: &[u64], span: (u64, u64)) -> (f64, f64) {
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let inside = own
        .iter()
        .filter(|(s, _)| flagged.contains(s))
        .map(|x| x.1)
        .collect();
    let alone = own
        .iter()
        .filter(|(s, _)| *s < span.0 || *s > span.1)
        .map(|x| x.1)
        .collect();
    (mean(inside), mean(alone))
}

/// Waits until a job of `served` has a stream open: its first process
/// started (its events come at its end).
pub fn served_job_started(served: &Served) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !served
        .jobs(None)
        .iter()
        .any(|j| j["state"] == "running" && j["open"].as_u64() > Some(0))
    {
        assert!(
            Instant::now() < deadline,
            "no job opened a stream within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
