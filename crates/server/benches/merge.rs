//! The CPU cost of merging the analysers' partial results
//! (`hark_server::merge_partials`, docs/analysers.md step 6), as a function
//! of the model's size and of the number of partials, in-process: no MPI.
//!
//! For a model of `R` ranks, `C` call regions and `S` time slices, the
//! ranks are split evenly over `k` analysis servers (as `hark run
//! --analysers k` splits writers over analyser ranks). Each rank streams a
//! synthetic run over a Unix socket: `REPS` rounds of, per region, a region
//! begin, a ring `MPI_Send` and `MPI_Recv` (64 B, so every message whose
//! two sides sit on different servers is completed by the merge), an
//! `MPI_Allreduce` and the region's end. Each server ends with
//! `Server::finish_partials`. Then, timed, three times each (medians): the
//! partials serialised (`Partial::to_bytes`, what an analyser sends to
//! analyser rank 0), deserialised (`Partial::from_bytes`), and merged into
//! the run (`merge_partials`, which also finishes the model: `k = 1` is that
//! finish alone, the socket path's cost).
//!
//! `cargo bench -p hark-server --bench merge` prints the table of
//! BENCHMARKS.md, "Merging over MPI"; `merge R C
//! S k...` measures one model.

use hark_server::{merge_partials, Server, ServerConfig};
use hark_wire::{
    encode_pack, op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, NameKind, RankInfo,
    TickScale,
};
use std::io::Write;
use std::time::{Duration, Instant};

/// Rounds of every region per rank.
const REPS: u64 = 2;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    println!("| ranks | regions | slices | partials | serialised KiB | serialise ms | deserialise ms | merge + finish ms | merge + finish CPU ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    if args.len() >= 4 {
        model(args[0], args[1], args[2], &args[3..]);
        return;
    }
    // Model size at a fixed count, then the count at a fixed size.
    for (r, c, s) in [
        (64, 4, 100),
        (256, 4, 100),
        (1024, 4, 100),
        (256, 32, 100),
        (256, 4, 1000),
    ] {
        model(r, c, s, &[1, 2, 8]);
    }
    model(1024, 4, 100, &[4, 16, 32, 64]);
}

/// Measures the model of `ranks` ranks, `regions` regions and `slices`
/// slices split into each of `counts` partials.
fn model(ranks: usize, regions: usize, slices: usize, counts: &[usize]) {
    for &k in counts {
        let parts: Vec<Vec<hark_engine::Partial>> = (0..k)
            .map(|j| {
                vec![partial(
                    ranks,
                    regions,
                    slices,
                    j * ranks / k..(j + 1) * ranks / k,
                )]
            })
            .collect();
        let (mut ser, mut de, mut merge, mut cpu, mut size) = (vec![], vec![], vec![], vec![], 0);
        for _ in 0..3 {
            let t = Instant::now();
            let bytes: Vec<Vec<Vec<u8>>> = parts
                .iter()
                .map(|ps| ps.iter().map(|p| p.to_bytes()).collect())
                .collect();
            ser.push(t.elapsed());
            size = bytes.iter().flatten().map(Vec::len).sum::<usize>();
            let t = Instant::now();
            let copies: Vec<Vec<hark_engine::Partial>> = bytes
                .iter()
                .map(|ps| {
                    ps.iter()
                        .map(|b| hark_engine::Partial::from_bytes(b).expect("a partial"))
                        .collect()
                })
                .collect();
            de.push(t.elapsed());
            let (t, c) = (Instant::now(), cpu_time());
            let run = merge_partials(copies, Vec::new(), None).expect("merging");
            merge.push(t.elapsed());
            cpu.push(cpu_time() - c);
            let got = run.programs[0].ranks;
            assert_eq!(got as usize, ranks, "the merged model lost ranks");
        }
        println!(
            "| {ranks} | {regions} | {slices} | {k} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
            size as f64 / 1024.0,
            median_ms(&mut ser),
            median_ms(&mut de),
            median_ms(&mut merge),
            median_ms(&mut cpu)
        );
    }
}

