//! `hark run`: measure a command from start to end.
//!
//! 1. find the probe and start the embedded server on a Unix socket in a
//!    private temporary directory;
//! 2. run the command with `LD_PRELOAD` and `HARK_*` set (and named on the
//!    launcher's command line, see [`crate::launch`]), its standard streams
//!    untouched but a launcher's stderr, which is passed on as it comes and
//!    read for the probes' "cannot reach" warnings ([`crate::unreached`]);
//! 3. show what arrives on stderr while it runs;
//! 4. when it ends, let the server drain and fold the run, write the run
//!    directory, print the summary and the directory's path (on stderr, so
//!    the program's stdout stays exactly its own), and exit with the
//!    command's status.

use crate::cli::RunArgs;
use crate::output::print_stderr;
use crate::status::{Mode, Progress, StatusLine};
use crate::unreached::Said;
use crate::{probe, rundir, settings};
use anyhow::{anyhow, bail, Context, Result};
use hark_launch::{self as launch, Launcher};
use hark_model::Run;
use hark_server::{Server, ServerConfig};
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use std::time::{Duration, Instant};

/// How long the server waits, once the command has ended, for processes
/// still connected (a daemon the program left behind) before cutting them
/// off and marking them partial.
const GRACE: Duration = Duration::from_secs(10);

/// Runs `hark run`; returns the exit status for `hark`.
pub fn run(args: &RunArgs) -> Result<i32> {
    if args.analyses.iter().any(|a| a == "list") {
        return list_analyses();
    }
    if args.command.is_empty() {
        bail!("no command to measure: write it after `--`, e.g. `hark run -- mpirun -np 4 ./app`");
    }
    settings::check_all(&settings_env(args))?;
    crate::export::check_before_run(&args.export, args.trace.is_some())?;
    // Held while the command runs: the probes on this node then open and
    // close their counters without patching the kernel's text each time.
    let _held = probe::hold_counter_kinds(args.counters.as_deref());
    if let Some(addr) = &args.server {
        if args.trace.is_some() || !args.export.is_empty() {
            bail!("--trace and --export are not available with --server yet: the service writes the run directory; use `hark export` on it afterwards");
        }
        return crate::ctl::run_into_service(args, addr);
    }
    if let Some(spec) = args.analysers {
        return crate::analysers::run(args, spec);
    }
    measure(args)
}

/// `hark run` with its own analysis server: runs the command under the
/// probe and writes the run directory when it ends.
fn measure(args: &RunArgs) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the hark executable")?;
    let probe = probe::locate(args.probe.as_deref(), &exe)?;
    // Said before the live view's address, which would be of no use.
    if let Err(e) = startable(&args.command[0]) {
        return Ok(spawn_failure(&args.command[0], &e));
    }
    let place = rundir::Place::choose(args.output.as_deref(), &args.out_dir);
    let socket_dir = SocketDir::create()?;
    let launcher = launch::detect(&args.command[0]);
    let also = crate::reach::also_listen(launcher, &args.command);
    let server = std::sync::Arc::new(start_server(args, &place, &socket_dir, also)?);
    let view = match args.no_http {
        true => None,
        false => Some(crate::live::start(&args.http, &server, args.quiet)?),
    };

    let env = probe_env(args, &probe, &crate::reach::probe_addr(&server));
    let launch = command_line(args, launcher, &probe, &server, env);
    let argv = &launch.argv;
    let mut spawn = Command::new(&argv[0]);
    spawn.args(&argv[1..]).envs(launch.env.iter().cloned());
    for name in &launch.unset {
        spawn.env_remove(name);
    }
    // A launcher's stderr carries every rank's, on every node: read for
    // the probes that could not connect (`crate::unreached`). Where no
    // pipe or thread can be had, it stays hark's own.
    let said = match launcher {
        Launcher::Other => None,
        _ => Said::pass_on().ok(),
    };
    let said = said.map(|(said, write)| {
        spawn.stderr(write);
        said
    });
    let child = spawn.spawn();
    // Only the launcher holds the pipe's writing end now, so that the
    // reader sees its end when the launcher's output ends.
    drop(spawn);
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return Ok(not_started(&argv[0], &e, server)),
    };
    // The terminal's Ctrl-C and Ctrl-\ reach the whole foreground group: the
    // program decides what they mean, and hark stays to write the report.
    // Ignored only after the spawn: ignored signals would be inherited.
    ignore_terminal_signals();
    let command_pid = child.id();
    // A batch system's SIGTERM (time limit) or a closed session's SIGHUP
    // goes to hark alone: pass it on, and write the report when the command
    // ends.
    hark_os::forward_signals_to(child.id());

    let (status, ended) = wait_showing_progress(&mut child, status_mode(args), &server);
    let status = status.context("cannot wait for the command")?;
    let code = exit_code(status);

    // From here on SIGTERM and SIGINT (a batch system's time limit, a
    // second Ctrl-C) cut the grace period short; the report is still
    // written.
    let hurry = hurry_on_signals();
    let sockets = server.sockets();
    let mut run = crate::live::release(server).finish_unless(GRACE, hurry);
    run.exit = Some(exit_of(status));
    run.command_pid = Some(command_pid);
    if let Some(said) = &said {
        said.wait_end(Duration::from_secs(2));
        said.attach(&mut run);
    }
    if let Some(view) = &view {
        view.finished(&run);
    }
    let analysed = ended.elapsed();
    let written = write_outputs(args, &place, &run);
    let ready = ended.elapsed();
    drop(socket_dir);
    if args.verbose {
        say_ready(ready, analysed, sockets);
        say_cpu(run.accounting.events_analysed);
    }
    if !args.quiet {
        say_summary(args, &run, &written, code);
    }
    Ok(code)
}

