//! The server under a synthetic flood: N processes stream encoded packs of a
//! realistic event mix as fast as they can over a Unix socket.
//!
//! `cargo bench -p hark-server --bench flood` runs, each in a fresh process so
//! that peak memory is its own, three times each: 4 writers × 2.5·10^6
//! events (1×), then 4 × 2.5·10^7 (10×, 10^8 events in all). For each it prints the events/s the
//! server sustained, the time from the last writer's exit to the model in
//! hand, the server's peak RSS, and the accounting (every event written must
//! be analysed: the writers block instead of dropping, so a server that does
//! not keep up shows as a lower rate, not as loss), then the wait-state
//! instances found (the writers are aligned as probes align at `MPI_Init`,
//! and each runs [`LAG_NS`] behind the one before it, so ranks wait).
//!
//! The writers stay within [`AHEAD`] packs of each other, as coupled ranks'
//! streams do. Each is run with every analysis and again without the
//! cross-rank ones
//! (message matching, collective instances, wait states, efficiencies, the
//! digest), alternating, to show what relating ranks costs: after each size
//! it says the median of the rounds' rate ratios (the goal is at
//! least 0.8×) and the server CPU time the cross-rank analyses add per event.
//!
//! `flood run <events per writer> <writers> [all|local]` runs one
//! measurement, and says the CPU time of the server (the bench process)
//! and of the writers apart (with `HARK_FLOOD_NO_RECEIVES` set, no send is ever
//! received: what unmatched operations cost; with
//! `HARK_FLOOD_SNAPSHOT_HZ=1` a thread takes a live view's snapshot once a
//! second while the writers write, and serialises it as the live view's
//! API does: what watching a run costs; with `HARK_FLOOD_QUERY=1` the
//! finished model answers interval queries, profile and timeline, timed
//! (every run also says how often the analyses' workers waited for a
//! state, and copied one a snapshot read);
//! with `HARK_FLOOD_IN_FLIGHT_MB=N` the server's in-flight limit is N MiB
//! instead of the default; with `HARK_FLOOD_WORKERS=N` its analyses have N
//! workers instead of one per core; with `HARK_FLOOD_JOBS=1` it lists the jobs each
//! knowledge source ran and the time they took, counted when the last
//! writer ended, before the last milliseconds' backlog);
//! `flood write <addr> <rank> <size> <events>` is one writer.
//!
//! With `HARK_FLOOD_TRACE=SPEC` (`all`, `auto`, ...) the server also keeps a
//! trace store (`hark run --trace=SPEC`), in `HARK_FLOOD_TRACE_DIR` (kept
//! after the run, for `cargo bench -p hark-cli --bench trace_export`) or a
//! temporary directory, with a cap of `HARK_FLOOD_TRACE_CAP` bytes (default
//! 64 GiB); the line then says how many bytes the store holds.

use hark_server::{Server, ServerConfig};
use hark_wire::{
    encode_pack, op, ClockPhase, ClockReference, ClockSource, ClockSync, Def, End, EndReason,
    Event, Flavour, Hello, RankInfo, TickScale, EVENT_SIZE, HEADER_SIZE, PACK_HEADER_SIZE,
};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../../engine/benches/support/halo_mix.rs"]
mod halo_mix;
use halo_mix::mix;

const PACK_EVENTS: usize = (1 << 20) / EVENT_SIZE;

/// Packs a writer may be ahead of the slowest: real ranks are coupled by
/// their messages, so their streams drift apart by no more than the
/// probes' buffers (8 packs by default); uncoupled writers would drift
/// without bound and measure something no program does.
const AHEAD: u64 = 8;

/// How far each rank's timeline runs behind the one before it, in ns: in
/// every round of the mix ranks below the last wait for it in
/// `MPI_Allreduce` (Wait at N×N), and rank 0 receives from the last rank
/// before it sends (Late Sender), so the wait-state analyses have work.
const LAG_NS: u64 = 400;

/// The writers' progress, one `u64` per writer in a file beside the socket.
struct Progress {
    file: std::fs::File,
    writers: usize,
}

