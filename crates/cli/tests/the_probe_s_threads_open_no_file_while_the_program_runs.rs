//! A shell's redirection frees a descriptor and takes its number again
//! (`close(1)`, then `dup2(file, 1)`). A file one of the probe's own
//! threads opened in between would get that number, and the thread's
//! `close` would then close the program's file: `sh -c 'echo $$ > f'`
//! under the probe once failed with "echo: I/O error" that way (the
//! shipper read `/sys/devices/system/cpu/online` as it started). So the
//! probe's threads open nothing once the program runs: every call of the
//! traced program that makes a descriptor comes from its main thread.

mod common;

use common::*;
use std::process::Command;

#[test]
fn the_probe_s_threads_open_no_file_while_the_program_runs() {
    probe();
    assert!(have("strace"), "strace is needed: run scripts/deps.sh");
    let traces = Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .output_within()
        .is_ok_and(|o| o.status.success());
    if !traces {
        // ptrace refused (a container without it): nothing to look at.
        eprintln!("skipped: strace cannot trace a process here");
        return;
    }
    let dir = scratch("threads-open-nothing");
    let trace = dir.join("trace.txt");
    // `exec` starts the probe a second time, in the new image.
    let command: Vec<String> = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=open,openat,openat2,creat,socket,accept,accept4,dup,pipe,pipe2,memfd_create,eventfd2,epoll_create1,timerfd_create,signalfd4,inotify_init1",
        "-o",
        trace.to_str().unwrap(),
        "sh",
        "-c",
        "echo $$ > main.pid; exec sh -c 'echo again > again.txt'",
    ]
    .map(String::from)
    .to_vec();
    let (out, _) = hark_run(&dir, &["-q", "--no-http"], &command);
    assert_exit(&out, 0);
    let main = std::fs::read_to_string(dir.join("main.pid")).unwrap();
    let main = format!("{} ", main.trim());
    assert_eq!(
        std::fs::read_to_string(dir.join("again.txt")).unwrap(),
        "again\n"
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.lines().any(|l| l.starts_with(&main)), "{text}");
    let others: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(&main) && !l.contains("+++ exited") && !l.contains("--- SIG"))
        .collect();
    assert!(
        others.is_empty(),
        "the probe's threads made descriptors:\n{}",
        others.join("\n")
    );
}
