//! The program runs on whatever the server does: missing, killed, slow.
//! And totals reconcile exactly: written = delivered + dropped.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{compile, probe_lib, scratch, Options, Probed};
use hark_transport::Closed;
use hark_wire::op::io;

fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("hark: ")).collect()
}

#[test]
fn a_missing_server_costs_one_warning_and_the_program_runs_on() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let dir = scratch("noserver");
    let out = Command::new(&exe)
        .arg("data.bin")
        .current_dir(&dir)
        .env("LD_PRELOAD", probe_lib())
        .env(
            "HARK_ADDR",
            format!("unix:{}", dir.join("nobody.sock").display()),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    let w = warnings(&stderr);
    assert_eq!(w.len(), 1, "{stderr}");
    assert!(w[0].contains("cannot reach the Hark server"), "{}", w[0]);
}

#[test]
fn a_server_killed_mid_run_costs_one_warning_and_the_program_finishes() {
    // Lossless too: through shared memory the slots never come back from a
    // dead server, and a writer that waited for them would wait for ever.
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    for lossless in ["0", "1"] {
        let p = Probed::new("killed")
            .env("HARK_PACK_SIZE", "4K")
            .env("HARK_LOSSLESS", lossless);
        let mut cmd = Command::new(&exe);
        cmd.args(["out.dat", "20000", "2000"])
            .current_dir(&p.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &p.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        // Cut the connection once the first packs have arrived.
        let deadline = Instant::now() + Duration::from_secs(30);
        while p
            .collector
            .streams()
            .first()
            .is_none_or(|s| s.packs.len() < 2)
        {
            assert!(Instant::now() < deadline, "no packs arrived");
            std::thread::sleep(Duration::from_millis(5));
        }
        p.collector.abort_connections();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            std::fs::metadata(p.dir.join("out.dat")).unwrap().len(),
            20000
        );
        let w = warnings(&stderr);
        assert_eq!(w.len(), 1, "{stderr}");
        assert!(w[0].contains("lost the connection"), "{}", w[0]);
        let s = &p.collector.wait_closed(1, Duration::from_secs(10)).unwrap()[0];
        assert!(s.shm && s.end.is_none());
        assert!(
            matches!(s.closed, Some(Closed::NoEnd | Closed::Broken(_))),
            "{:?}",
            s.closed
        );
    }
}

/// Runs `writes` one-byte writes against a collector that sleeps `delay`
/// after every pack, with 2 buffers of `pack_size`.
fn against_a_slow_server(
    tag: &str,
    delay: Duration,
    lossless: bool,
    pack_size: &str,
    writes: u64,
) -> common::Stream {
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    let p = Probed::with_options(
        tag,
        Options {
            pack_delay: delay,
            ..Options::default()
        },
    )
    .env("HARK_PACK_SIZE", pack_size)
    .env("HARK_BUFFERS", "2")
    .env("HARK_LOSSLESS", if lossless { "1" } else { "0" });
    let run = p.run(&exe, &["out.dat", &writes.to_string(), "0"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(warnings(&run.stderr).is_empty(), "{}", run.stderr);
    let s = run.only_stream().clone();
    assert!(s.is_clean(), "{:?}", s.closed);
    s
}

#[test]
fn a_slow_server_in_lossy_mode_drops_and_the_totals_reconcile_exactly() {
    // 100000 events in 64 KiB packs (~74 packs) against a server taking
    // 50 ms per pack: it would need almost 4 s, the program takes a fraction
    // of that, and the socket's own buffers hold only a few packs.
    let s = against_a_slow_server("lossy", Duration::from_millis(50), false, "64K", 100_000);
    let end = s.end.clone().unwrap();
    // open + the writes + close, every one either delivered or dropped.
    assert_eq!(end.events_written, 100_002);
    assert_eq!(
        end.events_written,
        s.events.len() as u64 + end.events_dropped
    );
    assert!(
        end.events_dropped > 0,
        "nothing was dropped: the server was not slow enough"
    );
    assert_eq!(end.packs_sent, s.packs.len() as u64);
}

#[test]
fn a_slow_server_in_lossless_mode_gets_every_event() {
    let s = against_a_slow_server("lossless", Duration::from_millis(1), true, "4K", 20_000);
    let end = s.end.clone().unwrap();
    assert_eq!((end.events_written, end.events_dropped), (20002, 0));
    assert_eq!(s.events_of(io::WRITE).count(), 20000);
}

#[test]
fn ls_runs_under_the_probe_with_unchanged_output() {
    let p = Probed::new("ls");
    let plain = Command::new("/bin/ls")
        .args(["-la", "/usr"])
        .output()
        .unwrap();
    let mut cmd = Command::new("/bin/ls");
    cmd.args(["-la", "/usr"]);
    let run = p.run_command(cmd);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, String::from_utf8_lossy(&plain.stdout));
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let s = run.only_stream();
    assert!(s.is_clean());
    assert_eq!(s.hello.program, "ls");
    assert_eq!(s.hello.argv, ["/bin/ls", "-la", "/usr"]);
}

#[test]
fn python_runs_under_the_probe_and_its_file_writes_are_exact() {
    let p = Probed::new("python");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args([
        "-c",
        "f = open('out.txt', 'wb', buffering=0)\nfor i in range(10): f.write(b'x' * 1000)\nf.close()\nprint('ok')",
    ])
    .current_dir(&p.dir);
    let run = p.run_command(cmd);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, "ok\n");
    let s = run.only_stream();
    assert!(s.is_clean());
    assert_eq!(common::bytes_on(s, io::WRITE, "out.txt"), 10_000);
    assert_eq!(common::count_on(s, io::WRITE, "out.txt"), 10);
}