impl Progress {
    fn open(addr: &str, writers: usize) -> Progress {
        use std::os::unix::fs::FileExt;
        let sock = std::path::Path::new(addr.strip_prefix("unix:").expect("a unix: address"));
        let path = sock.with_file_name("progress");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("the progress file");
        if file.metadata().map_or(0, |m| m.len()) < 8 * writers as u64 {
            file.write_at(&vec![0u8; 8 * writers], 0).unwrap();
        }
        Progress { file, writers }
    }
    fn set(&self, rank: i32, packs: u64) {
        use std::os::unix::fs::FileExt;
        self.file
            .write_at(&packs.to_le_bytes(), 8 * rank as u64)
            .unwrap();
    }
    /// Waits until every writer has sent at least `packs` packs.
    fn wait_for(&self, packs: u64) {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; 8 * self.writers];
        loop {
            self.file.read_exact_at(&mut buf, 0).unwrap();
            let slowest = buf
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .min()
                .unwrap_or(u64::MAX);
            if slowest >= packs {
                return;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("write") => write(
            &args[1],
            num(&args[2]) as i32,
            num(&args[3]) as i32,
            num(&args[4]),
        ),
        Some("run") => run(
            num(&args[1]),
            num(&args[2]) as usize,
            args.get(3).map_or("all", String::as_str),
        ),
        // `cargo bench` passes `--bench`: the whole comparison.
        _ => {
            for per_writer in [2_500_000u64, 25_000_000] {
                // Per round, (events/s, server CPU s) with every analysis
                // and without the cross-rank ones.
                let mut rounds = Vec::new();
                for _ in 0..3 {
                    let mut round = [(0.0, 0.0); 2];
                    for (i, which) in ["all", "local"].into_iter().enumerate() {
                        let out = Command::new(std::env::current_exe().unwrap())
                            .args(["run", &per_writer.to_string(), "4", which])
                            .output()
                            .expect("running a measurement");
                        let said = String::from_utf8_lossy(&out.stdout);
                        print!("{said}");
                        eprint!("{}", String::from_utf8_lossy(&out.stderr));
                        round[i] = (
                            said_number(&said, "= ", " M events/s"),
                            said_number(&said, "server ", " s,"),
                        );
                    }
                    rounds.push(round);
                }
                compare(per_writer * 4, &rounds);
            }
        }
    }
}

/// The criterion for one size: the rate with the cross-rank
/// analyses against the rate without, as the median of the rounds' own
/// ratios (the machine's speed drifts between rounds), and what they add
/// to the server's CPU time per event.
fn compare(events: u64, rounds: &[[(f64, f64); 2]]) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let ratio = median(rounds.iter().map(|[all, local]| all.0 / local.0).collect());
    let added_ns = median(
        (rounds.iter())
            .map(|[all, local]| (all.1 - local.1) / events as f64 * 1e9)
            .collect(),
    );
    println!(
        "{events} events: with the cross-rank analyses the server keeps {ratio:.3}x its rate \
         without them (median of {} in-round ratios; the goal is at least 0.8x), and they \
         add {added_ns:.1} ns of its CPU time per event\n",
        rounds.len()
    );
}

/// The number `said` has between `before` and `after` (NaN if none).
fn said_number(said: &str, before: &str, after: &str) -> f64 {
    said.split(after)
        .next()
        .and_then(|s| s.rsplit(before).next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn num(s: &str) -> u64 {
    s.parse().expect("a number")
}

/// The environment variable `name` parsed, if it is set and parses.
fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.parse().ok()
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The analyses that see one rank at a time: everything but matching and
/// what depends on it.
const LOCAL: &[&str] = &[
    "summary",
    "mpi-profile",
    "p2p-topology",
    "collectives",
    "io-profile",
    "regions",
    "marks",
    "timeslices",
    "density",
];

fn run(per_writer: u64, writers: usize, which: &str) {
    set_mmap_threshold();
    let dir = std::env::temp_dir().join(format!("hark-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("unix:{}", dir.join("sock").display());
    let server = start_server(&dir, &addr, which);
    let started = Instant::now();
    let hz: f64 = env("HARK_FLOOD_SNAPSHOT_HZ").unwrap_or(0.0);
    let (snapshots, watcher_cpu_ms) = flood(&server, &addr, writers, per_writer, hz);
    let last_exit = Instant::now();
    let contention = server.contention();
    let sources = if std::env::var_os("HARK_FLOOD_JOBS").is_some() {
        server.board_stats().knowledge_sources
    } else {
        Vec::new()
    };
    let run = server.finish(Duration::from_secs(60));
    let ready = last_exit.elapsed();
    let total = started.elapsed();
    let events = run.accounting.events_received;
    print_totals(&run, which, writers, per_writer, total, ready);
    if hz > 0.0 {
        print_snapshots(snapshots, hz, watcher_cpu_ms, last_exit - started);
    }
    print_details(&run, &contention, &sources);
    print_trace_store(&dir, events);
    let _ = std::fs::remove_dir_all(&dir);
}

/// As `hark run` sets it (crates/cli/src/alloc.rs), unless glibc's own
/// variable is set.
fn set_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets an allocator parameter.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20) };
    }
}

