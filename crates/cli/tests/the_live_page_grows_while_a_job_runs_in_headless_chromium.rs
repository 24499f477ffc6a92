//! The live page of `hark run` in Debian's headless Chromium, driven over
//! the DevTools protocol, on a real 4-rank job (Open MPI) that does
//! point-to-point for its first 5 s and collectives after: two screenshots
//! a few seconds apart show data that grew, brushing the first seconds on
//! the over-time chart recomputes the table of functions and the matrix for
//! that interval, and the page logs no error or warning (no failed load:
//! everything is embedded). Skips, saying so, without Chromium or Open MPI.
//!
//! Set `HARK_SCREENSHOT=path.png` to keep the last screenshot (the README's
//! `docs/live.png` is one).

#[path = "common/cdp.rs"]
mod cdp;
mod common;
#[path = "common/live.rs"]
mod live;

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;

use serde_json::Value;

fn table(b: &mut cdp::Browser) -> String {
    b.eval("document.querySelector('#functions tbody').innerText")
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_live_page_grows_while_a_job_runs_and_a_brushed_interval_changes_the_table() {
    let Some(browser) = chromium::chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    if !common::have(common::OPEN_MPI.run) {
        eprintln!("skipped: no {}", common::OPEN_MPI.run);
        return;
    }
    let dir = common::scratch("live-page");
    let job = live::start(&dir, 5, 60);
    job.wait_for_events(0);
    let mut b = cdp::Browser::launch(browser, &dir, 1280, 1400);
    b.navigate(&job.url);
    b.wait_until(
        "Number(document.body.dataset.updates) >= 1 && Number(document.body.dataset.events) > 0",
        60,
    );
    let (shot1, shot2) = b.two_screenshots_that_grew();
    std::fs::write(dir.join("live-1.png"), &shot1).unwrap();
    std::fs::write(dir.join("live-2.png"), &shot2).unwrap();

    // Into the collective phase, and shown.
    job.wait_for_length(7.0);
    b.wait_until(
        "document.querySelector('#functions tbody').innerText.includes('MPI_Allreduce')",
        30,
    );
    let whole = table(&mut b);
    assert!(whole.contains("MPI_Sendrecv"), "{whole}");
    let whole_messages = b.eval("Number(document.getElementById('matrix').dataset.total)");

    // Brush 0.5 s to 4 s: before the collective phase, which starts 5 s
    // after MPI_Init.
    let chart: Value = serde_json::from_str(
        b.eval(
            "(() => { const s = document.getElementById('overtime-svg'); const r = s.getBoundingClientRect(); \
             return JSON.stringify({left: r.left, top: r.top, width: r.width, start: Number(s.dataset.startNs), span: Number(s.dataset.spanNs)}); })()",
        )
        .as_str()
        .unwrap(),
    )
    .unwrap();
    let f = |k: &str| chart[k].as_f64().unwrap();
    let x = |ns: f64| f("left") + 50.0 + (ns - f("start")) / f("span") * (f("width") - 54.0);
    let y = f("top") + 60.0;
    b.drag((x(0.5e9), y), (x(4.0e9), y));
    b.wait_until(
        "document.body.dataset.interval !== '' && document.body.dataset.interval !== undefined \
         && document.getElementById('scope').textContent.startsWith('interval') \
         && !document.querySelector('#functions tbody').innerText.includes('MPI_Allreduce')",
        30,
    );
    let brushed = table(&mut b);
    assert!(brushed.contains("MPI_Sendrecv"), "{brushed}");
    assert_ne!(whole, brushed);
    let brushed_messages = b.eval("Number(document.getElementById('matrix').dataset.total)");
    assert!(
        brushed_messages.as_f64() < whole_messages.as_f64()
            && brushed_messages.as_f64() > Some(0.0),
        "the matrix was not recomputed for the interval: {whole_messages} → {brushed_messages}"
    );
    let shot3 = b.screenshot();
    if let Ok(path) = std::env::var("HARK_SCREENSHOT") {
        std::fs::write(path, &shot3).unwrap();
    }
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);
    drop(b);
    job.stop();
}
