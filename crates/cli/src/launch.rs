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
        Launcher::Hydra => {
            if !vars.is_empty() {
                out.push("-genvlist".into());
                out.push(vars.join(","));
            }
            out.extend(rest.iter().cloned());
        }
        Launcher::Other => out.extend(rest.iter().cloned()),
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
    fn launchers_are_known_by_name() {
        let cases = [
            ("orterun", Launcher::OpenMpi),
            ("/usr/bin/mpirun.openmpi", Launcher::OpenMpi),
            ("mpiexec.hydra", Launcher::Hydra),
            ("mpirun.mpich", Launcher::Hydra),
            ("./a.out", Launcher::Other),
            ("srun", Launcher::Other),
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
    fn hydra_gets_one_global_list() {
        let cmd = words("mpiexec.hydra -n 2 ./a : -n 1 ./b");
        assert_eq!(
            with_env_options(Launcher::Hydra, &cmd, &["LD_PRELOAD", "HARK_ADDR"]),
            words("mpiexec.hydra -genvlist LD_PRELOAD,HARK_ADDR -n 2 ./a : -n 1 ./b")
        );
    }

    #[test]
    fn other_commands_run_as_given() {
        let cmd = words("./serial in.txt : out");
        assert_eq!(with_env_options(Launcher::Other, &cmd, &["HARK_ADDR"]), cmd);
        assert!(with_env_options(Launcher::Other, &[], &["HARK_ADDR"]).is_empty());
    }
}
