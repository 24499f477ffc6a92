//! The machine view of a long-lived service (`hark serve`): every job's time
//! slices laid on wall-clock seconds shared by all jobs, per node, so that
//! jobs on the same nodes can be read side by side (`docs/analyses.md`,
//! "The machine view").
//!
//! [`Machine`] is the fold. It is fed whole models ([`Machine::record`]): a
//! running job's snapshot, then its finished model, each replacing the
//! job's earlier contribution, so a job is counted once whatever the
//! number of snapshots. A slice `[origin + i·w, origin + (i+1)·w)` of a
//! program's `timeslices` (`origin_ns` is ns since the epoch on the
//! server's clock) is spread over the seconds it overlaps in proportion to
//! the overlap; each rank's share goes to the node its `rank_info` names.
//!
//! From the seconds it reads two things: **interference** (a job whose
//! rate drops in the seconds another job was busy on its nodes,
//! [`Machine::interference`]) and **node anomalies** (a node whose rate
//! for one program stays below its peers' in every job of that program,
//! [`Machine::anomalies`]). The rules and thresholds are written, with
//! why, in `docs/analyses.md`.
//!
//! Memory is bounded by a window ([`WINDOW_S`]) that ends at the service's
//! clock: older seconds are dropped as jobs are recorded (and seconds more
//! than a minute ahead of it never taken in), and a job
//! with no second left is forgotten. What is kept is at most jobs × their
//! nodes × the window's seconds, ten numbers each, and never more than
//! [`MAX_CELLS`] cells: on many nodes the window shortens.

use hark_model::{Finding, Run};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The page `hark serve --http` serves at `/machine`: the map, coloured
/// by a chosen figure, the jobs over it, and the two tables; its script
/// and style inline.
pub const PAGE: &str = include_str!("machine.html");

/// Seconds the fold keeps: one hour.
pub const WINDOW_S: u64 = 3600;

/// Cells the fold keeps at most, over every job: past it, the oldest
/// seconds go first (about 100 bytes a cell: 100 MB at most).
pub const MAX_CELLS: usize = 1 << 20;

/// The longest span one [`Machine::view`] answers, in seconds (the cells
/// of one figure over every node).
pub const MAX_SPAN_S: u64 = 3600;

/// A rate at most this share of the job's rate alone is a drop (a 30 %
/// drop: well beyond the few percent a job varies by on its own).
pub const DROP: f64 = 0.3;

/// Seconds needed on each side (overlapped, alone) before a drop is
/// believed: one second is one slice's noise.
pub const MIN_SECONDS: usize = 2;

// What a cell holds, per job, node and second.
const COMM_BYTES: usize = 0;
const COMM_NS: usize = 1;
const IO_BYTES: usize = 2;
const IO_NS: usize = 3;
const CPU_ON_NS: usize = 4;
const CPU_WAIT_NS: usize = 5;
const DISK_BYTES: usize = 6;
const NETWORK_BYTES: usize = 7;
const BUSY_TICKS: usize = 8;
const TICKS: usize = 9;
const CELL: usize = 10;

type Cell = [f64; CELL];

/// Per second and node, the jobs measured there.
type Present = HashMap<(u64, u32), Vec<u64>>;

/// Time slice metrics (`docs/profile-json.md`) and the cell field each adds to.
const METRICS: &[(&str, usize)] = &[
    ("p2p_bytes", COMM_BYTES),
    ("collective_bytes", COMM_BYTES),
    ("mpi_time_ns", COMM_NS),
    ("io_bytes", IO_BYTES),
    ("io_time_ns", IO_NS),
    ("cpu.on_cpu_ns", CPU_ON_NS),
    ("cpu.runnable_wait_ns", CPU_WAIT_NS),
    ("node.disk.read_bytes", DISK_BYTES),
    ("node.disk.written_bytes", DISK_BYTES),
    ("node.network.in_bytes", NETWORK_BYTES),
    ("node.network.out_bytes", NETWORK_BYTES),
    ("node.cpu.user_ticks", BUSY_TICKS),
    ("node.cpu.system_ticks", BUSY_TICKS),
    ("node.cpu.user_ticks", TICKS),
    ("node.cpu.system_ticks", TICKS),
    ("node.cpu.idle_ticks", TICKS),
    ("node.cpu.iowait_ticks", TICKS),
    ("node.cpu.steal_ticks", TICKS),
];

/// What a job's rate is measured in, for interference and anomalies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// CPU availability: time on a CPU over time on a CPU or runnable.
    Cpu,
    /// I/O: bytes per second spent in I/O calls.
    Io,
    /// Communication: bytes sent per second spent in MPI.
    Comm,
}

const KINDS: [Kind; 3] = [Kind::Cpu, Kind::Io, Kind::Comm];