/// Starts the embedded analysis server on the socket in `socket_dir`.
/// `also`: more addresses to listen on (TCP, for ranks on other nodes).
fn start_server(
    args: &RunArgs,
    place: &rundir::Place,
    socket_dir: &SocketDir,
    also: Vec<String>,
) -> Result<Server> {
    // The secret keeps other processes of the user from joining the run:
    // the probes get it in HARK_ADDR, the server refuses streams without it.
    let secret =
        hark_server::new_secret().context("cannot read /dev/urandom for the run's secret")?;
    crate::alloc::fix_mmap_threshold();
    hark_analyser::test_match_bound();
    Server::start(ServerConfig {
        addr: format!("unix:{}", socket_dir.socket().display()),
        // On TCP anyone on the network may connect: one that says nothing
        // is cut off, as `hark serve` does.
        hello_timeout: (!also.is_empty()).then_some(Duration::from_secs(10)),
        also,
        analyses: (!args.analyses.is_empty()).then(|| args.analyses.clone()),
        secret: Some(secret),
        rows: args.rows.map_or(ServerConfig::default().rows, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        }),
        trace: args
            .trace
            .clone()
            .map(|selection| hark_server::trace::TraceConfig {
                dir: crate::trace::staging(place.parent()),
                selection,
                cap_bytes: args
                    .trace_cap
                    .unwrap_or(hark_server::trace::DEFAULT_TRACE_CAP),
            }),
        ..ServerConfig::default()
    })
    // The server's error already names its cause: no chain to print twice.
    .map_err(|e| anyhow!("cannot start the analysis server: {e}"))
}

/// The command line to run and its environment: the command with the
/// probe's preloads and the environment `env` given where its launcher
/// wants them (`hark run -v` shows it; [`crate::reach::launch_line`]).
fn command_line(
    args: &RunArgs,
    launcher: Launcher,
    probe: &Path,
    server: &Server,
    env: Vec<(String, String)>,
) -> crate::reach::Launch {
    let command = launch::with_given_preloads(launcher, &args.command, probe);
    let launch = crate::reach::launch_line(launcher, &command, env);
    let argv = &launch.argv;
    if args.verbose {
        print_stderr(&format!(
            "hark: probe {}\nhark: server listening on {}\nhark: launcher: {}\nhark: running {}\n",
            probe.display(),
            server.addrs().join(", "),
            match launcher {
                Launcher::OpenMpi => "Open MPI (the probe preloaded into the ranks with -x)",
                Launcher::Hydra => "MPICH Hydra (the probe preloaded into the ranks with -genv)",
                Launcher::Slurm =>
                    "Slurm's srun (the probe preloaded into the tasks with --export)",
                Launcher::Other => "none known (the command inherits the environment)",
            },
            argv.join(" ")
        ));
    }
    launch
}

