//! `hark run --analysers N|R:W -- mpirun ...`: the program's job and its
//! analyser partition started as one MPMD job (`docs/analysers.md`).

use crate::cli::RunArgs;
use crate::output::print_stderr;
use crate::{probe, rundir};
use anyhow::{bail, Context, Result};
use hark_launch::{self as launch, Launcher};
use hark_wire::partition::Analysers;
use std::path::Path;
use std::process::Command;

/// The MPI library an analyser rank opens for each launcher's flavour (the
/// sonames Debian's Open MPI and MPICH install).
fn mpi_library(launcher: Launcher) -> Option<&'static str> {
    match launcher {
        Launcher::OpenMpi => Some("libmpi.so.40"),
        Launcher::Hydra => Some("libmpich.so.12"),
        Launcher::Slurm | Launcher::Other => None,
    }
}

/// Runs the job with `spec` analyser ranks; returns the command's status.
pub fn run(args: &RunArgs, spec: Analysers) -> Result<i32> {
    if args.trace.is_some() {
        bail!("--trace is not available with --analysers yet: the trace store is written by a single server");
    }
    let shape = hark_analyser::Mode::from_env()?;
    let launcher = launch::detect(&args.command[0]);
    let lib = job_library(launcher, &args.command)?;
    let n = analyser_count(args, spec)?;
    let exe = std::env::current_exe().context("cannot find the hark executable")?;
    let probe = probe::locate(args.probe.as_deref(), &exe)?;
    let place = rundir::Place::choose(args.output.as_deref(), &args.out_dir);
    let program = crate::run::program_of(&args.command);
    // Absolute: the analysers may start in another working directory, on
    // another node.
    let dir =
        std::path::absolute(place.create(&program)?).context("cannot name the run directory")?;
    let secret =
        hark_server::new_secret().context("cannot read /dev/urandom for the run's secret")?;
    let pack_size = args.pack_size.unwrap_or_else(|| {
        // As the probes read it (`hark run` has checked it already).
        let env = std::env::var(hark_settings::PACK_SIZE.name).ok();
        hark_settings::PACK_SIZE.number(env.as_deref()).value
    });
    let mut env = job_env(args, &probe, &secret, pack_size, n);
    // This host's slots, counted once: the analysers must not switch the
    // programs' ranks into yielding, and a job short of slots is told why.
    let env_var = |v: &str| std::env::var_os(v).map(|s| s.to_string_lossy().into_owned());
    let here = match launcher {
        Launcher::OpenMpi => {
            hark_launch::slots::local(&args.command, env_var, hark_launch::slots::host_slots)
        }
        _ => None,
    };
    let keep = here.as_ref().is_some_and(|l| l.keep_from_yielding(n));
    let short = here.as_ref().and_then(|l| l.short_of_slots(n));
    if keep {
        env.push((hark_launch::slots::VAR.to_string(), "0".to_string()));
    }
    let mut analyser = analyser_command(args, &exe, lib, n, pack_size, &dir, shape);
    // The way back: analyser rank 0 sends the merged run (and the live
    // snapshots) to this process, which writes the run directory here,
    // whatever the analysers' nodes share.
    let relay =
        hark_analyser::Relay::start(&secret).context("cannot listen for the analysers' results")?;
    analyser.extend(["--hark".into(), relay.addresses()]);
    let view = match args.no_http {
        true => None,
        false => {
            analyser.push("--live".into());
            Some(crate::live::start_with(
                &args.http,
                relay.source(),
                args.quiet,
            )?)
        }
    };
    let (argv, _config) = job_line(args, launcher, &probe, n, &analyser, &env)?;
    if args.verbose {
        say_job(&probe, n, lib, keep, &argv);
    }
    let mut child = match Command::new(&argv[0]).args(&argv[1..]).envs(env).spawn() {
        Ok(child) => child,
        Err(e) => return Ok(crate::run::spawn_failure(&argv[0], &e)),
    };
    crate::run::ignore_terminal_signals();
    let command_pid = child.id();
    hark_os::forward_signals_to(command_pid);
    let status = child.wait().context("cannot wait for the command")?;
    let code = crate::run::exit_code(status);
    // Whatever becomes of the run, `hark` exits with the job's status.
    let mut run = match take_run(args, &relay, &dir, code, n, short) {
        Ok(Some(run)) => run,
        Ok(None) => return Ok(code),
        Err(e) => {
            print_stderr(&format!("hark: error: {e:#}\n"));
            return Ok(code);
        }
    };
    hark_analyser::clean(&dir);
    // Written here, with the command's status: the run that came back has
    // none yet, and a run directory rank 0 or the salvage wrote is written
    // again with it.
    run.exit = Some(crate::run::exit_of(status));
    run.command_pid = Some(command_pid);
    if let Err(e) = hark_outputs::write_all(&run, &dir, |_| true) {
        print_stderr(&format!(
            "hark: error: cannot write the run directory {}: {e:#}\n",
            dir.display()
        ));
        return Ok(code);
    }
    if let Some(view) = &view {
        view.finished(&run);
    }
    drop(relay);
    crate::run::after_run(args, &run, &dir);
    if !args.quiet {
        print_stderr(&format!(
            "\n{}\nRun directory: {} (open report.html in a browser)\n",
            hark_outputs::summary::render(&run),
            dir.display()
        ));
    }
    Ok(code)
}

