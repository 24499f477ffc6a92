//! How the job ended, in words: the one place the summary's first line,
//! the report and `hark runs` take them from, so that a failed job never
//! reads like a normal one.
//!
//! What is known: the measured command's exit status or signal
//! ([`hark_model::Run::exit`], from `hark run`), and each process's own end
//! ([`hark_model::RankInfo::ended`], with the code it passed to `MPI_Abort`).

use hark_model::{Ending, Program, Run};

/// Ranks named one by one before the rest are counted.
const NAMED: usize = 3;

/// A rank that ended badly, as a sentence names it.
struct Bad {
    who: String,
    abort_code: Option<i32>,
}

/// The processes of `run` that called `MPI_Abort` and those a signal
/// ended, in program and rank order.
fn bad_ranks(run: &Run) -> (Vec<Bad>, Vec<Bad>) {
    let (mut aborts, mut signals) = (Vec::new(), Vec::new());
    let several = run.programs.len() > 1;
    for p in &run.programs {
        for (i, r) in p.rank_info.iter().enumerate() {
            let bad = || Bad {
                who: who(p, i, several),
                abort_code: r.abort_code,
            };
            match r.ended {
                Some(Ending::Abort) => aborts.push(bad()),
                // A process that called MPI_Abort and was then ended by
                // the launcher's signal is an abort.
                Some(Ending::Signal) if r.abort_code.is_some() => aborts.push(bad()),
                Some(Ending::Signal) => signals.push(bad()),
                _ => {}
            }
        }
    }
    (aborts, signals)
}

/// "rank 3", or "rank 3 of ocean" when the run has several programs; a
/// process without an MPI rank by its pid.
fn who(p: &Program, index: usize, several: bool) -> String {
    let r = &p.rank_info[index];
    let mut s = if r.world_rank >= 0 {
        format!("rank {}", r.world_rank)
    } else {
        format!("process {}", r.pid)
    };
    if several {
        s.push_str(&format!(" of {}", p.name));
    }
    s
}

/// The common name of signal `n` (`SIGKILL`), or `signal n`.
pub fn signal_name(n: i32) -> String {
    let name = match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        _ => return format!("signal {n}"),
    };
    format!("{name} ({n})")
}

/// A list of at most [`NAMED`] names, then how many more.
fn list(names: Vec<String>) -> String {
    let n = names.len();
    let mut shown: Vec<String> = names.into_iter().take(NAMED).collect();
    if n > NAMED {
        shown.push(format!("{} more", n - NAMED));
    }
    match shown.len() {
        0 | 1 => shown.concat(),
        _ => {
            let last = shown.pop().unwrap_or_default();
            format!("{} and {last}", shown.join(", "))
        }
    }
}

/// How the job ended, when it did not end well: "the job failed: rank 0
/// called MPI_Abort with code 3; 1 rank ended by a signal; exit status 3".
/// `None` for a job that ended normally (or of which nothing bad is
/// known). The summary's first line ends with it, and the report shows it
/// at the top.
pub fn job_failure(run: &Run) -> Option<String> {
    let (aborts, signals) = bad_ranks(run);
    let mut parts = Vec::new();
    if !aborts.is_empty() {
        let mut by_code: Vec<(Option<i32>, Vec<String>)> = Vec::new();
        for a in aborts {
            match by_code.iter_mut().find(|(c, _)| *c == a.abort_code) {
                Some((_, who)) => who.push(a.who),
                None => by_code.push((a.abort_code, vec![a.who])),
            }
        }
        for (code, who) in by_code {
            let n = who.len();
            let code = code.map_or(String::new(), |c| format!(" with code {c}"));
            let verb = if n == 1 { "called" } else { "each called" };
            parts.push(format!("{} {verb} MPI_Abort{code}", list(who)));
        }
    }
    if !signals.is_empty() {
        let n = signals.len();
        let who = signals.into_iter().map(|b| b.who).collect();
        parts.push(format!(
            "{} ended by a signal",
            if n <= NAMED {
                list(who)
            } else {
                format!("{n} ranks")
            }
        ));
    }
    match run.exit {
        Some(hark_model::Exit {
            signal: Some(sig), ..
        }) => parts.push(format!("the command was ended by {}", signal_name(sig))),
        Some(hark_model::Exit {
            code: Some(code), ..
        }) if code != 0 => parts.push(format!("exit status {code}")),
        _ => {}
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("the job failed: {}", parts.join("; ")))
}

