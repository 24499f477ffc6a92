//! `hark diff` across rank counts and with repeated runs, on real Open MPI
//! jobs of one program (`tests/programs/phases.c`):
//!
//! - 2 ranks against 4: every rank makes the same calls and sends the same
//!   messages, so no count is listed as changed (they are compared per
//!   rank), and the header gives the speed-up and the parallel efficiency;
//! - two repeated runs a side of the same job: no change matters beyond the
//!   run-to-run spread, and the text says the noise comes from it;
//! - two runs a side where side B sends twice the messages (twice the
//!   rounds) and is slower in region `solve`: the region is the first change
//!   that matters, and the per-rank message count is listed.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn diff(before: &[PathBuf], after: &[PathBuf]) -> String {
    let mut c = Command::new(hark());
    c.arg("diff").args(before);
    if before.len() > 1 || after.len() > 1 {
        c.arg("--");
    }
    let out = c.args(after).output_within().unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names in the "Changes that matter" section of the text, in order.
fn matters(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Changes that matter"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.trim_start().starts_with("none:"))
        .map(|l| {
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

struct Phases {
    /// Removed when the test passes.
    dir: Scratch,
    exe: PathBuf,
}

impl Phases {
    fn new(tag: &str) -> Option<Phases> {
        if !have(OPEN_MPI.cc) {
            eprintln!("skipped: Open MPI is not installed");
            return None;
        }
        let dir = scratch(tag);
        let include = format!("-I{}/../../include", env!("CARGO_MANIFEST_DIR"));
        let exe = compile(OPEN_MPI.cc, "phases.c".as_ref(), &dir, &[&include]);
        Some(Phases { dir, exe })
    }

    fn run(&self, tag: &str, np: usize, args: &[&str]) -> PathBuf {
        let mut c = launcher(OPEN_MPI, np);
        c.push(self.exe.display().to_string());
        c.extend(args.iter().map(|s| s.to_string()));
        run(&self.dir, tag, c)
    }
}

#[test]
fn two_ranks_against_four_list_no_count_and_give_the_speedup() {
    let Some(p) = Phases::new("diffr-ranks") else {
        return;
    };
    let a = p.run("np2", 2, &["10", "2000"]);
    let b = p.run("np4", 4, &["10", "2000"]);
    let text = diff(&[a], &[b]);
    assert!(text.contains("ranks 2 -> 4"), "{text}");
    assert!(
        !text.contains("Counts that changed"),
        "per-rank counts are the same, yet counts are listed:\n{text}"
    );
    assert!(text.contains("speed-up "), "no speed-up line:\n{text}");
    assert!(
        text.contains("parallel efficiency ") && text.contains("from 2 to 4 ranks"),
        "no parallel efficiency line:\n{text}"
    );
    assert!(
        text.contains("noise judged from the spread across ranks (give repeated runs"),
        "{text}"
    );
}

#[test]
fn repeated_runs_of_the_same_job_change_nothing_that_matters() {
    let Some(p) = Phases::new("diffr-same") else {
        return;
    };
    // One more set if the first is off: on a loaded machine one rank may
    // sleep far longer than asked in one run of one side only.
    let mut last = String::new();
    for attempt in 0..2 {
        let runs: Vec<PathBuf> = (0..4)
            .map(|i| p.run(&format!("r{attempt}-{i}"), 2, &["10", "5000"]))
            .collect();
        // Sides in turns (A B A B), so a drift of the machine lands on both.
        let text = diff(
            &[runs[0].clone(), runs[2].clone()],
            &[runs[1].clone(), runs[3].clone()],
        );
        assert!(text.contains("run-to-run spread"), "{text}");
        assert!(text.contains("means over 2 and 2 runs"), "{text}");
        let names = matters(&text);
        if names.is_empty() && text.contains("  none: every difference") {
            return;
        }
        last = format!("changes that matter: {names:?}\n{text}");
        eprintln!("attempt {attempt} is off:\n{last}");
    }
    panic!("identical repeated runs differ beyond their noise:\n{last}");
}

#[test]
fn a_real_change_comes_first_against_repeated_runs() {
    let Some(p) = Phases::new("diffr-change") else {
        return;
    };
    let mut last = String::new();
    for attempt in 0..2 {
        let a: Vec<PathBuf> = (0..2)
            .map(|i| p.run(&format!("a{attempt}-{i}"), 2, &["10", "5000"]))
            .collect();
        // Twice the rounds: twice the messages, and `solve` much slower.
        let b: Vec<PathBuf> = (0..2)
            .map(|i| {
                let args = ["20", "5000", "solve", "50000"];
                p.run(&format!("b{attempt}-{i}"), 2, &args)
            })
            .collect();
        let text = diff(&a, &b);
        let names = matters(&text);
        let messages = text
            .lines()
            .find(|l| l.trim_start().starts_with("point-to-point messages"));
        assert!(messages.is_some(), "no message count in:\n{text}");
        if names.first().map(String::as_str) == Some("step/solve") {
            return;
        }
        last = format!("changes that matter: {names:?}\n{text}");
        eprintln!("attempt {attempt} is off:\n{last}");
    }
    panic!("the injected change is not named first:\n{last}");
}
