//! Builders shared by the analyses' tests: streams written as scripts of
//! frames, fed by hand or through the board, folded into a model.
#![allow(dead_code)]

use hark_analyses::registry;
use hark_engine::{Config, OnBoard, Partial, ProgramAnalysis, StreamAccounting};
use hark_model::Program;
use hark_wire::{op, ClockSource, Def, End, EndReason, Event, Flavour, Hello, NameKind, RankInfo};
use std::sync::Arc;

/// One frame of a scripted stream.
#[derive(Clone)]
pub enum Step {
    Rank(RankInfo),
    Defs(Vec<Def>),
    Pack(Vec<Event>),
    /// A sampled-out probe's totals in place of a pack.
    Counts(hark_wire::Counts),
    End,
}

/// A scripted process: its handshake, clock offset and frames.
#[derive(Clone)]
pub struct Proc {
    pub hello: Hello,
    pub offset_ns: i64,
    pub steps: Vec<Step>,
}

pub fn hello(program: &str, rank: i32, size: i32) -> Hello {
    Hello {
        program: program.into(),
        argv: vec![format!("./{program}"), "arg".into()],
        host: format!("node{}", rank.max(0) / 2),
        pid: 1000 + rank.max(0) as u32,
        rank,
        size,
        job: "job".into(),
        clock: ClockSource::Monotonic,
        clock_ns: 0,
        realtime_ns: 0,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    }
}

pub fn rank_info(world_rank: i32, world_size: i32, appnum: i32) -> RankInfo {
    RankInfo {
        world_rank,
        world_size,
        appnum,
        thread_level: 0,
        flavour: Flavour::OpenMpi,
        library: "Open MPI v4.1.4".into(),
    }
}

impl Proc {
    /// An MPI process of `program` with world rank `rank` of `size`.
    pub fn mpi(program: &str, rank: i32, size: i32) -> Proc {
        Proc {
            hello: hello(program, rank, size),
            offset_ns: 0,
            steps: vec![Step::Rank(rank_info(rank, size, 0))],
        }
    }
    pub fn defs(mut self, defs: Vec<Def>) -> Proc {
        self.steps.push(Step::Defs(defs));
        self
    }
    pub fn pack(mut self, events: Vec<Event>) -> Proc {
        self.steps.push(Step::Pack(events));
        self
    }
    pub fn counts(mut self, counts: hark_wire::Counts) -> Proc {
        self.steps.push(Step::Counts(counts));
        self
    }
    pub fn end(mut self) -> Proc {
        self.steps.push(Step::End);
        self
    }
    pub fn offset(mut self, ns: i64) -> Proc {
        self.offset_ns = ns;
        self
    }
    /// The same stream with every pack cut into packs of at most `n` events.
    pub fn rebatched(&self, n: usize) -> Proc {
        let mut p = self.clone();
        p.steps = self
            .steps
            .iter()
            .flat_map(|s| match s {
                Step::Pack(ev) => ev.chunks(n).map(|c| Step::Pack(c.to_vec())).collect(),
                other => vec![other.clone()],
            })
            .collect();
        p
    }
    pub fn events_in_packs(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Pack(e) => e.len() as u64,
                Step::Counts(c) => c.events,
                _ => 0,
            })
            .sum()
    }
}

pub fn end_frame(written: u64) -> End {
    End {
        events_written: written,
        events_dropped: 0,
        packs_sent: 0,
        reason: EndReason::Finalize,
    }
}

pub fn program(name: &str, config: Config) -> ProgramAnalysis {
    ProgramAnalysis::new(name, 0, registry::all(), config)
}

/// Feeds the processes by hand, in the order given, and folds them.
pub fn run(procs: &[Proc]) -> Vec<Program> {
    run_with(procs, Config::default())
}

pub fn run_with(procs: &[Proc], config: Config) -> Vec<Program> {
    let all: Vec<(u64, &Proc)> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u64, p))
        .collect();
    let name = name_of(procs);
    partial_by_hand(&name, &all, config).finish(&registry::all(), false)
}

fn name_of(procs: &[Proc]) -> String {
    procs
        .first()
        .map_or("none".into(), |p| p.hello.program.clone())
}

/// Feeds `procs` (each with its connection number) by hand into a program
/// called `name`, as one server would, and returns its partial result.
pub fn partial_by_hand(name: &str, procs: &[(u64, &Proc)], config: Config) -> Partial {
    let pa = program(name, config);
    let streams = procs
        .iter()
        .map(|&(conn, p)| {
            let mut s = pa.open(conn, p.hello.clone(), p.offset_ns);
            for step in &p.steps {
                match step {
                    Step::Rank(r) => s.rank(r.clone()),
                    Step::Defs(d) => s.defs(d),
                    Step::Pack(e) => s.events(e),
                    Step::Counts(c) => s.counts(c),
                    Step::End => s.end(end_frame(p.events_in_packs())),
                }
            }
            s
        })
        .collect();
    pa.partial(streams)
}

