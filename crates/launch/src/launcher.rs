//! Launching the measured command: which launcher it starts with, and how
//! to make sure the probe's environment reaches every process it starts.
//!
//! `hark run` sets `LD_PRELOAD` and the `HARK_*` variables in the
//! environment of the command it runs. A plain command inherits them; so do
//! the processes a local `mpirun` starts. To be safe on more than one node
//! too, the variables are also named on the launcher's command line:
//!
//! - Open MPI (`mpirun`, `mpiexec`, `orterun`, `prterun`): `-x NAME` for each
//!   variable, right after the launcher's name and again after every `:`
//!   (Open MPI applies `-x` to one application context only, so each
//!   program of an MPMD launch gets its own).
//! - MPICH's Hydra (`mpiexec.hydra`, `mpirun.mpich`, ...): one
//!   `-genvlist NAME,NAME,...` after the launcher's name (global to all
//!   programs).
//! - Anything else (`srun`, scripts, a serial program) is run as given.
//!
//! An `LD_PRELOAD` the user gives the launcher itself would replace the one
//! passed this way: [`with_given_preloads`] adds the probe to it.
//!
//! The probe itself stays passive in launcher processes, so preloading it
//! into `mpirun` costs nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The launcher a command starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI's `mpirun` / `mpiexec` / `orterun` / `prterun`.
    OpenMpi,
    /// MPICH's Hydra `mpiexec`.
    Hydra,
    /// Slurm's `srun`.
    Slurm,
    /// Not an MPI launcher we know: a program, a script, `srun`...
    Other,
}

/// Names that are Open MPI's launcher whatever `PATH` says.
const OPEN_MPI: &[&str] = &["orterun", "prterun", "mpirun.openmpi", "mpiexec.openmpi"];
/// Names that are Hydra's.
const HYDRA: &[&str] = &[
    "mpiexec.hydra",
    "mpirun.mpich",
    "mpiexec.mpich",
    "mpirun.hydra",
];
/// Names shared by both (and others); decided by where they lead.
const GENERIC: &[&str] = &["mpirun", "mpiexec"];

/// Which launcher `program` (a command's first word) is. A generic name
/// (`mpirun`) is followed through symbolic links (Debian's alternatives
/// lead to `orterun` or `mpiexec.hydra`); failing that, its `--version`
/// output decides.
pub fn detect(program: &str) -> Launcher {
    let name = file_name(Path::new(program));
    if let Some(l) = by_name(&name) {
        return l;
    }
    if !GENERIC.contains(&name.as_str()) {
        return Launcher::Other;
    }
    if let Some(path) = which(program) {
        if let Ok(real) = std::fs::canonicalize(&path) {
            if let Some(l) = by_name(&file_name(&real)) {
                return l;
            }
        }
    }
    by_version(program)
}

fn by_name(name: &str) -> Option<Launcher> {
    if OPEN_MPI.contains(&name) {
        Some(Launcher::OpenMpi)
    } else if HYDRA.contains(&name) {
        Some(Launcher::Hydra)
    } else if name == "srun" {
        Some(Launcher::Slurm)
    } else {
        None
    }
}