impl Kind {
    /// `cpu`, `io` or `comm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Io => "io",
            Kind::Comm => "comm",
        }
    }

    /// The (work, time) pair whose ratio is the rate.
    fn parts(self, c: &Cell) -> (f64, f64) {
        match self {
            Kind::Cpu => (c[CPU_ON_NS], c[CPU_ON_NS] + c[CPU_WAIT_NS]),
            Kind::Io => (c[IO_BYTES], c[IO_NS]),
            Kind::Comm => (c[COMM_BYTES], c[COMM_NS]),
        }
    }

    /// The job does enough of it in a second for its rate there to count:
    /// 100 ms of CPU demand, 10 ms in I/O or MPI calls.
    fn active(self, c: &Cell) -> bool {
        let (work, time) = self.parts(c);
        match self {
            Kind::Cpu => time >= 100e6,
            Kind::Io | Kind::Comm => time >= 10e6 && work > 0.0,
        }
    }

    /// Another job is busy with it on a node in a second: a quarter of a
    /// CPU; 100 ms in I/O calls or 1 MiB read or written; 1 MiB sent.
    fn busy(self, c: &Cell) -> bool {
        match self {
            Kind::Cpu => c[CPU_ON_NS] >= 250e6,
            Kind::Io => c[IO_NS] >= 100e6 || c[IO_BYTES] >= 1048576.0,
            Kind::Comm => c[COMM_BYTES] >= 1048576.0,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Kind::Cpu => "of its CPU demand on a CPU",
            Kind::Io => "MB/s in I/O calls",
            Kind::Comm => "MB/s in MPI",
        }
    }

    fn shown(self, rate: f64) -> String {
        match self {
            Kind::Cpu => format!("{:.0} %", rate * 100.0),
            Kind::Io | Kind::Comm => format!("{:.1}", rate / 1e6 * 1e9),
        }
    }
}

/// The figures a view's cells can be coloured by.
pub const FIGURES: &[&str] = &[
    "cpus",
    "cpu_wait",
    "comm_bytes",
    "io_bytes",
    "disk_bytes",
    "network_bytes",
    "node_busy",
];

/// A job as the service knows it, beside its model.
#[derive(Clone, Debug, PartialEq)]
pub struct JobMeta {
    /// The service's number for it.
    pub id: u64,
    /// Its name (`HARK_JOB`, the launcher's id).
    pub name: String,
    /// Its owner's uid (`None`: the TCP site).
    pub owner: Option<u32>,
    /// Still running: recorded from a snapshot.
    pub running: bool,
}

struct JobRec {
    meta: JobMeta,
    programs: Vec<String>,
    cells: BTreeMap<(u64, u32), Cell>,
}

/// The fold over every job of a service. See the module documentation.
#[derive(Default)]
pub struct Machine {
    nodes: Vec<String>,
    node_ids: HashMap<String, u32>,
    jobs: BTreeMap<u64, JobRec>,
    newest_s: u64,
}

/// One drop of a job's rate while others were busy on its nodes; the
/// others by number (`By = u64`), or as the asker may read them
/// (`By = Named`, in a [`MachineView`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interference<By = u64> {
    /// The job whose rate dropped.
    pub job: u64,
    /// In what.
    pub kind: Kind,
    /// The jobs busy on its nodes in those seconds, most seconds first.
    pub by: Vec<By>,
    /// The overlapped seconds, as inclusive ranges `[from, to]` of
    /// seconds since the epoch.
    pub seconds: Vec<[u64; 2]>,
    /// Its rate in the seconds no other job was busy on its nodes.
    pub rate_alone: f64,
    /// Its rate in the overlapped seconds.
    pub rate_overlapped: f64,
    /// How many seconds of each.
    pub alone_s: usize,
    /// See `alone_s`.
    pub overlapped_s: usize,
    /// Time lost, ns: what the overlapped seconds' work would have taken
    /// at the rate alone, subtracted from what it took.
    pub lost_ns: u64,
}

impl Interference {
    /// The same, the other jobs named by `name`.
    pub fn name_by(self, name: impl FnMut(u64) -> Named) -> Interference<Named> {
        Interference {
            job: self.job,
            kind: self.kind,
            by: self.by.into_iter().map(name).collect(),
            seconds: self.seconds,
            rate_alone: self.rate_alone,
            rate_overlapped: self.rate_overlapped,
            alone_s: self.alone_s,
            overlapped_s: self.overlapped_s,
            lost_ns: self.lost_ns,
        }
    }
}

/// A node whose rate for one program stayed below its peers' in every
/// job of that program that ran there with peers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Anomaly {
    /// The node.
    pub node: String,
    /// The programs of the jobs, joined by ` : `.
    pub program: String,
    /// In what.
    pub kind: Kind,
    /// The jobs, by number.
    pub jobs: Vec<u64>,
    /// Its rate over the median of its peers', per job, in order.
    pub ratios: Vec<f64>,
}

