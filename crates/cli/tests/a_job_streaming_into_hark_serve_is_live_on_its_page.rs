//! `hark serve --http` serves the live view over every job of the service
//! on one router with its control route: a 4-rank job (Open MPI) run
//! through `hark run --server` is listed by `GET /api/runs` as running, its
//! profile grows while it runs, an interval and a timeline are answered,
//! the page itself is served, and once the job ended it is listed as
//! finished and its profile is its run directory's, with no gap between
//! (the job is listed, and its profile served, while it is being folded). Control goes
//! through the same address.

mod common;
mod served;

use common::*;
use served::*;
use std::time::{Duration, Instant};

fn get(url: &str) -> String {
    hark_live::client::get(url).unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

fn json(url: &str) -> serde_json::Value {
    serde_json::from_str(&get(url)).unwrap()
}

fn events(profile: &serde_json::Value) -> u64 {
    profile["accounting"]["events_received"].as_u64().unwrap()
}

#[test]
fn a_running_job_grows_on_the_services_page_then_is_finished() {
    if !have(OPEN_MPI.run) {
        eprintln!("skipped: no {}", OPEN_MPI.run);
        return;
    }
    let dir = scratch("serve-live");
    let exe = compile(OPEN_MPI.cc, "live_phases.c".as_ref(), &dir, &[]);
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let url = served.url();

    let page = get(&url);
    assert!(
        page.contains("<html") && page.contains("api/runs"),
        "{page}"
    );
    assert_eq!(json(&format!("{url}api/runs")), serde_json::json!([]));

    let mut cmd = launcher(OPEN_MPI, 4);
    cmd.extend([exe.display().to_string(), "2".into(), "5".into()]);
    let job = served.run(None, &cmd);
    let deadline = Instant::now() + Duration::from_secs(120);
    let (id, first) = loop {
        let runs = json(&format!("{url}api/runs"));
        if let Some(r) = runs.as_array().and_then(|r| r.first()) {
            let id = r["id"].as_str().unwrap().to_string();
            let p = json(&format!("{url}api/runs/{id}/profile"));
            if events(&p) > 0 {
                assert_eq!(r["state"], "running", "{runs}");
                assert!(r["started_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
                break (id, events(&p));
            }
        }
        assert!(Instant::now() < deadline, "no events within 120 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    // The same job, by number, in `hark ctl` and over HTTP.
    assert_eq!(served.jobs(None)[0]["id"], id.as_str());
    std::thread::sleep(Duration::from_millis(1500));
    let second = events(&json(&format!("{url}api/runs/{id}/profile")));
    assert!(
        second > first,
        "the profile did not grow: {first} then {second}"
    );
    let runs = json(&format!("{url}api/runs"));
    assert_eq!(runs[0]["state"], "running", "{runs}");
    assert_eq!(
        runs[0]["programs"],
        serde_json::json!(["live_phases-mpicc-openmpi"])
    );
    let early = json(&format!(
        "{url}api/runs/{id}/profile?from_ns=0&to_ns=1000000000"
    ));
    assert!(
        early["programs"][0]["diagnostics"][0]
            .as_str()
            .unwrap()
            .starts_with("Interval: "),
        "{early}"
    );
    let t = json(&format!("{url}api/runs/{id}/timeline?bins=8"));
    assert_eq!(t["programs"][0]["ranks"].as_array().unwrap().len(), 4);
    let e = hark_live::client::get(&format!("{url}api/runs/99/profile"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("404"), "{e}");

    // Control through the same address.
    let (_, answer) = served.post(
        None,
        &format!("api/runs/{id}/control"),
        r#"{"action":"resume"}"#,
        &[],
    );
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer, serde_json::json!({"ok": true, "dir": null}));

    // Asked all along while the job ends, is folded and written, the job is
    // listed and its profile there (both were missing while it was folded).
    let poller = {
        let (url, id) = (url.clone(), id.clone());
        std::thread::spawn(move || -> Vec<String> {
            let mut failures = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline {
                if let Err(e) = hark_live::client::get(&format!("{url}api/runs/{id}/profile")) {
                    failures.push(e.to_string());
                }
                let runs = hark_live::client::get(&format!("{url}api/runs")).unwrap();
                if !runs.contains(&format!("\"id\":\"{id}\"")) {
                    failures.push(format!("not listed: {runs}"));
                }
                if runs.contains("\"finished\"") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            failures
        })
    };
    let out = job.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failures = poller.join().unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let jobs = served.wait_jobs("the job is finished", |j| j[0]["state"] == "finished");
    let runs = json(&format!("{url}api/runs"));
    assert_eq!(
        (runs[0]["id"].as_str(), runs[0]["state"].as_str()),
        (Some(id.as_str()), Some("finished"))
    );
    let served_profile = json(&format!("{url}api/runs/{id}/profile"));
    let on_disk = profile(jobs[0]["dir"].as_str().unwrap().as_ref());
    assert_eq!(
        served_profile, on_disk,
        "the finished job's profile is not its run directory's"
    );
    assert!(events(&on_disk) > second);
}
