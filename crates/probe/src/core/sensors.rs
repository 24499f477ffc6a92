//! Node sensors: the node's own figures over time, read by one process
//! per node and job.
//!
//! Every `HARK_SENSORS_MS` the shipping thread of the process that holds
//! the node's sampler name reads `/proc/stat` (CPU time by kind),
//! `/proc/meminfo`, `/proc/net/dev` (loopback left out), the InfiniBand
//! ports' counters, `/proc/diskstats` (whole disks) and `/proc/loadavg`,
//! and ships what changed since its previous reading as one event per
//! figure group (`op::SENSOR_CPU ..= op::SENSOR_LOAD`).
//!
//! One sampler per node: when the stream starts, every process makes a
//! Unix datagram socket; at each sensor tick one that does not sample yet
//! tries to bind it to the abstract name `hark-sensors-<uid>-<job hash>`.
//! The kernel gives a name to one socket of a network namespace at a time
//! and frees it when its process exits, so exactly one process samples
//! and another takes over at its next tick; nothing is left behind (a lock
//! file in `/dev/shm` would be). `/proc/net/dev` is per network namespace
//! too, so the name's scope is the figures' scope. A child process never
//! samples (its stream is analysed apart from the ranks), and a forked one
//! closes its inherited copy at once ([`forget_after_fork`]): holding it,
//! it would keep the name after its parent exits.
//!
//! As for `cpu.rs`, every file is opened on a program's thread when the
//! stream starts and moved to a high descriptor; the shipper only `pread`s.

use super::cpu::{open_high, pread_all};
use hark_wire::{op, Event};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// This process's sampler socket, -1 before its stream starts. An atomic
/// so that a forked child can close it without a lock.
static SOCKET: AtomicI32 = AtomicI32::new(-1);

/// The InfiniBand counters of one port: received and sent data (4-byte
/// words), received and sent packets.
type IbPort = [RawFd; 4];

/// The files read, opened once (-1 for one the node lacks).
struct Files {
    stat: RawFd,
    meminfo: RawFd,
    net: RawFd,
    disk: RawFd,
    load: RawFd,
    ib: Vec<IbPort>,
    /// The whole disks: `/sys/block` entries with a `device`.
    disks: Vec<String>,
}

/// One reading of every group; `None` for one the node did not give.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Reading {
    /// user + nice, system + irq + softirq, idle, iowait, steal (ticks).
    cpu: Option<[u64; 5]>,
    /// `MemTotal`, `MemAvailable` in bytes.
    mem: Option<[u64; 2]>,
    /// bytes in, bytes out, packets in, packets out.
    net: Option<[u64; 4]>,
    ib: Option<[u64; 4]>,
    /// bytes read, bytes written, reads, writes.
    disk: Option<[u64; 4]>,
    /// load 1, 5, 15 (thousandths), runnable, all.
    load: Option<[u64; 5]>,
}

/// The sampler's state in one process.
pub(crate) struct Sensors {
    files: Option<Files>,
    /// Whether this process holds the node's name and samples.
    holder: bool,
    /// The node's sampler name of this job (`name`).
    name: Vec<u8>,
    last: Option<(Reading, u64)>,
    undo: Option<(Reading, u64)>,
    buf: Vec<u8>,
}

impl Sensors {
    /// Nothing opened yet.
    pub(crate) fn new() -> Sensors {
        Sensors {
            files: None,
            holder: false,
            name: Vec::new(),
            last: None,
            undo: None,
            buf: Vec::new(),
        }
    }

