//! Which programs of a run are the ones the user meant, and which are the
//! machinery that started them: a `pyenv` shim is a `bash` script run
//! through `env` that calls `readlink`, `dirname`, `basename` and `uname`
//! before it `exec`s Python, and every one of those processes loads the
//! probe. They are measured (and kept in `profile.json`), but the summary
//! counts them on one "other processes" line, the run directory is named
//! after the program meant, and a process without MPI is a process, never
//! a "rank".
//!
//! The programs meant ([`main_programs`]): those that made MPI calls, if
//! any did; else the program the command's own process ran last (its pid
//! is [`hark_model::Run::command_pid`]: shims and `env` replace their image
//! with `exec`, keeping it); else all. The others are helpers when they made
//! no MPI call, came before the first program meant (they started it: what
//! a program meant runs itself, a shell loop's `dd`, is its work), and each
//! of their processes either lived under [`SHORT_NS`] or was an earlier
//! image of a process of a program meant.

use hark_model::{Program, Run};

/// A process without MPI that lived less than this (1 s) is short-lived.
pub const SHORT_NS: u64 = 1_000_000_000;

/// Whether `p` made MPI calls (its processes are then ranks).
pub fn has_mpi(p: &Program) -> bool {
    !p.mpi.is_empty()
}

/// The indices of the programs the user meant (see the module
/// documentation), in the run's order.
pub fn main_programs(run: &Run) -> Vec<usize> {
    let all = 0..run.programs.len();
    let mpi: Vec<usize> = all.clone().filter(|&i| has_mpi(&run.programs[i])).collect();
    if !mpi.is_empty() {
        return mpi;
    }
    let command = run.command_pid.and_then(|pid| {
        all.clone()
            .rev()
            .find(|&i| run.programs[i].rank_info.iter().any(|r| r.pid == pid))
    });
    match command {
        Some(i) => vec![i],
        None => all.collect(),
    }
}

/// The indices of the helper programs: not meant, no MPI, connected before
/// the first program meant, and made of short-lived processes or of
/// earlier images of the programs meant.
pub fn helper_programs(run: &Run) -> Vec<usize> {
    let main = main_programs(run);
    let first = main.first().copied().unwrap_or(0);
    let main_pids: Vec<(u32, &str)> = main
        .iter()
        .flat_map(|&i| run.programs[i].rank_info.iter())
        .map(|r| (r.pid, r.host.as_str()))
        .collect();
    (0..first)
        .filter(|i| !main.contains(i))
        .filter(|&i| {
            let p = &run.programs[i];
            !has_mpi(p)
                && p.rank_info.iter().enumerate().all(|(r, info)| {
                    let short = p.rank_wall_ns.get(r).is_some_and(|&ns| ns < SHORT_NS);
                    let earlier_image = main_pids.contains(&(info.pid, info.host.as_str()));
                    short || earlier_image
                })
        })
        .collect()
}

/// The name the run is known by (its run directory's): the first program
/// meant.
pub fn run_name(run: &Run) -> Option<&str> {
    main_programs(run)
        .first()
        .map(|&i| run.programs[i].name.as_str())
}

/// What a program's processes are called: `rank(s)` with MPI, else
/// `process(es)`.
pub fn unit(p: &Program, n: u64) -> &'static str {
    match (has_mpi(p), n == 1) {
        (true, true) => "rank",
        (true, false) => "ranks",
        (false, true) => "process",
        (false, false) => "processes",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{FunctionProfile, RankInfo};

    fn program(name: &str, pids: &[u32], wall_ns: u64, mpi: bool) -> Program {
        let mut p = Program {
            name: name.into(),
            ranks: pids.len(),
            rank_info: pids
                .iter()
                .map(|&pid| RankInfo {
                    world_rank: -1,
                    pid,
                    host: "n1".into(),
                    ..RankInfo::default()
                })
                .collect(),
            rank_wall_ns: vec![wall_ns; pids.len()],
            ..Program::default()
        };
        if mpi {
            p.mpi.insert("MPI_Init".into(), FunctionProfile::default());
        }
        p
    }

    #[test]
    fn a_pyenv_shim_folds_into_other_processes_and_python_names_the_run() {
        let run = Run {
            programs: vec![
                program("env", &[100], 2_000_000, false),
                program("bash", &[100, 101, 104], 1_500_000_000, false),
                program("readlink", &[102], 1_000_000, false),
                program("uname", &[103], 1_000_000, false),
                program("python3.12", &[100], 30_000_000, false),
            ],
            command_pid: Some(100),
            ..Run::default()
        };
        assert_eq!(main_programs(&run), [4]);
        assert_eq!(run_name(&run), Some("python3.12"));
        // bash's pid 100 is an earlier image of python3.12's process; its
        // others were short.
        let mut short = run.clone();
        short.programs[1].rank_wall_ns = vec![1_500_000_000, 5_000_000, 5_000_000];
        assert_eq!(helper_programs(&short), [0, 1, 2, 3]);
        // A long-lived process of another program is not machinery.
        short.programs[1].rank_wall_ns[1] = 2_000_000_000;
        assert_eq!(helper_programs(&short), [0, 2, 3]);
    }

    #[test]
    fn what_the_program_meant_runs_itself_is_its_work_not_machinery() {
        // `bash -c 'for ...; do dd ...; done'`: the dd processes are short,
        // but bash started them.
        let run = Run {
            programs: vec![
                program("bash", &[50], 900_000_000, false),
                program("dd", &[51, 52], 1_000_000, false),
            ],
            command_pid: Some(50),
            ..Run::default()
        };
        assert_eq!(main_programs(&run), [0]);
        assert!(helper_programs(&run).is_empty());
    }

    #[test]
    fn mpi_programs_are_the_ones_meant_and_their_processes_ranks() {
        let run = Run {
            programs: vec![
                program("sh", &[7, 8], 3_000_000, false),
                program("ring", &[9, 10], 3_000_000_000, true),
            ],
            ..Run::default()
        };
        assert_eq!(main_programs(&run), [1]);
        assert_eq!(helper_programs(&run), [0]);
        assert_eq!(run_name(&run), Some("ring"));
        assert_eq!(unit(&run.programs[1], 2), "ranks");
        assert_eq!(unit(&run.programs[0], 1), "process");
    }

    #[test]
    fn without_the_command_s_pid_every_program_is_meant() {
        let run = Run {
            programs: vec![
                program("make", &[1], 1_000, false),
                program("cc", &[2], 1_000, false),
            ],
            ..Run::default()
        };
        assert_eq!(main_programs(&run), [0, 1]);
        assert!(helper_programs(&run).is_empty());
    }
}
