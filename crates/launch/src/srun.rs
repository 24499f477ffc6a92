//! Slurm's `srun` under `hark run --analysers`: the program's tasks and the
//! analyser ranks started as one MPMD step with `--multi-prog`
//! (`docs/analysers.md`, "Under srun").
//!
//! `srun -n W [options] ./app args` becomes `srun -n W+N [options]
//! --multi-prog FILE`, the file giving tasks `0..W-1` the program and tasks
//! `W..W+N-1` the analyser. One step, so one `MPI_COMM_WORLD`, with the
//! analysers as its last N ranks, as the other launchers' MPMD syntax gives
//! them. A heterogeneous step (`srun ... : ...`) would need a heterogeneous
//! allocation; `--multi-prog` runs in any allocation.
//!
//! Slurm reads the file itself and splits each line at white space, and
//! replaces `%t` and `%o` in the arguments: a program whose arguments hold
//! white space, quotes or `%` is refused, with why.

/// srun's options that take a value as the next word (when not written
/// `--option=value`, or, for the short ones, glued: `-n4`).
const VALUED: &[&str] = &[
    "-A",
    "--account",
    "-b",
    "--begin",
    "-c",
    "--cpus-per-task",
    "-C",
    "--constraint",
    "--cpu-bind",
    "--cpu-freq",
    "-d",
    "--dependency",
    "-D",
    "--chdir",
    "--distribution",
    "-m",
    "-e",
    "--error",
    "--export",
    "--gres",
    "--gpus",
    "-G",
    "-i",
    "--input",
    "-J",
    "--job-name",
    "-L",
    "--licenses",
    "--mem",
    "--mem-per-cpu",
    "--mem-bind",
    "--mpi",
    "-n",
    "--ntasks",
    "-N",
    "--nodes",
    "--ntasks-per-node",
    "--nodelist",
    "-w",
    "--exclude",
    "-x",
    "-o",
    "--output",
    "-p",
    "--partition",
    "-q",
    "--qos",
    "-r",
    "--relative",
    "--reservation",
    "-S",
    "--core-spec",
    "--signal",
    "-t",
    "--time",
    "-T",
    "--threads",
    "-W",
    "--wait",
    "--het-group",
    "--network",
    "--slurmd-debug",
    "--kill-on-bad-exit",
];

/// Whether `program` (a command's first word) is Slurm's `srun`.
pub fn is_srun(program: &str) -> bool {
    std::path::Path::new(program)
        .file_name()
        .is_some_and(|n| n == "srun")
}

/// An `srun` command line taken apart: its options, the task count and
/// where the program starts.
struct Parts<'a> {
    /// The options, each with its value, less the task count.
    options: Vec<&'a str>,
    tasks: Option<usize>,
    /// The program and its arguments.
    program: &'a [String],
}

/// Takes `command` (`srun [options] program [args]`) apart; an error says
/// what cannot be run as an MPMD step.
fn parts(command: &[String]) -> Result<Parts<'_>, String> {
    let mut options = Vec::new();
    let mut tasks = None;
    let mut i = 1;
    while let Some(arg) = command.get(i).filter(|a| a.starts_with('-')) {
        let (name, glued) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ if !arg.starts_with("--") && arg.len() > 2 => (&arg[..2], Some(&arg[2..])),
            _ => (arg.as_str(), None),
        };
        if name == "--multi-prog" {
            return Err("the srun command already uses --multi-prog".into());
        }
        let takes = VALUED.contains(&name);
        let value = match (takes, glued) {
            (true, Some(v)) => Some(v),
            (true, None) => {
                i += 1;
                Some(
                    command
                        .get(i)
                        .map(String::as_str)
                        .ok_or_else(|| format!("srun's {name} has no value"))?,
                )
            }
            // A flag glued to other short flags (`-lK`) is kept as it is.
            (false, _) => None,
        };
        if matches!(name, "-n" | "--ntasks") {
            let v = value.unwrap_or_default();
            tasks = Some(
                v.parse::<usize>()
                    .map_err(|_| format!("srun's task count `{v}` is not a number"))?,
            );
        } else {
            options.push(arg.as_str());
            if let (true, None) = (takes, glued) {
                options.push(value.unwrap_or_default());
            }
        }
        i += 1;
    }
    let program = &command[i.min(command.len())..];
    if program.is_empty() {
        return Err("the srun command names no program".into());
    }
    if program.iter().any(|a| a == ":") {
        return Err("the srun command is a heterogeneous step (`:`)".into());
    }
    Ok(Parts {
        options,
        tasks,
        program,
    })
}

/// The tasks `command` (`srun -n W ...`) starts, when it says.
pub fn tasks(command: &[String]) -> Option<usize> {
    parts(command).ok()?.tasks
}

/// The program `command` (`srun [options] program ...`) runs.
pub fn program(command: &[String]) -> Option<&str> {
    parts(command).ok().map(|p| p.program[0].as_str())
}

/// Whether Slurm's `--multi-prog` passes `word` unchanged as one argument.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && !word
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '\'' | '"' | '\\' | '%' | '#'))
}