    /// On a program's thread as the stream starts: makes the socket and
    /// opens the files (module doc). `job` is the stream's job.
    pub(crate) fn open(&mut self, job: &str) {
        // SAFETY: plain system call; the raw form bypasses any wrapper.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_socket,
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
            )
        } as RawFd;
        if fd < 0 {
            return;
        }
        SOCKET.store(
            crate::ship::transport::move_out_of_the_way(fd),
            Ordering::Relaxed,
        );
        self.name = name(job);
        let mut ib = Vec::new();
        if let Ok(devices) = std::fs::read_dir("/sys/class/infiniband") {
            for d in devices.flatten() {
                let Ok(ports) = std::fs::read_dir(d.path().join("ports")) else {
                    continue;
                };
                for p in ports.flatten() {
                    let c = p.path().join("counters");
                    let f = |n: &str| open_high(&c.join(n).to_string_lossy());
                    let port = [
                        f("port_rcv_data"),
                        f("port_xmit_data"),
                        f("port_rcv_packets"),
                        f("port_xmit_packets"),
                    ];
                    if port.iter().all(|&fd| fd >= 0) {
                        ib.push(port);
                    }
                }
            }
        }
        let disks = std::fs::read_dir("/sys/block")
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().join("device").exists())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        self.files = Some(Files {
            stat: open_high("/proc/stat"),
            meminfo: open_high("/proc/meminfo"),
            net: open_high("/proc/net/dev"),
            disk: open_high("/proc/diskstats"),
            load: open_high("/proc/loadavg"),
            ib,
            disks,
        });
        self.buf = vec![0; 64 << 10];
    }

    /// At a sensor tick of the shipper, at `stamp`: the events of this
    /// reading, none when this process does not sample (or only just
    /// started to: its first reading is the baseline).
    pub(crate) fn tick(&mut self, stamp: u64) -> Vec<Event> {
        let Some(files) = &self.files else {
            return Vec::new();
        };
        if !self.holder {
            self.holder = bind(SOCKET.load(Ordering::Relaxed), &self.name);
            if self.holder {
                self.last = Some((read(files, &mut self.buf), stamp));
            }
            return Vec::new();
        }
        let now = read(files, &mut self.buf);
        let Some((before, from)) = self.last.replace((now.clone(), stamp)) else {
            return Vec::new();
        };
        let out = events(from, stamp, &before, &now);
        self.undo = Some((before, from));
        out
    }

    /// Forgets the last reading (it could not be sent): the next one
    /// covers its time.
    pub(crate) fn unread(&mut self) {
        if let Some(u) = self.undo.take() {
            self.last = Some(u);
        }
    }
}

/// In a forked child: closes the socket inherited from the parent (module
/// doc). Its own stream makes a new one when it starts.
pub(crate) fn forget_after_fork() {
    let fd = SOCKET.swap(-1, Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: `fd` is the probe's; the raw call bypasses the wrapper.
        unsafe { libc::syscall(libc::SYS_close, fd) };
    }
}

/// The node's sampler name of `job` for this user.
fn name(job: &str) -> Vec<u8> {
    // FNV-1a: the job string may be long or hold any byte; its hash keeps
    // the name short.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in job.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    format!("hark-sensors-{uid}-{h:016x}").into_bytes()
}

/// Binds `fd` to the abstract Unix name `name`; true when it did.
fn bind(fd: RawFd, name: &[u8]) -> bool {
    if fd < 0 {
        return false;
    }
    // SAFETY: sockaddr_un is plain data; all zeros is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let n = name.len().min(addr.sun_path.len() - 1);
    // sun_path[0] stays 0: the abstract namespace.
    for (d, s) in addr.sun_path[1..=n].iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + n;
    // SAFETY: `addr` is a valid sockaddr_un of at least `len` bytes.
    unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        ) == 0
    }
}

/// Reads every group.
fn read(f: &Files, buf: &mut [u8]) -> Reading {
    // /proc/stat's first line is all that is needed; its interrupt lines
    // can be long.
    let small = buf.len().min(1024);
    Reading {
        cpu: pread_all(f.stat, &mut buf[..small]).and_then(parse_stat),
        mem: pread_all(f.meminfo, buf).and_then(parse_meminfo),
        net: pread_all(f.net, buf).and_then(parse_net_dev),
        disk: pread_all(f.disk, buf).and_then(|t| parse_diskstats(t, &f.disks)),
        load: pread_all(f.load, buf).and_then(parse_loadavg),
        ib: read_ib(&f.ib, buf),
    }
}

fn read_ib(ports: &[IbPort], buf: &mut [u8]) -> Option<[u64; 4]> {
    if ports.is_empty() {
        return None;
    }
    let mut sum = [0u64; 4];
    for port in ports {
        for (i, &fd) in port.iter().enumerate() {
            let v = pread_all(fd, buf)
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(0);
            // Data counters count 4-byte words.
            sum[i] = sum[i].saturating_add(if i < 2 { v.saturating_mul(4) } else { v });
        }
    }
    Some(sum)
}

