//! What a newcomer reading `report.html` tripped over, checked on the
//! page's layout in Debian's headless Chromium (skipped, saying so, without
//! it) and on its markup: the time axes end at the program's end, not at
//! the capacity of the slices; the efficiencies over time are small
//! multiples whose titles fit; numbers never wrap inside a table cell or a
//! density map's caption; no two headings of a chapter share a name;
//! charts are titled in words, not by the model's metric names; a file
//! only opened counts its ranks; communicators of one size calling one
//! collective are one row; the OpenMP section's per-thread bars keep
//! their labels inside their charts, side by side without overlapping and
//! within the page, and the efficiency bars' longest hybrid names end
//! before their bars.

mod common;

use common::chromium::{chromium, visit};
use hark_model::{
    CommCollectives, Efficiency, FileIo, OmpEfficiency, OmpRegion, Run, ThreadTimes, Totals,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

const MS: u64 = 1_000_000;

fn scratch(tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hark-layout-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixture run made to look like the runs the report tripped over: the
/// slices' capacity outlasts the program (as in a 42.7 s run whose slices
/// reached 68.7 s), hpcc-like dozens of two-rank communicators, a file
/// every rank opened and none moved a byte in, and large numbers.
fn tripping_run() -> Run {
    let mut run = common::two_programs();
    let p = &mut run.programs[0];
    // 48 slices of 50 ms hold the 2.45 s program; 40 more are capacity.
    p.efficiency_slices
        .extend(std::iter::repeat_n(Efficiency::default(), 40));
    for rows in p.timeslices.metrics.values_mut() {
        for row in rows.iter_mut() {
            row.extend(std::iter::repeat_n(0, 40));
        }
    }
    let collective = (0..4)
        .map(|r| {
            (0..88)
                .map(|k| {
                    if k < 48 {
                        (5 + r + k % 7) as u64 * MS
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect();
    p.timeslices
        .metrics
        .insert("collective_time_ns".into(), collective);
    for k in 0..24 {
        let mut functions = BTreeMap::new();
        functions.insert(
            "MPI_Allreduce".to_string(),
            Totals {
                calls: 1000 + k,
                bytes: 8000,
                time_ns: 7 * MS + k * 1000,
            },
        );
        let first = 2 * (k as i32 % 2);
        p.collectives.push(CommCollectives {
            members: vec![first, first + 1],
            functions,
        });
    }
    let mut null = FileIo {
        path: "/dev/null".into(),
        read_bytes: vec![0; 4],
        write_bytes: vec![0; 4],
        calls: vec![1; 4],
        ..FileIo::default()
    };
    null.ops.insert(
        "open".into(),
        Totals {
            calls: 4,
            bytes: 0,
            time_ns: MS / 50,
        },
    );
    p.io.files.push(null);
    // Numbers as wide as a long run's.
    let waitall = p.mpi.get_mut("MPI_Waitall").unwrap();
    waitall.calls = vec![12_345_678_901; 4];
    // OpenMP: 8 threads a rank, one never in a team, a long construct name
    // and the hybrid efficiencies.
    p.threads = (0..4)
        .map(|r| {
            (0..8)
                .map(|t| ThreadTimes {
                    omp_thread: if t == 7 { -1 } else { t },
                    useful_ns: (900 + 40 * t as u64 + 10 * r) * MS,
                    omp_barrier_ns: (300 - 40 * t as u64) * MS,
                    omp_idle_ns: if t == 0 { 0 } else { 120 * MS },
                    omp_lock_ns: 7 * MS,
                    omp_management_ns: if t == 0 { 15 * MS } else { 0 },
                    mpi_ns: 200 * MS,
                    io_ns: 3 * MS,
                    ..ThreadTimes::default()
                })
                .collect()
        })
        .collect();
    let omp = OmpEfficiency {
        parallel: 0.61,
        load_balance: 0.78,
        scheduling: 0.99,
        serialisation: 0.79,
    };
    p.openmp.efficiency = Some(omp);
    let e = p.efficiency.as_mut().unwrap();
    e.openmp = Some(omp);
    e.mpi_load_balance_in = Some(0.97);
    e.mpi_load_balance_out = Some(0.88);
    p.openmp.regions = vec![OmpRegion {
        name: "__ocean_dynamics_mod_MOD_compute_barotropic_residuals._omp_fn.12".into(),
        kind: "parallel".into(),
        calls: 12_345_678,
        threads: 7,
        time_ns: 2_300 * MS,
        barrier_ns: vec![vec![300 * MS; 8]; 4],
        critical_ns: 28 * MS,
        ..OmpRegion::default()
    }];
    run
}

/// The rows of the table that follows the heading `id` in `html`.
fn rows_after<'a>(html: &'a str, id: &str) -> Vec<&'a str> {
    let from = html.find(&format!("id=\"{id}\"")).unwrap();
    let rest = &html[from..];
    let table = &rest[rest.find("<tbody>").unwrap()..rest.find("</tbody>").unwrap()];
    table.split("<tr>").skip(1).collect()
}

#[test]
fn a_file_only_opened_counts_its_ranks_and_communicators_of_one_size_are_one_row() {
    let html = hark_outputs::html::render(&tripping_run(), &Default::default());

    let null = rows_after(&html, "p0-io")
        .into_iter()
        .find(|r| r.contains("/dev/null"))
        .expect("no row for /dev/null");
    assert!(
        null.contains("<td class=\"n\" data-v=\"4\">4</td>"),
        "the 4 ranks that opened /dev/null are not counted: {null}"
    );

    let rows = rows_after(&html, "p0-collectives");
    assert_eq!(rows.len(), 4, "one row per function and size: {rows:#?}");
    let grouped = rows
        .iter()
        .find(|r| r.contains("24 communicators"))
        .expect("the 24 two-rank communicators are not one row");
    // Calls and time add up over the 24 communicators.
    let calls: u64 = (0..24).map(|k| 1000 + k).sum();
    assert!(
        grouped.contains(&format!("data-v=\"{calls}\"")),
        "{grouped}"
    );

    // Each heading of a chapter says something of its own.
    for chapter in html.split("<section class=\"chapter\"").skip(1) {
        let mut seen = std::collections::BTreeSet::new();
        for tag in ["<h3", "<h4"] {
            for part in chapter.split(tag).skip(1) {
                let text = &part[part.find('>').unwrap() + 1..part.find("</h").unwrap()];
                assert!(seen.insert(text.to_string()), "two headings \"{text}\"");
            }
        }
    }

    // Charts are titled in words: no `collective_time_ns`, no `MPI_Send.calls`.
    for title in html.split("class=\"charttitle\">").skip(1) {
        let title = &title[..title.find("</text>").unwrap()];
        assert!(
            !title.contains("_ns") && !title.contains("_time") && !title.contains(".calls"),
            "a chart is titled by a metric's name: {title}"
        );
    }
    assert!(html.contains(">Time in collectives, % of each slice</text>"));
}

/// Measures the page after its script ran: each number's lines in table
/// cells and density-map captions, the time axes' ends, the panels of the
/// efficiencies and whether each chart title fits its chart.
const MEASURE: &str = r##"<script>
(function () {
  const out = { split: [], axes: [], panels: [], cut: [], threads: [], outside: [], overlaps: [], width: document.documentElement.clientWidth };
  const number = /\d[\d.,]*(?:[ \u00a0](?:%|[µa-zA-Z]{1,3}\b))?/g;
  const lines = (range) => new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  for (const el of document.querySelectorAll("td, .smalls figcaption")) {
    if (!el.getClientRects().length) continue; // folded away in <details>
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(number)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        if (lines(range) > 1) out.split.push(m[0]);
      }
    }
  }
  for (const t of document.querySelectorAll("#p0 .xend")) {
    out.axes.push({ ns: Number(t.dataset.ns), text: t.textContent });
  }
  const panels = document.querySelector("#p0 [aria-label='ocean: efficiencies per slice']");
  if (panels) {
    for (const s of panels.querySelectorAll("svg")) {
      const r = s.getBoundingClientRect();
      out.panels.push({ left: r.left, top: r.top, right: r.right, bottom: r.bottom, title: s.querySelector(".charttitle").textContent });
    }
  }
  for (const t of document.querySelectorAll("svg .charttitle")) {
    const s = t.ownerSVGElement, box = s.viewBox.baseVal;
    if (!s.getClientRects().length) continue;
    const end = Number(t.getAttribute("x")) + t.getComputedTextLength();
    if (end > box.width + 0.5) out.cut.push(t.textContent);
  }
  // OpenMP: every text of the per-thread bars inside its chart; the
  // efficiency bars' names end before the bars begin.
  const inside = (s) => {
    const box = s.viewBox.baseVal;
    for (const t of s.querySelectorAll("text")) {
      const len = t.getComputedTextLength(), x = Number(t.getAttribute("x"));
      const a = t.getAttribute("text-anchor") || "start";
      const start = a === "end" ? x - len : a === "middle" ? x - len / 2 : x;
      if (start < -0.5 || start + len > box.width + 0.5) out.outside.push(t.textContent);
    }
  };
  for (const f of document.querySelectorAll("#p0 figure.threads")) {
    const r = f.getBoundingClientRect();
    out.threads.push({ left: r.left, top: r.top, right: r.right, bottom: r.bottom, bars: f.querySelectorAll("g.thread").length });
    inside(f.querySelector("svg"));
  }
  for (const s of document.querySelectorAll("#p0 svg.effbars")) {
    inside(s);
    const bar0 = Number(s.querySelector("rect.track").getAttribute("x"));
    for (const t of s.querySelectorAll("text.axis")) {
      const x = Number(t.getAttribute("x"));
      if (x < bar0 && x + t.getComputedTextLength() > bar0 - 2) out.overlaps.push(t.textContent);
    }
  }
  const pre = document.createElement("pre");
  pre.id = "layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script></body>"##;

/// Whether two measured boxes (`left`, `top`, `right`, `bottom`) do not
/// overlap: side by side or one below the other.
fn apart(a: &Value, b: &Value) -> bool {
    let f = |p: &Value, k: &str| p[k].as_f64().unwrap();
    f(a, "right") <= f(b, "left") + 0.5
        || f(b, "right") <= f(a, "left") + 0.5
        || f(a, "bottom") <= f(b, "top") + 0.5
        || f(b, "bottom") <= f(a, "top") + 0.5
}

#[test]
fn numbers_stay_whole_axes_end_with_the_program_and_panels_fit() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    let dir = scratch("report");
    let run = tripping_run();
    let wall_ns = run.programs[0].wall_ns;
    let out = dir.join("run");
    hark_outputs::write_all(&run, &out, |_| true).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let page = dir.join("measured.html");
    std::fs::write(&page, html.replace("</body>", MEASURE)).unwrap();
    // A laptop's half screen: narrow enough for cells to be squeezed.
    let v = visit(
        browser,
        &page,
        &dir,
        &["--dump-dom".into(), "--window-size=760,3000".into()],
    );
    assert!(v.console.is_empty(), "the report logged: {:#?}", v.console);
    let json = &v.dom[v
        .dom
        .find("<pre id=\"layout\">")
        .expect("the measuring script did not run")
        + 17..];
    let json = json[..json.find("</pre>").unwrap()]
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"");
    let m: Value = serde_json::from_str(&json).unwrap();

    assert_eq!(
        m["split"],
        Value::Array(vec![]),
        "numbers wrapped over two lines"
    );
    assert_eq!(
        m["cut"],
        Value::Array(vec![]),
        "chart titles cut at the chart's edge"
    );

    // Every time axis of the chapter ends at the program's end (within its
    // last 50 ms slice), not at the 4.4 s the slices could hold.
    let axes = m["axes"].as_array().unwrap();
    assert!(axes.len() >= 4, "time axes missing: {axes:?}");
    for a in axes {
        let end = a["ns"].as_u64().unwrap();
        assert!(
            end <= wall_ns && end + 50 * MS >= wall_ns,
            "an axis ends at {a} for a program of {wall_ns} ns"
        );
    }

    // Five panels, side by side or below each other, none over another.
    let panels = m["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 5, "{panels:?}");
    let f = |p: &Value, k: &str| p[k].as_f64().unwrap();
    for (i, a) in panels.iter().enumerate() {
        for b in &panels[i + 1..] {
            assert!(apart(a, b), "panels overlap: {a} {b}");
        }
    }
    assert!(panels[0]["title"].as_str().unwrap().starts_with("Parallel"));

    // The OpenMP section: a chart per rank with a bar per thread, every
    // label inside its chart, charts apart and within the page.
    assert_eq!(
        m["outside"],
        Value::Array(vec![]),
        "labels outside their chart"
    );
    assert_eq!(
        m["overlaps"],
        Value::Array(vec![]),
        "efficiency names over their bars"
    );
    let charts = m["threads"].as_array().unwrap();
    assert_eq!(charts.len(), 4, "{charts:?}");
    let width = m["width"].as_f64().unwrap();
    for (i, a) in charts.iter().enumerate() {
        assert_eq!(a["bars"], 8, "{a}");
        assert!(f(a, "right") <= width + 0.5, "a chart beyond the page: {a}");
        for b in &charts[i + 1..] {
            assert!(apart(a, b), "thread charts overlap: {a} {b}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
