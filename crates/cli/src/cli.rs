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
    /// Run a long-lived analysis service that many jobs stream into, each
    /// written to its own run directory when it ends (docs/api.md).
    #[command(after_help = crate::serve::SERVE_EXAMPLES)]
    Serve(crate::serve::ServeArgs),
    /// List, pause, resume, sample or dump the jobs of a running `hark serve`.
    #[command(after_help = crate::ctl::CTL_EXAMPLES)]
    Ctl(crate::ctl::CtlArgs),
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
  already in LD_PRELOAD) and HARK_ADDR set. For Open MPI's mpirun these are
  also passed with -x NAME in every application context, for MPICH's Hydra
  with -genvlist; other launchers and plain programs inherit them. The probe
  stays passive in launchers themselves. The program's own output passes
  through untouched; hark's status line and summary go to stderr.

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

    /// Do not record POSIX and STDIO file I/O (HARK_IO=0).
    #[arg(long = "no-io")]
    pub no_io: bool,

    /// The probe library to preload (default: libhark.so next to hark).
    #[arg(long, value_name = "PATH", env = "HARK_PROBE")]
    pub probe: Option<PathBuf>,

    /// Print nothing of hark's own: no status line, no summary (errors
    /// still go to stderr; the run directory is still written).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Also say which launcher was detected, the command run, and each
    /// process as it connects and ends.
    #[arg(short, long)]
    pub verbose: bool,

    /// Stream into a running `hark serve` at ADDR (unix:PATH, or
    /// tcp:HOST:PORT with --token-file) instead of an analysis server of
    /// hark's own; the service writes the run directory.
    #[arg(long, value_name = "ADDR", env = "HARK_SERVER")]
    pub server: Option<String>,

    /// The site token of a TCP service (a file of mode 0600).
    #[arg(long = "token-file", value_name = "FILE", requires = "server")]
    pub token_file: Option<PathBuf>,

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
    crate::settings::check("HARK_PACK_SIZE", v)?;
    crate::settings::parse_size(v).ok_or_else(|| format!("`{v}` is not a size"))
}

/// `--buffers`: a count within the probe's range (`HARK_BUFFERS`).
fn parse_buffers(v: &str) -> Result<u32, String> {
    crate::settings::check("HARK_BUFFERS", v)?;
    v.trim().parse().map_err(|e| format!("`{v}`: {e}"))
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
        for sub in ["run", "report"] {
            let help = cmd
                .find_subcommand_mut(sub)
                .unwrap()
                .render_long_help()
                .to_string();
            assert!(help.contains("Examples:"), "{sub}: {help}");
        }
    }
}
