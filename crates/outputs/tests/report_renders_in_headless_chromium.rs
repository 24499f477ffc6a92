//! `report.html` opened in Debian's headless Chromium: the page's script runs
//! to its end, nothing is logged to the console (no errors, no blocked
//! fetches), and a screenshot can be taken. Skips, saying so, when Chromium
//! is not installed (`apt install chromium`).
//!
//! Set `HARK_SCREENSHOT=path.png` to keep the screenshot.

mod common;

use common::chromium::{chromium, visit};
use std::path::PathBuf;

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hark-chromium-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_report_runs_its_script_logs_nothing_and_can_be_photographed() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    let dir = scratch("report");

    // The harness must see errors when there are some.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('seen'); null.x();</script></body></html>",
    )
    .unwrap();
    let v = visit(browser, &bad, &dir, &["--dump-dom".into()]);
    assert!(
        v.console.iter().any(|l| l.contains("seen")),
        "console capture is broken: {:?}",
        v.console
    );
    assert!(
        v.console.iter().any(|l| l.contains("Uncaught TypeError")),
        "{:?}",
        v.console
    );

    let run = common::two_programs();
    let out = dir.join("run");
    hark_outputs::write_all(&run, &out, |_| true).unwrap();
    let page = out.join("report.html");
    let v = visit(browser, &page, &dir, &["--dump-dom".into()]);
    assert!(v.console.is_empty(), "the report logged: {:#?}", v.console);
    assert!(
        v.dom.contains("data-ready=\"1\""),
        "the report's script did not run to its end"
    );
    assert!(v.dom.contains("<h2>1. ocean</h2>") && v.dom.contains("<h2>2. atmos</h2>"));
    assert!(
        v.dom.contains("<h3 id=\"p0-why\">Why</h3>") && v.dom.contains("<svg class=\"effbars\""),
        "the Why section is missing"
    );

    let png = match std::env::var_os("HARK_SCREENSHOT") {
        Some(p) => PathBuf::from(p),
        None => dir.join("report.png"),
    };
    let v = visit(
        browser,
        &page,
        &dir,
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,3000".into(),
        ],
    );
    assert!(v.console.is_empty(), "the report logged: {:#?}", v.console);
    let bytes = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 50_000,
        "a {} byte screenshot is too small to show the report",
        bytes.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
