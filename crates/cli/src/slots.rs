//! This host's slots, as Open MPI counts them, against the job `hark run
//! --analysers` starts: the programs' ranks plus the analyser partition
//! (`docs/analysers.md`, "The programs' ranks do not start yielding").
//!
//! Open MPI makes every rank on a node holding more ranks than slots yield
//! the processor in each MPI call that finds nothing to do. The analyser
//! partition is one more application context on the programs' node: where
//! the programs fill the cores, as on a workstation, it is the analysers
//! that oversubscribe the node, and every rank of the programs would call
//! `sched_yield` in its empty `MPI_Iprobe`s and `MPI_Test`s, where it does
//! not without Hark. So `hark run --analysers` sets the parameter off when
//! the programs alone fit the host and the analysers do not, and leaves it
//! to Open MPI whenever it cannot tell: the user set it, hosts are named,
//! or a resource manager or a default hostfile gives the slots. The same
//! count says why a job that does not fit was refused by the launcher.

use crate::launch;
use std::collections::BTreeSet;

/// The parameter as Open MPI reads it from a process's environment.
pub const VAR: &str = "OMPI_MCA_mpi_yield_when_idle";

/// Resource managers whose allocation, not this host, gives Open MPI its
/// slots (Slurm, PBS/Torque, LSF, Grid Engine).
const MANAGERS: &[&str] = &["SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "PE_HOSTFILE"];

/// Launcher options that name other hosts or their slots.
const HOSTS: &[&str] = &[
    "-H",
    "--host",
    "-host",
    "--hostfile",
    "-hostfile",
    "--machinefile",
    "-machinefile",
    "--default-hostfile",
    "--rankfile",
    "-rf",
];

/// The default hostfile of Debian's Open MPI: hosts named there give the
/// slots instead of this host's cores.
const DEFAULT_HOSTFILE: &str = "/etc/openmpi/openmpi-default-hostfile";

/// The job on this host alone, when `hark` can tell: its programs'
/// ranks, the host's slots, whether the launcher may oversubscribe, and
/// whether the user said whether to yield.
pub struct Local {
    writers: usize,
    slots: usize,
    oversubscribe: bool,
    yield_set: bool,
}

/// [`Local`] for Open MPI `command`: `None` when hosts are named, a
/// resource manager or a default hostfile gives the slots, a context gives
/// no rank count, or the slots cannot be counted. `env` reads the
/// environment; `slots` counts this host's slots (its argument: whether
/// hardware threads count, `--use-hwthread-cpus`).
pub fn local(
    command: &[String],
    env: impl Fn(&str) -> Option<String>,
    slots: impl FnOnce(bool) -> Option<usize>,
) -> Option<Local> {
    if env("OMPI_MCA_orte_default_hostfile").is_some() || MANAGERS.iter().any(|v| env(v).is_some())
    {
        return None;
    }
    let options: Vec<_> = launch::options(command).into_iter().flatten().collect();
    if options.iter().any(|(o, _)| HOSTS.contains(o)) {
        return None;
    }
    let writers = launch::writers(command)?;
    let hwthreads = options.iter().any(|(o, _)| *o == "--use-hwthread-cpus");
    let slots = slots(hwthreads)?;
    let yes = |v: &str| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "1" | "true" | "t" | "yes" | "y" | "enabled"
        )
    };
    let oversubscribe = env("OMPI_MCA_rmaps_base_oversubscribe").is_some_and(|v| yes(&v))
        || options.iter().any(|(o, values)| {
            matches!(*o, "--oversubscribe" | "-oversubscribe")
                || (*o == "--map-by"
                    && values
                        .first()
                        .is_some_and(|v| v.to_ascii_uppercase().contains("OVERSUBSCRIBE")))
        });
    let yield_set = env(VAR).is_some()
        || options.iter().any(|(option, values)| {
            let first = values.first().map(String::as_str).unwrap_or("");
            (matches!(*option, "-mca" | "--mca" | "-gmca" | "--gmca")
                && first == "mpi_yield_when_idle")
                || (*option == "-x" && (first == VAR || first.starts_with(&format!("{VAR}="))))
        });
    Some(Local {
        writers,
        slots,
        oversubscribe,
        yield_set,
    })
}

impl Local {
    /// Whether `hark run --analysers` should set [`VAR`] to 0 for this job
    /// with `analysers` analyser ranks: the programs' ranks fit the host's
    /// slots and the analysers do not, and the user did not say whether to
    /// yield.
    pub fn keep_from_yielding(&self, analysers: usize) -> bool {
        !self.yield_set && self.writers <= self.slots && self.writers + analysers > self.slots
    }

    /// The slots this job with `analysers` analyser ranks needs and the
    /// slots the host has, when it needs more and the launcher is not
    /// allowed to oversubscribe: Open MPI then refuses to start it.
    pub fn short_of_slots(&self, analysers: usize) -> Option<(usize, usize)> {
        let needs = self.writers + analysers;
        (needs > self.slots && !self.oversubscribe).then_some((needs, self.slots))
    }
}

