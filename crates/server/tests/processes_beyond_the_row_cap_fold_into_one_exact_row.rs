//! Processes without an MPI rank beyond a program's first
//! `rows` are folded, when they end, into one row ("N other processes")
//! whose counts are exact. Ten short processes that each write, with a cap
//! of three rows, give four rows; every total (accounting, calls, bytes)
//! equals that of the same ten processes with a row each, the first three
//! rows are unchanged, and the folded one that died without its End record
//! is counted and named. Each process also enters a region and sets a
//! mark; an eleventh process that sets a user counter (whose last value
//! per time slice has no order across processes) keeps a row of its own.

mod common;

use common::{hello, socket};
use hark_model::{Program, Run};
use hark_server::{Server, ServerConfig};
use hark_wire::{encode_pack, op, Def, End, EndReason, Event, NameKind};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

const PROCESSES: u32 = 10;
/// The process that dies without its End record (a folded one).
const KILLED: u32 = 7;

/// The process that sets a counter.
const COUNTING: u32 = PROCESSES;

/// What process `i` sends: a region around a write to one of two files and
/// a write to fd 1, a mark (a counter for [`COUNTING`]) and, unless killed,
/// its End.
fn process(i: u32) -> Vec<u8> {
    let mut b = hello("loop", 100 + i, 1 << 20);
    let name = |id, kind, name: &str| Def::Name {
        id,
        kind,
        name: name.into(),
    };
    Def::encode_all(
        &[
            name(1, NameKind::Region, "step"),
            name(2, NameKind::Mark, "iter"),
            name(3, NameKind::Counter, "residual"),
            Def::File {
                id: 4,
                path: format!("/tmp/out.{}", i % 2),
            },
        ],
        &mut b,
    );
    let write = |start: u64, bytes: u64, file: u32| {
        let mut e = Event::new(op::io::WRITE, start, start + 10 * u64::from(i + 1));
        e.bytes.set(bytes);
        e.obj.set(file);
        e.peer.set(if file == 0 { 1 } else { 5 });
        e
    };
    let user = |code, t: u64, obj: u32, value: u64| {
        let mut e = Event::new(code, t, t);
        e.obj.set(obj);
        e.bytes.set(value);
        e
    };
    let mut events = vec![
        user(op::REGION_BEGIN, 1_500, 1, 0),
        write(2_000, 100 * u64::from(i + 1), 4),
        user(op::REGION_END, 2_500 + 100 * u64::from(i), 1, 0),
        write(3_000, 7, 0),
    ];
    events.push(if i == COUNTING {
        user(op::COUNTER, 3_500, 3, 42)
    } else {
        user(op::MARK, 3_500, 2, u64::from(i))
    });
    encode_pack(0, &events, &mut b);
    if i != KILLED {
        End {
            events_written: events.len() as u64 + u64::from(i % 3),
            events_dropped: u64::from(i % 3),
            packs_sent: 1,
            reason: EndReason::Exit,
        }
        .encode(&mut b);
    }
    b
}

/// The ten processes, one after the other, through a server keeping `rows`.
fn run(name: &str, rows: usize) -> Run {
    let (dir, path) = socket(name);
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", path.display()),
        workers: 2,
        rows,
        ..ServerConfig::default()
    })
    .unwrap();
    for i in 0..=COUNTING {
        send(&server, &path, &process(i), u64::from(i) + 1);
    }
    let run = server.finish(Duration::from_secs(10));
    std::fs::remove_dir_all(&dir).unwrap();
    run
}