/// Feeds the processes through a board with `workers` workers, interleaving
/// their frames, and folds them.
pub fn run_on_board(procs: &[Proc], workers: usize) -> Vec<Program> {
    run_on_board_with_snapshot(procs, workers).1
}

/// As [`run_on_board`], also taking a snapshot once every batch is analysed
/// and before the fold: `(snapshot, final)`.
pub fn run_on_board_with_snapshot(procs: &[Proc], workers: usize) -> (Vec<Program>, Vec<Program>) {
    let all: Vec<(u64, &Proc)> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u64, p))
        .collect();
    let (snapshot, partial) = on_board(&name_of(procs), &all, workers);
    (snapshot, partial.finish(&registry::all(), false))
}

/// Feeds `procs` (each with its connection number) through a board with
/// `workers` workers, interleaving their frames, as one server would: a
/// snapshot once everything is analysed, and the partial result.
pub fn on_board(name: &str, procs: &[(u64, &Proc)], workers: usize) -> (Vec<Program>, Partial) {
    on_board_with(program(name, Config::default()), procs, workers)
}

/// As [`on_board`], for a program with analyses of its own.
pub fn on_board_with(
    program: ProgramAnalysis,
    procs: &[(u64, &Proc)],
    workers: usize,
) -> (Vec<Program>, Partial) {
    let board = hark_board::Board::new(workers);
    let on = OnBoard::install(&board, program).unwrap();
    let infos: Vec<_> = procs
        .iter()
        .map(|&(conn, p)| Arc::new(on.program().stream_info(conn, p.hello.clone(), p.offset_ns)))
        .collect();
    let mut accs = vec![StreamAccounting::default(); procs.len()];
    let longest = procs.iter().map(|p| p.1.steps.len()).max().unwrap_or(0);
    for i in 0..longest {
        for (k, (_, p)) in procs.iter().enumerate() {
            match p.steps.get(i) {
                Some(Step::Rank(r)) => infos[k].set_rank(r.clone()),
                Some(Step::Defs(d)) => on.defs(&infos[k], d.clone()).unwrap(),
                Some(Step::Pack(e)) => {
                    accs[k].received += e.len() as u64;
                    on.pack(&infos[k], e).unwrap();
                }
                Some(Step::Counts(c)) => {
                    accs[k].received += c.events;
                    on.counts(&infos[k], c.clone()).unwrap();
                }
                Some(Step::End) => accs[k].end = Some(end_frame(p.events_in_packs())),
                None => {}
            }
        }
    }
    let ranks: Vec<_> = infos.into_iter().zip(accs).collect();
    board.drain_level(on.level());
    let snapshot = on.snapshot(&ranks);
    let partial = on.finish_partial(ranks);
    board.shutdown();
    (snapshot, partial)
}

/// The JSON of a model, for comparing whole results.
pub fn json(p: &[Program]) -> serde_json::Value {
    serde_json::to_value(p).unwrap()
}

/// An event of the MPI function `name`.
pub fn mpi(name: &str, start: u64, end: u64) -> Event {
    Event::new(
        op::mpi_op(name).unwrap_or_else(|| panic!("{name} is not in the table")),
        start,
        end,
    )
}

pub fn ev(code: u16, start: u64, end: u64) -> Event {
    Event::new(code, start, end)
}

/// Field setters, chained: `mpi("MPI_Send", 0, 10).peer(1).bytes(8)`.
pub trait Set {
    fn peer(self, p: i32) -> Self;
    fn bytes(self, b: u64) -> Self;
    fn extra(self, x: u64) -> Self;
    fn obj(self, o: u32) -> Self;
    fn thread(self, t: u16) -> Self;
    fn tag(self, t: i32) -> Self;
}

impl Set for Event {
    fn peer(mut self, p: i32) -> Self {
        self.peer.set(p);
        self
    }
    fn bytes(mut self, b: u64) -> Self {
        self.bytes.set(b);
        self
    }
    fn extra(mut self, x: u64) -> Self {
        self.extra.set(x);
        self
    }
    fn obj(mut self, o: u32) -> Self {
        self.obj.set(o);
        self
    }
    fn thread(mut self, t: u16) -> Self {
        self.thread.set(t);
        self
    }
    fn tag(mut self, t: i32) -> Self {
        self.tag.set(t);
        self
    }
}

pub fn comm(id: u32, members: &[i32]) -> Def {
    Def::Comm {
        id,
        members: members.to_vec(),
        remote: vec![],
    }
}

pub fn file(id: u32, path: &str) -> Def {
    Def::File {
        id,
        path: path.into(),
    }
}

pub fn name(id: u32, kind: NameKind, name: &str) -> Def {
    Def::Name {
        id,
        kind,
        name: name.into(),
    }
}