/// The server, with the analyses `which` names (`all`, `local` or a list).
fn start_server(dir: &std::path::Path, addr: &str, which: &str) -> Server {
    Server::start(ServerConfig {
        addr: addr.to_string(),
        analyses: match which {
            "all" => None,
            "local" => Some(LOCAL.iter().map(|s| s.to_string()).collect()),
            list => Some(list.split(',').map(str::to_string).collect()),
        },
        trace: trace_config(dir),
        max_in_flight: env::<u64>("HARK_FLOOD_IN_FLIGHT_MB")
            .map_or(ServerConfig::default().max_in_flight, |mb| mb << 20),
        workers: env("HARK_FLOOD_WORKERS").unwrap_or(ServerConfig::default().workers),
        ..ServerConfig::default()
    })
    .expect("starting the server")
}

/// Runs `writers` writer processes of `per_writer` events each until they
/// end, taking live snapshots at `hz` meanwhile (if above 0): the
/// snapshots' times in ms, and the watcher thread's CPU time.
fn flood(server: &Server, addr: &str, writers: usize, per_writer: u64, hz: f64) -> (Vec<f64>, f64) {
    let writing = std::sync::atomic::AtomicBool::new(true);
    let mut snapshots: Vec<f64> = Vec::new();
    let mut watcher_cpu_ms = 0.0;
    let mut children: Vec<_> = (0..writers)
        .map(|r| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "write",
                    addr,
                    &r.to_string(),
                    &writers.to_string(),
                    &per_writer.to_string(),
                ])
                .spawn()
                .expect("starting a writer")
        })
        .collect();
    std::thread::scope(|s| {
        let watcher = (hz > 0.0).then(|| {
            s.spawn(|| {
                let mut taken = Vec::new();
                let period = Duration::from_secs_f64(1.0 / hz);
                let mut next = Instant::now() + period;
                while writing.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    if Instant::now() < next {
                        continue;
                    }
                    next += period;
                    let t = Instant::now();
                    let json = serde_json::to_vec(&server.snapshot()).unwrap();
                    std::hint::black_box(json);
                    taken.push(t.elapsed().as_secs_f64() * 1e3);
                }
                (taken, thread_cpu_ms())
            })
        });
        for c in &mut children {
            assert!(c.wait().unwrap().success(), "a writer failed");
        }
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(w) = watcher {
            (snapshots, watcher_cpu_ms) = w.join().unwrap();
        }
    });
    (snapshots, watcher_cpu_ms)
}

/// The throughput, the model's latency, the memory, the accounting and the
/// CPU time.
fn print_totals(
    run: &hark_model::Run,
    which: &str,
    writers: usize,
    per_writer: u64,
    total: Duration,
    ready: Duration,
) {
    let a = &run.accounting;
    let events = a.events_received;
    println!(
        "flood ({which}): {writers} writers x {per_writer} events: {events} events in {:.2} s = {:.1} M events/s; \
         model ready {:.0} ms after the last writer ended; server peak RSS {} MiB; \
         written {} received {} analysed {} dropped {} partial {}",
        total.as_secs_f64(),
        events as f64 / total.as_secs_f64() / 1e6,
        ready.as_secs_f64() * 1e3,
        peak_rss_kib() / 1024,
        a.events_written,
        a.events_received,
        a.events_analysed,
        a.events_dropped,
        a.partial_ranks,
    );
    let (server_cpu, writers_cpu) = process_cpu_ms();
    println!(
        "  CPU (user + system): server {:.2} s, writers {:.2} s",
        server_cpu / 1e3,
        writers_cpu / 1e3
    );
}

/// The live snapshots' times and the watcher's cost over the `writing`
/// time.
fn print_snapshots(mut snapshots: Vec<f64>, hz: f64, watcher_cpu_ms: f64, writing: Duration) {
    snapshots.sort_by(f64::total_cmp);
    println!(
        "  live view at {hz} Hz: {} snapshots taken and serialised, median {:.1} ms, max {:.1} ms (wall); \
         the watcher's CPU time {watcher_cpu_ms:.0} ms = {:.2} % of one core over the {:.1} s of writing",
        snapshots.len(),
        snapshots.get(snapshots.len() / 2).copied().unwrap_or(0.0),
        snapshots.last().copied().unwrap_or(0.0),
        watcher_cpu_ms / writing.as_secs_f64() / 10.0,
        writing.as_secs_f64(),
    );
}

