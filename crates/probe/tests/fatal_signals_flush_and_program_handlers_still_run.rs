//! The probe flushes on a fatal signal, then lets it take its course; a
//! handler the program installs later still runs, and is what a query
//! reports (see `core::signals`).

mod common;

use common::{bytes_on, compile, Probed};
use hark_wire::{op::io, EndReason};
use std::os::unix::process::ExitStatusExt;

fn run(mode: &str) -> common::Run {
    let exe = compile("tests/programs/signals.c", &["cc"], &[]);
    Probed::new(&format!("signal-{mode}")).run(&exe, &["out.dat", mode])
}

#[test]
fn a_fatal_signal_flushes_everything_then_ends_the_process_with_it() {
    for (mode, signal) in [
        ("segv", libc::SIGSEGV),
        ("term", libc::SIGTERM),
        ("int", libc::SIGINT),
        ("bus", libc::SIGBUS),
        ("fpe", libc::SIGFPE),
        ("abort", libc::SIGABRT),
    ] {
        let run = run(mode);
        assert_eq!(run.status.signal(), Some(signal), "{mode}: {}", run.stderr);
        let s = run.only_stream();
        let end = s.end.as_ref().unwrap_or_else(|| panic!("{mode}: no End"));
        assert_eq!(end.reason, EndReason::Signal, "{mode}");
        assert_eq!(bytes_on(s, io::WRITE, "out.dat"), 1000, "{mode}");
        assert_eq!(
            (end.events_written, end.events_dropped),
            (s.events.len() as u64, 0),
            "{mode}"
        );
    }
}

#[test]
fn handlers_the_program_installs_run_and_are_reported_as_installed() {
    let run = run("handler");
    assert!(
        run.status.success(),
        "exit {:?}: {}",
        run.status,
        run.stderr
    );
    assert_eq!(run.stdout, "handled\n");
    let s = run.only_stream();
    assert!(s.is_clean());
    assert_eq!(s.end.as_ref().unwrap().reason, EndReason::Exit);
    assert_eq!(bytes_on(s, io::WRITE, "out.dat"), 1007);
}

#[test]
fn a_program_handler_that_exits_closes_the_stream_itself() {
    let run = run("exits");
    assert_eq!(run.status.code(), Some(7), "{}", run.stderr);
    let s = run.only_stream();
    assert!(s.is_clean());
    assert_eq!(bytes_on(s, io::WRITE, "out.dat"), 1000);
}
