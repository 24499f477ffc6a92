//! How every rank of `hark run`, on every node, reaches `hark`
//! (`docs/cluster.md`, "How ranks on other nodes reach hark").
//!
//! A launcher that can place ranks on other nodes makes `hark` listen on
//! TCP, on every interface, beside its node-local Unix socket; the probes
//! get both in `HARK_ADDR` (the Unix socket first, then one TCP address per
//! interface), and the run's secret with them. The probe is preloaded into
//! the launcher's application processes only, so that the launcher, its
//! `ssh` or `rsh` agent and its node daemons run as they would without
//! Hark.

use hark_launch::{self as launch, Launcher};
use hark_server::Server;

/// Where `hark` listens besides its Unix socket: a TCP socket on every
/// interface, on a free port, when `command` (started by `launcher`) may
/// start ranks on other nodes, or runs in a batch job; nothing otherwise.
pub(crate) fn also_listen(launcher: Launcher, command: &[String]) -> Vec<String> {
    let in_batch_job =
        (launch::BATCH_JOB_VARS.iter()).any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    match launch::reaches_other_nodes(launcher, command, in_batch_job) {
        true => vec!["tcp:0.0.0.0:0".to_string()],
        false => Vec::new(),
    }
}

/// `HARK_ADDR` for the probes: the run's secret and every address the
/// server listens on, as ranks on this and other nodes reach them.
pub(crate) fn probe_addr(server: &Server) -> String {
    let interfaces: Vec<_> = hark_os::ipv4_interfaces()
        .into_iter()
        .map(|i| (i.addr, i.loopback))
        .collect();
    let addrs = launch::advertised(server.addrs(), &interfaces);
    let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    server.probe_addr_for(&addrs)
}

/// How to start the command.
pub(crate) struct Launch {
    /// The command line.
    pub argv: Vec<String>,
    /// Variables to set in its environment.
    pub env: Vec<(String, String)>,
    /// Variables to remove from it.
    pub unset: Vec<&'static str>,
}

/// The command line to run and the environment to run it in: for a
/// launcher that can pass it, `LD_PRELOAD` goes on its command line for its
/// application processes and leaves its own environment (which keeps the
/// user's own `LD_PRELOAD`, if any, but for `srun`, where a variable of its
/// environment wins over the same one in `--export`: the user's libraries
/// then reach the tasks with the probe, not `srun` itself); the other
/// variables stay in the environment and are named on the command line.
/// Any other command inherits them all.
pub(crate) fn launch_line(
    launcher: Launcher,
    command: &[String],
    mut env: Vec<(String, String)>,
) -> Launch {
    let preload = env.iter().position(|(k, _)| k == "LD_PRELOAD");
    if let Some(i) = preload {
        let names: Vec<&str> = (env.iter())
            .filter(|(k, _)| k != "LD_PRELOAD")
            .map(|(k, _)| k.as_str())
            .collect();
        if let Some(argv) = launch::with_probe_env(launcher, command, &env[i].1, &names) {
            env.remove(i);
            let unset = match launcher {
                Launcher::Slurm => vec!["LD_PRELOAD"],
                _ => Vec::new(),
            };
            return Launch { argv, env, unset };
        }
    }
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    Launch {
        argv: launch::with_env_options(launcher, command, &names),
        env,
        unset: Vec::new(),
    }
}
