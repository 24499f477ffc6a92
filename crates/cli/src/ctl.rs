//! `hark ctl` and `hark run --server`: the clients of a running `hark
//! serve`, over its control socket (one JSON line each way, `docs/api.md`).

use crate::cli::RunArgs;
use crate::output::{print_stderr, print_stdout};
use crate::{probe, run};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hark_launch as launch;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Command;

pub const CTL_EXAMPLES: &str = "\
Examples:
  hark ctl list                      your jobs (all jobs for root and the admin group)
  hark ctl 3 pause                   stop recording in every process of job 3
  hark ctl 3 resume
  hark ctl 3 dump                    write a report of job 3 now; it goes on
  hark ctl sample 1/8 3              detailed events from 1 rank in 8 (world rank r % 8 < 1),
                                     exact counts from all (also: hark ctl 3 sample 1 8)
  hark ctl sample 8/8 3              every rank in detail again
The service is found with --server or HARK_SERVER (default unix:/tmp/hark/hark.sock).";

/// Options of `hark ctl`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The service's probe address (unix:PATH; its control socket is
    /// PATH.ctl), or its control socket's path.
    #[arg(
        long,
        value_name = "ADDR",
        env = "HARK_SERVER",
        default_value = "unix:/tmp/hark/hark.sock"
    )]
    pub server: String,

    /// Print the service's JSON answer as it is.
    #[arg(long)]
    pub json: bool,

    /// `list`, or a job (its number or name) followed by `pause`,
    /// `resume`, `dump`, `show` or `sample K N`; or `sample K/N JOB`.
    #[arg(value_name = "WHAT", required = true, num_args = 1..=4)]
    pub what: Vec<String>,
}

/// The control socket of the service at `addr`.
pub fn control_path(addr: &str) -> Result<PathBuf> {
    if let Some(p) = addr.strip_prefix("unix:") {
        return Ok(PathBuf::from(format!("{p}.ctl")));
    }
    if addr.starts_with("tcp:") {
        bail!("a TCP service is controlled through its control socket: give --server its path (`hark serve` printed it)");
    }
    Ok(PathBuf::from(addr))
}

/// Sends one request and returns the answer; an error if the service says
/// no (with its reason).
pub fn request(addr: &str, req: &Value) -> Result<Value> {
    let path = control_path(addr)?;
    let mut s = UnixStream::connect(&path).with_context(|| {
        format!(
            "cannot reach the Hark service's control socket {} (is `hark serve` running?)",
            path.display()
        )
    })?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    s.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(&s).read_line(&mut answer)?;
    let v: Value = serde_json::from_str(&answer)
        .with_context(|| format!("the service answered something else than JSON: {answer:?}"))?;
    if v["ok"] != json!(true) {
        bail!("{}", v["error"].as_str().unwrap_or("the service refused"));
    }
    Ok(v)
}

/// The control request that samples job `run` to `k` of every `n` ranks,
/// refused here already if the numbers make no filter.
fn sample_request(run: &str, k: &str, n: &str) -> Result<Value> {
    let num = |s: &str| -> Result<u32> {
        s.trim().parse().map_err(|_| {
            anyhow!(
                "`{s}` is not a whole number (sample K/N: detailed events from K of every N ranks)"
            )
        })
    };
    let (keep, of) = (num(k)?, num(n)?);
    hark_server::check_sample(keep, of)?;
    Ok(json!({"op": "control", "run": run, "action": "sample", "keep": keep, "of": of}))
}