/// The command `program` could not start: says why, ends the server and
/// returns [`spawn_failure`]'s status.
fn not_started(program: &str, e: &std::io::Error, server: std::sync::Arc<Server>) -> i32 {
    let code = spawn_failure(program, e);
    let _ = crate::live::release(server).finish(Duration::ZERO);
    code
}

/// Whether `program` can be started: found (on `PATH` when it names no
/// directory), a file, and executable; else the error starting it would
/// give.
fn startable(program: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    const ENOENT: i32 = 2;
    const EACCES: i32 = 13;
    let executable =
        |p: &Path| std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return match executable(Path::new(program))? {
            true => Ok(()),
            false => Err(std::io::Error::from_raw_os_error(EACCES)),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(program)).unwrap_or(false)) {
        return Ok(());
    }
    Err(std::io::Error::from_raw_os_error(ENOENT))
}

/// Says on stderr that `program` could not start; returns what a shell
/// answers for a command it cannot find or run.
pub(crate) fn spawn_failure(program: &str, e: &std::io::Error) -> i32 {
    print_stderr(&format!("hark: error: cannot run `{program}`: {e}\n"));
    if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// How the status line shows the run's progress on stderr.
fn status_mode(args: &RunArgs) -> Mode {
    if args.quiet {
        Mode::Off
    } else if args.verbose {
        Mode::Verbose
    } else if std::io::stderr().is_terminal() {
        Mode::Lines
    } else {
        Mode::Off
    }
}

/// Waits for the command, showing the run's progress meanwhile; returns
/// its status and when it ended.
fn wait_showing_progress(
    child: &mut std::process::Child,
    mode: Mode,
    server: &Server,
) -> (std::io::Result<ExitStatus>, Instant) {
    std::thread::scope(|s| {
        let line = StatusLine::start(s, mode, || progress(server));
        let status = child.wait();
        // Reaped: its pid may be reused, so no more forwarding to it.
        hark_os::stop_forwarding();
        let ended = Instant::now();
        line.stop();
        (status, ended)
    })
}

/// Writes the run directory, the trace into it and what `hark run` does
/// after a run; returns the directory's path.
fn write_outputs(args: &RunArgs, place: &rundir::Place, run: &Run) -> Result<PathBuf> {
    let written = write_run_dir(args, place, run);
    if let (Some(_), Ok(dir)) = (&args.trace, &written) {
        if let Err(e) =
            crate::trace::finish(&crate::trace::staging(place.parent()), dir, args.quiet)
        {
            print_stderr(&format!("hark: error: {e:#}\n"));
        }
    }
    if let Ok(dir) = &written {
        after_run(args, run, dir);
    }
    written
}

/// `hark run -v`: how long the report took once the command ended.
/// `sockets`: connections hark accepted (a forwarder's counts once).
fn say_ready(ready: Duration, analysed: Duration, sockets: u64) {
    let peak = peak_memory()
        .map(|b| {
            format!(
                "; hark's peak memory {:.1} MiB",
                b as f64 / (1 << 20) as f64
            )
        })
        .unwrap_or_default();
    print_stderr(&format!(
        "hark: report ready {:.3} s after the command ended (streams drained and analysed in {:.3} s, outputs written in {:.3} s); {sockets} connection(s) into hark{peak}\n",
        ready.as_secs_f64(),
        analysed.as_secs_f64(),
        (ready - analysed).as_secs_f64()
    ));
}

/// `hark run -v`'s last line: hark's own CPU time (this process only, not
/// the command it ran) and the events it analysed per CPU-second.
fn say_cpu(events: u64) {
    print_stderr(&format!(
        "hark: {}\n",
        hark_os::cpu_rate(events, hark_os::cpu_time(false))
    ));
}

/// The run's summary and where its directory is, on stderr.
fn say_summary(args: &RunArgs, run: &Run, written: &Result<PathBuf>, code: i32) {
    let where_ = match written {
        Ok(dir) => format!(
            "Run directory: {} (open report.html in a browser)",
            dir.display()
        ),
        Err(_) => "No run directory: it could not be written (see above).".into(),
    };
    print_stderr(&format!(
        "\n{}\n{where_}\n",
        hark_outputs::summary::render(run)
    ));
    if run.programs.is_empty() {
        print_stderr(&no_process_hint(&args.command[0], code));
    }
}

/// This process's peak resident memory in bytes (`VmHWM`: the server, the
/// live view and the outputs together), where `/proc` tells it.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// What to say when no process connected: a command that failed says why
/// itself (a launcher refusing to start, a program not found), so hark
/// points there before guessing.
fn no_process_hint(command: &str, code: i32) -> String {
    if code != 0 {
        format!(
            "hark: no process connected: `{command}` exited with status {code} before any process of it \
             reached the probe; its own messages above say why.\n"
        )
    } else {
        "hark: no process connected. Statically linked and setuid programs ignore LD_PRELOAD; \
         `hark run -v` shows the command and launcher hark used.\n"
            .to_string()
    }
}

/// The environment the measured processes get.
pub(crate) fn probe_env(args: &RunArgs, probe: &Path, addr: &str) -> Vec<(String, String)> {
    let existing = std::env::var("LD_PRELOAD").ok();
    let mut env = vec![
        (
            "LD_PRELOAD".to_string(),
            hark_launch::preload_value(existing.as_deref(), probe),
        ),
        (hark_settings::ADDR.name.to_string(), addr.to_string()),
    ];
    // The first measured process of a node starts its forwarder with this
    // binary (`docs/cluster.md`, "The forwarder").
    if let Ok(exe) = std::env::current_exe() {
        env.push((
            hark_settings::BIN.name.to_string(),
            exe.display().to_string(),
        ));
    }
    // Named to the launcher, so that it reaches every node.
    for setting in [hark_settings::FORWARD, hark_settings::FORWARD_STATS] {
        if let Ok(value) = std::env::var(setting.name) {
            env.push((setting.name.to_string(), value));
        }
    }
    env.extend(settings_env(args));
    env
}

/// The probe settings `hark run`'s options set.
fn settings_env(args: &RunArgs) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if args.lossless {
        env.push((hark_settings::LOSSLESS.name.into(), "1".into()));
    }
    if let Some(size) = args.pack_size {
        env.push((hark_settings::PACK_SIZE.name.into(), size.to_string()));
    }
    if let Some(n) = args.buffers {
        env.push((hark_settings::BUFFERS.name.into(), n.to_string()));
    }
    if args.no_io {
        env.push((hark_settings::IO.name.into(), "0".into()));
    }
    if let Some(list) = &args.counters {
        env.push((hark_settings::COUNTERS.name.into(), list.clone()));
    }
    if args.counters_in_mpi {
        env.push((hark_settings::COUNTERS_IN_MPI.name.into(), "1".into()));
    }
    if let Some(ms) = args.sensors_ms {
        env.push((hark_settings::SENSORS_MS.name.into(), ms.to_string()));
    }
    if let Some(n) = args.callsite_depth {
        env.push((hark_settings::CALLSITE_DEPTH.name.into(), n.to_string()));
    }
    if let Some(file) = &args.filter {
        // Absolute: ranks may start in another directory.
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        env.push((
            hark_settings::FILTER.name.into(),
            file.display().to_string(),
        ));
    }
    if let Some(t) = &args.throttle {
        env.push((hark_settings::THROTTLE.name.into(), t.clone()));
    }
    env
}