/// Who a view names: a job the asker may see, or "another job".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Named {
    /// The job's number, when the asker may see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// `job N (name)`, or `another job`.
    pub label: String,
}

/// A job drawn over the map.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobView {
    /// Who it is.
    #[serde(flatten)]
    pub who: Named,
    /// Its programs, when the asker may see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub programs: Option<Vec<String>>,
    /// Still running.
    pub running: bool,
    /// The nodes it used (indices into the view's `nodes`).
    pub nodes: Vec<usize>,
    /// Its first and last second (since the epoch).
    pub first_s: u64,
    /// See `first_s`.
    pub last_s: u64,
}

/// `GET /api/machine`: nodes × seconds coloured by one figure, the jobs
/// over it, interference and node anomalies (`docs/api.md`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineView {
    /// First second shown (since the epoch).
    pub from_s: u64,
    /// One past the last second shown.
    pub to_s: u64,
    /// The figure of `cells` (one of [`FIGURES`]).
    pub figure: String,
    /// Seconds the service keeps ([`WINDOW_S`]).
    pub window_s: u64,
    /// Node names, in order of first appearance.
    pub nodes: Vec<String>,
    /// Per node, per second from `from_s`: the figure (`null`: no job
    /// measured anything there).
    pub cells: Vec<Vec<Option<f64>>>,
    /// The jobs with a second in the span.
    pub jobs: Vec<JobView>,
    /// Drops of the asker's jobs' rates while another job was busy.
    pub interference: Vec<Interference<Named>>,
    /// Nodes worse than their peers, over the asker's jobs.
    pub anomalies: Vec<Anomaly>,
}

impl Machine {
    /// Records `run`, the model of job `meta` so far (or final), in place
    /// of what the job gave before; then forgets what fell out of the
    /// window.
    /// `now_s` is the service's clock (seconds since the epoch): the
    /// window ends there, and seconds more than a minute past it (a clock
    /// gone wrong) are left out.
    pub fn record(&mut self, meta: JobMeta, run: &Run, now_s: u64) {
        let mut cells: BTreeMap<(u64, u32), Cell> = BTreeMap::new();
        for p in &run.programs {
            let ts = &p.timeslices;
            if ts.slice_ns == 0 {
                continue;
            }
            let hosts: Vec<u32> = p.rank_info.iter().map(|r| self.node_id(&r.host)).collect();
            for &(metric, field) in METRICS {
                let Some(ranks) = ts.metrics.get(metric) else {
                    continue;
                };
                for (rank, slices) in ranks.iter().enumerate() {
                    let Some(&node) = hosts.get(rank) else {
                        continue;
                    };
                    for (i, &v) in slices.iter().enumerate() {
                        if v == 0 {
                            continue;
                        }
                        let start = ts.origin_ns + i as u64 * ts.slice_ns;
                        spread(start, ts.slice_ns, v as f64, |s, share| {
                            cells.entry((s, node)).or_insert([0.0; CELL])[field] += share;
                        });
                    }
                }
            }
        }
        cells.split_off(&(now_s + 60, 0));
        self.newest_s = self.newest_s.max(now_s);
        let programs = run.programs.iter().map(|p| p.name.clone()).collect();
        self.jobs.insert(
            meta.id,
            JobRec {
                meta,
                programs,
                cells,
            },
        );
        self.prune();
    }

    /// Forgets a job that was never measured (no model to give).
    pub fn forget(&mut self, id: u64) {
        self.jobs.remove(&id);
    }

    /// The latest `now_s` a job was recorded at: where the window ends.
    pub fn newest_s(&self) -> u64 {
        self.newest_s
    }

    fn prune(&mut self) {
        let mut oldest = self.newest_s.saturating_sub(WINDOW_S);
        loop {
            for job in self.jobs.values_mut() {
                job.cells = job.cells.split_off(&(oldest, 0));
            }
            let cells: usize = self.jobs.values().map(|j| j.cells.len()).sum();
            if cells <= MAX_CELLS {
                break;
            }
            // Many nodes: a shorter window, a minute at a time.
            oldest += 60;
        }
        self.jobs
            .retain(|_, j| !j.cells.is_empty() || j.meta.running);
    }

    fn node_id(&mut self, host: &str) -> u32 {
        if let Some(&id) = self.node_ids.get(host) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(host.to_string());
        self.node_ids.insert(host.to_string(), id);
        id
    }

    /// Every drop of job `job`'s rates while another job was busy on its
    /// nodes (`docs/analyses.md`, "Interference").
    pub fn interference(&self, job: u64) -> Vec<Interference> {
        self.interference_with(job, &self.present())
    }

    /// Which jobs measured something per second and node: what a job's
    /// seconds are compared against, built once for many jobs.
    fn present(&self) -> Present {
        let mut present = Present::new();
        for job in self.jobs.values() {
            for &key in job.cells.keys() {
                present.entry(key).or_default().push(job.meta.id);
            }
        }
        present
    }

