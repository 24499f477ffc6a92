//! What a newcomer tripped over in the live view, checked on its layout in
//! Debian's headless Chromium on a real 4-rank job (Open MPI), with the
//! page as narrow as two columns allow: every chart with more than one
//! colour has a legend of colour swatches whose names are whole, not cut
//! at the chart's edge ("MPI_Waita"); the efficiency bars are coloured as
//! the report grades them (red, orange, green); numbers in the tables stay
//! on one line; the header of the running job shows its real rate, never
//! "0 events/s"; and `hark open` of the finished run shows the whole run,
//! not "whole run so far". The node's sensors have a row beside its ranks
//! (0-3) and a chart of CPU busy and memory used per slice, while the job
//! runs and after, where the row's figures are `profile.json`'s
//! `nodes[0]`. Skips, saying so, without Chromium or Open MPI.
//!
//! Set `HARK_SCREENSHOT=path.png` to keep a screenshot of the running job.

#[path = "common/cdp.rs"]
mod cdp;
mod common;
#[path = "common/live.rs"]
mod live;

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;

use serde_json::Value;

/// Measures the page as it is: legends, efficiency bars, numbers in table
/// cells, the header's rate and the scope of the tables.
const MEASURE: &str = r##"(() => {
  const out = { legends: [], bars: [], split: [], rate: document.getElementById("rate").textContent,
                scope: document.getElementById("scope").textContent, state: document.getElementById("state").textContent };
  for (const id of ["overtime", "mean"]) {
    const host = document.getElementById(id), section = host.closest("section").getBoundingClientRect();
    const items = [...host.querySelectorAll(".legend > span")].map((s) => {
      const r = s.getBoundingClientRect(), sw = s.querySelector(".sw");
      return { text: s.textContent, swatch: sw ? getComputedStyle(sw).backgroundColor : null,
               whole: s.scrollWidth <= s.clientWidth + 1 && r.right <= section.right + 0.5 && r.width > 0 };
    });
    out.legends.push({ id: id, items: items, lines: host.querySelectorAll("polyline").length });
  }
  for (const r of document.querySelectorAll("#eff rect")) {
    out.bars.push({ v: Number(r.dataset.v), fill: r.getAttribute("fill") });
  }
  const number = /\d[\d.,]*(?:[ \u00a0](?:%|[µa-zA-Z]{1,3}\b))?/g;
  for (const td of document.querySelectorAll("#functions td, #waits td")) {
    const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(number)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) out.split.push(m[0]);
      }
    }
  }
  return JSON.stringify(out);
})()"##;

/// The nodes' rows (their cells' text) and charts (host, lines drawn).
const NODES: &str = r##"JSON.stringify({
  hidden: document.getElementById("nodesec").hidden,
  rows: [...document.querySelectorAll("#nodes tbody tr")].map((tr) => [...tr.cells].map((c) => c.textContent)),
  charts: [...document.querySelectorAll("#nodecharts .nodechart")].map((d) => [d.dataset.host, d.querySelectorAll("polyline").length]),
})"##;

/// The page's node rows, checked against what every node row must show:
/// the host and the job's four ranks on it, with a chart of two lines.
fn nodes(b: &mut cdp::Browser) -> Vec<Vec<String>> {
    let v: Value = serde_json::from_str(b.eval(NODES).as_str().unwrap()).unwrap();
    assert_eq!(v["hidden"], false, "no nodes panel: {v}");
    let rows: Vec<Vec<String>> = serde_json::from_value(v["rows"].clone()).unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0][1], "0-3", "the node's ranks: {v}");
    assert_eq!(v["charts"][0][0].as_str(), Some(rows[0][0].as_str()), "{v}");
    assert_eq!(v["charts"][0][1], 2, "CPU busy and memory used lines: {v}");
    rows
}

fn measure(b: &mut cdp::Browser) -> Value {
    serde_json::from_str(b.eval(MEASURE).as_str().unwrap()).unwrap()
}

/// The colour the report gives an efficiency `v`.
fn graded(v: f64) -> &'static str {
    if v >= 0.8 {
        "#3a9a5b"
    } else if v >= 0.6 {
        "#e8912d"
    } else {
        "#c8453b"
    }
}

