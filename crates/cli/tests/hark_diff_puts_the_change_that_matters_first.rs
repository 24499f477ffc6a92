//! `hark diff RUN_A RUN_B` on real runs:
//!
//! - the same program (`tests/programs/phases.c`) twice, the second with
//!   50 ms more per round in region `solve`: the first change that matters,
//!   in the text and in the HTML page, is region `step/solve` (the other
//!   regions may move by a few ms on a loaded machine, as sleeps wake late;
//!   they come after it);
//! - LAMMPS (`in.melt`) on 2 and on 4 ranks: the ranks go 2 → 4, ranks are
//!   not compared one by one, every MPI function of either run and every
//!   efficiency is compared (with both runs' values), and the
//!   point-to-point messages, counted exactly, grow with the ranks (LAMMPS
//!   splits the box along one more dimension).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn diff(a: &Path, b: &Path, html: &Path) -> (String, String) {
    let out: Output = Command::new(hark())
        .arg("diff")
        .arg(a)
        .arg(b)
        .arg("-o")
        .arg(html)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        std::fs::read_to_string(html).unwrap(),
    )
}

/// The names in the "Changes that matter" section of the text, in order.
fn matters(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Changes that matter"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            // "  <kind> <name> ...": the kind may be two words ("wait state").
            let l = l.trim_start().trim_start_matches("wait state");
            l.split_whitespace().nth(1).unwrap_or_default().to_string()
        })
        .collect()
}

fn run(dir: &Path, tag: &str, command: Vec<String>) -> PathBuf {
    let at = dir.join(tag);
    std::fs::create_dir_all(&at).unwrap();
    let index = dir.join("runs.sqlite");
    let (out, run_dir) = hark_run_env(
        &at,
        &["-q"],
        &command,
        &[("HARK_INDEX", index.to_str().unwrap())],
    );
    assert_exit(&out, 0);
    run_dir
}

#[test]
fn an_injected_slowdown_in_one_region_is_named_first() {
    if !have(OPEN_MPI.cc) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("diff-slowdown");
    let include = format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"));
    let exe = compile(OPEN_MPI.cc, "phases.c".as_ref(), &dir, &[&include]);
    let command = |extra: &[&str]| {
        let mut c = launcher(OPEN_MPI, 2);
        c.extend([exe.display().to_string(), "10".into(), "5000".into()]);
        c.extend(extra.iter().map(|s| s.to_string()));
        c
    };
    // One more pair if the first is off: on a loaded machine a rank may
    // sleep far longer than asked, once. A real error shows in both.
    let mut last = String::new();
    for attempt in 0..2 {
        let a = run(&dir, &format!("a{attempt}"), command(&[]));
        let b = run(&dir, &format!("b{attempt}"), command(&["solve", "50000"]));
        let (text, html) = diff(&a, &b, &dir.join("diff.html"));
        let names = matters(&text);
        let first_row = html
            .split("<tr class=")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        if names.first().map(String::as_str) == Some("step/solve")
            && first_row.contains("step/solve")
            && first_row.starts_with("worse")
        {
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        last = format!("changes that matter: {names:?}\n{text}\nfirst HTML row: {first_row}");
        eprintln!("attempt {attempt} is off:\n{last}");
    }
    panic!("the slowed region is not named first:\n{last}");
}

#[test]
fn lammps_on_2_and_4_ranks_differ_as_expected() {
    let input = Path::new("/usr/share/lammps/examples/melt/in.melt");
    if !have("lmp") || !input.exists() || !have(OPEN_MPI.run) {
        eprintln!(
            "skipped: needs lammps, lammps-examples and Open MPI (scripts/deps.sh installs them)"
        );
        return;
    }
    let dir = scratch("diff-lammps");
    let mut runs = Vec::new();
    for np in [2, 4] {
        let at = dir.join(format!("np{np}"));
        std::fs::create_dir_all(&at).unwrap();
        std::fs::copy(input, at.join("in.melt")).unwrap();
        let mut command = launcher(OPEN_MPI, np);
        command.extend(["lmp", "-in", "in.melt", "-log", "none"].map(String::from));
        runs.push(run(&dir, &format!("np{np}"), command));
    }
    let (text, html) = diff(&runs[0], &runs[1], &dir.join("diff.html"));
    let (a, b) = (profile(&runs[0]), profile(&runs[1]));
    assert!(text.contains("== lmp: ranks 2 -> 4"), "{text}");
    assert!(text.contains("2 ranks against 4"), "{text}");
    assert!(
        !text.contains("outside MPI"),
        "ranks compared one by one:\n{text}"
    );

    let messages = |p: &serde_json::Value| -> u64 {
        matrix(&p["programs"][0]["p2p"]["messages"])
            .iter()
            .flatten()
            .sum()
    };
    let (ma, mb) = (messages(&a), messages(&b));
    assert!(
        mb > ma,
        "LAMMPS sent {ma} messages on 2 ranks and {mb} on 4"
    );
    let count = hark_outputs::units::count;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("point-to-point messages"))
        .unwrap_or_else(|| panic!("no message count in:\n{text}"));
    assert!(
        line.contains(&count(ma)) && line.contains(&count(mb)),
        "{line}: expected {ma} -> {mb}"
    );

    for p in [&a, &b] {
        for f in p["programs"][0]["mpi"].as_object().unwrap().keys() {
            assert!(
                html.contains(&format!("<td class=l>{f}</td>")),
                "{f} not compared"
            );
        }
    }
    for e in [
        "parallel",
        "load_balance",
        "communication",
        "serialisation",
        "transfer",
    ] {
        let row = html
            .split("<tr")
            .find(|r| r.contains(&format!("<td class=l>efficiency</td><td class=l>{e}</td>")))
            .unwrap_or_else(|| panic!("efficiency {e} not compared"));
        for p in [&a, &b] {
            let v = p["programs"][0]["efficiency"][e].as_f64().unwrap();
            let shown = format!("{:.1} %", 100.0 * v);
            assert!(row.contains(&shown), "{e}: {shown} not in {row}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