    fn interference_with(&self, job: u64, present: &Present) -> Vec<Interference> {
        let Some(me) = self.jobs.get(&job) else {
            return Vec::new();
        };
        // Per second: the nodes it used and its cell summed over them.
        let mut mine: BTreeMap<u64, (Vec<u32>, Cell)> = BTreeMap::new();
        for (&(s, node), c) in &me.cells {
            let e = mine.entry(s).or_insert_with(|| (Vec::new(), [0.0; CELL]));
            e.0.push(node);
            add(&mut e.1, c);
        }
        let mut found = Vec::new();
        for kind in KINDS {
            let mut alone = (0.0, 0.0, 0usize);
            let mut over = (0.0, 0.0, 0usize);
            let mut seconds = Vec::new();
            let mut by: BTreeMap<u64, usize> = BTreeMap::new();
            for (&s, (nodes, cell)) in &mine {
                if !kind.active(cell) {
                    continue;
                }
                let mut busy: Vec<u64> = nodes
                    .iter()
                    .flat_map(|&n| {
                        let here = present.get(&(s, n)).map_or(&[][..], Vec::as_slice);
                        here.iter()
                            .filter(move |&&o| {
                                o != job
                                    && self.jobs[&o]
                                        .cells
                                        .get(&(s, n))
                                        .is_some_and(|c| kind.busy(c))
                            })
                            .copied()
                    })
                    .collect();
                busy.sort_unstable();
                busy.dedup();
                let (work, time) = kind.parts(cell);
                let side = if busy.is_empty() {
                    &mut alone
                } else {
                    seconds.push(s);
                    for b in busy {
                        *by.entry(b).or_default() += 1;
                    }
                    &mut over
                };
                side.0 += work;
                side.1 += time;
                side.2 += 1;
            }
            if alone.2 < MIN_SECONDS || over.2 < MIN_SECONDS || alone.1 <= 0.0 || over.1 <= 0.0 {
                continue;
            }
            let (rate_alone, rate_over) = (alone.0 / alone.1, over.0 / over.1);
            if rate_alone <= 0.0 || rate_over > (1.0 - DROP) * rate_alone {
                continue;
            }
            let mut by: Vec<(u64, usize)> = by.into_iter().collect();
            by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            found.push(Interference {
                job,
                kind,
                by: by.into_iter().map(|(j, _)| j).collect(),
                seconds: ranges(&seconds),
                rate_alone,
                rate_overlapped: rate_over,
                alone_s: alone.2,
                overlapped_s: over.2,
                lost_ns: (over.1 - over.0 / rate_alone).max(0.0) as u64,
            });
        }
        found
    }

