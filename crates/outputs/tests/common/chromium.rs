//! Opening a page in headless Chromium and collecting what it logged.
//! Shared with the cli's end-to-end tests (included there by path).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The first Chromium found on `PATH`.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// What the browser made of a page.
pub struct Visit {
    /// The DOM after the page's scripts ran (with `--dump-dom`).
    pub dom: String,
    /// Every console line Chromium logged.
    pub console: Vec<String>,
}

/// Opens `page` with the extra `flags`, using `scratch` for the profile
/// and the captured streams.
pub fn visit(browser: &str, page: &Path, scratch: &Path, extra: &[String]) -> Visit {
    let profile = scratch.join(format!("profile-{}", extra.len()));
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    // Chromium leaves org.chromium.Chromium.* directories in $TMPDIR.
    .env("TMPDIR", scratch)
    .args(extra)
    .arg(format!("file://{}", page.display()))
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(scratch.join("stdout")).unwrap())
    .stderr(std::fs::File::create(scratch.join("stderr")).unwrap());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{browser} did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stderr = std::fs::read_to_string(scratch.join("stderr")).unwrap();
    Visit {
        dom: std::fs::read_to_string(scratch.join("stdout")).unwrap(),
        // Chromium logs every console message, uncaught exceptions and
        // refused loads included, as `...:INFO:CONSOLE(line)] "text", source: ...`.
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}