/// How long `hark run` waits for the analysers' run once the job ended:
/// analyser rank 0 waits for `hark run` to hold it before the job ends,
/// so this only covers a reader thread still parsing it.
const MODEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The job's run, once the job ended with status `code`: the model analyser
/// rank 0 sent back (the caller writes it into `dir`); else the run directory rank 0
/// wrote there itself (it could not reach this process, and `dir` is on a
/// file system its node shares); else the keepers' partial results merged
/// ([`salvage`]). `None`, said on stderr with why, when there is none.
fn take_run(
    args: &RunArgs,
    relay: &hark_analyser::Relay,
    dir: &Path,
    code: i32,
    n: usize,
    short: Option<(usize, usize)>,
) -> Result<Option<hark_model::Run>> {
    let profile = dir.join(hark_outputs::json::FILE_NAME);
    if let Some(run) = relay.take_model(MODEL_WAIT) {
        return Ok(Some(run));
    }
    if !profile.exists() && !salvage(args, dir, code, n)? {
        say_no_run_dir(dir, code, n, short, relay.refused());
        return Ok(None);
    }
    Ok(Some(hark_outputs::json::read(&profile)?))
}

/// The MPI library the analyser ranks open: the launcher's flavour, or
/// under `srun` the one the program is linked with.
fn job_library(launcher: Launcher, command: &[String]) -> Result<&'static str> {
    if launch::srun::is_srun(&command[0]) {
        let Some(program) = launch::srun::program(command) else {
            bail!("--analysers cannot find the program in this srun command: write it as `srun [options] -n TASKS PROGRAM [ARGS]`");
        };
        return launch::srun::mpi_library(program).ok_or_else(|| anyhow::anyhow!(
            "--analysers under srun needs to know which MPI `{program}` uses, and its dynamic section names neither Open MPI's libmpi.so.40 nor MPICH's libmpich.so.12; run it through mpirun or mpiexec instead"
        ));
    }
    mpi_library(launcher).ok_or_else(|| {
        anyhow::anyhow!(
            "--analysers needs an MPI launcher (Open MPI's mpirun, MPICH's mpiexec or Slurm's srun) as the command's first word, not `{}`",
            command[0]
        )
    })
}