    /// The digest findings of job `job`'s interference, naming the other
    /// job where `may_name` allows (its owner is the asker's) and "another
    /// job" otherwise. Their severity is the digest's: the time lost as a
    /// share of `rank_ns`, the job's rank time (`high` from 10 %, `medium`
    /// from 3 %).
    pub fn findings(
        &self,
        job: u64,
        may_name: &dyn Fn(Option<u32>) -> bool,
        rank_ns: u64,
    ) -> Vec<Finding> {
        let total_ns = rank_ns as f64;
        self.interference(job)
            .into_iter()
            .map(|i| {
                let names: Vec<String> = i
                    .by
                    .iter()
                    .map(|&b| self.named(b, may_name).label)
                    .collect();
                let share = if total_ns > 0.0 {
                    i.lost_ns as f64 / total_ns
                } else {
                    0.0
                };
                Finding {
                    severity: if share >= 0.10 {
                        "high"
                    } else if share >= 0.03 {
                        "medium"
                    } else {
                        "low"
                    }
                    .into(),
                    title: format!("Interfered with by {}", list(&names)),
                    detail: format!(
                        "In {} s while {} was busy on the same nodes ({}), this job's {} rate fell to {} {} from {} in its {} s alone; look at the machine view (hark serve --http, /machine).",
                        i.overlapped_s,
                        list(&names),
                        i.seconds
                            .iter()
                            .map(|[a, b]| format!("{a}–{b}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        i.kind.as_str(),
                        i.kind.shown(i.rate_overlapped),
                        i.kind.unit(),
                        i.kind.shown(i.rate_alone),
                        i.alone_s,
                    ),
                    time_ns: i.lost_ns,
                }
            })
            .collect()
    }

    fn named(&self, id: u64, may: &dyn Fn(Option<u32>) -> bool) -> Named {
        match self.jobs.get(&id) {
            Some(j) if may(j.meta.owner) => Named {
                id: Some(id),
                label: format!("job {id} ({})", j.meta.name),
            },
            _ => Named {
                id: None,
                label: "another job".into(),
            },
        }
    }

    /// Nodes whose rate for one program stayed below 70 % of the median
    /// of their peers' in every job of it (at least two) in which they
    /// had peers, over the jobs `may` allows (`docs/analyses.md`, "Node
    /// anomalies").
    pub fn anomalies(&self, may: &dyn Fn(Option<u32>) -> bool) -> Vec<Anomaly> {
        // (program, kind, node) → (job, ratio) per job with peers.
        let mut seen: BTreeMap<(String, Kind, u32), Vec<(u64, f64)>> = BTreeMap::new();
        for job in self.jobs.values().filter(|j| may(j.meta.owner)) {
            let program = job.programs.join(" : ");
            let mut per_node: BTreeMap<u32, Cell> = BTreeMap::new();
            for (&(_, n), c) in &job.cells {
                add(per_node.entry(n).or_insert([0.0; CELL]), c);
            }
            for kind in KINDS {
                let rates: Vec<(u32, f64)> = per_node
                    .iter()
                    .filter_map(|(&n, c)| {
                        let (work, time) = kind.parts(c);
                        (kind_total_active(kind, time) && time > 0.0).then(|| (n, work / time))
                    })
                    .collect();
                if rates.len() < 2 {
                    continue;
                }
                for &(n, rate) in &rates {
                    let mut peers: Vec<f64> =
                        rates.iter().filter(|r| r.0 != n).map(|r| r.1).collect();
                    peers.sort_by(f64::total_cmp);
                    let median = peers[peers.len() / 2];
                    if median > 0.0 {
                        seen.entry((program.clone(), kind, n))
                            .or_default()
                            .push((job.meta.id, rate / median));
                    }
                }
            }
        }
        seen.into_iter()
            .filter(|(_, jobs)| jobs.len() >= 2 && jobs.iter().all(|j| j.1 < 1.0 - DROP))
            .map(|((program, kind, n), jobs)| Anomaly {
                node: self.nodes[n as usize].clone(),
                program,
                kind,
                jobs: jobs.iter().map(|j| j.0).collect(),
                ratios: jobs.iter().map(|j| j.1).collect(),
            })
            .collect()
    }

    /// The view of seconds `[from_s, to_s)` coloured by `figure` for an
    /// asker whom `may` allows to see the jobs of some owners; `Err` says
    /// what is wrong with the question.
    pub fn view(
        &self,
        from_s: u64,
        to_s: u64,
        figure: &str,
        may: &dyn Fn(Option<u32>) -> bool,
    ) -> Result<MachineView, String> {
        if !FIGURES.contains(&figure) {
            return Err(format!(
                "unknown figure {figure:?}: give one of {}",
                FIGURES.join(", ")
            ));
        }
        if to_s <= from_s || to_s - from_s > MAX_SPAN_S {
            return Err(format!(
                "from={from_s} to={to_s}: give seconds since the epoch with from < to and at most {MAX_SPAN_S} s between them"
            ));
        }
        let width = (to_s - from_s) as usize;
        let mut sums: Vec<Vec<Option<Cell>>> = vec![vec![None; width]; self.nodes.len()];
        let mut jobs = Vec::new();
        let mut interference = Vec::new();
        let present = self.present();
        for job in self.jobs.values() {
            let mut used = Vec::new();
            let (mut first, mut last) = (u64::MAX, 0);
            for (&(s, n), c) in job.cells.range((from_s, 0)..(to_s, 0)) {
                let slot = sums[n as usize][(s - from_s) as usize].get_or_insert([0.0; CELL]);
                for f in 0..CELL {
                    // Sensors read the node itself: every job on it reads the same.
                    slot[f] = if f >= DISK_BYTES {
                        slot[f].max(c[f])
                    } else {
                        slot[f] + c[f]
                    };
                }
                if !used.contains(&(n as usize)) {
                    used.push(n as usize);
                }
                first = first.min(s);
                last = last.max(s);
            }
            if used.is_empty() {
                continue;
            }
            used.sort_unstable();
            let visible = may(job.meta.owner);
            jobs.push(JobView {
                who: self.named(job.meta.id, may),
                programs: visible.then(|| job.programs.clone()),
                running: job.meta.running,
                nodes: used,
                first_s: first,
                last_s: last,
            });
            if visible {
                interference.extend(
                    self.interference_with(job.meta.id, &present)
                        .into_iter()
                        .map(|i| i.name_by(|b| self.named(b, may))),
                );
            }
        }
        let cells = sums
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| c.and_then(|c| figure_of(figure, &c)))
                    .collect()
            })
            .collect();
        Ok(MachineView {
            from_s,
            to_s,
            figure: figure.into(),
            window_s: WINDOW_S,
            nodes: self.nodes.clone(),
            cells,
            jobs,
            interference,
            anomalies: self.anomalies(may),
        })
    }
}

