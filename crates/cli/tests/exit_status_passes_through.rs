//! `hark run` exits with the measured command's status: its exit code, 128
//! plus the signal that killed it, 127 for a command that does not exist;
//! and a failing command still leaves its run directory.

mod common;

use common::*;

#[test]
fn the_commands_exit_status_is_hark_s() {
    let dir = scratch("exit");
    let cases: &[(&str, &[&str], i32)] = &[
        ("zero", &["sh", "-c", "exit 0"], 0),
        ("seven", &["sh", "-c", "exit 7"], 7),
        ("terminated", &["sh", "-c", "kill -TERM $$"], 128 + 15),
        ("killed", &["sh", "-c", "kill -KILL $$"], 128 + 9),
        ("missing", &["./no-such-program-here"], 127),
    ];
    for (name, command, code) in cases {
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        let case_dir = dir.join(name);
        std::fs::create_dir_all(&case_dir).unwrap();
        let (out, run_dir) = hark_run(&case_dir, &[], &command);
        assert_exit(&out, *code);
        if *code != 127 {
            assert!(
                run_dir.join("summary.txt").exists(),
                "{name}: no run directory"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_default_run_directory_is_named_after_the_program() {
    probe();
    let dir = scratch("default-dir");
    let mut cmd = std::process::Command::new(hark());
    cmd.current_dir(&dir)
        .args(["run", "-q", "--", "sh", "-c", "exit 0"]);
    let out = cmd.output_within().unwrap();
    assert_exit(&out, 0);
    assert!(
        out.stderr.is_empty(),
        "quiet printed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].starts_with("hark-sh-"), "{made:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_probe_is_a_clear_error() {
    let dir = scratch("no-probe");
    let out = std::process::Command::new(hark())
        .current_dir(&dir)
        .args(["run", "--probe", "/nonexistent/libhark.so", "--", "true"])
        .output_within()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/libhark.so"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mistakes_on_the_command_line_exit_2_with_the_reason() {
    let dir = scratch("usage");
    let cases: &[(&[&str], &str)] = &[
        (&["run"], "no command to measure"),
        (
            &["run", "--analyses", "mpi-profile,bogus", "--", "true"],
            "no analysis is called `bogus`",
        ),
        (
            &["run", "--pack-size", "1G", "--", "true"],
            "from 4K to 64M",
        ),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, says) in cases {
        let out = std::process::Command::new(hark())
            .current_dir(&dir)
            .args(*args)
            .output_within()
            .unwrap();
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sigterm_to_hark_reaches_the_command_and_the_report_is_still_written() {
    probe();
    let dir = scratch("sigterm");
    let ready = dir.join("ready");
    // The command says when its trap is set, then waits to be terminated.
    let script = format!(
        "trap 'exit 3' TERM; touch {}; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; exit 9",
        ready.display()
    );
    let mut child = std::process::Command::new(hark())
        .current_dir(&dir)
        .args(["run", "-q", "-o"])
        .arg(dir.join("run"))
        .args(["--", "bash", "-c", &script])
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !ready.exists() {
        assert!(t0.elapsed().as_secs() < 30, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "hark did not pass SIGTERM on: {status:?}"
    );
    assert!(
        dir.join("run/summary.txt").exists(),
        "no run directory after SIGTERM"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A command from which no process reached the probe: when it failed, hark
/// points at its own messages (a launcher refusing to start says why), and
/// only when it succeeded does it guess at a static or setuid program.
#[test]
fn no_process_connected_points_at_the_command_when_it_failed() {
    let dir = scratch("no-process");
    // Statically linked, so LD_PRELOAD never loads the probe into it.
    std::fs::write(
        dir.join("status.c"),
        "#include <stdlib.h>\nint main(int c, char **v) { return c > 1 ? atoi(v[1]) : 0; }\n",
    )
    .unwrap();
    let cc = std::process::Command::new("cc")
        .current_dir(&dir)
        .args(["-static", "-o", "status", "status.c"])
        .output_within()
        .unwrap();
    if !cc.status.success() {
        eprintln!(
            "skipped: no static C library: {}",
            String::from_utf8_lossy(&cc.stderr)
        );
        return;
    }
    for (status, said) in [
        (
            "5",
            "`./status` exited with status 5 before any process of it reached the probe",
        ),
        (
            "0",
            "Statically linked and setuid programs ignore LD_PRELOAD",
        ),
    ] {
        let command = vec!["./status".to_string(), status.to_string()];
        let (out, _) = hark_run(&dir, &[], &command);
        assert_exit(&out, status.parse().unwrap());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(said), "status {status}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
