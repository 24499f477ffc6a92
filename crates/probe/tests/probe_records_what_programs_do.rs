//! Programs run under the probe; the decoded stream equals what they did.

mod common;

use common::{bytes_on, compile, count_on, Probed};
use hark_wire::op::io;
use hark_wire::ClockSource;

#[test]
fn posix_calls_arrive_with_exact_bytes_offsets_and_errors() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let p = Probed::new("posix");
    let run = p.run(&exe, &["data.bin"]);
    assert!(
        run.status.success(),
        "exit {:?}: {}",
        run.status,
        run.stderr
    );
    let s = run.only_stream();
    assert!(s.is_clean(), "{:?}", s.closed);
    let f = "data.bin";
    assert_eq!(count_on(s, io::OPEN, f), 2);
    assert_eq!(
        (count_on(s, io::WRITE, f), bytes_on(s, io::WRITE, f)),
        (10, 5500)
    );
    assert_eq!(
        (count_on(s, io::PWRITE, f), bytes_on(s, io::PWRITE, f)),
        (1, 333)
    );
    assert_eq!(bytes_on(s, io::WRITEV, f), 60);
    assert_eq!(count_on(s, io::FSYNC, f), 1);
    assert_eq!(count_on(s, io::FDATASYNC, f), 1);
    assert_eq!(
        (count_on(s, io::READ, f), bytes_on(s, io::READ, f)),
        (4, 10333)
    );
    assert_eq!(bytes_on(s, io::PREAD, f), 100);
    assert_eq!(bytes_on(s, io::READV, f), 100);
    assert_eq!(count_on(s, io::LSEEK, f), 1);
    assert_eq!(count_on(s, io::CLOSE, f), 2);
    let pw = s.events_of(io::PWRITE).next().unwrap();
    assert_eq!(pw.extra(), 10000, "pwrite offset");
    // The failed open and read carry their errno.
    let bad = s.file_id("/nonexistent/hark/x").unwrap();
    let failed_open = s.events_of(io::OPEN).find(|e| e.obj.get() == bad).unwrap();
    assert_eq!(
        (failed_open.peer.get(), failed_open.tag.get()),
        (-1, libc::ENOENT)
    );
    let failed_read = s.events_of(io::READ).find(|e| e.peer.get() == -1).unwrap();
    assert_eq!(failed_read.tag.get(), libc::EBADF);
    assert_eq!(bytes_on(s, io::WRITE, "<stdout>"), 6);
    assert_eq!(run.stdout, "hello\n");
    let end = s.end.as_ref().unwrap();
    assert_eq!(end.events_written, s.events.len() as u64);
    assert_eq!(end.events_dropped, 0);
}