/// Enough of `kind` over a whole job on one node for its rate to be
/// compared: a CPU-second, or 100 ms in calls.
fn kind_total_active(kind: Kind, time: f64) -> bool {
    match kind {
        Kind::Cpu => time >= 1e9,
        Kind::Io | Kind::Comm => time >= 100e6,
    }
}

fn figure_of(figure: &str, c: &Cell) -> Option<f64> {
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    match figure {
        "cpus" => Some(c[CPU_ON_NS] / 1e9),
        "cpu_wait" => ratio(c[CPU_WAIT_NS], c[CPU_ON_NS] + c[CPU_WAIT_NS]),
        "comm_bytes" => Some(c[COMM_BYTES]),
        "io_bytes" => Some(c[IO_BYTES]),
        "disk_bytes" => Some(c[DISK_BYTES]),
        "network_bytes" => Some(c[NETWORK_BYTES]),
        "node_busy" => ratio(c[BUSY_TICKS], c[TICKS]),
        _ => None,
    }
}

fn add(into: &mut Cell, c: &Cell) {
    for (a, b) in into.iter_mut().zip(c) {
        *a += b;
    }
}

/// Calls `to(second, share)` for every second `[start, start + width)`
/// overlaps, `share` the part of `value` that falls in it.
fn spread(start: u64, width: u64, value: f64, mut to: impl FnMut(u64, f64)) {
    const S: u64 = 1_000_000_000;
    let end = start + width;
    let mut s = start / S;
    while s * S < end {
        let overlap = end.min((s + 1) * S) - start.max(s * S);
        to(s, value * overlap as f64 / width as f64);
        s += 1;
    }
}

fn ranges(seconds: &[u64]) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = Vec::new();
    for &s in seconds {
        match out.last_mut() {
            Some(r) if r[1] + 1 == s => r[1] = s,
            _ => out.push([s, s]),
        }
    }
    out
}

