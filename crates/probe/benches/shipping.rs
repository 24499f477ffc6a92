//! The probe's costs, measured: the hot path (`record`, and a whole
//! wrapper's bookkeeping around a call), shipping throughput through the
//! shared-memory ring and over a Unix socket, and memory per process.
//!
//! `cargo bench -p hark-probe --bench shipping` prints medians; the numbers
//! go in `BENCHMARKS.md` (section "Probe: shipping and memory").
//!
//! The probe starts from its constructor and reads `HARK_ADDR` at load, so
//! every measurement runs in a fresh child process (this same binary with
//! `HARK_BENCH_CHILD` set) against a counting server in the parent.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hark::core;
use hark_transport::{Closed, ConnId, Listener, Sink};
use hark_wire::{op, Event, Frame, Hello};

/// Counts what arrives, keeping nothing.
#[derive(Default)]
struct Count {
    events: AtomicU64,
    closed: AtomicU64,
}

impl Sink for Count {
    fn on_hello(&self, _: ConnId, _: &Hello, _: i64) {}
    fn on_frame(&self, _: ConnId, f: Frame<'_>) {
        if let Frame::Pack { events, .. } = f {
            self.events
                .fetch_add(events.len() as u64, Ordering::Relaxed);
        }
    }
    fn on_close(&self, _: ConnId, _: Closed) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn vm(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs in the measured child; prints `key value` lines.
fn child(mode: &str) {
    let n: u64 = std::env::var("HARK_BENCH_N").unwrap().parse().unwrap();
    let warm: u64 = std::env::var("HARK_BENCH_WARM").map_or(1, |w| w.parse().unwrap());
    // The first events register the thread and, if asked, cycle through
    // the pool so that every buffer is allocated and mapped; the shipper
    // then gets time to drain. Not timed.
    for i in 0..warm {
        core::record(Event::new(op::COUNTER, i, i));
    }
    if warm > 1 {
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    // Timed in chunks: the median chunk is the steady hot path, immune to
    // the preemptions of a shared machine; the whole loop's time includes
    // every cold path (buffer switches, drops) and is reported too.
    const CHUNK: u64 = 4096;
    let mut chunks = Vec::with_capacity((n / CHUNK + 1) as usize);
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        let c0 = Instant::now();
        let end = (i + CHUNK).min(n);
        match mode {
            "record" => {
                for i in i..end {
                    core::record(Event::new(op::COUNTER, i, i));
                }
            }
            "wrapper" => {
                // What every wrapper adds around the real call: enter, two
                // clock reads, one record, leave.
                for i in i..end {
                    if let Some(_g) = core::enter() {
                        let a = core::stamp();
                        let b = core::stamp();
                        let mut ev = Event::new(op::io::WRITE, a, b);
                        ev.bytes.set(i);
                        core::record(ev);
                    }
                }
            }
            "now" => {
                let mut x = 0;
                for _ in i..end {
                    x ^= core::stamp();
                }
                std::hint::black_box(x);
            }
            _ => unreachable!(),
        }
        chunks.push(c0.elapsed().as_nanos() as f64 / (end - i) as f64);
        i = end;
    }
    let chunk_ns = median(chunks);
    let loop_ns = t0.elapsed().as_nanos() as f64;
    let pool = core::pool_memory();
    core::finish(hark_wire::EndReason::Exit);
    let total_ns = t0.elapsed().as_nanos() as f64;
    // Printed after `finish`: these writes are not part of the measurement.
    println!("median_chunk_ns_per_op {chunk_ns}");
    println!("loop_ns_per_op {}", loop_ns / n as f64);
    println!("total_s {}", total_ns / 1e9);
    println!("pool_bytes {pool}");
    println!("rss_kib {}", vm("VmHWM:"));
}

struct Out {
    per_op_ns: f64,
    chunk_ns: f64,
    total_s: f64,
    pool: f64,
    rss_kib: f64,
    delivered: u64,
}

fn run(server: &Count, addr: Option<&str>, mode: &str, n: u64, env: &[(&str, &str)]) -> Out {
    let before = server.closed.load(Ordering::Relaxed);
    let delivered0 = server.events.load(Ordering::Relaxed);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("HARK_BENCH_CHILD", mode)
        .env("HARK_BENCH_N", n.to_string())
        .env_remove("HARK_ADDR");
    if let Some(a) = addr {
        cmd.env("HARK_ADDR", a);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if addr.is_some() {
        while server.closed.load(Ordering::Relaxed) == before {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |k: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {text}"))
    };
    Out {
        per_op_ns: get("loop_ns_per_op"),
        chunk_ns: get("median_chunk_ns_per_op"),
        total_s: get("total_s"),
        pool: get("pool_bytes"),
        rss_kib: get("rss_kib"),
        delivered: server.events.load(Ordering::Relaxed) - delivered0,
    }
}

/// GB/s of `total` bytes through a socket pair, 1 MiB writes and reads.
fn raw_socket_gbs(total: usize) -> f64 {
    use std::io::{Read, Write};
    let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let t0 = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while let Ok(n) = b.read(&mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        got
    });
    let buf = vec![7u8; 1 << 20];
    for _ in 0..total / buf.len() {
        a.write_all(&buf).unwrap();
    }
    drop(a);
    assert_eq!(reader.join().unwrap(), total);
    total as f64 / t0.elapsed().as_secs_f64() / 1e9
}

fn main() {
    if let Ok(mode) = std::env::var("HARK_BENCH_CHILD") {
        child(&mode);
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("hark-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("unix:{}", dir.join("s").display());
    let count = Arc::new(Count::default());
    let server = Listener::bind(&addr).unwrap().serve(count.clone());
    let reps = 5;
    let a = Some(addr.as_str());
    hot_path(&count, a, reps);
    raw_socket(reps);
    shipping(&count, a, reps);
    lossy(&count, a, reps);
    memory(&count, a, reps);
    through_libhark(&dir, &addr, reps);
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Hot path: after a warm-up through the whole pool, 300k events fit in
/// the 16 free, mapped buffers, so nothing waits on the shipper or the
/// kernel while the loop runs.
fn hot_path(count: &Count, a: Option<&str>, reps: usize) {
    let roomy = [("HARK_BUFFERS", "16"), ("HARK_BENCH_WARM", "400000")];
    let rec = median(
        (0..reps)
            .map(|_| run(count, a, "record", 300_000, &roomy).chunk_ns)
            .collect(),
    );
    let wrap = median(
        (0..reps)
            .map(|_| run(count, a, "wrapper", 300_000, &roomy).chunk_ns)
            .collect(),
    );
    let now = median(
        (0..reps)
            .map(|_| run(count, a, "now", 1_000_000, &roomy).chunk_ns)
            .collect(),
    );
    println!("record() hot path:           {rec:.1} ns/event");
    println!("wrapper bookkeeping:         {wrap:.1} ns/call (enter + 2x stamp + record + leave)");
    println!("stamp() (a clock read):      {now:.1} ns");
}

/// The same machine's raw Unix-socket throughput, measured alongside:
/// one thread sends the same 1 MiB buffer, another reads it, no events.
fn raw_socket(reps: usize) {
    let raw = median((0..reps).map(|_| raw_socket_gbs(960 << 20)).collect());
    println!("raw Unix socket, 1 MiB writes: {raw:.2} GB/s (median of {reps})");
}

/// Shipping: 20M events (960 MB) lossless, as fast as the loop goes;
/// time from the first event to the End frame written. Through the
/// shared-memory ring (the default on a Unix socket) and through the
/// socket (HARK_SHM=0), alternated.
fn shipping(count: &Count, a: Option<&str>, reps: usize) {
    let n = 20_000_000u64;
    let (mut shm, mut sock) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        for (gbs, mode) in [(&mut shm, "1"), (&mut sock, "0")] {
            let o = run(
                count,
                a,
                "record",
                n,
                &[("HARK_LOSSLESS", "1"), ("HARK_SHM", mode)],
            );
            assert_eq!(o.delivered, n + 1, "lossless run lost events");
            gbs.push((n * 48) as f64 / o.total_s / 1e9);
        }
    }
    let show = |v: &[f64]| {
        v.iter()
            .map(|g| (g * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    };
    println!(
        "shipping, lossless, 1 MiB packs, 8 buffers, shared memory: {:.2} GB/s (median of {reps}, {:?})",
        median(shm.clone()),
        show(&shm)
    );
    println!(
        "shipping, lossless, 1 MiB packs, 8 buffers, socket:        {:.2} GB/s (median of {reps}, {:?})",
        median(sock.clone()),
        show(&sock)
    );
}

/// Lossy at full speed: what the loop costs when the shipper cannot keep up.
fn lossy(count: &Count, a: Option<&str>, reps: usize) {
    let n = 20_000_000u64;
    let lossy: Vec<Out> = (0..reps).map(|_| run(count, a, "record", n, &[])).collect();
    let lossy_ns = median(lossy.iter().map(|o| o.per_op_ns).collect());
    let kept = median(
        lossy
            .iter()
            .map(|o| o.delivered as f64 / (n + 1) as f64)
            .collect(),
    );
    println!(
        "record() lossy, 20M events:  {lossy_ns:.1} ns/event, {:.0}% delivered",
        kept * 100.0
    );
}

/// Memory: peak RSS of a child that recorded 1M events, against the same
/// child run passive (no HARK_ADDR).
fn memory(count: &Count, a: Option<&str>, reps: usize) {
    let m = 1_000_000;
    let probed = median(
        (0..reps)
            .map(|_| run(count, a, "record", m, &[]).rss_kib)
            .collect(),
    );
    let pool = median(
        (0..reps)
            .map(|_| run(count, a, "record", m, &[]).pool)
            .collect(),
    );
    let passive = median(
        (0..reps)
            .map(|_| run(count, None, "record", m, &[]).rss_kib)
            .collect(),
    );
    let quiet = median(
        (0..reps)
            .map(|_| run(count, a, "record", 1000, &[]).rss_kib)
            .collect(),
    );
    let quiet_passive = median(
        (0..reps)
            .map(|_| run(count, None, "record", 1000, &[]).rss_kib)
            .collect(),
    );
    println!(
        "memory, quiet process (1000 events): peak RSS +{:.1} MiB over passive",
        (quiet - quiet_passive) / 1024.0
    );
    println!(
        "memory: peak RSS {probed:.0} KiB probed vs {passive:.0} KiB passive: +{:.1} MiB; pool {:.1} MiB",
        (probed - passive) / 1024.0,
        pool / (1 << 20) as f64
    );
}

/// Through the real libhark.so, from C: a write(2) to /dev/null probed
/// against the same program passive, and a user-API counter call.
fn through_libhark(dir: &std::path::Path, addr: &str, reps: usize) {
    let exe = dir.join("calls");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/programs/calls.c");
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(src)
        .status()
        .unwrap();
    assert!(st.success());
    // cargo leaves the bench profile's cdylib in target/release/deps,
    // next to the bench binary.
    let exe_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let lib = [exe_dir.join("libhark.so"), exe_dir.join("../libhark.so")]
        .into_iter()
        .find(|p| p.exists())
        .expect("libhark.so next to the bench binary");
    let calls = |probed: bool, key: &str| -> f64 {
        median(
            (0..reps)
                .map(|_| {
                    let mut cmd = Command::new(&exe);
                    cmd.arg("300000")
                        .env("LD_PRELOAD", &lib)
                        .env("HARK_BUFFERS", "16");
                    if probed {
                        cmd.env("HARK_ADDR", addr);
                    } else {
                        cmd.env_remove("HARK_ADDR");
                    }
                    let out = cmd.output().unwrap();
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    text.lines()
                        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                        .unwrap_or_else(|| {
                            panic!(
                                "no {key} in {text} (stderr: {}, lib {})",
                                String::from_utf8_lossy(&out.stderr),
                                lib.display()
                            )
                        })
                })
                .collect(),
        )
    };
    let w_on = calls(true, "write_devnull");
    let w_off = calls(false, "write_devnull");
    let t_on = calls(true, "ftell_memstream");
    let t_off = calls(false, "ftell_memstream");
    let counter = calls(true, "hark_counter");
    println!("write(/dev/null, 1 byte):    {w_on:.1} ns probed, {w_off:.1} ns passive: +{:.1} ns per wrapped call", w_on - w_off);
    println!(
        "ftell(memory stream):        {t_on:.1} ns probed, {t_off:.1} ns passive: +{:.1} ns per wrapped call",
        t_on - t_off
    );
    println!("hark_counter() via libhark:  {counter:.1} ns/call");
}