/// How the job ended in a word or two, for a column of `hark runs`: `ok`,
/// `MPI_Abort 3`, `signal SIGKILL`, `exit 3`; `ok?` when nothing bad is
/// known but neither is the command's status (a served job, an older
/// profile).
pub fn status_word(run: &Run) -> String {
    let (aborts, signals) = bad_ranks(run);
    if let Some(a) = aborts.first() {
        return a
            .abort_code
            .map_or("MPI_Abort".to_string(), |c| format!("MPI_Abort {c}"));
    }
    match run.exit {
        Some(hark_model::Exit {
            signal: Some(sig), ..
        }) => return format!("killed {}", short_signal(sig)),
        Some(hark_model::Exit {
            code: Some(code), ..
        }) if code != 0 => return format!("exit {code}"),
        _ => {}
    }
    if !signals.is_empty() {
        return "signal".into();
    }
    match run.exit {
        Some(_) => "ok".into(),
        None => "ok?".into(),
    }
}

/// `SIGKILL` alone, or the number.
fn short_signal(n: i32) -> String {
    signal_name(n)
        .split(' ')
        .next()
        .map_or_else(|| n.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_model::{Exit, RankInfo};

    fn run(ranks: &[(Option<Ending>, Option<i32>)], exit: Option<Exit>) -> Run {
        let rank_info = ranks
            .iter()
            .enumerate()
            .map(|(i, (ended, abort_code))| RankInfo {
                world_rank: i as i32,
                ended: *ended,
                abort_code: *abort_code,
                ..RankInfo::default()
            })
            .collect();
        Run {
            programs: vec![Program {
                name: "lmp".into(),
                ranks: ranks.len(),
                rank_info,
                ..Program::default()
            }],
            exit,
            ..Run::default()
        }
    }

    const FIN: (Option<Ending>, Option<i32>) = (Some(Ending::Finalize), None);

    #[test]
    fn a_normal_job_says_nothing_and_is_ok() {
        let r = run(&[FIN, FIN], Some(Exit::default()));
        assert_eq!(job_failure(&r), None);
        assert_eq!(status_word(&r), "ok");
        assert_eq!(status_word(&run(&[FIN], None)), "ok?");
    }

    #[test]
    fn an_abort_names_the_rank_its_code_and_the_exit_status() {
        let r = run(
            &[(Some(Ending::Abort), Some(3)), (Some(Ending::Signal), None)],
            Some(Exit {
                code: Some(3),
                signal: None,
            }),
        );
        assert_eq!(
            job_failure(&r).unwrap(),
            "the job failed: rank 0 called MPI_Abort with code 3; rank 1 ended by a signal; exit status 3"
        );
        assert_eq!(status_word(&r), "MPI_Abort 3");
    }

    #[test]
    fn many_aborting_ranks_are_counted_past_three() {
        let a = (Some(Ending::Abort), Some(1));
        let r = run(&[a, a, a, a, a], None);
        assert_eq!(
            job_failure(&r).unwrap(),
            "the job failed: rank 0, rank 1, rank 2 and 2 more each called MPI_Abort with code 1"
        );
    }

    #[test]
    fn a_killed_command_is_named_by_its_signal() {
        let r = run(
            &[(None, None)],
            Some(Exit {
                code: None,
                signal: Some(9),
            }),
        );
        assert_eq!(
            job_failure(&r).unwrap(),
            "the job failed: the command was ended by SIGKILL (9)"
        );
        assert_eq!(status_word(&r), "killed SIGKILL");
        let failed = run(
            &[FIN],
            Some(Exit {
                code: Some(2),
                signal: None,
            }),
        );
        assert_eq!(status_word(&failed), "exit 2");
    }
}