fn numbers(s: &str) -> impl Iterator<Item = u64> + '_ {
    s.split_ascii_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0))
}

fn parse_stat(text: &str) -> Option<[u64; 5]> {
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = numbers(line).collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    if v.len() < 4 {
        return None;
    }
    Some([at(0) + at(1), at(2) + at(5) + at(6), at(3), at(4), at(7)])
}

fn parse_meminfo(text: &str) -> Option<[u64; 2]> {
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| numbers(rest.trim_end_matches("kB")).next())
            .map(|v| v.saturating_mul(1024))
    };
    Some([kib("MemTotal:")?, kib("MemAvailable:")?])
}

fn parse_net_dev(text: &str) -> Option<[u64; 4]> {
    let mut sum = [0u64; 4];
    let mut any = false;
    for line in text.lines() {
        let Some((iface, rest)) = line.split_once(':') else {
            continue;
        };
        if iface.trim() == "lo" {
            continue;
        }
        let v: Vec<u64> = numbers(rest).collect();
        if v.len() < 10 {
            continue;
        }
        any = true;
        for (s, x) in sum.iter_mut().zip([v[0], v[8], v[1], v[9]]) {
            *s = s.saturating_add(x);
        }
    }
    any.then_some(sum)
}

fn parse_diskstats(text: &str, disks: &[String]) -> Option<[u64; 4]> {
    let mut sum = [0u64; 4];
    let mut any = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 10 || !disks.iter().any(|d| d == f[2]) {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        any = true;
        // Sectors are 512 bytes in diskstats whatever the device's.
        for (s, x) in sum.iter_mut().zip([n(5) * 512, n(9) * 512, n(3), n(7)]) {
            *s = s.saturating_add(x);
        }
    }
    any.then_some(sum)
}

fn parse_loadavg(text: &str) -> Option<[u64; 5]> {
    let mut f = text.split_ascii_whitespace();
    let mut load = || -> Option<u64> {
        let v: f64 = f.next()?.parse().ok()?;
        Some((v * 1000.0).round() as u64)
    };
    let (a, b, c) = (load()?, load()?, load()?);
    let (run, all) = text.split_ascii_whitespace().nth(3)?.split_once('/')?;
    Some([a, b, c, run.parse().ok()?, all.parse().ok()?])
}