/// Contention, the knowledge sources' jobs, the query latency (if asked),
/// the wait states and the diagnostics.
fn print_details(
    run: &hark_model::Run,
    contention: &hark_engine::Contention,
    sources: &[hark_board::KsStats],
) {
    println!(
        "  workers waited for a state {} times and copied one a snapshot read {} times",
        contention.stalls, contention.copies
    );
    for k in sources {
        println!(
            "  knowledge source {:18} {:>8} jobs, {:>7.1} ms",
            k.name,
            k.jobs_run,
            k.busy.as_secs_f64() * 1e3
        );
    }
    if std::env::var_os("HARK_FLOOD_QUERY").is_some() {
        query_latency(run);
    }
    for p in &run.programs {
        let waits: Vec<String> = (p.waits.iter())
            .map(|(k, w)| format!("{k} {}", w.instances.iter().sum::<u64>()))
            .collect();
        println!("  wait-state instances: {}", waits.join(", "));
        for d in &p.diagnostics {
            println!("  diagnostic: {d}");
        }
    }
}

/// The trace store's size per event, if `HARK_FLOOD_TRACE` kept one.
fn print_trace_store(dir: &std::path::Path, events: u64) {
    if let Some(t) = trace_config(dir) {
        let bytes: u64 = std::fs::read_dir(&t.dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        println!(
            "  trace store: {bytes} bytes for {events} events = {:.2} bytes/event, in {}",
            bytes as f64 / events.max(1) as f64,
            t.dir.display()
        );
    }
}

/// The trace store `HARK_FLOOD_TRACE` asks for, if any.
fn trace_config(dir: &std::path::Path) -> Option<hark_server::trace::TraceConfig> {
    let spec = std::env::var("HARK_FLOOD_TRACE").ok()?;
    Some(hark_server::trace::TraceConfig {
        dir: std::env::var_os("HARK_FLOOD_TRACE_DIR")
            .map_or_else(|| dir.join("trace"), std::path::PathBuf::from),
        selection: hark_engine::trace::Selection::parse(&spec).expect("a trace SPEC"),
        cap_bytes: env("HARK_FLOOD_TRACE_CAP").unwrap_or(64 << 30),
    })
}

/// CPU time of the calling thread so far, in ms (user + system, from
/// `/proc/thread-self/stat`, in clock ticks of 10 ms): a cost that other
/// processes' load does not inflate, unlike wall time.
fn thread_cpu_ms() -> f64 {
    let f = stat_fields("/proc/thread-self/stat");
    (f[0] + f[1]) as f64 * 10.0
}

/// This process's CPU time and its waited-for children's (the writers),
/// user + system, in ms.
fn process_cpu_ms() -> (f64, f64) {
    let f = stat_fields("/proc/self/stat");
    ((f[0] + f[1]) as f64 * 10.0, (f[2] + f[3]) as f64 * 10.0)
}

/// utime, stime, cutime and cstime (fields 14 to 17) of a `stat` file, in
/// clock ticks (10 ms).
fn stat_fields(path: &str) -> [u64; 4] {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    std::array::from_fn(|i| f.get(11 + i).copied().unwrap_or(0))
}

/// Interval queries on the finished model, as the live view's API answers
/// them (computed, then serialised): the whole run, a single slice, and
/// windows of every power-of-two fraction of the run at several offsets.
fn query_latency(run: &hark_model::Run) {
    use hark_live::interval::{length_ns, profile, timeline, Interval};
    let len = length_ns(run).max(1);
    let mut intervals = vec![Interval::default()];
    for k in 0..9 {
        let width = len >> k;
        for i in 0..(1u64 << k).min(4) {
            intervals.push(Interval {
                from_ns: Some(i * width),
                to_ns: Some((i + 1) * width),
            });
        }
    }
    intervals.push(Interval {
        from_ns: Some(len / 3),
        to_ns: Some(len / 3 + 1),
    });
    let mut times = Vec::new();
    for iv in &intervals {
        for kind in ["profile", "timeline"] {
            let t = Instant::now();
            let json = match kind {
                "profile" => serde_json::to_vec(&profile(run, *iv)),
                _ => serde_json::to_vec(&timeline(run, *iv, 256)),
            }
            .unwrap();
            std::hint::black_box(json);
            times.push((t.elapsed().as_secs_f64() * 1e3, kind, *iv));
        }
    }
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (max, kind, iv) = times[times.len() - 1];
    println!(
        "  interval queries: {} (profile and timeline of {} intervals of a {:.2} s run), median {:.2} ms, max {:.2} ms ({kind} of {:?}..{:?} ns)",
        times.len(),
        intervals.len(),
        len as f64 / 1e9,
        times[times.len() / 2].0,
        max,
        iv.from_ns,
        iv.to_ns
    );
}

/// One writer: a probe's stream, packs of a fixed mix with time moving on.
fn write(addr: &str, rank: i32, size: i32, events: u64) {
    let path = addr.strip_prefix("unix:").expect("a unix: address");
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("connecting");
    let mut head = Vec::new();
    Hello {
        program: "flood".into(),
        argv: vec!["flood".into()],
        host: "localhost".into(),
        pid: std::process::id(),
        rank,
        size,
        job: "bench".into(),
        // As a probe on the TSC sends it, so the server converts every
        // event as it reads (here at one tick per nanosecond).
        clock: ClockSource::Tsc(TickScale {
            tsc0: 0,
            ns0: 0,
            mult: 1 << 32,
        }),
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
    .encode(&mut head);
    RankInfo {
        world_rank: rank,
        world_size: size,
        appnum: 0,
        thread_level: 0,
        flavour: Flavour::OpenMpi,
        library: "synthetic".into(),
    }
    .encode(&mut head);
    // Aligned with world rank 0 as a probe aligns at `MPI_Init`: every
    // writer's clock is rank 0's (offset 0). Without it each writer's
    // timeline would be offset by the handshake, the milliseconds between
    // the writers' connections, and half the messages would break the
    // clock condition.
    ClockSync {
        phase: ClockPhase::Init,
        local_ns: 0,
        reference_ns: 0,
        round_trip_ns: 1000,
        reference: ClockReference::WorldRank0,
        relay_bound_ns: 0,
    }
    .encode(&mut head);
    Def::encode_all(&halo_mix::defs(rank, size), &mut head);
    s.write_all(&head).unwrap();

    // One pack of the mix, one synthetic microsecond per event; each later
    // pack is the same with its times moved on, as a long run would be.
    let mut pattern = mix(rank, size);
    // A program whose receives never complete: every send stays unmatched.
    if std::env::var_os("HARK_FLOOD_NO_RECEIVES").is_some() {
        let recv = [op::mpi_op("MPI_Recv").unwrap(), op::COMPLETE_RECV];
        pattern.retain(|e| !recv.contains(&e.op()));
    }
    // Whole copies of the mix per pack, so regions open and close in one.
    let per_pack = PACK_EVENTS / pattern.len() * pattern.len();
    let rounds = per_pack / pattern.len();
    let allreduce = op::mpi_op("MPI_Allreduce").unwrap();
    let template: Vec<Event> = (0..per_pack)
        .map(|i| {
            let mut e = pattern[i % pattern.len()];
            let t = i as u64 * 1000 + rank as u64 * LAG_NS;
            e.start.set(t);
            e.end.set(t + e.end.get());
            // A collective's sequence number on its communicator, as the
            // probe numbers them (one per round of the mix).
            if e.op() == allreduce {
                e.tag.set((i / pattern.len()) as i32);
            }
            e
        })
        .collect();
    let mut buf = Vec::with_capacity(HEADER_SIZE + PACK_HEADER_SIZE + PACK_EVENTS * EVENT_SIZE);
    let mut pack = template.clone();
    let progress = Progress::open(addr, size as usize);
    let (mut sent, mut seq) = (0u64, 0u64);
    while sent < events {
        progress.wait_for(seq.saturating_sub(AHEAD));
        let n = ((events - sent) as usize).min(per_pack);
        let shift = seq * per_pack as u64 * 1000;
        for (e, t) in pack[..n].iter_mut().zip(&template) {
            e.start.set(t.start.get() + shift);
            e.end.set(t.end.get() + shift);
            if e.op() == allreduce {
                e.tag.set(t.tag.get() + (seq as usize * rounds) as i32);
            }
        }
        buf.clear();
        encode_pack(seq, &pack[..n], &mut buf);
        s.write_all(&buf).unwrap();
        sent += n as u64;
        seq += 1;
        progress.set(rank, seq);
    }
    progress.set(rank, u64::MAX);
    buf.clear();
    End {
        events_written: events,
        events_dropped: 0,
        packs_sent: seq,
        reason: EndReason::Finalize,
    }
    .encode(&mut buf);
    s.write_all(&buf).unwrap();
}