/// A deterministic pseudo-random generator (xorshift), so failures replay.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A plausible busy rank: every kind of event, ids mostly defined.
pub fn busy(rank: i32, size: i32, seed: u64) -> Proc {
    let mut rng = Rng(seed | 1);
    let defs = vec![
        comm(1, &(0..size).collect::<Vec<_>>()),
        file(2, "/data/in"),
        file(3, "/data/out"),
        name(4, NameKind::Region, "solve"),
        name(5, NameKind::Region, "io"),
        name(6, NameKind::Counter, "iters"),
        name(7, NameKind::Mark, "step"),
        comm(8, &[rank]),
    ];
    // Ranks define in different orders, so servers number ids differently.
    let mut defs = defs;
    defs.rotate_left(rank as usize % 8);
    let ops: Vec<u16> = [
        "MPI_Send",
        "MPI_Recv",
        "MPI_Isend",
        "MPI_Irecv",
        "MPI_Wait",
        "MPI_Waitall",
        "MPI_Allreduce",
        "MPI_Bcast",
        "MPI_Barrier",
        "MPI_Sendrecv",
        "MPI_File_read_at",
    ]
    .iter()
    .map(|n| op::mpi_op(n).unwrap())
    .chain([
        op::io::WRITE,
        op::io::READ,
        op::io::FWRITE,
        op::REGION_BEGIN,
        op::REGION_END,
        op::COUNTER,
        op::MARK,
        op::COMPLETE_RECV,
        op::COMPLETE_SEND,
    ])
    .collect();
    let mut t = 0u64;
    let events: Vec<Event> = (0..5000)
        .map(|_| {
            t += rng.below(2000);
            let code = ops[rng.below(ops.len() as u64) as usize];
            Event::new(code, t, t + rng.below(500))
                .peer(rng.below(size as u64 + 1) as i32 - 1)
                .bytes(rng.below(1 << 16))
                .extra(rng.below(8))
                .obj(rng.below(9) as u32)
                .thread(rng.below(2) as u16)
        })
        .collect();
    // Collectives number their instances per communicator, as the probe does.
    let mut seq = [0i32; 16];
    let events: Vec<Event> = events
        .into_iter()
        .map(|mut e| {
            let collective = ["MPI_Allreduce", "MPI_Bcast", "MPI_Barrier"]
                .iter()
                .any(|n| op::mpi_op(n) == Some(e.op()));
            if collective {
                let c = e.obj.get() as usize % seq.len();
                e.tag.set(seq[c]);
                seq[c] += 1;
            }
            e
        })
        .collect();
    let mut p = Proc::mpi("busy", rank, size).defs(defs);
    for chunk in events.chunks(1500) {
        p = p.pack(chunk.to_vec());
    }
    p.end()
}

/// A millisecond in ns.
pub const MS: u64 = 1_000_000;

/// Two ranks of `busy` that wait on a duplicate of the world, which a
/// server folds past the communicators' cap only if it analyses rank 0:
/// rank 0 first defines 1,000 other member sets, so when both define the
/// duplicate (their second communicator with those members) its server
/// has no room left, while rank 1's alone keeps it an id of its own.
/// Rank 1 arrives 49 ms late at a barrier on it; then each rank sends on
/// it 40 ms after the other began to receive.
pub fn folded_on_rank_0s_server_only() -> [Proc; 2] {
    let world = |id| comm(id, &[0, 1]);
    let others: Vec<_> = (0..1000)
        .map(|i| comm(10 + i, &[0, 2 + i as i32]))
        .collect();
    let (dup0, dup1) = (5000, 2);
    let barrier = |dup, t: (u64, u64)| mpi("MPI_Barrier", t.0, t.1).obj(dup).tag(0).peer(-1);
    let rank0 = Proc::mpi("busy", 0, 2)
        .defs([vec![world(1)], others, vec![world(dup0)]].concat())
        .pack(vec![
            barrier(dup0, (MS, 50 * MS)),
            mpi("MPI_Recv", 60 * MS, 100 * MS)
                .obj(dup0)
                .peer(1)
                .tag(5)
                .bytes(8),
            mpi("MPI_Send", 150 * MS, 150 * MS + 10)
                .obj(dup0)
                .peer(1)
                .tag(6)
                .bytes(8),
        ])
        .end();
    let rank1 = Proc::mpi("busy", 1, 2)
        .defs(vec![world(1), world(dup1)])
        .pack(vec![
            barrier(dup1, (50 * MS, 50 * MS + 10)),
            mpi("MPI_Send", 100 * MS, 100 * MS + 10)
                .obj(dup1)
                .peer(0)
                .tag(5)
                .bytes(8),
            mpi("MPI_Recv", 110 * MS, 150 * MS + 20)
                .obj(dup1)
                .peer(0)
                .tag(6)
                .bytes(8),
        ])
        .end();
    [rank0, rank1]
}