/// Runs `hark ctl`.
pub fn ctl(args: &CtlArgs) -> Result<i32> {
    let what: Vec<&str> = args.what.iter().map(String::as_str).collect();
    let req = match what.as_slice() {
        ["list"] => json!({"op": "list"}),
        [run, "show"] => json!({"op": "show", "run": run}),
        [run, action @ ("pause" | "resume" | "dump")] => {
            json!({"op": "control", "run": run, "action": action})
        }
        [run, "sample", k, n] => sample_request(run, k, n)?,
        ["sample", kn, run] | [run, "sample", kn] => {
            let Some((k, n)) = kn.split_once('/') else {
                bail!("`{kn}` is not K/N (sample K/N JOB: detailed events from K of every N ranks)");
            };
            sample_request(run, k, n)?
        }
        _ => bail!("expected `list`, RUN followed by pause, resume, dump, show or `sample K N`, or `sample K/N RUN`"),
    };
    let v = request(&args.server, &req)?;
    if args.json {
        print_stdout(&format!("{v}\n"))?;
        return Ok(0);
    }
    let text = match what.as_slice() {
        ["list"] => {
            let mut t = format!(
                "{:>8}  {:<9}  {:>6}  {:>5}  {:>12}  {:<20}  JOB\n",
                "ID", "STATE", "OWNER", "OPEN", "EVENTS", "PROGRAMS"
            );
            for j in v["jobs"].as_array().into_iter().flatten() {
                let programs: Vec<&str> = j["programs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                t.push_str(&format!(
                    "{:>8}  {:<9}  {:>6}  {:>5}  {:>12}  {:<20}  {}\n",
                    j["id"].as_str().unwrap_or("?"),
                    j["state"].as_str().unwrap_or("?"),
                    j["owner"].as_u64().map_or("tcp".into(), |u| u.to_string()),
                    j["open"].to_string(),
                    j["events"].to_string(),
                    programs.join(","),
                    j["job"].as_str().unwrap_or("")
                ));
            }
            t
        }
        [_, "show"] => format!("{:#}\n", v["job"]),
        [run, "dump"] => format!(
            "Dump of job {run} written to {}\n",
            v["dir"].as_str().unwrap_or("?")
        ),
        ["sample", kn, run] | [run, "sample", kn] => {
            format!("Job {run}: sampling {kn} of the ranks sent.\n")
        }
        [run, action, ..] => format!("Job {run}: {action} sent.\n"),
        _ => String::new(),
    };
    print_stdout(&text)?;
    Ok(0)
}

/// `hark run --server ADDR -- COMMAND`: runs the command with the probe
/// streaming into the service under a fresh job token, tells the service
/// when the command has ended, and prints the run directory it wrote.
pub fn run_into_service(args: &RunArgs, addr: &str) -> Result<i32> {
    if args.command.is_empty() {
        bail!("no command to measure: write it after `--`");
    }
    let exe = std::env::current_exe().context("cannot find the hark executable")?;
    let probe = probe::locate(args.probe.as_deref(), &exe)?;
    let token = hark_server::new_secret().context("cannot read /dev/urandom for a job token")?;
    let job = format!("hark-run-{}", &token[..16]);
    let probe_addr = match (&args.token_file, addr.starts_with("tcp:")) {
        (Some(f), true) => format!("{}@{addr}", crate::serve::read_token(f)?),
        (None, true) => bail!("a TCP service needs its site token: --token-file FILE"),
        _ => addr.to_string(),
    };
    let mut env = run::probe_env(args, &probe, &probe_addr);
    env.push((hark_settings::JOB.name.into(), job.clone()));
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    let launcher = launch::detect(&args.command[0]);
    let command = launch::with_given_preloads(launcher, &args.command, &probe);
    let argv = launch::with_env_options(launcher, &command, &names);
    let mut child = match Command::new(&argv[0]).args(&argv[1..]).envs(env).spawn() {
        Ok(c) => c,
        Err(e) => {
            print_stderr(&format!("hark: error: cannot run `{}`: {e}\n", argv[0]));
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    run::ignore_terminal_signals();
    hark_os::forward_signals_to(child.id());
    let status = child.wait().context("cannot wait for the command")?;
    hark_os::stop_forwarding();
    let code = run::exit_code(status);
    let control = if addr.starts_with("tcp:") {
        None
    } else {
        Some(addr)
    };
    match control.map(|a| request(a, &json!({"op": "finish", "run": job, "grace_s": 10}))) {
        Some(Ok(v)) if !args.quiet => print_stderr(&format!(
            "Run directory: {} (written by the service)\n",
            v["dir"].as_str().unwrap_or("?")
        )),
        Some(Ok(_)) => {}
        Some(Err(e)) => print_stderr(&format!(
            "hark: warning: the service did not report job {job}: {e:#}\n"
        )),
        // Over TCP there is no control channel: hark cannot know whether
        // the service took the streams (a wrong token gets each one cut),
        // so it claims nothing.
        None if !args.quiet => print_stderr(&format!(
            "Streamed job {job} to {addr}; over TCP hark cannot see whether the service accepted it (a wrong token is refused there): its log and `hark ctl list` on its host say.\n"
        )),
        None => {}
    }
    Ok(code)
}