/// The command line of the job with its analyser partition, and under
/// `srun` the `--multi-prog` file it names (removed when dropped).
fn job_line(
    args: &RunArgs,
    launcher: Launcher,
    probe: &Path,
    n: usize,
    analyser: &[String],
    env: &[(String, String)],
) -> Result<(Vec<String>, Option<ConfigFile>)> {
    if launch::srun::is_srun(&args.command[0]) {
        let config = ConfigFile::new()?;
        let (line, text) =
            launch::srun::with_analyser_partition(&args.command, n, analyser, &config.0).map_err(
                |e| anyhow::anyhow!("cannot run this srun command with --analysers: {e}"),
            )?;
        std::fs::write(&config.0, text).with_context(|| {
            format!(
                "cannot write srun's --multi-prog file {}",
                config.0.display()
            )
        })?;
        return Ok((line, Some(config)));
    }
    let command = launch::with_given_preloads(launcher, &args.command, probe);
    let line = launch::with_analyser_partition(launcher, &command, n, analyser)
        .context("cannot add the analyser partition to this command")?;
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    Ok((launch::with_env_options(launcher, &line, &names), None))
}

/// srun's `--multi-prog` file, in the temporary directory, removed when
/// dropped (srun reads it when the step starts, on this node).
struct ConfigFile(std::path::PathBuf);

impl ConfigFile {
    fn new() -> Result<ConfigFile> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "hark-multi-prog-{}-{nanos:x}.conf",
            std::process::id()
        ));
        Ok(ConfigFile(path))
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How many analyser ranks `spec` asks for: a number, or a ratio of the
/// command's writer ranks.
fn analyser_count(args: &RunArgs, spec: Analysers) -> Result<usize> {
    let writers = match launch::srun::is_srun(&args.command[0]) {
        true => launch::srun::tasks(&args.command),
        false => launch::writers(&args.command),
    };
    Ok(match spec {
        Analysers::Count(n) => n as usize,
        Analysers::Ratio { .. } => match writers {
            Some(w) => spec.count(w),
            None => bail!(
                "cannot count the writer ranks of this command (an option hides them); give --analysers a number instead of a ratio"
            ),
        },
    })
}

/// The environment the job's processes get: the probe's, streaming over
/// MPI to `n` analysers with packs of `pack_size` bytes.
fn job_env(
    args: &RunArgs,
    probe: &Path,
    secret: &str,
    pack_size: u64,
    n: usize,
) -> Vec<(String, String)> {
    let mut env = crate::run::probe_env(args, probe, &format!("{secret}@mpi:"));
    env.retain(|(k, _)| k != hark_settings::PACK_SIZE.name);
    env.extend([
        (
            hark_settings::PACK_SIZE.name.to_string(),
            pack_size.to_string(),
        ),
        // The analysers are not part of the programs' worlds: each program
        // gets its own, or, with --no-virtualise, all share the writers'.
        (
            hark_settings::VIRTUALISE.name.to_string(),
            if args.no_virtualise { "0" } else { "1" }.to_string(),
        ),
        (hark_settings::MPI_ANALYSERS.name.to_string(), n.to_string()),
        (
            hark_settings::MPI_MAP.name.to_string(),
            args.map.name().to_string(),
        ),
    ]);
    // Named, so that the launcher passes them to other nodes as well: the
    // release's bound, and the tests' hooks (which only a build with the
    // `test-hooks` feature reads).
    for (k, v) in std::env::vars() {
        let pass = k == hark_settings::RELEASE_TIMEOUT_MS.name || k.starts_with("HARK_TEST_");
        if pass && !env.iter().any(|(e, _)| *e == k) {
            env.push((k, v));
        }
    }
    env
}

/// The analyser partition's command line (`hark mpi-analyser`), writing
/// the run into `dir`.
fn analyser_command(
    args: &RunArgs,
    exe: &Path,
    lib: &str,
    n: usize,
    pack_size: u64,
    dir: &Path,
    shape: hark_analyser::Mode,
) -> Vec<String> {
    let mut analyser = vec![
        exe.display().to_string(),
        "mpi-analyser".into(),
        "--mpi-lib".into(),
        lib.into(),
        "--analysers".into(),
        n.to_string(),
        "--pack-size".into(),
        pack_size.to_string(),
        "--map".into(),
        args.map.name().into(),
        "--output".into(),
        dir.display().to_string(),
    ];
    if args.verbose {
        analyser.push("--verbose".into());
    }
    if !args.analyses.is_empty() {
        analyser.extend(["--analyses".into(), args.analyses.join(",")]);
    }
    analyser.extend(["--merge".into(), shape.name().into()]);
    analyser
}