#[test]
fn timestamps_are_on_the_hosts_monotonic_clock() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    // The default clock (the TSC where usable: events carry ticks, which
    // the reader turns into nanoseconds) and the forced fallback.
    for clock in ["", "monotonic"] {
        let p = Probed::new("clock").env("HARK_CLOCK", clock);
        let before = monotonic_ns();
        let run = p.run(&exe, &["data.bin"]);
        let after = monotonic_ns();
        assert!(run.status.success(), "{}", run.stderr);
        let s = run.only_stream();
        if clock == "monotonic" {
            assert_eq!(s.hello.clock, ClockSource::Monotonic);
        }
        // The probe clock is anchored to CLOCK_MONOTONIC: every event, and
        // the handshake's reference, falls inside the run as this test saw it.
        let h = &s.hello;
        assert!(
            (before..=after).contains(&h.clock_ns),
            "{clock:?}: {} not in {before}..{after}",
            h.clock_ns
        );
        for e in &s.events {
            assert!(
                before <= e.start.get() && e.start.get() <= e.end.get() && e.end.get() <= after,
                "{clock:?}: {e:?} not in {before}..{after}"
            );
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(
            now - h.realtime_ns < 60_000_000_000,
            "realtime reference is off"
        );
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn with_io_off_only_the_stream_itself_arrives() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let p = Probed::new("io-off").env("HARK_IO", "0");
    let run = p.run(&exe, &["data.bin"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    assert!(s.is_clean());
    assert!(
        s.events.is_empty(),
        "{:?}",
        &s.events[..s.events.len().min(3)]
    );
    assert_eq!(s.end.as_ref().unwrap().events_written, 0);
}

#[test]
fn duplicated_descriptors_keep_their_file() {
    let exe = compile("tests/programs/dup_io.c", &["cc"], &[]);
    let p = Probed::new("dup");
    let run = p.run(&exe, &["d.txt"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    assert_eq!(count_on(s, io::WRITE, "d.txt"), 3);
    assert_eq!(bytes_on(s, io::WRITE, "d.txt"), 9);
    assert_eq!(count_on(s, io::CLOSE, "d.txt"), 4);
}

#[test]
fn streams_also_travel_over_tcp() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let p = Probed::tcp("tcp");
    assert!(p.collector.addr().starts_with("tcp:127.0.0.1:"));
    let run = p.run(&exe, &["data.bin"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    assert!(s.is_clean());
    assert_eq!(bytes_on(s, io::WRITE, "data.bin"), 5500);
}

#[test]
fn stdio_calls_arrive_with_exact_bytes_and_formatted_output_counted() {
    // Plain, and fortified (the compiler then calls __printf_chk,
    // __fprintf_chk, __read_chk and friends instead).
    for flags in [&["-O1"][..], &["-O2", "-D_FORTIFY_SOURCE=2"][..]] {
        let exe = compile("tests/programs/stdio_io.c", &["cc"], flags);
        let p = Probed::new("stdio");
        let run = p.run(&exe, &["text.txt"]);
        assert!(
            run.status.success(),
            "{flags:?}: exit {:?}: {}",
            run.status,
            run.stderr
        );
        let s = run.only_stream();
        let f = "text.txt";
        assert_eq!(count_on(s, io::FOPEN, f), 3, "{flags:?}");
        assert_eq!(bytes_on(s, io::FWRITE, f), 70, "{flags:?}");
        assert_eq!(bytes_on(s, io::FPRINTF, f), 12, "{flags:?}");
        assert_eq!(bytes_on(s, io::FPUTS, f), 12, "{flags:?}");
        assert_eq!(count_on(s, io::FFLUSH, f), 1, "{flags:?}");
        assert_eq!(count_on(s, io::FSEEK, f), 1, "{flags:?}");
        let tell = s.events_of(io::FTELL).next().unwrap();
        assert_eq!(tell.extra(), 94, "{flags:?}");
        assert_eq!(bytes_on(s, io::FREAD, f), 94, "{flags:?}");
        assert_eq!(bytes_on(s, io::FGETS, f), 82, "{flags:?}");
        assert_eq!(count_on(s, io::FSCANF, f), 1, "{flags:?}");
        assert_eq!(count_on(s, io::FCLOSE, f), 3, "{flags:?}");
        assert_eq!(bytes_on(s, io::FPRINTF, "<stdout>"), 4, "{flags:?}");
        assert_eq!(run.stdout, "n=7\n");
        let line = "1 2 3 4 5 6 7 8 9 10|1.5 2.5 3.5 4.5 5.5 6.5 7.5 8.5 9.5 10.5|end\n";
        assert_eq!(
            std::fs::read_to_string(p.dir.join("fmt.txt")).unwrap(),
            line
        );
        assert_eq!(bytes_on(s, io::FPRINTF, "fmt.txt"), line.len() as u64);
        // stdio's own read/write calls are internal: never counted twice.
        assert!(s
            .events_of(io::WRITE)
            .all(|e| e.obj.get() != s.file_id(f).unwrap()));
    }
}

#[test]
fn a_forked_child_streams_on_its_own_and_the_parent_stays_exact() {
    let exe = compile("tests/programs/fork.c", &["cc"], &[]);
    // The child leaves by exit, then by _exit: both close its stream.
    for how in ["exit", "_exit"] {
        let p = Probed::new("fork").streams(2);
        let run = p.run(&exe, &["parent.dat", "child.dat", how]);
        assert!(run.status.success(), "{}", run.stderr);
        assert_eq!(run.streams.len(), 2);
        let parent = run
            .streams
            .iter()
            .find(|s| s.file_id("child.dat").is_none())
            .unwrap();
        let child = run
            .streams
            .iter()
            .find(|s| s.file_id("child.dat").is_some())
            .unwrap();
        assert_ne!(parent.hello.pid, child.hello.pid);
        // The child says whose it is, and keeps its parent's job (its own
        // would be `ppid:<parent>`): the server counts it under the parent.
        assert_eq!(
            (parent.hello.parent, child.hello.parent),
            (0, parent.hello.pid)
        );
        assert_eq!(child.hello.job, parent.hello.job);
        assert!(parent.is_clean() && child.is_clean(), "{how}");
        // Each through a shared-memory ring of its own (the child's pool is
        // new; the parent's ring stays the parent's).
        assert!(parent.shm && child.shm, "{how}");
        assert_eq!(bytes_on(parent, io::WRITE, "parent.dat"), 400);
        assert_eq!(count_on(parent, io::WRITE, "parent.dat"), 2);
        // The child's stream starts with the definitions it inherited, so its
        // write on the parent's descriptor is still attributed to the file.
        assert_eq!(bytes_on(child, io::WRITE, "child.dat"), 200, "{how}");
        assert_eq!(bytes_on(child, io::WRITE, "parent.dat"), 7, "{how}");
        for s in [parent, child] {
            let end = s.end.as_ref().unwrap();
            assert_eq!(
                (end.events_written, end.events_dropped),
                (s.events.len() as u64, 0)
            );
        }
    }
}

#[test]
fn execl_execle_and_execlp_close_the_stream_and_pass_every_argument() {
    let exe = compile("tests/programs/exec_l.c", &["cc"], &[]);
    for (how, streams, env) in [("l", 2, ""), ("le", 1, "from-execle"), ("lp", 2, "")] {
        // execle's environment has no LD_PRELOAD: the shell is not probed.
        let p = Probed::new("exec-l").streams(streams);
        let run = p.run(&exe, &["data.bin", how]);
        assert!(run.status.success(), "{how}: {}", run.stderr);
        // The nine arguments, six past the registers, reached the shell,
        // and execle's environment replaced the program's.
        let out = std::fs::read_to_string(p.dir.join("out.txt")).unwrap();
        assert_eq!(out, format!("a b c d e [{env}]\n"), "{how}");
        let s = run
            .streams
            .iter()
            .find(|s| s.hello.program.starts_with("exec_l"))
            .unwrap_or_else(|| {
                let programs: Vec<_> = run.streams.iter().map(|s| &s.hello.program).collect();
                panic!("{how}: no stream of exec_l in {programs:?}")
            });
        // Closed before the exec, with its totals: nothing lost.
        assert!(s.is_clean(), "{how}");
        assert_eq!(bytes_on(s, io::WRITE, "data.bin"), 100, "{how}");
        assert_eq!(
            s.end.as_ref().unwrap().events_written,
            s.events.len() as u64
        );
    }
}

#[test]
fn each_thread_is_recorded_as_its_own_thread() {
    let exe = compile("tests/programs/threads.c", &["cc"], &["-pthread"]);
    // Small packs, so each thread fills several.
    let p = Probed::new("threads").env("HARK_PACK_SIZE", "64K");
    let run = p.run(&exe, &["a.dat", "b.dat", "5000"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    let expect: u64 = (0..5000u64).map(|i| 1 + i % 200).sum();
    let mut threads = Vec::new();
    for f in ["a.dat", "b.dat"] {
        assert_eq!(count_on(s, io::WRITE, f), 5000);
        assert_eq!(bytes_on(s, io::WRITE, f), expect);
        let id = s.file_id(f).unwrap();
        let mut t: Vec<u16> = s
            .events
            .iter()
            .filter(|e| e.obj.get() == id)
            .map(|e| e.thread.get())
            .collect();
        t.dedup();
        assert_eq!(t.len(), 1, "{f} written from threads {t:?}");
        threads.push(t[0]);
    }
    assert_ne!(threads[0], threads[1]);
    // Each thread's events are in its own time order, each lasting >= 0.
    for t in &threads {
        let starts: Vec<u64> = s
            .events
            .iter()
            .filter(|e| e.thread.get() == *t)
            .map(|e| e.start.get())
            .collect();
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "thread {t} out of order"
        );
    }
    assert!(s.events.iter().all(|e| e.start.get() <= e.end.get()));
    assert!(s.packs.len() >= 8, "{} packs", s.packs.len());
    let seqs: Vec<u64> = s.packs.iter().map(|p| p.0).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

fn user_events(s: &common::Stream) -> Vec<(u16, String, u64)> {
    s.events
        .iter()
        .filter(|e| e.op.get() >= hark_wire::op::USER_BASE)
        .map(|e| {
            let name = s
                .defs
                .iter()
                .find_map(|d| match d {
                    hark_wire::Def::Name { id, name, .. } if *id == e.obj.get() => {
                        Some(name.clone())
                    }
                    _ => None,
                })
                .unwrap_or_default();
            (e.op.get(), name, e.bytes.get())
        })
        .collect()
}

#[test]
fn user_regions_marks_counters_and_pauses_arrive_in_order() {
    use hark_wire::op::{COUNTER, MARK, PAUSE, REGION_BEGIN, REGION_END, RESUME};
    let exe = compile("tests/programs/user_api.c", &["cc"], &[]);
    let p = Probed::new("user");
    let run = p.run(&exe, &["probe"]);
    assert!(run.status.success(), "{}", run.stderr);
    let s = run.only_stream();
    let mut want = Vec::new();
    for i in 0..3u64 {
        want.push((MARK, "step".to_string(), i));
        want.push((REGION_BEGIN, "outer".into(), 0));
        want.push((REGION_BEGIN, "inner".into(), 0));
        want.push((COUNTER, "cells".into(), 100 * i));
        want.push((REGION_END, "inner".into(), 0));
        want.push((REGION_END, "outer".into(), 0));
    }
    want.push((PAUSE, String::new(), 0));
    want.push((RESUME, String::new(), 0));
    assert_eq!(user_events(s), want);
    // The write while paused is not recorded; the one after is.
    let out: Vec<u64> = s.events_of(io::WRITE).map(|e| e.bytes.get()).collect();
    assert_eq!(out, vec![8]);
    // One definition per name.
    assert_eq!(
        s.defs
            .iter()
            .filter(|d| matches!(d, hark_wire::Def::Name { .. }))
            .count(),
        4
    );

    // Without the probe the same program runs, its calls doing nothing.
    let st = std::process::Command::new(&exe)
        .arg("none")
        .output()
        .unwrap();
    assert!(st.status.success());
}

#[test]
fn a_cpp_scoped_region_begins_and_ends() {
    use hark_wire::op::{REGION_BEGIN, REGION_END};
    let exe = compile("tests/programs/user_api.cpp", &["c++"], &[]);
    let p = Probed::new("cpp");
    let run = p.run(&exe, &[]);
    assert!(run.status.success(), "{}", run.stderr);
    let got = user_events(run.only_stream());
    let one = [
        (REGION_BEGIN, "work".to_string(), 0),
        (REGION_END, "work".into(), 0),
    ];
    let want: Vec<_> = (0..3).flat_map(|_| one.clone()).collect();
    assert_eq!(got, want);
}

#[test]
fn the_fortran_module_records_the_same_events() {
    use hark_wire::op::{COUNTER, MARK, REGION_BEGIN, REGION_END};
    let module = common::crate_dir().join("../../include/hark.f90");
    let exe = common::compile_many(
        &[module.to_str().unwrap(), "tests/programs/user_api.f90"],
        &["gfortran"],
        &[],
    );
    let p = Probed::new("fortran");
    let run = p.run(&exe, &[]);
    assert!(run.status.success(), "{}", run.stderr);
    let got = user_events(run.only_stream());
    let mut want = Vec::new();
    for i in 0..3u64 {
        want.push((MARK, "step".to_string(), i));
        want.push((REGION_BEGIN, "outer".into(), 0));
        want.push((COUNTER, "cells".into(), 100 * i));
        want.push((REGION_END, "outer".into(), 0));
    }
    assert_eq!(got, want);
}

#[test]
fn the_rust_crate_records_the_same_events() {
    use hark_wire::op::{COUNTER, MARK, REGION_BEGIN, REGION_END};
    // Built into this test's own target directory and profile:
    // target/<profile>/deps/<this test> → target/<profile>/examples/regions.
    let profile_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .to_path_buf();
    let target = profile_dir.parent().unwrap();
    let profile = profile_dir.file_name().unwrap().to_str().unwrap();
    let profile = if profile == "debug" { "dev" } else { profile };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = std::process::Command::new(cargo)
        .args(["build", "-q", "-p", "hark-user", "--example", "regions"])
        .args(["--profile", profile])
        .arg("--target-dir")
        .arg(target)
        .status()
        .unwrap();
    assert!(st.success());
    let exe = profile_dir.join("examples/regions");
    let p = Probed::new("rust-user");
    let run = p.run(&exe, &[]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, "active: true\n");
    let mut want = Vec::new();
    for i in 0..3u64 {
        want.push((MARK, "step".to_string(), i));
        want.push((REGION_BEGIN, "outer".into(), 0));
        want.push((COUNTER, "cells".into(), 100 * i));
        want.push((REGION_END, "outer".into(), 0));
    }
    assert_eq!(user_events(run.only_stream()), want);
}

#[test]
fn events_of_a_slow_thread_reach_a_live_server_before_the_program_ends() {
    // 300 writes, pausing 0.5 s after every 100: the buffer never fills,
    // yet the periodic flush sends events while the program runs.
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    let p = Probed::new("flush").env("HARK_FLUSH_MS", "100");
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["out.dat", "300", "500000"]).current_dir(&p.dir);
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let live = loop {
        let got = p.collector.streams().first().map_or(0, |s| s.events.len());
        if got > 0 {
            break child.try_wait().unwrap().is_none();
        }
        assert!(std::time::Instant::now() < deadline, "no events arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(child.wait().unwrap().success());
    assert!(live, "events arrived only after the program ended");
    let s = &p
        .collector
        .wait_closed(1, std::time::Duration::from_secs(10))
        .unwrap()[0];
    // Flushing early loses nothing and counts nothing twice.
    assert_eq!(count_on(s, io::WRITE, "out.dat"), 300);
    assert!(s.packs.len() >= 3, "{} packs", s.packs.len());
}

#[test]
fn more_threads_than_buffers_neither_starve_nor_deadlock() {
    // 12 threads, a pool of 2 buffers: each thread holds a half-filled
    // buffer while it waits at a barrier for the others.
    let exe = compile("tests/programs/barrier_threads.c", &["cc"], &["-pthread"]);
    for lossless in ["0", "1"] {
        let p = Probed::new("barrier")
            .env("HARK_BUFFERS", "2")
            .env("HARK_LOSSLESS", lossless);
        let run = p.run(&exe, &["12"]);
        assert!(run.status.success(), "{}", run.stderr);
        let s = run.only_stream();
        let end = s.end.as_ref().unwrap();
        assert_eq!(
            (end.events_written, end.events_dropped),
            (120, 0),
            "lossless={lossless}"
        );
        let mut threads: Vec<u16> = s.events.iter().map(|e| e.thread.get()).collect();
        threads.sort();
        threads.dedup();
        assert_eq!(threads.len(), 12);
    }
}
