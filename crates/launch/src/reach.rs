//! How every rank, on every node, reaches `hark` (`docs/cluster.md`, "How
//! ranks on other nodes reach hark").
//!
//! A launcher that can place ranks on other nodes gets two things from
//! here: the probe preloaded into its application processes only
//! ([`with_probe_env`]: the launcher, its `ssh`/`rsh` agent and its node
//! daemons are never preloaded), and the list of addresses the probes try
//! ([`advertised`]): the node-local Unix socket first, then a TCP socket on
//! each of this host's interfaces.

use crate::launcher::{option_spans, Launcher};
use std::net::Ipv4Addr;
use std::path::Path;

/// Variables a batch system sets in a job's environment: a script run
/// there (`hark run -- ./job.sh`) most likely starts ranks on the
/// allocation's other nodes.
pub const BATCH_JOB_VARS: &[&str] = &["SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"];

/// Whether `command` may start processes on other nodes, so that `hark`
/// must listen on TCP as well as on its Unix socket: an MPI launcher,
/// `srun`, `salloc` (whose command, often `srun` or `mpirun`, runs with
/// the allocation's nodes), or anything run inside a batch job
/// (`in_batch_job`: one of [`BATCH_JOB_VARS`] is set).
pub fn reaches_other_nodes(launcher: Launcher, command: &[String], in_batch_job: bool) -> bool {
    let first = command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    launcher != Launcher::Other || first == "salloc" || in_batch_job
}

/// The addresses the probes are given, in the order they try them:
/// `listening` (what `hark` listens on, its Unix socket first) with each
/// TCP address bound to every interface (`tcp:0.0.0.0:PORT`) replaced by
/// one address per interface of `interfaces` that is not loopback; the
/// loopback address only when there is no other. A rank on `hark`'s node
/// reaches the Unix socket; one on another node, the first interface it
/// can route to (the probe tries those on its own subnets first).
pub fn advertised(listening: &[String], interfaces: &[(Ipv4Addr, bool)]) -> Vec<String> {
    let mut out = Vec::new();
    for addr in listening {
        let Some(port) = addr.strip_prefix("tcp:0.0.0.0:") else {
            out.push(addr.clone());
            continue;
        };
        let mut outside: Vec<Ipv4Addr> = (interfaces.iter())
            .filter(|(a, loopback)| !loopback && !a.is_loopback() && !a.is_unspecified())
            .map(|(a, _)| *a)
            .collect();
        outside.dedup();
        if outside.is_empty() {
            outside.push(Ipv4Addr::LOCALHOST);
        }
        out.extend(outside.iter().map(|a| format!("tcp:{a}:{port}")));
    }
    out
}

/// `command` with the options that give the probe to the launcher's
/// application processes, and to them only: `LD_PRELOAD` by value
/// (`preload`), the `vars` by name or by the launcher's default (their
/// values stay in the launcher's environment, off its command line, since
/// `HARK_ADDR` holds the run's secret).
///
/// - Open MPI: `-x LD_PRELOAD=V -x NAME...` in every application context.
/// - Hydra: `-genv LD_PRELOAD V`; the names are passed by Hydra's default
///   (the whole environment), or added to the user's `-genvlist`.
/// - `srun`: `--export=ALL,LD_PRELOAD=V` in every component, or, where
///   the user gives `--export`, `LD_PRELOAD=V` and the names added to it.
///
/// `None` for a command that is not such a launcher: it must inherit
/// `LD_PRELOAD` from its environment.
pub fn with_probe_env(
    launcher: Launcher,
    command: &[String],
    preload: &str,
    vars: &[&str],
) -> Option<Vec<String>> {
    let (first, rest) = command.split_first()?;
    let mut out = vec![first.clone()];
    match launcher {
        Launcher::OpenMpi => {
            let pass = |out: &mut Vec<String>| {
                out.extend(["-x".to_string(), format!("LD_PRELOAD={preload}")]);
                for v in vars {
                    out.extend(["-x".to_string(), v.to_string()]);
                }
            };
            pass(&mut out);
            for arg in rest {
                out.push(arg.clone());
                if arg == ":" {
                    pass(&mut out);
                }
            }
        }
        Launcher::Hydra => {
            out.extend(["-genv", "LD_PRELOAD", preload].map(String::from));
            out.extend(rest.iter().cloned());
            return Some(crate::launcher::hydra_env_list(&out, vars));
        }
        Launcher::Slurm => return Some(srun_with_probe_env(command, preload, vars)),
        Launcher::Other => return None,
    }
    Some(out)
}

