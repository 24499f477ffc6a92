//! Headless Chromium driven over the DevTools protocol: navigate, evaluate,
//! click and drag, take screenshots, and keep every console message,
//! uncaught exception and log entry (a refused load, a failed fetch) the
//! page caused.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// A browser with one page, driven over its DevTools socket.
pub struct Browser {
    child: Child,
    ws: WebSocket<TcpStream>,
    next: u64,
    /// What the page logged: `type: text` per console call of type error or
    /// warning, uncaught exception or log entry of level error or warning.
    pub problems: Vec<String>,
}

impl Browser {
    /// Starts `browser` headless with a fresh profile in `scratch`, the
    /// page `width` × `height` CSS pixels, and connects to its page.
    pub fn launch(browser: &str, scratch: &Path, width: u32, height: u32) -> Browser {
        let profile = scratch.join("chromium-profile");
        let mut child = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            // Chromium leaves org.chromium.Chromium.* directories in $TMPDIR.
            .env("TMPDIR", scratch)
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // A group of its own, so that dropping the browser ends its
            // helper processes too (left alive, they write into the
            // profile after the scratch directory is removed).
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {browser}: {e}"));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let ws_url = loop {
            let line = lines
                .next()
                .expect("chromium ended without a DevTools address")
                .unwrap();
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                break url.trim().to_string();
            }
        };
        // Keep reading Chromium's stderr so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let host = ws_url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        let page = loop {
            let list = hark_live::client::get(&format!("http://{host}/json/list")).unwrap();
            let list: Value = serde_json::from_str(&list).unwrap();
            if let Some(p) = list
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["type"] == "page")
            {
                break p["webSocketDebuggerUrl"].as_str().unwrap().to_string();
            }
            assert!(Instant::now() < deadline, "chromium opened no page");
            std::thread::sleep(Duration::from_millis(100));
        };
        let stream = TcpStream::connect(&host).unwrap();
        let (ws, _) = tungstenite::client(page.as_str(), stream).unwrap();
        let mut b = Browser {
            child,
            ws,
            next: 0,
            problems: Vec::new(),
        };
        for m in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(m, json!({}));
        }
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        b
    }

    /// Calls `method` and returns its result, keeping the events that came
    /// before it.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::text(msg)).unwrap();
        loop {
            let Message::Text(text) = self.ws.read().unwrap() else {
                continue;
            };
            let v: Value = serde_json::from_str(text.as_str()).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {}", v["error"]);
                return v["result"].clone();
            }
            self.record(&v);
        }
    }

    fn record(&mut self, v: &Value) {
        let p = &v["params"];
        match v["method"].as_str() {
            Some("Runtime.consoleAPICalled") => {
                let kind = p["type"].as_str().unwrap_or("");
                if matches!(kind, "error" | "warning" | "assert") {
                    self.problems.push(format!("console.{kind}: {}", p["args"]));
                }
            }
            Some("Runtime.exceptionThrown") => {
                self.problems
                    .push(format!("exception: {}", p["exceptionDetails"]));
            }
            Some("Log.entryAdded") => {
                let level = p["entry"]["level"].as_str().unwrap_or("");
                if matches!(level, "error" | "warning") {
                    self.problems.push(format!(
                        "log {level}: {} {}",
                        p["entry"]["text"], p["entry"]["url"]
                    ));
                }
            }
            _ => {}
        }
    }

    /// Opens `url` and waits until it is loaded (`Page.navigate` answers
    /// before: an expression evaluated then may find no `document.body`).
    pub fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.call(
                "Runtime.evaluate",
                json!({"expression": "document.readyState === 'complete' && document.body !== null && location.href", "returnByValue": true}),
            );
            if r["result"]["value"].as_str() == Some(url) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{url} did not load within 30 s: {r}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The value of the expression `js` (awaited if a promise).
    pub fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r["exceptionDetails"].is_null(),
            "{js}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Evaluates `js` until it is true, for at most `secs` seconds.
    pub fn wait_until(&mut self, js: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.eval(js) != json!(true) {
            assert!(Instant::now() < deadline, "not true within {secs} s: {js}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A drag with the left button from `from` to `to` (CSS pixels).
    pub fn drag(&mut self, from: (f64, f64), to: (f64, f64)) {
        let ev = |kind: &str, (x, y): (f64, f64), buttons: u32| json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": buttons, "clickCount": 1});
        self.call("Input.dispatchMouseEvent", ev("mouseMoved", from, 0));
        self.call("Input.dispatchMouseEvent", ev("mousePressed", from, 1));
        for i in 1..=5 {
            let x = from.0 + (to.0 - from.0) * f64::from(i) / 5.0;
            self.call("Input.dispatchMouseEvent", ev("mouseMoved", (x, to.1), 1));
        }
        self.call("Input.dispatchMouseEvent", ev("mouseReleased", to, 0));
    }

    /// A PNG of the page as it is now.
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine;
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }

    /// What Hark's live page shows that grows: events received, the extent
    /// of the over-time chart, updates made.
    pub fn growth(&mut self) -> (u64, u64, u64) {
        let v = self.eval(
            "JSON.stringify([document.body.dataset.events, document.body.dataset.extent, document.body.dataset.updates].map(Number))",
        );
        let v: Vec<u64> = serde_json::from_str(v.as_str().unwrap()).unwrap();
        (v[0], v[1], v[2])
    }

    /// Two screenshots of Hark's live page 3 s and two updates apart,
    /// checked to show more events, a longer time axis, and pixels that
    /// changed.
    pub fn two_screenshots_that_grew(&mut self) -> (Vec<u8>, Vec<u8>) {
        let first = self.growth();
        let shot1 = self.screenshot();
        std::thread::sleep(Duration::from_secs(3));
        self.wait_until(
            &format!("Number(document.body.dataset.updates) >= {}", first.2 + 2),
            30,
        );
        let second = self.growth();
        let shot2 = self.screenshot();
        assert!(
            second.0 > first.0,
            "events did not grow: {first:?} → {second:?}"
        );
        assert!(
            second.1 > first.1,
            "the time axis did not grow: {first:?} → {second:?}"
        );
        assert_ne!(shot1, shot2, "the two screenshots are the same");
        (shot1, shot2)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: a plain signal to the browser's own process group.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
