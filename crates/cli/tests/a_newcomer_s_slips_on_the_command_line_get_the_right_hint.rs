//! What a new user types wrong gets the line they meant: `hark run ls`
//! (no `--`) shows `hark run -- ls`, `hark rn` suggests `run`, a command
//! that does not exist is said before any live-view address, and the help
//! and the bad-SPEC error list every trace term, `auto` included, and do
//! not deny `--analysers` a live view it has.

mod common;

use common::*;
use std::process::{Command, Output};

fn hark_with(args: &[&str]) -> Output {
    Command::new(hark()).args(args).output_within().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_command_without_the_double_dash_gets_the_line_it_meant() {
    let out = hark_with(&["run", "-q", "ls", "-la"]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("hark run -q -- ls -la"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_misspelt_run_suggests_run() {
    let out = hark_with(&["rn"]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(err.contains("'run'") && !err.contains("'runs'"), "{err}");
}

#[test]
fn a_command_that_does_not_exist_is_said_before_any_address() {
    let dir = scratch("nonexistent-command");
    let out = Command::new(hark())
        .current_dir(&dir)
        .args(["run", "--", "./nonexistent"])
        .env("HARK_INDEX", dir.join("runs.sqlite"))
        .output_within()
        .unwrap();
    assert_exit(&out, 127);
    let err = stderr(&out);
    assert!(err.contains("cannot run `./nonexistent`"), "{err}");
    assert!(!err.contains("live view"), "{err}");
}

#[test]
fn the_help_and_the_spec_error_list_trace_auto() {
    let out = hark_with(&["run", "--help"]);
    assert_exit(&out, 0);
    let help = String::from_utf8_lossy(&out.stdout);
    let trace = help.split("--trace[=<SPEC>]").nth(1).unwrap();
    let trace = trace.split("--trace-cap").next().unwrap();
    assert!(trace.contains("auto"), "{trace}");
    let analysers = help.split("--analysers <N|R:W>").nth(1).unwrap();
    let analysers = analysers.split("--no-virtualise").next().unwrap();
    assert!(!analysers.contains("no live view"), "{analysers}");

    let out = hark_with(&["run", "--trace=everything", "--", "true"]);
    assert_exit(&out, 2);
    assert!(stderr(&out).contains("auto=N"), "{}", stderr(&out));
}
