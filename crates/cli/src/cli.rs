//! The command line: every subcommand, option and help text.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  hark run -- mpirun -np 4 ./app input.dat            measure an MPI program
  hark run -- mpirun -np 2 ./ocean : -np 2 ./atmos    two programs, one report
  hark run -- ./serial_tool data.csv                  a program without MPI
  hark report hark-app-20260101-120000                render a finished run again

Each run leaves a directory hark-<program>-<timestamp>/ with summary.txt,
report.html (open it in a browser; it works offline), profile.json and
topology/*.dot.";

/// Hark measures parallel programs while they run.
///
/// A preloaded probe captures the MPI, POSIX/STDIO I/O and user-marked
/// regions of every process and streams them to an analysis server inside
/// `hark`, which reduces them into profiles, communication matrices,
/// density maps and time series. Nothing is recompiled or relinked.
#[derive(Debug, Parser)]
#[command(name = "hark", version, after_help = EXAMPLES, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments; a mistake gets clap's message with
    /// hark's tip ([`with_tips`]) and ends the process.
    pub fn parse_args() -> Cli {
        let args: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        Cli::try_parse_from(&args).unwrap_or_else(|e| with_tips(e, &args).exit())
    }
}

/// `e` with a better tip where clap's misleads: a misspelt subcommand gets
/// the closest one by [`closest_subcommand`] (`rn` is `run`, not `runs`),
/// and `hark run ls` (the command without `--`) the line it meant.
fn with_tips(mut e: clap::Error, args: &[String]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::InvalidSubcommand => {
            if let Some(best) =
                text(ContextKind::InvalidSubcommand).and_then(|t| closest_subcommand(&t))
            {
                e.insert(ContextKind::SuggestedSubcommand, ContextValue::String(best));
            }
        }
        ErrorKind::UnknownArgument
            if args.get(1).is_some_and(|a| a == "run") && !args.iter().any(|a| a == "--") =>
        {
            let at = text(ContextKind::InvalidArg)
                .filter(|a| !a.starts_with('-'))
                .and_then(|a| args.iter().skip(2).position(|w| *w == a))
                .map(|i| i + 2);
            if let Some(at) = at {
                let options: String = args[2..at].iter().map(|o| format!("{o} ")).collect();
                let tip = format!(
                    "the command to measure goes after `--`: hark run {options}-- {}",
                    args[at..].join(" ")
                );
                e.insert(
                    ContextKind::Suggested,
                    ContextValue::StyledStrs(vec![tip.into()]),
                );
            }
        }
        _ => {}
    }
    e
}

/// The visible subcommand `typed` most likely meant: the shortest that
/// starts with it, else the shortest holding its letters in order (`rn`:
/// `run`); `None` leaves clap's guess.
fn closest_subcommand(typed: &str) -> Option<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    let in_order = |name: &str| {
        let mut rest = name.chars();
        typed.chars().all(|c| rest.any(|n| n == c))
    };
    let shortest = |keep: &dyn Fn(&str) -> bool| {
        names
            .iter()
            .filter(|n| keep(n))
            .min_by_key(|n| n.len())
            .map(|n| n.to_string())
    };
    shortest(&|n| n.starts_with(typed)).or_else(|| shortest(&in_order))
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure a command: run it with the probe preloaded, then write the run
    /// directory and print the summary.
    #[command(
        after_help = RUN_EXAMPLES,
        after_long_help = RUN_LONG,
        override_usage = "hark run [OPTIONS] -- COMMAND [ARGS]..."
    )]
    Run(RunArgs),
    /// Render the summary, report.html and topology/*.dot of a finished run
    /// again from its profile.json, and print the summary.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Estimate the events, bytes per second and added time per process of
    /// measuring a program at another scale, from a short run's profile,
    /// with and without a suggested filter of instrumented functions,
    /// which it writes (RUN_DIR/filter.txt).
    #[command(after_help = ESTIMATE_EXAMPLES)]
    Estimate(EstimateArgs),
    /// Write a finished run in the formats other tools read: a Hatchet
    /// graphframe indexed by node and rank (and Thicket metadata), Parquet tables, and from its
    /// trace store (`hark run --trace`) OTF2 and Perfetto traces.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
    /// List the recorded runs (the run index), filtered by program, host and
    /// date.
    #[command(after_help = RUNS_EXAMPLES)]
    Runs(RunsArgs),
    /// Compare two runs (or repeated runs of each side): what changed, the
    /// differences that matter first.
    #[command(after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// The POP table of a scaling series: runs of one program at different
    /// rank counts (global efficiency = parallel efficiency ×
    /// computational scalability; instruction, IPC and frequency scaling
    /// where the runs counted cycles and instructions).
    #[command(after_help = SCALING_EXAMPLES)]
    Scaling(ScalingArgs),
    /// Serve a finished run's live view (the page `hark run` serves while it
    /// runs) until interrupted.
    #[command(after_help = crate::open::EXAMPLES)]
    Open(crate::open::OpenArgs),
    /// Print the profile (profile.json's schema) or the per-rank timeline of
    /// a time interval of a run directory or of a live run.
    #[command(after_help = crate::query::EXAMPLES)]
    Query(crate::query::QueryArgs),
    /// Watch a live run in the terminal (for a shell with no browser).
    #[command(after_help = crate::top::EXAMPLES)]
    Top(crate::top::TopArgs),
    /// Run a long-lived analysis service that many jobs stream into, each
    /// written to its own run directory when it ends (docs/api.md).
    #[command(after_help = crate::serve::SERVE_EXAMPLES)]
    Serve(crate::serve::ServeArgs),
    /// List, pause, resume, sample or dump the jobs of a running `hark serve`.
    #[command(after_help = crate::ctl::CTL_EXAMPLES)]
    Ctl(crate::ctl::CtlArgs),
    /// One analyser rank of an MPI job; started by `hark run --analysers`,
    /// not by hand.
    #[command(name = "mpi-analyser", hide = true)]
    MpiAnalyser(crate::mpi_analyser::AnalyserArgs),
    /// A node's forwarder (`docs/cluster.md`); started by the first
    /// measured process of a node, not by hand.
    #[command(hide = true)]
    Forward(crate::forward::ForwardArgs),
    /// A recorded run's trace store streamed again into an analysis
    /// server at full speed, for benchmarks (docs/replay.md).
    #[command(hide = true)]
    Replay(crate::replay::ReplayArgs),
}

const EXPORT_EXAMPLES: &str = "\
Examples:
  hark export hark-app-20260101-120000 --format hatchet
  hark export hark-app-20260101-120000 --format hatchet,parquet -o tables
  hark export hark-app-20260101-120000 --format otf2,perfetto";

const RUNS_EXAMPLES: &str = "\
The index is $HARK_INDEX, else $XDG_DATA_HOME/hark/runs.sqlite, else
~/.local/share/hark/runs.sqlite. `hark run` records every run in it.

Examples:
  hark runs
  hark runs --program lmp --since 2026-11-01
  hark runs --add old-runs/hark-app-20260101-120000";

/// `hark scaling`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ScalingArgs {
    /// Two or more runs (run directories or profile.json files) of one
    /// program at different rank counts; the one with the fewest ranks is
    /// the reference.
    #[arg(value_name = "RUN", required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
}

const SCALING_EXAMPLES: &str = "\
Examples:
  hark scaling run-np1 run-np2 run-np4";

const DIFF_EXAMPLES: &str = "\
Examples:
  hark diff hark-app-before hark-app-after
  hark diff run-np2 run-np4 -o diff.html
  hark diff before-1 before-2 before-3 -- after-1 after-2 after-3";

/// Formats `hark export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// OTF2 trace (from the run's trace store: `hark run --trace`).
    Otf2,
    /// Perfetto trace (from the run's trace store: `hark run --trace`).
    Perfetto,
    /// hatchet.json (GraphFrame.from_json, indexed by node and rank) and thicket-metadata.json.
    Hatchet,
    /// functions, regions, messages, one_sided and timeslices .parquet.
    Parquet,
}

impl Format {
    /// The name users write.
    pub fn name(self) -> &'static str {
        match self {
            Format::Otf2 => "otf2",
            Format::Perfetto => "perfetto",
            Format::Hatchet => "hatchet",
            Format::Parquet => "parquet",
        }
    }
}

/// Options of `hark export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A run directory, or its profile.json.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,

    /// Formats to write, comma-separated.
    #[arg(long, value_name = "FORMAT", value_delimiter = ',', required = true)]
    pub format: Vec<Format>,

    /// Write into DIR instead of the run directory.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Do not list the files written.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Options of `hark runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs with a program of this name.
    #[arg(long, value_name = "NAME")]
    pub program: Option<String>,

    /// Only runs on this host (of their first rank).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,

    /// Only runs that ended on or after this date (UTC, YYYY-MM-DD or
    /// YYYY-MM-DD HH:MM:SS).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,

    /// Only runs that ended before this time, or on or before this day.
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,

    /// Record these run directories first (runs made elsewhere).
    #[arg(long, value_name = "RUN_DIR")]
    pub add: Vec<PathBuf>,

    /// The index file.
    #[arg(long, value_name = "FILE", env = "HARK_INDEX")]
    pub index: Option<PathBuf>,

    /// Ask a `hark serve` across a network for your runs: tls:HOST:PORT,
    /// with --token-file and HARK_TLS_CA.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["index", "add"])]
    pub server: Option<String>,

    /// Your token for --server (a file of mode 0600).
    #[arg(long = "token-file", value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,
}

/// Options of `hark diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The run before and the run after (run directories or profile.json
    /// files); or, with `--`, every repeated run before the `--`.
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<PathBuf>,

    /// The repeated runs after (`hark diff A1 A2 -- B1 B2`): a change then
    /// matters only beyond the run-to-run spread of either side.
    #[arg(value_name = "RUN_AFTER", last = true)]
    pub after: Vec<PathBuf>,

    /// Also write the comparison as an HTML page.
    #[arg(short = 'o', long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

const RUN_EXAMPLES: &str = "\
Examples:
  hark run -- mpirun -np 4 ./app input.dat
  hark run --out-dir results -- mpiexec.mpich -n 4 ./app
  hark run -o lammps-run --lossless -- mpirun -np 2 lmp -in in.melt
  hark run -- mpirun -np 2 ./ocean : -np 2 ./atmos
  hark run -- ./serial_tool data.csv";

const RUN_LONG: &str = "\
Examples:
  hark run -- mpirun -np 4 ./app input.dat
      Measure an MPI program on 4 ranks; the report goes to ./hark-app-<timestamp>/.
  hark run --out-dir results -- mpiexec.mpich -n 4 ./app
      The same with MPICH, the run directory created inside ./results.
  hark run -o lammps-run --lossless -- mpirun -np 2 lmp -in in.melt
      Write into ./lammps-run exactly, and never drop an event (the program
      waits for the analysis instead).
  hark run -- mpirun -np 2 ./ocean : -np 2 ./atmos
      MPMD: both programs measured into one report, a chapter each.
  hark run -- ./serial_tool data.csv
      A program without MPI: its file I/O and regions are measured.

How it works:
  hark starts an analysis server on a Unix socket in a private temporary
  directory and runs COMMAND with LD_PRELOAD=libhark.so (after anything
  already in LD_PRELOAD) and HARK_ADDR set. Over Open MPI's mpirun, MPICH's
  Hydra and Slurm's srun, LD_PRELOAD goes to the ranks only (-x, -genv,
  --export), HARK_ADDR by name (-x NAME) or with the whole environment, and
  hark listens on TCP too, so that ranks on other nodes reach it; other
  launchers and plain programs inherit them. The probe stays passive in
  launchers and their agents. The program's own output passes through
  untouched; hark's status line and summary go to stderr.

Signals:
  Ctrl-C reaches the command directly; SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2
  sent to hark are passed on to it. Either way hark writes the run directory
  once the command has ended.

Exit status:
  The command's own exit status (128+N when a signal N ended it), always:
  if hark itself fails before the command runs (a bad setting, no probe),
  2. A run directory that cannot be written is said on stderr and does not
  change the status; hark then writes it under the temporary directory.

Signals after the command ended:
  SIGTERM, SIGINT and SIGHUP make hark stop waiting for processes still
  connected (10 s at most otherwise) and write the report at once.";

const REPORT_EXAMPLES: &str = "\
Examples:
  hark report hark-app-20260101-120000
  hark report hark-app-20260101-120000/profile.json --no-html";

const ESTIMATE_EXAMPLES: &str = "\
Examples:
  hark estimate hark-app-20260101-120000 --ranks 1024 --seconds 3600
  hark run --filter hark-app-20260101-120000/filter.txt -- ./app";

/// Options of `hark estimate`.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// A run directory, or its profile.json.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,

    /// Processes of the run to estimate (default: the run's).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks: Option<u64>,

    /// Seconds of the run to estimate (default: the run's wall time).
    #[arg(long, value_name = "S")]
    pub seconds: Option<f64>,

    /// Time the probe adds per event, in ns (default 30: BENCHMARKS.md's
    /// bound for a region's events at one rank).
    #[arg(long = "event-ns", value_name = "NS", default_value_t = 30.0)]
    pub event_ns: f64,

    /// Where to write the suggested filter (default RUN_DIR/filter.txt).
    #[arg(long = "filter-out", value_name = "FILE")]
    pub filter_out: Option<PathBuf>,
}

/// Options of `hark run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Write the run directory exactly here (created if missing; files of an
    /// earlier run in it are replaced).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        conflicts_with = "out_dir"
    )]
    pub output: Option<PathBuf>,

    /// Create the run directory hark-<program>-<timestamp>/ inside DIR.
    #[arg(long = "out-dir", value_name = "DIR", default_value = ".")]
    pub out_dir: PathBuf,

    /// Never drop events: when the analysis falls behind, the program waits
    /// (HARK_LOSSLESS=1). By default the probe drops and counts what it
    /// cannot send.
    #[arg(long)]
    pub lossless: bool,

    /// Bytes per event pack each process sends, e.g. 256K or 4M, between 4K
    /// and 64M (HARK_PACK_SIZE). Default 1M.
    #[arg(long = "pack-size", value_name = "SIZE", value_parser = parse_pack_size)]
    pub pack_size: Option<u64>,

    /// Packs each process may hold while the server catches up, 2 to 4096
    /// (HARK_BUFFERS). Default 8.
    #[arg(long, value_name = "N", value_parser = parse_buffers)]
    pub buffers: Option<u32>,

    /// Analyses to run, comma-separated (default: all). `--analyses list`
    /// prints their names.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub analyses: Vec<String>,

    /// Rows of their own for a program's first N processes without an MPI
    /// rank (a shell loop, make, a Python tool); later ones are folded into
    /// one row of exact totals, "M other processes", so that memory stays
    /// flat however many processes the run starts. At least 1. Default 1000.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rows: Option<u64>,

    /// Do not record POSIX and STDIO file I/O (HARK_IO=0).
    #[arg(long = "no-io")]
    pub no_io: bool,

    /// Performance counters to read per thread and region, as `perf list`
    /// names them, comma-separated (HARK_COUNTERS): `default` (the six
    /// software counters and cycles, instructions, cache-references,
    /// cache-misses, branch-misses where the processor's PMU is exposed),
    /// `none`, or names such as `page-faults,instructions`.
    #[arg(long, value_name = "LIST", value_parser = counter_list)]
    pub counters: Option<String>,

    /// Read the counters at the entry and exit of every MPI call, for the
    /// counts inside each MPI function (HARK_COUNTERS_IN_MPI=1); adds
    /// some µs to every call (two reads per counter group).
    #[arg(long = "counters-in-mpi")]
    pub counters_in_mpi: bool,

    /// How often one process per node reads the node's CPU, memory,
    /// network, disk and load, in ms (HARK_SENSORS_MS); 0 never. Default
    /// 1000.
    #[arg(long = "sensors-ms", value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub sensors_ms: Option<u64>,

    /// Frames of the caller's stack each MPI call records as its call site
    /// (HARK_CALLSITE_DEPTH): 1, the default, is the line that called the
    /// MPI function; more name the callers of a program's own wrappers
    /// (each frame costs an unwind: see BENCHMARKS.md). 1 to 64.
    #[arg(long = "callsite-depth", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub callsite_depth: Option<u32>,

    /// A filter file of the compiler-instrumented functions
    /// (`-finstrument-functions`) to leave out (HARK_FILTER), in Score-P's
    /// syntax: `SCOREP_REGION_NAMES_BEGIN`, `EXCLUDE`/`INCLUDE` globs,
    /// `SCOREP_REGION_NAMES_END`. `hark estimate` writes one.
    #[arg(long, value_name = "FILE")]
    pub filter: Option<PathBuf>,

    /// When to stop recording a short, often-called instrumented function
    /// (HARK_THROTTLE): `CALLS,MICROSECONDS` (default 100000,10), or `off`.
    #[arg(long, value_name = "CALLS,US")]
    pub throttle: Option<String>,

    /// The probe library to preload (default: libhark.so next to hark).
    #[arg(long, value_name = "PATH", env = "HARK_PROBE")]
    pub probe: Option<PathBuf>,

    /// Print nothing of hark's own: no status line, no summary (errors
    /// still go to stderr; the run directory is still written).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Also say which launcher was detected, the command run, each
    /// process as it connects and ends, and at the end how soon the report
    /// was ready, hark's peak memory, and hark's own CPU time with the
    /// events it analysed per CPU-second.
    #[arg(short, long)]
    pub verbose: bool,

    /// Also export the run in these formats (comma-separated: otf2,
    /// perfetto, hatchet, parquet) into its run directory when it ends; see `hark export`.
    #[arg(long, value_name = "FORMAT", value_delimiter = ',')]
    pub export: Vec<Format>,

    /// The run index to record this run in (default: see `hark runs`).
    #[arg(long, value_name = "FILE", env = "HARK_INDEX")]
    pub index: Option<PathBuf>,

    /// Keep raw events in a trace store (RUN_DIR/trace/) and write them as
    /// OTF2 (trace.otf2/) and Perfetto (trace.perfetto-trace). SPEC chooses
    /// what to keep, comma-separated terms that must all hold:
    /// ranks=A-B, window=S-E (seconds after the start), iterations=A-B
    /// (hark_mark numbers), region=NAME; auto (or auto=N) keeps the N time
    /// windows (default 4) that waited most; none (or `all`) keeps every
    /// event (docs/trace.md).
    #[arg(
        long,
        value_name = "SPEC",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "all",
        value_parser = parse_trace
    )]
    pub trace: Option<hark_engine::trace::Selection>,

    /// The trace store's cap, e.g. 512M or 4G (default 1G): chosen events
    /// past it are dropped, and the summary says how many.
    #[arg(long = "trace-cap", value_name = "SIZE", value_parser = parse_trace_cap)]
    pub trace_cap: Option<u64>,

    /// Serve the live view and the query API on HOST:PORT (port 0 picks a
    /// free one); its URL is printed on stderr at the start.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    pub http: String,

    /// Do not serve the live view.
    #[arg(long = "no-http", conflicts_with = "http")]
    pub no_http: bool,

    /// Stream into a running `hark serve` at ADDR (unix:PATH, or
    /// tcp:HOST:PORT with --token-file) instead of an analysis server of
    /// hark's own; the service writes the run directory.
    #[arg(long, value_name = "ADDR", env = "HARK_SERVER")]
    pub server: Option<String>,

    /// The site token of a TCP service (a file of mode 0600).
    #[arg(long = "token-file", value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,

    /// Analyse inside the MPI job: N analyser ranks (or R per W writers,
    /// e.g. 1:10) started as one more context of the job, each receiving
    /// its writers' streams over MPI; analyser rank 0 writes the run
    /// directory (docs/analysers.md). Needs Open MPI's mpirun or MPICH's
    /// mpiexec; not with --trace.
    #[arg(long, value_name = "N|R:W", value_parser = parse_analysers, conflicts_with = "server")]
    pub analysers: Option<hark_wire::partition::Analysers>,

    /// With --analysers: keep one MPI_COMM_WORLD for all the programs of an
    /// MPMD job (the analysers excluded), for programs that talk to each
    /// other through it. Their partitions are then named but not isolated
    /// (docs/analysers.md).
    #[arg(long = "no-virtualise", requires = "analysers")]
    pub no_virtualise: bool,
    /// With --analysers: how writer ranks are mapped to analyser ranks,
    /// `same-node` (a writer streams to an analyser on its own node when
    /// there is one, else round-robin; on one node it is round-robin),
    /// `round-robin` or `blocks` (contiguous ranks of each program).
    #[arg(long, value_name = "POLICY", default_value = "same-node", value_parser = parse_map, requires = "analysers")]
    pub map: hark_wire::partition::Policy,

    /// The command to measure, after `--` (required, except with
    /// `--analyses list`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Options of `hark report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run directory, or its profile.json.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,

    /// Write the outputs into DIR instead of the run directory.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Do not write report.html.
    #[arg(long = "no-html")]
    pub no_html: bool,

    /// Do not print the summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `--pack-size`: a size within the probe's range (`HARK_PACK_SIZE`).
fn parse_pack_size(v: &str) -> Result<u64, String> {
    crate::settings::check(&hark_settings::PACK_SIZE, v)?;
    hark_settings::parse_size(v).ok_or_else(|| format!("`{v}` is not a size"))
}

/// `--analysers`: a count or a ratio.
fn parse_analysers(v: &str) -> Result<hark_wire::partition::Analysers, String> {
    hark_wire::partition::Analysers::parse(v).map_err(|e| e.to_string())
}

/// `--map`: a writer-to-analyser map policy.
fn parse_map(v: &str) -> Result<hark_wire::partition::Policy, String> {
    hark_wire::partition::Policy::parse(v).map_err(|e| e.to_string())
}

/// `--trace=SPEC`: a trace selection.
fn parse_trace(v: &str) -> Result<hark_engine::trace::Selection, String> {
    hark_engine::trace::Selection::parse(v)
}

/// `--trace-cap`: a size, with G allowed.
fn parse_trace_cap(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let size = match t.strip_suffix(['G', 'g']).or_else(|| t.strip_suffix("GiB")) {
        Some(g) => g
            .trim()
            .parse::<u64>()
            .ok()
            .and_then(|g| g.checked_mul(1 << 30)),
        None => hark_settings::parse_size(t),
    };
    size.filter(|s| *s > 0)
        .ok_or_else(|| format!("`{v}` is not a size: write e.g. 512M or 4G"))
}

/// `--buffers`: a count within the probe's range (`HARK_BUFFERS`).
fn parse_buffers(v: &str) -> Result<u32, String> {
    crate::settings::check(&hark_settings::BUFFERS, v)?;
    v.trim().parse().map_err(|e| format!("`{v}`: {e}"))
}

/// A `--counters` list whose every name Hark knows.
fn counter_list(list: &str) -> Result<String, String> {
    let (_, unknown) = hark_wire::counters::parse_list(list);
    if unknown.is_empty() {
        return Ok(list.to_string());
    }
    let known: Vec<&str> = hark_wire::counters::EVENTS.iter().map(|e| e.name).collect();
    Err(format!(
        "unknown counter {}; the counters are `default`, `none` and: {}",
        unknown.join(", "),
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn everything_after_the_double_dash_is_the_command() {
        let cli = Cli::try_parse_from([
            "hark",
            "run",
            "--lossless",
            "--",
            "mpirun",
            "-np",
            "2",
            "./a",
            "--lossless",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert!(run.lossless);
        assert_eq!(run.command, ["mpirun", "-np", "2", "./a", "--lossless"]);
    }

    #[test]
    fn a_misspelt_subcommand_gets_the_closest_one() {
        assert_eq!(closest_subcommand("rn").as_deref(), Some("run"));
        assert_eq!(closest_subcommand("ru").as_deref(), Some("run"));
        assert_eq!(closest_subcommand("rns").as_deref(), Some("runs"));
        assert_eq!(closest_subcommand("rpt").as_deref(), Some("report"));
        assert_eq!(closest_subcommand("xyz"), None);
    }

    #[test]
    fn sizes_take_units_and_stay_in_range() {
        assert_eq!(parse_pack_size("4096"), Ok(4096));
        assert_eq!(parse_pack_size("256K"), Ok(256 << 10));
        assert_eq!(parse_pack_size("2MiB"), Ok(2 << 20));
        assert!(parse_pack_size("1G").is_err());
        assert!(parse_pack_size("12").is_err());
        assert!(parse_pack_size("lots").is_err());
        assert!(parse_pack_size("17592186044417M").is_err());
        assert!(parse_buffers("0").is_err());
        assert_eq!(parse_buffers("8"), Ok(8));
    }

    #[test]
    fn every_help_text_shows_examples() {
        let mut cmd = Cli::command();
        let top = cmd.render_help().to_string();
        assert!(
            top.contains("Examples:") && top.contains("hark run -- mpirun"),
            "{top}"
        );
        for sub in ["run", "report", "open", "query", "top"] {
            let help = cmd
                .find_subcommand_mut(sub)
                .unwrap_or_else(|| panic!("no subcommand {sub}"))
                .render_long_help()
                .to_string();
            assert!(help.contains("Examples:"), "{sub}: {help}");
        }
    }
}
