//! The hidden `hark mpi-analyser` subcommand: one analyser rank of a job
//! `hark run --analysers` started (`crates/cli/src/analysers.rs` writes
//! these options). The rank itself is the `hark-analyser` crate.

use anyhow::Result;
use clap::Args;
use hark_analyser::Mode;
use hark_wire::partition::Policy;
use std::path::PathBuf;

/// Options of `hark mpi-analyser` (started by `hark run --analysers`).
#[derive(Debug, Args)]
pub struct AnalyserArgs {
    /// The MPI library to open (`libmpi.so.40`, `libmpich.so.12`).
    #[arg(long = "mpi-lib", value_name = "LIB")]
    pub mpi_lib: String,
    /// Analyser ranks in the job (the last ones of the world).
    #[arg(long, value_name = "N")]
    pub analysers: u32,
    /// How writers are mapped to analysers: `round-robin`, `blocks` or
    /// `same-node` (the probes read the same choice from `HARK_MPI_MAP`).
    #[arg(long, value_name = "POLICY", default_value = "same-node", value_parser = parse_policy)]
    pub map: Policy,
    /// The probes' pack size in bytes.
    #[arg(long = "pack-size", value_name = "BYTES")]
    pub pack_size: usize,
    /// The run directory (absolute): where the keepers leave their partial
    /// results if this node shares it, and where analyser rank 0 writes the
    /// run if it cannot reach `hark run`.
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// Analyses to run, comma-separated (default: all).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub analyses: Vec<String>,
    /// How the ranks' results merge: `tree` or `gather`
    /// (`HARK_ANALYSER_MERGE`).
    #[arg(long, value_name = "SHAPE", default_value = "tree")]
    pub merge: String,
    /// Where analyser rank 0 reaches `hark run`: `unix:PATH` and
    /// `tcp:ADDRESS:PORT`, comma-separated, tried in turn. The merged run
    /// goes there.
    #[arg(long, value_name = "ADDRESSES")]
    pub hark: Option<String>,
    /// Send `hark run` live snapshots about once a second.
    #[arg(long)]
    pub live: bool,
    /// Say on stderr which writers this rank receives, its events and CPU
    /// time, and (analyser rank 0) how long the merge took (`hark run -v`).
    #[arg(long)]
    pub verbose: bool,
}

/// `--map`: a policy name.
fn parse_policy(v: &str) -> Result<Policy, String> {
    Policy::parse(v).map_err(|e| e.to_string())
}

/// Runs one analyser rank; returns its exit status.
pub fn run(args: &AnalyserArgs) -> Result<i32> {
    let options = hark_analyser::Options {
        mpi_lib: args.mpi_lib.clone(),
        analysers: args.analysers,
        map: args.map,
        pack_size: args.pack_size,
        output: args.output.clone(),
        analyses: args.analyses.clone(),
        merge: match args.merge.as_str() {
            "gather" => Mode::Gather,
            _ => Mode::Tree,
        },
        hark: args.hark.clone(),
        live: args.live,
        verbose: args.verbose,
    };
    Ok(hark_analyser::run(&options)?)
}