#[test]
fn launchers_and_skipped_programs_are_left_alone() {
    let dir = scratch("skip-bin");
    let mpirun = dir.join("mpirun");
    std::fs::copy("/bin/true", &mpirun).unwrap();
    let p = Probed::new("skip");
    for (prog, skip) in [
        (mpirun.as_path(), ""),
        (std::path::Path::new("/bin/true"), "true"),
    ] {
        let st = Command::new(prog)
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .env("HARK_SKIP", skip)
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(p.collector.streams().is_empty());
}

#[test]
fn without_an_address_the_probe_starts_no_thread() {
    let count = "import os; print(len(os.listdir('/proc/self/task')))";
    let out = Command::new("/usr/bin/python3")
        .args(["-c", count])
        .env("LD_PRELOAD", probe_lib())
        .env_remove("HARK_ADDR")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
}

#[test]
fn a_shell_script_and_every_process_it_starts_stream_cleanly() {
    let p = Probed::new("shell");
    let mut cmd = Command::new("/bin/bash");
    cmd.args([
        "-c",
        "for i in 1 2 3; do /bin/true; done; echo done > out.txt",
    ])
    .current_dir(&p.dir);
    // bash, and three /bin/true; forked children that record before their
    // exec add streams of their own, closed before the exec.
    cmd.env("HARK_PACK_SIZE", "4K");
    let run = p.run_command(cmd);
    assert!(run.status.success(), "{}", run.stderr);
    std::thread::sleep(Duration::from_millis(300));
    let streams = p.collector.streams();
    let programs: Vec<&str> = streams.iter().map(|s| s.hello.program.as_str()).collect();
    assert_eq!(
        programs.iter().filter(|p| **p == "true").count(),
        3,
        "{programs:?}"
    );
    for s in &streams {
        assert!(
            s.is_clean(),
            "{} (pid {}): {:?}",
            s.hello.program,
            s.hello.pid,
            s.closed
        );
        let end = s.end.as_ref().unwrap();
        assert_eq!(
            end.events_written,
            s.events.len() as u64 + end.events_dropped
        );
        assert_eq!(end.events_dropped, 0);
    }
    let bash = streams
        .iter()
        .find(|s| s.hello.pid == streams[0].hello.pid)
        .unwrap();
    assert_eq!(bash.hello.program, "bash");
}

#[test]
fn a_server_that_never_accepts_delays_start_by_the_connect_timeout_only() {
    use std::os::unix::net::UnixStream;
    let dir = scratch("backlog");
    let path = dir.join("full.sock");
    // A listener with a backlog of 0 that never accepts, its queue filled
    // by one waiting connection: the next connect cannot complete.
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: plain socket calls on a fresh descriptor and a valid address.
    let lfd = unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in sa.sun_path.iter_mut().zip(c.as_bytes()) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, (&sa as *const libc::sockaddr_un).cast(), len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        fd
    };
    let _waiting = UnixStream::connect(&path).unwrap();
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let t0 = Instant::now();
    let out = common::output_within(
        {
            let mut cmd = Command::new(&exe);
            cmd.arg("data.bin")
                .current_dir(&dir)
                .env("LD_PRELOAD", probe_lib())
                .env("HARK_ADDR", format!("unix:{}", path.display()))
                .env("HARK_CONNECT_TIMEOUT_MS", "300");
            cmd
        },
        Duration::from_secs(30),
    );
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(warnings(&stderr).len(), 1, "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // SAFETY: closing the test's own listener.
    unsafe { libc::close(lfd) };
}

#[test]
fn a_python_worker_forked_and_ended_with_os_exit_streams_cleanly() {
    let p = Probed::new("pyfork").streams(2);
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args([
        "-c",
        "import os\npid = os.fork()\nif pid == 0:\n    f = open('c.txt', 'wb', buffering=0)\n    f.write(b'x' * 100)\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('ok')",
    ])
    .current_dir(&p.dir);
    let run = p.run_command(cmd);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, "ok\n");
    let child = run
        .streams
        .iter()
        .find(|s| s.file_id("c.txt").is_some())
        .expect("the child's stream");
    assert!(child.is_clean(), "{:?}", child.closed);
    assert_eq!(common::bytes_on(child, io::WRITE, "c.txt"), 100);
    assert!(run.streams.iter().all(|s| s.is_clean()));
}

#[test]
fn a_program_closing_and_dup2ing_every_descriptor_keeps_the_stream() {
    let exe = compile("tests/programs/fd_churn.c", &["cc"], &[]);
    let p = Probed::new("churn");
    let run = p.run(&exe, &["f.txt"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(warnings(&run.stderr).is_empty(), "{}", run.stderr);
    let s = run.only_stream();
    assert!(s.is_clean(), "{:?}", s.closed);
    assert_eq!(common::bytes_on(s, io::WRITE, "f.txt"), 11);
    // The file got only what the program wrote: no pack went into it.
    assert_eq!(std::fs::read(p.dir.join("f.txt")).unwrap(), b"still here\n");
}