fn by_version(program: &str) -> Launcher {
    let Ok(out) = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
    else {
        return Launcher::Other;
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if text.contains("Open MPI") || text.contains("OpenRTE") || text.contains("PRRTE") {
        Launcher::OpenMpi
    } else if text.contains("HYDRA") || text.contains("MPICH") {
        Launcher::Hydra
    } else {
        Launcher::Other
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `program` as the shell would find it: itself when it holds a `/`, else
/// the first executable of that name on `PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command line to run: `command` with the launcher options that pass
/// `vars` to every process it starts inserted.
pub fn with_env_options(launcher: Launcher, command: &[String], vars: &[&str]) -> Vec<String> {
    let Some((first, rest)) = command.split_first() else {
        return Vec::new();
    };
    let mut out = vec![first.clone()];
    match launcher {
        Launcher::OpenMpi => {
            let pass = |out: &mut Vec<String>| {
                for v in vars {
                    out.push("-x".into());
                    out.push(v.to_string());
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
        Launcher::Hydra => return hydra_env_list(command, vars),
        Launcher::Slurm | Launcher::Other => out.extend(rest.iter().cloned()),
    }
    out
}

/// Hydra passes `mpiexec`'s whole environment to every rank on every node
/// unless told `-genvlist` (or `-genvnone`): then a rank on another node
/// gets only the listed variables (on `mpiexec`'s node the proxy inherits
/// them all anyway). So `vars` are added to a `-genvlist` the user gives,
/// and otherwise left to the default; naming them in a `-genvlist` of our
/// own would cut the program's environment short on every other node.
pub(crate) fn hydra_env_list(command: &[String], vars: &[&str]) -> Vec<String> {
    let mut out = command.to_vec();
    for (i, end) in option_spans(command).into_iter().flatten() {
        if matches!(command[i].as_str(), "-genvlist" | "-envlist") && end == i + 2 {
            let mut list = command[i + 1].clone();
            for v in vars {
                if !list.split(',').any(|n| n == *v) {
                    list = format!("{list},{v}");
                }
            }
            out[i + 1] = list;
        }
    }
    out
}

/// `command` with `probe` added to every `LD_PRELOAD` value given to the
/// launcher itself: `-x LD_PRELOAD=V` (Open MPI), `-env LD_PRELOAD V` or
/// `-genv LD_PRELOAD V` (Hydra). Such a value replaces the one `hark run`
/// passes, so the probe would reach no process; it goes after the user's
/// libraries. The program's own arguments are left alone.
pub fn with_given_preloads(launcher: Launcher, command: &[String], probe: &Path) -> Vec<String> {
    let add = |v: &str| preload_value(Some(v), probe);
    let mut out = command.to_vec();
    for (i, end) in option_spans(command).into_iter().flatten() {
        match (launcher, command[i].as_str(), &command[i + 1..end]) {
            (Launcher::OpenMpi, "-x", [v]) => {
                if let Some(v) = v.strip_prefix("LD_PRELOAD=") {
                    out[i + 1] = format!("LD_PRELOAD={}", add(v));
                }
            }
            (Launcher::Hydra, "-env" | "-genv", [name, v]) if name == "LD_PRELOAD" => {
                out[i + 2] = add(v);
            }
            _ => {}
        }
    }
    out
}

/// The command line of a job with an analyser partition (`docs/analysers.md`; Besnard
/// et al., *Event Streaming for Online Performance Measurements Reduction*):
/// `command` — the programs, as given — with one more application context of
/// `n` ranks running `analyser`, in the launcher's MPMD syntax (`mpirun -np
/// 4 ./app : -np 1 analyser`, `mpiexec -n 4 ./app : -n 1 analyser`). Pass
/// the result through [`with_env_options`] afterwards: Open MPI then gets
/// its `-x` options in the analyser's context too. `None` for a command
/// that is not started by an MPI launcher (it streams over sockets).
pub fn with_analyser_partition(
    launcher: Launcher,
    command: &[String],
    n: usize,
    analyser: &[String],
) -> Option<Vec<String>> {
    let count = match launcher {
        Launcher::OpenMpi => "-np",
        Launcher::Hydra => "-n",
        Launcher::Slurm | Launcher::Other => return None,
    };
    if command.len() < 2 || analyser.is_empty() || n == 0 {
        return None;
    }
    let mut out = command.to_vec();
    out.extend([":".to_string(), count.to_string(), n.to_string()]);
    out.extend(analyser.iter().cloned());
    Some(out)
}

/// Options that take values (two for the `mca`/`env` pairs), so that a
/// value is not taken for the program.
const VALUED: &[(&str, usize)] = &[
    ("-np", 1),
    ("-n", 1),
    ("-c", 1),
    ("--np", 1),
    ("--n", 1),
    ("-x", 1),
    ("-H", 1),
    ("--host", 1),
    ("-host", 1),
    ("-hosts", 1),
    ("--hostfile", 1),
    ("-hostfile", 1),
    ("--machinefile", 1),
    ("-machinefile", 1),
    ("--default-hostfile", 1),
    ("--rankfile", 1),
    ("-rf", 1),
    ("-f", 1),
    ("--map-by", 1),
    ("--bind-to", 1),
    ("--rank-by", 1),
    ("-npernode", 1),
    ("--npernode", 1),
    ("-ppn", 1),
    ("-wdir", 1),
    ("--wdir", 1),
    ("-genvlist", 1),
    ("-envlist", 1),
    ("-mca", 2),
    ("--mca", 2),
    ("-gmca", 2),
    ("--gmca", 2),
    ("-genv", 2),
    ("-env", 2),
    // srun's
    ("-N", 1),
    ("--nodes", 1),
    ("-w", 1),
    ("--nodelist", 1),
    ("-p", 1),
    ("--partition", 1),
    ("-t", 1),
    ("--time", 1),
    ("-J", 1),
    ("--job-name", 1),
    ("-A", 1),
    ("--account", 1),
    ("--ntasks", 1),
    ("--ntasks-per-node", 1),
    ("--cpus-per-task", 1),
    ("-D", 1),
    ("--chdir", 1),
    ("--mpi", 1),
    ("--export", 1),
];

/// The launcher's options of every application context of `command`, each
/// with its values, context by context: the words before each context's
/// program. An option this does not know is taken for a flag.
pub fn options(command: &[String]) -> Vec<Vec<(&str, &[String])>> {
    option_spans(command)
        .into_iter()
        .map(|context| {
            (context.into_iter())
                .map(|(i, end)| (command[i].as_str(), &command[i + 1..end]))
                .collect()
        })
        .collect()
}

/// Where [`options`] finds them: per application context, each option's
/// index in `command` and the end (exclusive) of its values.
pub(crate) fn option_spans(command: &[String]) -> Vec<Vec<(usize, usize)>> {
    let mut contexts = Vec::new();
    let mut start = 1;
    while start <= command.len() {
        let len = command[start..].iter().position(|a| a == ":");
        let stop = len.map_or(command.len(), |n| start + n);
        let mut spans = Vec::new();
        let mut i = start;
        while let Some(arg) = command.get(i).filter(|a| i < stop && a.starts_with('-')) {
            let n = VALUED.iter().find(|(o, _)| o == arg).map_or(0, |v| v.1);
            let end = (i + 1 + n).min(stop);
            spans.push((i, end));
            i = end;
        }
        contexts.push(spans);
        start = stop + 1;
    }
    contexts
}

/// The writer ranks `command` starts: the sum of each application context's
/// process count (`-np`, `-n`, `-c`, `--np`, `--n`, before its program).
/// `None` when a context gives none (the launcher would then fill the
/// machine), or when an option this does not know hides the program: give
/// `--analysers` a count instead of a ratio then.
pub fn writers(command: &[String]) -> Option<usize> {
    command.get(1..)?;
    let mut total = 0;
    for context in options(command) {
        let mut found = None;
        for (option, values) in context {
            let n = match option
                .strip_prefix("--np=")
                .or_else(|| option.strip_prefix("-np="))
                .or_else(|| option.strip_prefix("--n="))
            {
                Some(n) => n,
                None if ["-np", "-n", "-c", "--np", "--n"].contains(&option) => {
                    values.first()?.as_str()
                }
                None => continue,
            };
            found = Some(n.parse::<usize>().ok()?);
        }
        total += found?;
    }
    Some(total)
}

/// `LD_PRELOAD` for the child: libraries the user already preloads come
/// first (so a tool of theirs still sees every call first), then the probe.
pub fn preload_value(existing: Option<&str>, probe: &Path) -> String {
    let probe = probe.display().to_string();
    match existing.map(str::trim) {
        Some(e) if !e.is_empty() => {
            let kept: Vec<&str> = e
                .split([':', ' '])
                .filter(|s| !s.is_empty() && *s != probe)
                .collect();
            if kept.is_empty() {
                probe
            } else {
                format!("{}:{probe}", kept.join(":"))
            }
        }
        _ => probe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn launchers_are_known_by_name() {
        let cases = [
            ("orterun", Launcher::OpenMpi),
            ("/usr/bin/mpirun.openmpi", Launcher::OpenMpi),
            ("mpiexec.hydra", Launcher::Hydra),
            ("mpirun.mpich", Launcher::Hydra),
            ("./a.out", Launcher::Other),
            ("srun", Launcher::Slurm),
            ("/usr/bin/srun", Launcher::Slurm),
            ("python3", Launcher::Other),
        ];
        for (program, want) in cases {
            assert_eq!(detect(program), want, "{program}");
        }
    }

    #[test]
    fn the_installed_generic_launchers_are_followed_to_their_flavour() {
        // Debian: mpirun -> /etc/alternatives/mpirun -> orterun (Open MPI is
        // the default alternative on the machines this runs on).
        for (program, want) in [
            ("mpirun.openmpi", Launcher::OpenMpi),
            ("mpirun.mpich", Launcher::Hydra),
        ] {
            if which(program).is_none() {
                eprintln!("skipped {program}: not installed");
                continue;
            }
            assert_eq!(detect(program), want, "{program}");
        }
        if let (Some(generic), Some(_)) = (which("mpirun"), which("orterun")) {
            let real = std::fs::canonicalize(generic).unwrap();
            let want = if real.ends_with("orterun") {
                Launcher::OpenMpi
            } else {
                Launcher::Hydra
            };
            assert_eq!(detect("mpirun"), want);
        }
    }

    #[test]
    fn open_mpi_gets_the_variables_in_every_application_context() {
        let cmd = words("mpirun -np 2 ./a : -np 3 ./b x");
        assert_eq!(
            with_env_options(Launcher::OpenMpi, &cmd, &["LD_PRELOAD", "HARK_ADDR"]),
            words("mpirun -x LD_PRELOAD -x HARK_ADDR -np 2 ./a : -x LD_PRELOAD -x HARK_ADDR -np 3 ./b x")
        );
    }

    #[test]
    fn hydra_passes_the_whole_environment_or_the_user_s_list_with_ours() {
        // Hydra's default passes everything; a list of our own would cut
        // the rest off on other nodes.
        let cmd = words("mpiexec.hydra -n 2 ./a : -n 1 ./b");
        assert_eq!(
            with_env_options(Launcher::Hydra, &cmd, &["LD_PRELOAD", "HARK_ADDR"]),
            cmd
        );
        let cmd = words("mpiexec.hydra -genvlist PATH,HOME -n 2 ./a : -envlist X -n 1 ./b");
        assert_eq!(
            with_env_options(Launcher::Hydra, &cmd, &["HARK_ADDR", "HOME"]),
            words("mpiexec.hydra -genvlist PATH,HOME,HARK_ADDR -n 2 ./a : -envlist X,HARK_ADDR,HOME -n 1 ./b")
        );
    }

    #[test]
    fn a_preload_given_to_the_launcher_keeps_the_probe() {
        let probe = Path::new("/p/libhark.so");
        let cmd = words(
            "mpirun -np 2 -x LD_PRELOAD=/u/a.so ./a -x LD_PRELOAD=x : -x LD_PRELOAD=b.so -np 1 ./b",
        );
        assert_eq!(
            with_given_preloads(Launcher::OpenMpi, &cmd, probe),
            words("mpirun -np 2 -x LD_PRELOAD=/u/a.so:/p/libhark.so ./a -x LD_PRELOAD=x : -x LD_PRELOAD=b.so:/p/libhark.so -np 1 ./b")
        );
        let cmd =
            words("mpiexec -genv LD_PRELOAD a.so -n 2 -env LD_PRELOAD b.so ./a -env LD_PRELOAD c");
        assert_eq!(
            with_given_preloads(Launcher::Hydra, &cmd, probe),
            words("mpiexec -genv LD_PRELOAD a.so:/p/libhark.so -n 2 -env LD_PRELOAD b.so:/p/libhark.so ./a -env LD_PRELOAD c")
        );
        // Another launcher's syntax, or none, is not touched.
        let cmd = words("srun -x LD_PRELOAD=a.so ./a");
        assert_eq!(with_given_preloads(Launcher::Other, &cmd, probe), cmd);
        let cmd = words("mpirun -np 2 -x OTHER=a.so -x LD_PRELOAD ./a");
        assert_eq!(with_given_preloads(Launcher::OpenMpi, &cmd, probe), cmd);
    }

    #[test]
    fn other_commands_run_as_given() {
        let cmd = words("./serial in.txt : out");
        assert_eq!(with_env_options(Launcher::Other, &cmd, &["HARK_ADDR"]), cmd);
        assert!(with_env_options(Launcher::Other, &[], &["HARK_ADDR"]).is_empty());
    }

    #[test]
    fn an_analyser_partition_is_one_more_context_in_each_syntax() {
        let analyser = words("hark analyse --map blocks");
        assert_eq!(
            with_analyser_partition(
                Launcher::OpenMpi,
                &words("mpirun -np 4 ./app : -np 2 ./other x"),
                2,
                &analyser
            ),
            Some(words(
                "mpirun -np 4 ./app : -np 2 ./other x : -np 2 hark analyse --map blocks"
            ))
        );
        assert_eq!(
            with_analyser_partition(Launcher::Hydra, &words("mpiexec -n 4 ./app"), 1, &analyser),
            Some(words("mpiexec -n 4 ./app : -n 1 hark analyse --map blocks"))
        );
        assert_eq!(
            with_analyser_partition(Launcher::Other, &words("./serial"), 1, &analyser),
            None
        );
        // Then the environment reaches the analyser's context as well.
        let line = with_analyser_partition(
            Launcher::OpenMpi,
            &words("mpirun -np 2 ./a"),
            1,
            &words("an"),
        )
        .unwrap();
        assert_eq!(
            with_env_options(Launcher::OpenMpi, &line, &["HARK_VIRTUALISE"]),
            words("mpirun -x HARK_VIRTUALISE -np 2 ./a : -x HARK_VIRTUALISE -np 1 an")
        );
    }

    #[test]
    fn writers_are_counted_over_every_context() {
        for (cmd, want) in [
            ("mpirun -np 4 ./app : -np 2 ./other -n 7", Some(6)),
            ("mpirun --oversubscribe -x A -n 3 ./app", Some(3)),
            ("mpiexec.hydra -genv A 1 -n 5 ./app : -n 1 ./b", Some(6)),
            ("mpirun --mca btl self -np=2 ./app", Some(2)),
            ("mpirun -c 8 ./app", Some(8)),
            // No count: the launcher fills the machine; unknown to us.
            ("mpirun ./app -n 3", None),
            ("mpirun -np 2 ./a : ./b", None),
            ("mpirun -np many ./a", None),
            ("mpirun", None),
        ] {
            assert_eq!(writers(&words(cmd)), want, "{cmd}");
        }
    }

    #[test]
    fn both_launchers_start_the_analyser_partition_beside_the_programs() {
        for (launcher, command) in [
            (
                Launcher::OpenMpi,
                "mpirun.openmpi --oversubscribe -np 2 echo app",
            ),
            (Launcher::Hydra, "mpiexec.mpich -n 2 echo app"),
        ] {
            let command = words(command);
            if which(&command[0]).is_none() {
                eprintln!("skipped {}: not installed", command[0]);
                continue;
            }
            let line =
                with_analyser_partition(launcher, &command, 1, &words("echo analyser")).unwrap();
            let out = Command::new(&line[0])
                .args(&line[1..])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{line:?}: {out:?}");
            let mut seen: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect();
            seen.sort();
            assert_eq!(seen, ["analyser", "app", "app"], "{line:?}");
        }
    }

    #[test]
    fn the_probe_is_preloaded_after_what_the_user_preloads() {
        let probe = Path::new("/opt/hark/libhark.so");
        let cases = [
            (None, "/opt/hark/libhark.so"),
            (Some(""), "/opt/hark/libhark.so"),
            (Some("/x/a.so"), "/x/a.so:/opt/hark/libhark.so"),
            (
                Some("/x/a.so /x/b.so"),
                "/x/a.so:/x/b.so:/opt/hark/libhark.so",
            ),
            (Some("/opt/hark/libhark.so"), "/opt/hark/libhark.so"),
        ];
        for (existing, want) in cases {
            assert_eq!(preload_value(existing, probe), want, "{existing:?}");
        }
    }
}