/// This host's slots as Open MPI counts them without a hostfile: the cores
/// this process may run on (the launcher inherits its affinity), or their
/// hardware threads. `None` when the default hostfile names hosts or the
/// topology cannot be read.
pub fn host_slots(hwthreads: bool) -> Option<usize> {
    if std::fs::read_to_string(DEFAULT_HOSTFILE).is_ok_and(|f| {
        f.lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    }) {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    let cpus = cpu_list(list.trim())?;
    if hwthreads {
        return Some(cpus.len());
    }
    let mut cores = BTreeSet::new();
    for cpu in cpus {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let package = read("physical_package_id")?;
        let core = read("core_id")?;
        cores.insert((package, read("die_id"), core));
    }
    Some(cores.len())
}

/// The CPUs of a kernel CPU list (`0-3,6,8-9`).
fn cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// The environment `env` (`NAME` or `NAME=value` words).
    fn vars<'a>(env: &'a [&'a str]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| {
            env.iter().find_map(|e| match e.split_once('=') {
                Some((n, v)) => (n == name).then(|| v.to_string()),
                None => (*e == name).then(String::new),
            })
        }
    }

    fn keep(cmd: &str, analysers: usize, env: &[&str], slots: usize) -> bool {
        local(&words(cmd), vars(env), |hw| {
            Some(if hw { 2 * slots } else { slots })
        })
        .is_some_and(|l| l.keep_from_yielding(analysers))
    }

    fn short(cmd: &str, analysers: usize, env: &[&str]) -> Option<(usize, usize)> {
        local(&words(cmd), vars(env), |_| Some(2))?.short_of_slots(analysers)
    }

    #[test]
    fn only_the_analysers_oversubscribing_the_host_turn_yielding_off() {
        let np2 = "mpirun -np 2 --oversubscribe ./app";
        // 2 ranks on 2 cores: not oversubscribed without Hark; 3 with it.
        assert!(keep(np2, 1, &[], 2));
        // 3 ranks on 2 cores yield without Hark already.
        assert!(!keep("mpirun -np 3 --oversubscribe ./app", 1, &[], 2));
        // Room for the analysers: nobody yields either way.
        assert!(!keep(np2, 1, &[], 4));
        assert!(keep(np2, 3, &[], 4));
        // Every context counts; hardware threads count with the option.
        assert!(keep("mpirun -np 1 ./a : -np 1 ./b", 1, &[], 2));
        assert!(!keep("mpirun --use-hwthread-cpus -np 2 ./app", 1, &[], 2));
    }

    #[test]
    fn the_user_s_setting_and_other_hosts_leave_it_to_open_mpi() {
        let np2 = "mpirun -np 2 ./app";
        assert!(!keep(np2, 1, &[VAR], 2));
        assert!(!keep(np2, 1, &["SLURM_JOB_ID"], 2));
        assert!(!keep(np2, 1, &["OMPI_MCA_orte_default_hostfile"], 2));
        for cmd in [
            "mpirun --mca mpi_yield_when_idle 1 -np 2 ./app",
            "mpirun -np 2 -x OMPI_MCA_mpi_yield_when_idle=1 ./app",
            "mpirun --host a,b -np 2 ./app",
            "mpirun -np 1 ./a : --hostfile hosts -np 1 ./b",
            // Without a count the launcher fills the slots, unknown here.
            "mpirun ./app",
        ] {
            assert!(!keep(cmd, 1, &[], 2), "{cmd}");
        }
        // Another parameter, or a program's argument, is not the setting.
        assert!(keep(
            "mpirun --mca btl self,vader -np 2 ./app --host a",
            1,
            &[],
            2
        ));
        // Slots that cannot be counted leave it too.
        assert!(local(&words(np2), |_| None, |_| None).is_none());
    }

    #[test]
    fn a_job_that_does_not_fit_without_oversubscribing_is_found_short() {
        // 2 ranks and 1 analyser on 2 slots: Open MPI refuses it as given.
        assert_eq!(short("mpirun -np 2 ./app", 1, &[]), Some((3, 2)));
        assert_eq!(short("mpirun -np 1 ./app", 1, &[]), None);
        for cmd in [
            "mpirun --oversubscribe -np 2 ./app",
            "mpirun -np 2 --map-by core:oversubscribe ./app",
            "mpirun --host a,b -np 2 ./app",
        ] {
            assert_eq!(short(cmd, 1, &[]), None, "{cmd}");
        }
        let allowed = ["OMPI_MCA_rmaps_base_oversubscribe=1"];
        assert_eq!(short("mpirun -np 2 ./app", 1, &allowed), None);
        let refused = ["OMPI_MCA_rmaps_base_oversubscribe=0"];
        assert_eq!(short("mpirun -np 2 ./app", 1, &refused), Some((3, 2)));
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-1"), Some(vec![0, 1]));
        assert_eq!(cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(cpu_list("x"), None);
        assert!(host_slots(false).is_some_and(|n| n >= 1));
    }
}