fn list(names: &[String]) -> String {
    let mut names = names.to_vec();
    names.dedup();
    match names.as_slice() {
        [] => "another job".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{Program, RankInfo, TimeSlices};

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_700_000_000;
    /// The service's clock when the tests' jobs are recorded.
    const NOW: u64 = T0 + 100;

    /// A job of one program: per rank its host and, per second from
    /// `start` (seconds since the epoch), its metrics.
    /// One second's metrics of one rank.
    type Second = &'static [(&'static str, u64)];

    fn run(program: &str, start: u64, ranks: &[(&str, Vec<Second>)]) -> Run {
        let mut metrics: BTreeMap<String, Vec<Vec<u64>>> = BTreeMap::new();
        let seconds = ranks.iter().map(|r| r.1.len()).max().unwrap_or(0);
        for (r, (_, per_second)) in ranks.iter().enumerate() {
            for (i, slice) in per_second.iter().enumerate() {
                for &(m, v) in slice.iter() {
                    let rows = metrics
                        .entry(m.to_string())
                        .or_insert_with(|| vec![vec![0; seconds]; ranks.len()]);
                    rows[r][i] = v;
                }
            }
        }
        Run {
            programs: vec![Program {
                name: program.into(),
                ranks: ranks.len(),
                rank_info: ranks
                    .iter()
                    .map(|(h, _)| RankInfo {
                        host: h.to_string(),
                        ..RankInfo::default()
                    })
                    .collect(),
                timeslices: TimeSlices {
                    slice_ns: S,
                    origin_ns: start * S,
                    metrics,
                },
                ..Program::default()
            }],
            ..Run::default()
        }
    }

    fn meta(id: u64, owner: u32) -> JobMeta {
        JobMeta {
            id,
            name: format!("j{id}"),
            owner: Some(owner),
            running: false,
        }
    }

    const ALONE: &[(&str, u64)] = &[
        ("cpu.on_cpu_ns", 900_000_000),
        ("cpu.runnable_wait_ns", 100_000_000),
    ];
    const SQUEEZED: &[(&str, u64)] = &[
        ("cpu.on_cpu_ns", 400_000_000),
        ("cpu.runnable_wait_ns", 600_000_000),
    ];
    const HOG: &[(&str, u64)] = &[("cpu.on_cpu_ns", 600_000_000)];

    #[test]
    fn a_slice_is_spread_over_the_seconds_it_overlaps() {
        let mut got = Vec::new();
        spread(S / 2, 2 * S, 100.0, |s, v| got.push((s, v)));
        assert_eq!(got, vec![(0, 25.0), (1, 50.0), (2, 25.0)]);
        let mut got = Vec::new();
        spread(3 * S + 10, S / 4, 8.0, |s, v| got.push((s, v)));
        assert_eq!(got, vec![(3, 8.0)]);
    }

    /// Job 1 (owner 100) on n1, squeezed in its seconds 3 to 5 by job 2
    /// (owner 200), a hog on the same node in those seconds.
    fn squeezed_on_n1() -> Machine {
        let mut m = Machine::default();
        let victim = vec![
            ALONE, ALONE, ALONE, SQUEEZED, SQUEEZED, SQUEEZED, ALONE, ALONE,
        ];
        m.record(meta(1, 100), &run("v", T0, &[("n1", victim)]), NOW);
        m.record(
            meta(2, 200),
            &run("hog", T0 + 3, &[("n1", vec![HOG; 3])]),
            NOW,
        );
        m
    }

    #[test]
    fn a_job_slowed_while_another_is_busy_on_its_node_is_flagged_naming_it() {
        let m = squeezed_on_n1();
        let found = m.interference(1);
        assert_eq!(found.len(), 1, "{found:?}");
        let i = &found[0];
        assert_eq!((i.kind, i.by.clone()), (Kind::Cpu, vec![2]));
        assert_eq!(i.seconds, vec![[T0 + 3, T0 + 5]]);
        assert_eq!((i.alone_s, i.overlapped_s), (5, 3));
        assert!((i.rate_alone - 0.9).abs() < 1e-9 && (i.rate_overlapped - 0.4).abs() < 1e-9);
        // The hog ran only while the victim did: nothing alone to compare.
        assert!(m.interference(2).is_empty());
        // Its owner reads the other user's job as "another job"; an admin by name.
        let own = m.findings(1, &|o| o == Some(100), 8_000_000_000);
        // 1.5 s lost of 8 s.
        assert_eq!(own[0].severity, "high");
        assert_eq!(own[0].title, "Interfered with by another job");
        let admin = m.findings(1, &|_| true, 100_000_000_000);
        assert_eq!(admin[0].severity, "low");
        assert_eq!(admin[0].title, "Interfered with by job 2 (j2)");
    }

    #[test]
    fn io_and_communication_rates_are_compared_the_same_way() {
        // 100 MB in 0.1 s of calls alone, in 0.5 s beside the other job.
        const WRITES: Second = &[("io_bytes", 100 << 20), ("io_time_ns", 100_000_000)];
        const SLOW: Second = &[("io_bytes", 100 << 20), ("io_time_ns", 500_000_000)];
        const SENDS: Second = &[("p2p_bytes", 100 << 20), ("mpi_time_ns", 100_000_000)];
        const SLOW_SENDS: Second = &[("p2p_bytes", 100 << 20), ("mpi_time_ns", 500_000_000)];
        const FLOOD: Second = &[("io_bytes", 1 << 30), ("collective_bytes", 1 << 30)];
        let mut m = Machine::default();
        let io = vec![WRITES, WRITES, SLOW, SLOW, WRITES, WRITES];
        let comm = vec![SENDS, SENDS, SLOW_SENDS, SLOW_SENDS, SENDS, SENDS];
        m.record(meta(1, 100), &run("io", T0, &[("n1", io)]), NOW);
        m.record(meta(2, 100), &run("mpi", T0, &[("n1", comm)]), NOW);
        m.record(
            meta(3, 100),
            &run("flood", T0 + 2, &[("n1", vec![FLOOD; 2])]),
            NOW,
        );
        let kinds = |job| {
            m.interference(job)
                .iter()
                .map(|i| (i.kind, i.by.clone(), i.seconds.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(1), vec![(Kind::Io, vec![3], vec![[T0 + 2, T0 + 3]])]);
        assert_eq!(
            kinds(2),
            vec![(Kind::Comm, vec![3], vec![[T0 + 2, T0 + 3]])]
        );
        let i = &m.interference(1)[0];
        // Each slow second took 0.4 s more than at the rate alone.
        assert_eq!(i.lost_ns, 800_000_000);
    }

    #[test]
    fn no_flag_without_a_drop_on_another_node_or_alone() {
        let steady = vec![ALONE; 8];
        // The same victim, but the hog is on another node.
        let mut m = Machine::default();
        let victim = vec![
            ALONE, ALONE, ALONE, SQUEEZED, SQUEEZED, SQUEEZED, ALONE, ALONE,
        ];
        m.record(meta(1, 100), &run("v", T0, &[("n1", victim.clone())]), NOW);
        m.record(
            meta(2, 100),
            &run("hog", T0 + 3, &[("n2", vec![HOG; 3])]),
            NOW,
        );
        assert!(m.interference(1).is_empty());
        // On its node but no drop.
        let mut m = Machine::default();
        m.record(meta(1, 100), &run("v", T0, &[("n1", steady)]), NOW);
        m.record(
            meta(2, 100),
            &run("hog", T0 + 3, &[("n1", vec![HOG; 3])]),
            NOW,
        );
        assert!(m.interference(1).is_empty());
        // Alone, however much its rate varies.
        let mut m = Machine::default();
        m.record(meta(1, 100), &run("v", T0, &[("n1", victim)]), NOW);
        assert!(m.interference(1).is_empty());
    }

    #[test]
    fn a_snapshot_is_replaced_by_the_next_and_old_seconds_leave_the_window() {
        let mut m = Machine::default();
        m.record(meta(1, 100), &run("a", T0, &[("n1", vec![HOG; 4])]), NOW);
        m.record(meta(1, 100), &run("a", T0, &[("n1", vec![HOG; 4])]), NOW);
        let v = m.view(T0, T0 + 4, "cpus", &|_| true).unwrap();
        assert_eq!(v.cells, vec![vec![Some(0.6); 4]]);
        m.record(
            meta(2, 100),
            &run("b", T0 + WINDOW_S + 2, &[("n1", vec![HOG])]),
            T0 + WINDOW_S + 2,
        );
        let v = m.view(T0, T0 + 4, "cpus", &|_| true).unwrap();
        assert_eq!(v.cells, vec![vec![None, None, Some(0.6), Some(0.6)]]);
        // A job whose clock says it ran a day ahead of the service's moves
        // no window and shows nowhere.
        m.record(
            meta(3, 100),
            &run("c", T0 + 86_400, &[("n1", vec![HOG])]),
            T0 + WINDOW_S + 2,
        );
        assert_eq!(m.newest_s(), T0 + WINDOW_S + 2);
        assert!(!m.jobs.contains_key(&3));
        assert!(m.view(T0, T0 + MAX_SPAN_S + 1, "cpus", &|_| true).is_err());
        assert!(m.view(T0, T0 + 1, "nonsense", &|_| true).is_err());
    }

    #[test]
    fn past_max_cells_the_oldest_seconds_go_first() {
        let mut m = Machine::default();
        let hosts: Vec<String> = (0..400).map(|n| format!("n{n}")).collect();
        let ranks: Vec<(&str, Vec<Second>)> = hosts
            .iter()
            .map(|h| (h.as_str(), vec![HOG; 2700]))
            .collect();
        m.record(meta(1, 100), &run("wide", T0, &ranks), T0 + 2700);
        let cells: usize = m.jobs.values().map(|j| j.cells.len()).sum();
        assert!(
            cells <= MAX_CELLS && cells > MAX_CELLS - 400 * 60,
            "{cells}"
        );
        let kept = m.jobs[&1].cells.keys().next().unwrap().0;
        assert_eq!(m.newest_s(), T0 + 2700);
        assert_eq!((kept + WINDOW_S - m.newest_s()) % 60, 0, "{kept}");
    }

    #[test]
    fn the_view_hides_other_users_jobs_but_draws_them() {
        let m = squeezed_on_n1();
        let v = m
            .view(T0, T0 + 10, "cpu_wait", &|o| o == Some(100))
            .unwrap();
        let text = serde_json::to_string(&v).unwrap();
        assert!(
            !text.contains("hog") && !text.contains("\"id\":2"),
            "{text}"
        );
        assert_eq!(v.jobs[1].who.label, "another job");
        assert_eq!((v.jobs[1].first_s, v.jobs[1].last_s), (T0 + 3, T0 + 5));
        assert_eq!(v.interference.len(), 1);
        assert_eq!(v.interference[0].by[0].label, "another job");
        // The hog's owner sees no one's interference but none of theirs.
        let v = m.view(T0, T0 + 10, "cpus", &|o| o == Some(200)).unwrap();
        assert!(v.interference.is_empty());
        assert_eq!(v.cells[0][3], Some(1.0));
    }

    #[test]
    fn a_node_worse_than_its_peers_in_every_job_of_a_program_is_named() {
        let mut m = Machine::default();
        for id in 1..=3 {
            m.record(
                meta(id, 100),
                &run(
                    "solver",
                    T0 + 10 * id,
                    &[
                        ("n1", vec![ALONE; 3]),
                        ("n2", vec![ALONE; 3]),
                        ("n3", vec![SQUEEZED; 3]),
                    ],
                ),
                NOW,
            );
        }
        // Once worse, once not: not named.
        m.record(
            meta(4, 100),
            &run(
                "other",
                T0 + 50,
                &[("n1", vec![SQUEEZED; 3]), ("n2", vec![ALONE; 3])],
            ),
            NOW,
        );
        m.record(
            meta(5, 100),
            &run(
                "other",
                T0 + 60,
                &[("n1", vec![ALONE; 3]), ("n2", vec![ALONE; 3])],
            ),
            NOW,
        );
        let a = m.anomalies(&|_| true);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(
            (a[0].node.as_str(), a[0].program.as_str(), a[0].kind),
            ("n3", "solver", Kind::Cpu)
        );
        assert_eq!(a[0].jobs, vec![1, 2, 3]);
        // Another user sees none of it: the jobs are not theirs.
        assert!(m.anomalies(&|o| o == Some(7)).is_empty());
    }
}