fn check_layout(m: &Value) {
    for legend in m["legends"].as_array().unwrap() {
        let items = legend["items"].as_array().unwrap();
        assert!(!items.is_empty(), "no legend on #{}: {m}", legend["id"]);
        for item in items {
            assert!(
                item["swatch"]
                    .as_str()
                    .is_some_and(|c| c != "rgba(0, 0, 0, 0)"),
                "a legend entry without its colour swatch: {item}"
            );
            assert_eq!(item["whole"], true, "a legend name is cut: {item}");
        }
    }
    let mean = &m["legends"][1];
    assert_eq!(
        mean["items"].as_array().unwrap().len() as u64,
        mean["lines"].as_u64().unwrap(),
        "each line of the mean profile is named: {mean}"
    );
    let bars = m["bars"].as_array().unwrap();
    assert_eq!(bars.len(), 5, "{m}");
    for bar in bars {
        let v = bar["v"].as_f64().unwrap();
        assert_eq!(bar["fill"], graded(v), "an efficiency bar of {v}");
    }
    assert_eq!(
        m["split"],
        Value::Array(vec![]),
        "numbers wrapped in a table"
    );
}

#[test]
fn legends_bars_numbers_rate_and_scope_read_as_they_should() {
    let Some(browser) = chromium::chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    if !common::have(common::OPEN_MPI.run) {
        eprintln!("skipped: no {}", common::OPEN_MPI.run);
        return;
    }
    let dir = common::scratch("live-reads");
    // Point-to-point for 4 s, collectives to 16 s.
    let job = live::start(&dir, 4, 16);
    job.wait_for_events(0);
    // Two columns at their narrowest (430 px each).
    let mut b = cdp::Browser::launch(browser, &dir, 940, 1400);
    b.navigate(&job.url);
    b.wait_until(
        "Number(document.body.dataset.updates) >= 1 && Number(document.body.dataset.events) > 0",
        60,
    );
    // Into the collective phase, with several functions in the mean
    // profile; the rate is read every update for 8 s while the job runs.
    job.wait_for_length(6.0);
    let mut rates = Vec::new();
    let start = b
        .eval("Number(document.body.dataset.updates)")
        .as_u64()
        .unwrap_or(0);
    b.wait_until(
        &format!("Number(document.body.dataset.updates) >= {}", start + 1),
        30,
    );
    let mut last = measure(&mut b);
    for _ in 0..8 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        last = measure(&mut b);
        if last["state"] != "running" {
            break;
        }
        rates.push(last["rate"].as_str().unwrap().to_string());
    }
    assert!(rates.len() >= 4, "the job ended too early: {rates:?}");
    for r in &rates {
        let n: f64 = r.trim_end_matches(['k', 'M', 'G']).parse().unwrap_or(-1.0);
        assert!(
            n > 0.0,
            "the running job's header says {r} events/s: {rates:?}"
        );
    }
    assert_eq!(last["scope"], "whole run so far");
    check_layout(&last);
    let running = nodes(&mut b);
    assert!(running[0][2].parse::<u64>().unwrap() > 0, "{running:?}");
    let shot = b.screenshot();
    std::fs::write(dir.join("live.png"), &shot).unwrap();
    if let Ok(path) = std::env::var("HARK_SCREENSHOT") {
        std::fs::write(path, &shot).unwrap();
    }
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);
    let (run_dir, live_url) = (job.run_dir.clone(), job.url.clone());
    assert_eq!(job.wait(), 0);
    // The running page polls on: its server ended with the job, so a poll
    // after that finds no one ("not updating", as the page says). Only
    // that is forgiven, and only for that server.
    b.problems
        .retain(|p| !(p.contains("net::ERR_CONNECTION_REFUSED") && p.contains(&live_url)));

    // The finished run, opened again: the whole run, at its mean rate.
    let (mut open, url) = live::open(&run_dir);
    b.navigate(&url);
    b.wait_until("Number(document.body.dataset.updates) >= 2", 60);
    let m = measure(&mut b);
    let _ = open.kill();
    let _ = open.wait();
    assert_eq!(m["state"], "finished", "{m}");
    assert_eq!(m["scope"], "whole run", "{m}");
    let row = &nodes(&mut b)[0];
    let profile = common::profile(&run_dir);
    let node = &profile["programs"][0]["nodes"][0];
    assert_eq!(row[0], node["host"].as_str().unwrap(), "{node}");
    assert_eq!(row[2], node["readings"].to_string(), "{node}");
    let busy_max = node["cpu"]["busy_max"].as_f64().unwrap();
    assert_eq!(row[4], format!("{:.0} %", 100.0 * busy_max), "{node}");
    let load = &node["load"];
    let shown = format!(
        "{:.2} (max {:.2})",
        load["load1_mean"].as_f64().unwrap(),
        load["load1_max"].as_f64().unwrap()
    );
    assert_eq!(row[8], shown, "{node}");
    let rate: f64 = m["rate"]
        .as_str()
        .unwrap()
        .trim_end_matches(['k', 'M', 'G'])
        .parse()
        .unwrap_or(-1.0);
    assert!(rate > 0.0, "a finished run shows {} events/s", m["rate"]);
    check_layout(&m);
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);
}