fn progress(server: &Server) -> Progress {
    let s = server.status();
    Progress {
        connected: s.open,
        ended: s.connections.saturating_sub(s.open),
        programs: s.programs as u64,
        events: s.events_received,
    }
}

/// The command's status as a shell reports it: its exit code, or 128 plus
/// the number of the signal that ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// How the command ended, as the run records it.
pub(crate) fn exit_of(status: ExitStatus) -> hark_model::Exit {
    hark_model::Exit {
        code: status.code(),
        signal: status.signal(),
    }
}

/// Set by SIGTERM, SIGINT or SIGHUP once the command has ended: stop
/// waiting for connections still open and write the report now.
fn hurry_on_signals() -> &'static std::sync::atomic::AtomicBool {
    hark_os::flag_on_signals(&[hark_os::SIGTERM, hark_os::SIGINT, hark_os::SIGHUP], true)
}

/// Leaves the terminal's SIGINT and SIGQUIT to the command `hark` started.
pub(crate) fn ignore_terminal_signals() {
    hark_os::ignore_signals(&[hark_os::SIGINT, hark_os::SIGQUIT]);
}

/// Writes every output into the run directory and returns its path. If
/// that fails (a full disk, say), writes them into a new directory under
/// the temporary directory instead and says so; the error, on stderr, is
/// returned only when both fail.
fn write_run_dir(args: &RunArgs, place: &rundir::Place, run: &Run) -> Result<PathBuf> {
    // Named after the program meant, not the shim or `env` that started it.
    let program = hark_outputs::roles::run_name(run)
        .map(str::to_string)
        .unwrap_or_else(|| program_of(&args.command));
    let write = |place: &rundir::Place| -> Result<PathBuf> {
        let dir = place.create(&program)?;
        hark_outputs::write_all(run, &dir, |_| true)
            .with_context(|| format!("cannot write the run directory {}", dir.display()))?;
        Ok(dir)
    };
    let first = match write(place) {
        Ok(dir) => return Ok(dir),
        Err(e) => e,
    };
    let fallback = rundir::Place::temporary();
    print_stderr(&format!(
        "hark: error: {first:#}\nhark: writing the run directory under {} instead\n",
        fallback.parent().display()
    ));
    write(&fallback).inspect_err(|e| print_stderr(&format!("hark: error: {e:#}\n")))
}