/// Sends one process's stream and waits until it has closed, so that
/// processes arrive in order.
fn send(server: &Server, path: &Path, bytes: &[u8], total: u64) {
    UnixStream::connect(path)
        .expect("connecting to the server")
        .write_all(bytes)
        .expect("sending a stream");
    let give_up = Instant::now() + Duration::from_secs(60);
    while !(server.status().connections == total && server.status().open == 0) {
        assert!(Instant::now() < give_up, "process {total} never closed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn written(p: &Program, row: usize) -> u64 {
    p.io.files
        .iter()
        .map(|f| f.write_bytes.get(row).copied().unwrap_or(0))
        .sum()
}

fn calls(p: &Program) -> u64 {
    p.io.files
        .iter()
        .flat_map(|f| f.ops.values())
        .map(|t| t.calls)
        .sum()
}

#[test]
fn processes_beyond_the_cap_fold_into_one_row_with_exact_counts() {
    let each = run("rows-each", 1_000);
    let folded = run("rows-folded", 3);
    let (e, f) = (&each.programs[0], &folded.programs[0]);

    assert_eq!(
        e.rank_info.len(),
        PROCESSES as usize + 1,
        "a row per process"
    );
    assert_eq!(
        f.rank_info.len(),
        5,
        "three rows, the counting process's and the row of the others"
    );
    assert_eq!(f.ranks, 5);
    assert_eq!(f.processes(), u64::from(PROCESSES) + 1);
    assert_eq!(f.rank_info[3].pid, 100 + COUNTING, "it keeps its row");
    assert_eq!(f.rank_info[3].folded, 0);
    let other = &f.rank_info[4];
    assert_eq!(other.folded, 7, "seven other processes");
    assert_eq!((other.world_rank, other.pid), (-1, 0));
    for r in 0..3 {
        assert_eq!(f.rank_info[r].pid, e.rank_info[r].pid);
        assert_eq!(f.rank_info[r].folded, 0);
        assert_eq!(written(f, r), written(e, r), "row {r} is unchanged");
    }
    let rest: u64 = (3..PROCESSES as usize).map(|r| written(e, r)).sum();
    assert_eq!(written(f, 4), rest, "the others' bytes, summed");
    assert_eq!(written(f, 3), written(e, PROCESSES as usize));
    assert_eq!(calls(f), calls(e), "every call is counted");
    assert_eq!(calls(f), 2 * u64::from(PROCESSES + 1));
    for file in ["/tmp/out.0", "/tmp/out.1"] {
        let of = |p: &Program| -> u64 {
            p.io.files
                .iter()
                .find(|x| x.path == file)
                .map_or(0, |x| x.write_bytes.iter().sum())
        };
        assert_eq!(of(f), of(e), "{file}: the same bytes, whatever the rows");
    }

    // Regions: calls and times summed; marks: count, min and max kept.
    let step = |p: &Program| p.regions.paths["step"].clone();
    let (se, sf) = (step(e), step(f));
    assert_eq!(sf.calls[4], 7);
    assert_eq!(sf.calls.iter().sum::<u64>(), se.calls.iter().sum::<u64>());
    assert_eq!(
        sf.inclusive_ns.iter().sum::<u64>(),
        se.inclusive_ns.iter().sum::<u64>()
    );
    assert_eq!(
        sf.inclusive_ns[4],
        se.inclusive_ns[3..PROCESSES as usize].iter().sum::<u64>()
    );
    assert_eq!(
        f.regions.counters["mark:iter"],
        e.regions.counters["mark:iter"]
    );
    assert_eq!(f.regions.counters["mark:iter"].count, u64::from(PROCESSES));
    assert_eq!(
        f.regions.counters["mark:iter"].max,
        i64::from(PROCESSES - 1)
    );

    // Accounting: written = received + dropped, exactly, and the same as
    // with a row each; the killed process is partial in both.
    let (ea, fa) = (&each.accounting, &folded.accounting);
    assert_eq!(
        (
            ea.events_written,
            ea.events_received,
            ea.events_analysed,
            ea.events_dropped
        ),
        (
            fa.events_written,
            fa.events_received,
            fa.events_analysed,
            fa.events_dropped
        )
    );
    assert_eq!(fa.events_written, fa.events_received + fa.events_dropped);
    assert_eq!((ea.partial_ranks, fa.partial_ranks), (1, 1));
    assert_eq!(other.accounting.partial_ranks, 1);
    let named = f
        .diagnostics
        .iter()
        .find(|d| d.contains("7 other processes"))
        .expect("the folded row is explained in the diagnostics");
    assert!(
        named.contains(&format!("pid {} on node0", 100 + KILLED)),
        "the partial process is named: {named}"
    );

    // The rest of the model reads the row like any other.
    assert_eq!(f.io.per_rank.len(), 5);
    assert_eq!(f.mpi_time_ns.len(), 5);
    assert_eq!(f.rank_wall_ns.len(), 5);
    assert!(f.rank_wall_ns[4] > 0, "the others' first to last event");

    // The outputs say what the row is.
    let text = hark_outputs::summary::render(&folded);
    assert!(
        text.contains("11 processes (7 of them folded into one row, \"7 other processes\""),
        "{text}"
    );
    assert!(text.contains("loss unknown for 1 rank"), "{text}");
    let options = hark_outputs::html::Options { graphviz: false };
    let html = hark_outputs::html::render(&folded, &options);
    assert!(
        html.contains("<td>7 other processes</td>"),
        "the ranks table"
    );
    assert!(html.contains("1 of them partial (no end record)"));
    let json: serde_json::Value =
        serde_json::from_str(&hark_outputs::json::render(&folded)).unwrap();
    assert_eq!(json["programs"][0]["rank_info"][4]["folded"], 7);
    assert_eq!(json["programs"][0]["rank_info"][0]["folded"], 0);

    for (name, t) in &f.timeslices.metrics {
        if name.starts_with("io_") {
            let total =
                |m: &hark_model::TimeSlices| -> u64 { m.metrics[name].iter().flatten().sum() };
            assert_eq!(
                total(&f.timeslices),
                total(&e.timeslices),
                "{name} over time"
            );
            assert_eq!(t.len(), 5, "{name}: a series per row");
        }
    }
}