/// The process's CPU time (every thread's: the finish may use several).
fn cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn median_ms(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// The partial of one server that received the streams of `mine`.
fn partial(
    ranks: usize,
    regions: usize,
    slices: usize,
    mine: std::ops::Range<usize>,
) -> hark_engine::Partial {
    let dir =
        std::env::temp_dir().join(format!("hark-merge-{}-{}", std::process::id(), mine.start));
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("unix:{}", dir.join("s").display());
    let server = Server::start(ServerConfig {
        addr: addr.clone(),
        slices,
        ..ServerConfig::default()
    })
    .expect("starting a server");
    let all: Vec<usize> = mine.clone().collect();
    let ranks_per_thread = mine.len().div_ceil(16).max(1);
    std::thread::scope(|s| {
        for chunk in all.chunks(ranks_per_thread) {
            let addr = &addr;
            s.spawn(move || {
                for &r in chunk {
                    write(addr, r as i32, ranks as i32, regions);
                }
            });
        }
    });
    // Connections still in the accept backlog do not count as open: wait
    // for every one, or the server's settle would end before them.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.status().connections < mine.len() as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let (mut partials, problems) = server.finish_partials(Duration::from_secs(10));
    assert!(
        problems.iter().all(|p| !p.contains("refused")),
        "{problems:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(partials.len(), 1, "one program per server");
    partials.pop().unwrap()
}

/// One rank's stream.
fn write(addr: &str, rank: i32, size: i32, regions: usize) {
    let path = addr.strip_prefix("unix:").unwrap();
    let mut s = std::os::unix::net::UnixStream::connect(path).expect("connecting");
    let mut out = Vec::new();
    Hello {
        program: "merge".into(),
        argv: vec!["merge".into()],
        host: "localhost".into(),
        pid: 1000 + rank as u32,
        rank,
        size,
        job: "bench".into(),
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
    .encode(&mut out);
    RankInfo {
        world_rank: rank,
        world_size: size,
        appnum: 0,
        thread_level: 0,
        flavour: Flavour::OpenMpi,
        library: "synthetic".into(),
    }
    .encode(&mut out);
    let mut defs = vec![Def::Comm {
        id: 1,
        members: (0..size).collect(),
        remote: vec![],
    }];
    for c in 0..regions {
        defs.push(Def::Name {
            id: 2 + c as u32,
            kind: NameKind::Region,
            name: format!("region_{c}"),
        });
    }
    Def::encode_all(&defs, &mut out);
    let f = |name: &str| op::mpi_op(name).unwrap();
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut events = Vec::new();
    let mut t = 0u64;
    let mut at = |code: u16, dur: u64| {
        let e = Event::new(code, t, t + dur);
        t += dur + 1000;
        e
    };
    let mut seq = 0;
    for _ in 0..REPS {
        for c in 0..regions {
            let mut e = at(op::REGION_BEGIN, 0);
            e.obj.set(2 + c as u32);
            events.push(e);
            let mut e = at(f("MPI_Send"), 500);
            e.peer.set(next);
            e.bytes.set(64);
            e.obj.set(1);
            events.push(e);
            let mut e = at(f("MPI_Recv"), 700);
            e.peer.set(prev);
            e.bytes.set(64);
            e.obj.set(1);
            events.push(e);
            let mut e = at(f("MPI_Allreduce"), 800);
            e.bytes.set(8);
            e.extra.set(8);
            e.obj.set(1);
            e.tag.set(seq);
            seq += 1;
            events.push(e);
            let mut e = at(op::REGION_END, 0);
            e.obj.set(2 + c as u32);
            events.push(e);
        }
    }
    encode_pack(0, &events, &mut out);
    End {
        events_written: events.len() as u64,
        events_dropped: 0,
        packs_sent: 1,
        reason: EndReason::Finalize,
    }
    .encode(&mut out);
    s.write_all(&out).unwrap();
}