/// Records the run in the run index and writes the `--export` formats. A
/// failure of either is reported and leaves the run directory as it is.
pub(crate) fn after_run(args: &RunArgs, run: &Run, dir: &Path) {
    if let Err(e) = crate::runs::record(run, dir, args.index.as_deref()) {
        print_stderr(&format!(
            "hark: warning: the run is not recorded in the run index: {e:#}\n"
        ));
    }
    if !args.export.is_empty() {
        if let Err(e) = crate::export::write(run, dir, &args.export, dir) {
            print_stderr(&format!("hark: error: cannot export the run: {e:#}\n"));
        }
    }
}

/// The file name of the command's first word.
pub(crate) fn program_of(command: &[String]) -> String {
    command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map_or_else(|| "run".into(), |n| n.to_string_lossy().into_owned())
}

fn list_analyses() -> Result<i32> {
    let mut text = String::from("Analyses (select with --analyses a,b,c; summary always runs):\n");
    for a in hark_analyses::registry::all() {
        let spec = a.spec();
        text.push_str(&format!("  {:<16} {}\n", spec.name, spec.description));
    }
    crate::output::print_stdout(&text)?;
    Ok(0)
}

/// A private directory for the server's socket, removed when dropped.
pub(crate) struct SocketDir(PathBuf);

impl SocketDir {
    pub(crate) fn create() -> Result<SocketDir> {
        use std::os::unix::fs::DirBuilderExt;
        // Socket paths are limited to about 100 bytes: fall back to /tmp
        // when TMPDIR is deep.
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() > 60 {
            base = PathBuf::from("/tmp");
        }
        remove_stale(&base);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("hark-{}-{nanos:x}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| {
                format!(
                    "cannot create a directory for the server's socket in {}",
                    base.display()
                )
            })?;
        Ok(SocketDir(dir))
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.0.join("hark.sock")
    }
}

/// Removes the socket directories (`hark-<pid>-<hex>`) that a `hark` which
/// was killed left in `base`: only this user's, and only those whose
/// process no longer exists.
fn remove_stale(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = hark_os::uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hark-"))
            .and_then(|rest| rest.split_once('-'))
            .filter(|(_, hex)| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        let dead = hark_os::process_gone(pid);
        if ours && dead && path.join("hark.sock").exists() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_statuses_read_as_a_shell_reads_them() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9 /* SIGKILL */)), 128 + 9);
        assert_eq!(exit_code(ExitStatus::from_raw(11 /* SIGSEGV */)), 128 + 11);
    }

    #[test]
    fn the_program_is_named_after_the_commands_first_word() {
        assert_eq!(program_of(&["/usr/bin/lmp".into(), "-in".into()]), "lmp");
        assert_eq!(program_of(&[]), "run");
    }
}
