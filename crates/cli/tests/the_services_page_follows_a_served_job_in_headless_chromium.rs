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
    cmd.extend([exe.display().to_string(), "2".into(), "8".into()]);
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
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);
}