/// The line of an MPMD step with an analyser partition: `srun` with the
/// options of `command` and `-n W+N --multi-prog CONFIG`, and the text of
/// the file CONFIG (tasks `0..W-1` run the program, tasks `W..W+N-1`
/// `analyser`). An error says why `command` cannot be run so.
pub fn with_analyser_partition(
    command: &[String],
    n: usize,
    analyser: &[String],
    config: &std::path::Path,
) -> Result<(Vec<String>, String), String> {
    let p = parts(command)?;
    let Some(w) = p.tasks else {
        return Err("the srun command gives no task count: give it one with -n".into());
    };
    if w == 0 || n == 0 {
        return Err("the srun command starts no task".into());
    }
    if let Some(bad) = p.program.iter().chain(analyser).find(|a| !plain(a)) {
        return Err(format!(
            "`{bad}` cannot be written into srun's --multi-prog file (it holds white space, a quote, a backslash, `%` or `#`)"
        ));
    }
    let range = |from: usize, count: usize| match count {
        1 => from.to_string(),
        _ => format!("{from}-{}", from + count - 1),
    };
    let text = format!(
        "# Written by hark run --analysers: the program's tasks, then the analyser ranks.\n{} {}\n{} {}\n",
        range(0, w),
        p.program.join(" "),
        range(w, n),
        analyser.join(" ")
    );
    let mut line = vec![command[0].clone()];
    line.extend(p.options.iter().map(|o| o.to_string()));
    line.extend([
        "-n".to_string(),
        (w + n).to_string(),
        "--multi-prog".to_string(),
        config.display().to_string(),
    ]);
    Ok((line, text))
}

/// The MPI library `program` is linked with, by the soname its dynamic
/// section names: `libmpi.so.40` (Open MPI) or `libmpich.so.12` (MPICH);
/// `None` when it names neither (a script, a static build, MPI reached
/// through another library).
pub fn mpi_library(program: &str) -> Option<&'static str> {
    use std::io::Read;
    let path = crate::which(program)?;
    // The dynamic string table is near the start of an executable.
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(8 << 20)
        .read_to_end(&mut head)
        .ok()?;
    ["libmpi.so.40", "libmpich.so.12", "libmpi.so.12"]
        .into_iter()
        .find(|name| {
            let mut needle = name.as_bytes().to_vec();
            // The name ends there (not `libmpi.so.400`).
            needle.push(0);
            head.windows(needle.len()).any(|w| w == needle)
        })
        .map(|name| match name {
            "libmpi.so.40" => "libmpi.so.40",
            _ => "libmpich.so.12",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn srun_is_known_by_name() {
        assert!(is_srun("srun"));
        assert!(is_srun("/usr/bin/srun"));
        assert!(!is_srun("mpirun"));
        assert!(!is_srun("./srun-like"));
    }

    #[test]
    fn an_srun_step_becomes_one_mpmd_step_with_the_analysers_last() {
        let analyser = words("/h/hark mpi-analyser --analysers 2");
        let config = std::path::Path::new("/tmp/x.conf");
        for (command, options) in [
            ("srun -n 4 --mpi=pmi2 ./app a b", "--mpi=pmi2"),
            ("srun -N2 -n4 --mpi pmi2 ./app a b", "-N2 --mpi pmi2"),
            ("srun --ntasks=4 -l ./app a b", "-l"),
            ("srun --ntasks 4 -p debug ./app a b", "-p debug"),
        ] {
            let (line, text) =
                with_analyser_partition(&words(command), 2, &analyser, config).unwrap();
            let mut want = vec!["srun".to_string()];
            want.extend(words(options));
            want.extend(words("-n 6 --multi-prog /tmp/x.conf"));
            assert_eq!(line, want, "{command}");
            let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            assert_eq!(
                lines,
                ["0-3 ./app a b", "4-5 /h/hark mpi-analyser --analysers 2"],
                "{command}"
            );
        }
        let (_, text) =
            with_analyser_partition(&words("srun -n 1 ./app"), 1, &analyser, config).unwrap();
        assert!(text.contains("\n0 ./app\n1 /h/hark"), "{text}");
        assert_eq!(tasks(&words("srun -N 2 -n3 ./app")), Some(3));
        assert_eq!(program(&words("srun -N 2 -n3 ./app -n 9")), Some("./app"));
    }

    #[test]
    fn what_cannot_be_one_mpmd_step_is_refused_with_why() {
        let a = words("hark mpi-analyser");
        let config = std::path::Path::new("/tmp/x.conf");
        for (command, says) in [
            ("srun ./app", "with -n"),
            ("srun -n 2 --multi-prog x.conf", "already uses --multi-prog"),
            ("srun -n 2 ./a : -n 1 ./b", "heterogeneous"),
            ("srun -n 2 ./a 50%", "cannot be written"),
            ("srun -n", "has no value"),
            ("srun -n two ./a", "not a number"),
            ("srun -n 2", "names no program"),
        ] {
            let e = with_analyser_partition(&words(command), 1, &a, config).unwrap_err();
            assert!(e.contains(says), "{command}: {e}");
        }
    }

    #[test]
    fn the_mpi_library_is_read_from_the_programs_dynamic_section() {
        let dir = std::env::temp_dir().join(format!("hark-srun-lib-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (bytes, want) in [
            (
                &b"\x7fELF...libc.so.6\0libmpi.so.40\0"[..],
                Some("libmpi.so.40"),
            ),
            (&b"\x7fELF...libmpich.so.12\0"[..], Some("libmpich.so.12")),
            (&b"\x7fELF...libmpi.so.400\0"[..], None),
            (&b"#!/bin/sh\n"[..], None),
        ] {
            let p = dir.join("prog");
            std::fs::write(&p, bytes).unwrap();
            assert_eq!(mpi_library(&p.display().to_string()), want);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