/// [`with_probe_env`] for `srun`: each component (`:` separates those of a
/// heterogeneous step) gets `--export`, or has the user's extended.
fn srun_with_probe_env(command: &[String], preload: &str, vars: &[&str]) -> Vec<String> {
    let mut out = command.to_vec();
    let ours = format!("LD_PRELOAD={preload}");
    let extend = |given: &str| -> String {
        let mut list: Vec<String> = match given.trim() {
            // Only the listed variables then, besides Slurm's own.
            "NONE" | "NIL" | "" => Vec::new(),
            g => g.split(',').map(str::to_string).collect(),
        };
        // The user's own preload for the tasks keeps its libraries first.
        match list.iter_mut().find(|v| v.starts_with("LD_PRELOAD=")) {
            Some(theirs) => *theirs = format!("{theirs}:{preload}"),
            None => list.push(ours.clone()),
        }
        list.extend(vars.iter().map(|v| v.to_string()));
        list.join(",")
    };
    // From the last component back, so that insertions keep the earlier
    // indices valid.
    let mut contexts: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    let mut start = 1;
    for spans in option_spans(command) {
        let next = spans.last().map_or(start, |s| s.1);
        contexts.push((start, spans));
        // The next component starts after this one's `:`.
        start = command[next..]
            .iter()
            .position(|a| a == ":")
            .map_or(command.len(), |p| next + p + 1);
    }
    for (start, spans) in contexts.into_iter().rev() {
        let given = spans.iter().find_map(|&(i, end)| {
            let arg = &command[i];
            if let Some(v) = arg.strip_prefix("--export=") {
                Some((i, v.to_string(), true))
            } else if arg == "--export" && end == i + 2 {
                Some((i + 1, command[i + 1].clone(), false))
            } else {
                None
            }
        });
        match given {
            Some((i, v, true)) => out[i] = format!("--export={}", extend(&v)),
            Some((i, v, false)) => out[i] = extend(&v),
            None => out.insert(start, format!("--export=ALL,{ours}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn launchers_that_place_ranks_elsewhere_make_hark_listen_on_tcp() {
        for (command, launcher, want) in [
            ("mpirun -np 2 ./a", Launcher::OpenMpi, true),
            ("mpiexec.hydra -n 2 ./a", Launcher::Hydra, true),
            ("srun -N2 ./a", Launcher::Slurm, true),
            ("/usr/bin/salloc -N2 srun ./a", Launcher::Other, true),
            ("./a.out", Launcher::Other, false),
            ("bash run.sh", Launcher::Other, false),
        ] {
            assert_eq!(
                reaches_other_nodes(launcher, &words(command), false),
                want,
                "{command}"
            );
        }
        // A script in a batch job may start ranks anywhere in it.
        assert!(reaches_other_nodes(
            Launcher::Other,
            &words("./job.sh"),
            true
        ));
    }

    #[test]
    fn a_tcp_socket_on_every_interface_is_given_as_each_interface_s_address() {
        let lo = (Ipv4Addr::LOCALHOST, true);
        let eth = (Ipv4Addr::new(10, 0, 0, 1), false);
        let ib = (Ipv4Addr::new(192, 168, 7, 1), false);
        let listening = words("unix:/tmp/h/hark.sock tcp:0.0.0.0:4000");
        assert_eq!(
            advertised(&listening, &[lo, eth, ib]),
            words("unix:/tmp/h/hark.sock tcp:10.0.0.1:4000 tcp:192.168.7.1:4000")
        );
        // Nothing but loopback: loopback, so that the list still works here.
        assert_eq!(
            advertised(&listening, &[lo]),
            words("unix:/tmp/h/hark.sock tcp:127.0.0.1:4000")
        );
        // A TCP address bound to one interface is given as it is.
        let one = words("unix:/s tcp:10.0.0.1:5");
        assert_eq!(advertised(&one, &[lo, eth]), one);
    }

    #[test]
    fn the_probe_reaches_the_application_processes_only() {
        let vars = ["HARK_ADDR", "HARK_JOB"];
        for (launcher, command, want) in [
            (
                Launcher::OpenMpi,
                "mpirun -np 2 ./a : -np 1 ./b",
                "mpirun -x LD_PRELOAD=/p.so -x HARK_ADDR -x HARK_JOB -np 2 ./a : \
                 -x LD_PRELOAD=/p.so -x HARK_ADDR -x HARK_JOB -np 1 ./b",
            ),
            (
                Launcher::Hydra,
                "mpiexec -n 2 ./a",
                "mpiexec -genv LD_PRELOAD /p.so -n 2 ./a",
            ),
            (
                Launcher::Hydra,
                "mpiexec -genvlist PATH -n 2 ./a",
                "mpiexec -genv LD_PRELOAD /p.so -genvlist PATH,HARK_ADDR,HARK_JOB -n 2 ./a",
            ),
            (
                Launcher::Slurm,
                "srun -N2 -n 2 ./a x",
                "srun --export=ALL,LD_PRELOAD=/p.so -N2 -n 2 ./a x",
            ),
            (
                Launcher::Slurm,
                "srun -n 1 ./a : -n 2 ./b",
                "srun --export=ALL,LD_PRELOAD=/p.so -n 1 ./a : --export=ALL,LD_PRELOAD=/p.so -n 2 ./b",
            ),
            (
                Launcher::Slurm,
                "srun --export=ALL,OMP_NUM_THREADS=2 -n 2 ./a --export=x",
                "srun --export=ALL,OMP_NUM_THREADS=2,LD_PRELOAD=/p.so,HARK_ADDR,HARK_JOB -n 2 ./a --export=x",
            ),
            (
                Launcher::Slurm,
                "srun --export=ALL,LD_PRELOAD=/u.so -n 2 ./a",
                "srun --export=ALL,LD_PRELOAD=/u.so:/p.so,HARK_ADDR,HARK_JOB -n 2 ./a",
            ),
            (
                Launcher::Slurm,
                "srun --export NONE -n 2 ./a",
                "srun --export LD_PRELOAD=/p.so,HARK_ADDR,HARK_JOB -n 2 ./a",
            ),
        ] {
            assert_eq!(
                with_probe_env(launcher, &words(command), "/p.so", &vars),
                Some(words(want)),
                "{command}"
            );
        }
        assert_eq!(
            with_probe_env(Launcher::Other, &words("./a"), "/p.so", &vars),
            None
        );
    }
}