/// The events between two readings over `[from, to]`.
fn events(from: u64, to: u64, before: &Reading, now: &Reading) -> Vec<Event> {
    let mut out = Vec::with_capacity(6);
    let to = to.max(from);
    let small = |v: u64| v.min(i32::MAX as u64) as i32;
    let mut push = |op: u16, bytes: u64, extra: u64, obj: u64, peer: u64, tag: u64| {
        let mut e = Event::new(op, from, to);
        e.bytes.set(bytes);
        e.extra.set(extra);
        e.obj.set(obj.min(u32::MAX as u64) as u32);
        e.peer.set(small(peer));
        e.tag.set(small(tag));
        out.push(e);
    };
    let d = |a: u64, b: u64| a.saturating_sub(b);
    if let (Some(b), Some(n)) = (before.cpu, now.cpu) {
        let x: Vec<u64> = n.iter().zip(b).map(|(n, b)| d(*n, b)).collect();
        push(op::SENSOR_CPU, x[0], x[1], x[2], x[3], x[4]);
    }
    if let Some([total, available]) = now.mem {
        push(op::SENSOR_MEM, total, available, 0, 0, 0);
    }
    for (code, b, n) in [
        (op::SENSOR_NET, before.net, now.net),
        (op::SENSOR_IB, before.ib, now.ib),
        (op::SENSOR_DISK, before.disk, now.disk),
    ] {
        if let (Some(b), Some(n)) = (b, n) {
            push(
                code,
                d(n[0], b[0]),
                d(n[1], b[1]),
                d(n[2], b[2]),
                0,
                d(n[3], b[3]),
            );
        }
    }
    if let Some([l1, l5, l15, run, all]) = now.load {
        push(op::SENSOR_LOAD, l1, l5, l15, run, all);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_s_files_are_read_as_documented() {
        let stat = "cpu  10 2 30 400 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n";
        assert_eq!(parse_stat(stat), Some([12, 43, 400, 5, 8]));
        let mem = "MemTotal:       2048 kB\nMemFree:  10 kB\nMemAvailable:   1024 kB\n";
        assert_eq!(parse_meminfo(mem), Some([2048 * 1024, 1024 * 1024]));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
        let net = "Inter-|   Receive                                                |  Transmit\n \
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                   lo: 1000 10 0 0 0 0 0 0 1000 10 0 0 0 0 0 0\n  \
                   eth0:100 2 0 0 0 0 0 0 300 4 0 0 0 0 0 0\n  \
                   eth1: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n";
        assert_eq!(parse_net_dev(net), Some([101, 301, 3, 5]));
        let disk = "   8       0 sda 10 0 20 0 30 0 40 0 0 0 0\n   8       1 sda1 10 0 20 0 30 0 40 0 0 0 0\n   7 0 loop0 1 0 2 0 3 0 4 0 0 0 0\n";
        assert_eq!(
            parse_diskstats(disk, &["sda".into()]),
            Some([20 * 512, 40 * 512, 10, 30])
        );
        assert_eq!(parse_diskstats(disk, &[]), None);
        assert_eq!(
            parse_loadavg("0.52 1.50 12.00 3/456 789\n"),
            Some([520, 1500, 12000, 3, 456])
        );
    }

    #[test]
    fn counts_are_differences_and_gauges_are_the_last_value() {
        let before = Reading {
            cpu: Some([10, 20, 30, 40, 50]),
            mem: Some([100, 50]),
            net: Some([1, 2, 3, 4]),
            ..Reading::default()
        };
        let now = Reading {
            cpu: Some([11, 22, 33, 44, 55]),
            mem: Some([100, 40]),
            net: Some([11, 22, 33, 44]),
            ..Reading::default()
        };
        let ev = events(5, 9, &before, &now);
        let ops: Vec<u16> = ev.iter().map(|e| e.op()).collect();
        assert_eq!(ops, [op::SENSOR_CPU, op::SENSOR_MEM, op::SENSOR_NET]);
        let c = &ev[0];
        assert_eq!(
            (
                c.bytes.get(),
                c.extra.get(),
                c.obj.get(),
                c.peer.get(),
                c.tag.get()
            ),
            (1, 2, 3, 4, 5)
        );
        assert_eq!((ev[1].bytes.get(), ev[1].extra.get()), (100, 40));
        assert_eq!((ev[2].bytes.get(), ev[2].tag.get()), (10, 40));
        assert!(ev.iter().all(|e| (e.start.get(), e.end.get()) == (5, 9)));
    }

    #[test]
    fn one_socket_of_a_namespace_holds_the_name_until_it_closes() {
        // SAFETY: plain system call.
        let make = || unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) };
        let (a, b) = (make(), make());
        let n = name(&format!("test-{}", std::process::id()));
        assert!(bind(a, &n));
        assert!(!bind(b, &n), "a second socket may not take the name");
        // SAFETY: `a` is this test's socket.
        unsafe { libc::close(a) };
        assert!(bind(b, &n), "the name is free once its holder closes");
        // SAFETY: `b` is this test's socket.
        unsafe { libc::close(b) };
    }

    /// The cost of one tick of the sampler, in CPU time of the thread
    /// that reads (`BENCHMARKS.md`, "Node sensors"):
    /// `cargo test --release -p hark-probe --lib sensor_tick_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn sensor_tick_cost() {
        let cpu = || {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `t` is a valid, writable timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        let mut s = Sensors::new();
        s.open(&format!("bench-{}", std::process::id()));
        assert!(s.tick(0).is_empty(), "the first tick is the baseline");
        assert!(s.holder, "this test's process holds the name");
        let n = 2000u64;
        let mut events = 0;
        let t0 = cpu();
        for i in 1..=n {
            events += s.tick(i).len();
        }
        let per_tick = (cpu() - t0) / n;
        println!(
            "sensor tick: {per_tick} ns of CPU ({} events per tick); at 1 s, {:.4} % of a core",
            events as u64 / n,
            per_tick as f64 / 1e9 * 100.0
        );
        forget_after_fork();
    }
}