/// `hark run -v`: the probe, the analysers and the command line.
fn say_job(probe: &Path, n: usize, lib: &str, keep: bool, argv: &[String]) {
    print_stderr(&format!(
        "hark: probe {}\nhark: {n} analyser rank(s) over MPI ({lib})\n{}hark: running {}\n",
        probe.display(),
        match keep {
            true => format!("hark: the analyser rank(s) oversubscribe this host: {}=0 keeps the programs' ranks from yielding, as without them\n", hark_launch::slots::VAR),
            false => String::new(),
        },
        argv.join(" ")
    ));
}

/// The analysers' run never reached this process, and the job left no run
/// directory in `dir` nor partial results to merge: says so, and why when
/// it can tell (`refused`: a connection that did not prove the run's
/// secret; `short`: the slots the job needs and those this host has).
fn say_no_run_dir(
    dir: &Path,
    code: i32,
    n: usize,
    short: Option<(usize, usize)>,
    refused: Option<String>,
) {
    let why = match refused {
        Some(r) => format!("; hark run refused a connection to its results channel: {r}"),
        None => "; the analyser ranks' own messages above, if any, say why".into(),
    };
    print_stderr(&format!(
        "hark: error: no run: the analyser ranks' results never reached hark run, and they left no run directory nor partial results in {} (the job ended with status {code}{why})\n",
        dir.display()
    ));
    if let Some((needs, has)) = short {
        print_stderr(&format!(
            "hark: the job needs {needs} slots with its {n} analyser rank(s) and this host has {has}, and Open MPI does not oversubscribe unless told: add --oversubscribe (the analysers then share the programs' cores), or give the analysers hosts of their own (--host, --hostfile)\n"
        ));
    }
}

/// How long `hark run` waits for the analysers' keepers after the job.
const KEEPER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The job ended without the analysers' merge (a rank died and the launcher
/// ended the job): merges the partial results the analysers' keepers left
/// in `dir` and writes the run directory from them (`docs/analysers.md`,
/// "When a rank dies"). Whether there was anything to merge.
fn salvage(args: &RunArgs, dir: &std::path::Path, code: i32, n: usize) -> Result<bool> {
    let Some(found) = hark_analyser::salvage(dir, KEEPER_WAIT)? else {
        return Ok(false);
    };
    let k = found.parts.len();
    // A job that ended well has merged; its run was lost on the way back.
    let why = match code {
        0 => "the analysers' merged run never reached hark run (the job ended with status 0)"
            .to_string(),
        _ => format!("the job ended with status {code} before the analysers merged"),
    };
    let mut problems = vec![format!(
        "{why}; hark run merged the partial results of {k} of the {n} analyser rank(s); ranks \
         whose streams never ended are partial{}",
        if k < n {
            ", and the writers of the analysers whose results are missing are not in the run"
        } else {
            ""
        }
    )];
    problems.extend(found.problems);
    let analyses = (!args.analyses.is_empty()).then_some(args.analyses.as_slice());
    let run = hark_server::merge_partials(found.parts, problems, analyses)
        .map_err(|e| anyhow::anyhow!("cannot merge the analysers' partial results: {e}"))?;
    hark_outputs::write_all(&run, dir, |_| true)
        .with_context(|| format!("cannot write the run directory {}", dir.display()))?;
    print_stderr(&format!(
        "hark: warning: {why}; the run directory holds the partial results of {k} of {n} \
         analyser rank(s)\n"
    ));
    Ok(true)
}
