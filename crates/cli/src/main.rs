//! `hark`: measure a parallel program, and look at what was measured.
//!
//! `hark run -- COMMAND` runs the command with the probe preloaded and an
//! analysis server listening inside `hark`, then writes the run directory
//! (`summary.txt`, `report.html`, `profile.json`, `topology/*.dot`);
//! `hark report RUN_DIR` renders a finished run again; `hark open`,
//! `hark query` and `hark top` show runs live (`docs/api.md`). The work is done by
//! the library crates (`hark-server`, `hark-outputs`, `hark-analyser` for
//! `--analysers`); this binary parses the command line, checks settings,
//! launches, writes the run directory, and maps results to exit statuses.
//! `docs/outputs.md` walks through `hark run` step by step.

// The doc comments in `cli.rs` are clap's help text, printed as written:
// `hark-<program>-<timestamp>/` there is text for people, not HTML.
#![allow(rustdoc::invalid_html_tags)]
// Every system call the binary makes goes through `hark-os`.
#![forbid(unsafe_code)]

mod alloc;
mod analysers;
mod cli;
mod ctl;
mod diff;
mod estimate;
mod export;
mod forward;
mod live;
mod mpi_analyser;
mod open;
mod output;
mod probe;
mod query;
mod reach;
mod replay;
mod report;
mod run;
mod rundir;
mod runs;
mod serve;
mod serve_files;
mod serve_http;
mod serve_index;
mod serve_machine;
mod serve_tcp;
mod settings;
mod status;
mod top;
mod trace;
mod unreached;

fn main() {
    // Call sites are named from the objects on this host's disk, in every
    // process of hark's that finishes analyses (an analyser rank too).
    hark_analyses::names::install(hark_server::resolve::Resolver::get());
    let cli = cli::Cli::parse_args();
    let result = match &cli.command {
        cli::Command::Run(args) => run::run(args),
        cli::Command::Report(args) => report::report(args),
        cli::Command::Estimate(args) => estimate::estimate(args),
        cli::Command::Export(args) => export::export(args),
        cli::Command::Runs(args) => runs::runs(args),
        cli::Command::Diff(args) => diff::diff(args),
        cli::Command::Scaling(args) => diff::scaling(args),
        cli::Command::Open(args) => open::open(args),
        cli::Command::Query(args) => query::query(args),
        cli::Command::Top(args) => top::top(args),
        cli::Command::Serve(args) => serve::serve(args),
        cli::Command::Ctl(args) => ctl::ctl(args),
        cli::Command::MpiAnalyser(args) => mpi_analyser::run(args),
        cli::Command::Forward(args) => forward::run(args),
        cli::Command::Replay(args) => replay::replay(args),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) if e.is::<output::Quiet>() => 0,
        Err(e) => {
            output::print_stderr(&format!("hark: error: {e:#}\n"));
            2
        }
    };
    std::process::exit(code);
}
