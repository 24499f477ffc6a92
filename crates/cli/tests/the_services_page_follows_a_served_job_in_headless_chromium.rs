//! The live page of `hark serve --http` in Debian's headless Chromium, over
//! the DevTools protocol: a 4-rank job (Open MPI) run through `hark run
//! --server` shows on the service's page, its events and time axis grow
//! between two screenshots a few seconds apart, the page shows it running
//! and then finished once it ended, and the page logs no error or warning.
//! Skips, saying so, without Chromium or Open MPI.

#[path = "common/cdp.rs"]
mod cdp;
mod common;
mod served;

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;

#[test]
fn a_served_job_grows_on_the_services_page_then_shows_finished() {
    let Some(browser) = chromium::chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    if !common::have(common::OPEN_MPI.run) {
        eprintln!("skipped: no {}", common::OPEN_MPI.run);
        return;
    }
    let dir = common::scratch("serve-page");
    let exe = common::compile(common::OPEN_MPI.cc, "live_phases.c".as_ref(), &dir, &[]);
    let served = served::Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let mut cmd = common::launcher(common::OPEN_MPI, 4);
    cmd.extend([exe.display().to_string(), "2".into(), "16".into()]);
    let job = served.run(None, &cmd);
    served.wait_jobs("the job connected", |j| j.len() == 1 && j[0]["open"] == 4);

    let mut b = cdp::Browser::launch(browser, &dir, 1280, 1400);
    b.navigate(&served.url());
    b.wait_until(
        "Number(document.body.dataset.updates) >= 1 && Number(document.body.dataset.events) > 0",
        60,
    );
    assert_eq!(
        b.eval("document.getElementById('state').textContent"),
        "running"
    );
    b.two_screenshots_that_grew();
    controls(&mut b);

    let out = job.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.wait_until(
        "document.getElementById('state').textContent === 'finished'",
        60,
    );
    b.wait_until(
        "document.querySelector('#functions tbody').innerText.includes('MPI_Allreduce')",
        30,
    );
    // The browser itself logs the one refusal the test asked for (a 422
    // answer); anything else is the page's problem.
    let refusal = |p: &String| p.contains("status of 422") && p.contains("/control");
    assert_eq!(b.problems.iter().filter(|p| refusal(p)).count(), 1);
    b.problems.retain(|p| !refusal(p));
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);
}

/// Presses the page's control buttons while the job runs.
fn controls(b: &mut cdp::Browser) {
    let events = |b: &mut cdp::Browser| {
        b.eval("Number(document.body.dataset.events)")
            .as_u64()
            .unwrap()
    };
    // Waits for `n` more page updates, so the counts shown are fresh.
    let updates = |b: &mut cdp::Browser, n: u64| {
        let now = b
            .eval("Number(document.body.dataset.updates)")
            .as_u64()
            .unwrap();
        b.wait_until(
            &format!("Number(document.body.dataset.updates) >= {}", now + n),
            30,
        );
    };
    let press = |b: &mut cdp::Browser, button: &str, answer: &str| {
        b.eval(&format!("document.getElementById('{button}').click()"));
        b.wait_until(
            &format!("document.getElementById('ctlmsg').textContent.startsWith('{answer}')"),
            30,
        );
        b.eval("document.getElementById('ctlmsg').textContent")
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(b.eval("document.getElementById('controls').hidden"), false);

    press(b, "pause", "pause done");
    // What was recorded before the pause drains first (the probes read
    // control every 100 ms and ship what they hold).
    updates(b, 3);
    let paused = events(b);
    updates(b, 2);
    assert_eq!(events(b), paused, "events grew while paused");

    press(b, "resume", "resume done");
    b.wait_until(
        &format!("Number(document.body.dataset.events) > {paused}"),
        30,
    );

    let dump = press(b, "dump", "dump done: ");
    let dir = std::path::PathBuf::from(dump.trim_start_matches("dump done: "));
    assert!(dir.join("profile.json").is_file(), "{dump}");

    b.eval(
        "document.getElementById('keep').value = '3'; document.getElementById('of').value = '2'",
    );
    let refused = press(b, "sample", "sample refused: ");
    assert!(
        refused.contains("cannot keep 3 of every 2 ranks"),
        "{refused}"
    );
    b.eval("document.getElementById('keep').value = '2'");
    press(b, "sample", "sample done");
}
