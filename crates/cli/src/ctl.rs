//! `hark ctl` and `hark run --server`: the clients of a running `hark
//! serve`, over its control socket, or across a network over its TLS
//! listener with the user's token (one JSON line each way, `docs/api.md`).

use crate::cli::RunArgs;
use crate::output::{print_stderr, print_stdout};
use crate::{probe, run};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hark_launch as launch;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const CTL_EXAMPLES: &str = "\
Examples:
  hark ctl list                      your jobs (all jobs for root and the admin group)
  hark ctl 3 pause                   stop recording in every process of job 3
  hark ctl 3 resume
  hark ctl 3 dump                    write a report of job 3 now; it goes on
  hark ctl sample 1/8 3              detailed events from 1 rank in 8 (world rank r % 8 < 1),
                                     exact counts from all (also: hark ctl 3 sample 1 8)
  hark ctl sample 8/8 3              every rank in detail again
The service is found with --server or HARK_SERVER (default unix:/tmp/hark/hark.sock).
Across a network: hark ctl --server tls:HOST:PORT --token-file ~/.hark-token list
(with HARK_TLS_CA=the CA file that signed the service's certificate).";

/// Options of `hark ctl`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The service's probe address (unix:PATH, whose control socket is
    /// PATH.ctl; or tls:HOST:PORT with --token-file), or its control
    /// socket's path.
    #[arg(
        long,
        value_name = "ADDR",
        env = "HARK_SERVER",
        default_value = "unix:/tmp/hark/hark.sock"
    )]
    pub server: String,

    /// Your token for a tls: service (a file of mode 0600).
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,

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
    if let Some(hostport) = addr.strip_prefix("tcp:") {
        bail!("control over TCP needs TLS, so that your token is not sent in clear: give --server tls:{hostport} (a service with --tls-cert) and HARK_TLS_CA, or on the service's host its control socket's path");
    }
    Ok(PathBuf::from(addr))
}

/// Sends one request and returns the answer; an error if the service says
/// no (with its reason). `token`: the user's, for a `tls:` service.
pub fn request_as(addr: &str, token: Option<&str>, req: &Value) -> Result<Value> {
    let answer = if addr.starts_with(hark_tls::SCHEME) {
        over_tls(addr, token, req)?
    } else {
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
        answer
    };
    let v: Value = serde_json::from_str(&answer)
        .with_context(|| format!("the service answered something else than JSON: {answer:?}"))?;
    if v["ok"] != json!(true) {
        bail!("{}", v["error"].as_str().unwrap_or("the service refused"));
    }
    Ok(v)
}

/// The CA file a `tls:` address is checked against (`HARK_TLS_CA`).
fn tls_ca() -> Result<PathBuf> {
    match std::env::var(hark_settings::TLS_CA.name) {
        Ok(ca) if !ca.is_empty() => Ok(PathBuf::from(ca)),
        _ => bail!(
            "a tls: address needs the CA that signed the service's certificate: set {}=FILE",
            hark_settings::TLS_CA.name
        ),
    }
}

/// One request to a `tls:` service, carrying the user's token inside TLS:
/// the answer's line. A `finish` may take as long as the job's folding.
fn over_tls(addr: &str, token: Option<&str>, req: &Value) -> Result<String> {
    let Some(token) = token else {
        bail!("a tls: service knows you by your token: give --token-file FILE");
    };
    let ca = tls_ca()?;
    let mut s = hark_tls::connect(addr, &ca, Duration::from_secs(10))
        .map_err(|e| anyhow!("cannot reach the Hark service at {addr}: {e}"))?;
    let _ = s.sock.set_read_timeout(Some(Duration::from_secs(3600)));
    let mut req = req.clone();
    req["token"] = json!(token);
    let mut line = serde_json::to_vec(&req)?;
    line.push(b'\n');
    s.write_all(&line)
        .and_then(|()| s.flush())
        .with_context(|| format!("cannot send the request to {addr}"))?;
    let mut answer = String::new();
    BufReader::new(s)
        .read_line(&mut answer)
        .with_context(|| format!("no answer from {addr}"))?;
    Ok(answer)
}

/// Before a job streams in plaintext to `tcp:HOST:PORT`: whether the
/// service there takes TLS only, asked without a token (a TLS service
/// answers any plaintext with its alert; a plaintext one refuses the
/// request in JSON).
fn check_plaintext_welcome(addr: &str) -> Result<()> {
    use std::io::Read;
    let Some(hostport) = addr.strip_prefix("tcp:") else {
        return Ok(());
    };
    let Ok(mut s) = std::net::TcpStream::connect(hostport) else {
        // The probes will say that they cannot reach it.
        return Ok(());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(b"{\"op\": \"hello\"}\n");
    let mut first = [0u8; 8];
    let n = s.read(&mut first).unwrap_or(0);
    if hark_tls::is_alert(&first[..n]) {
        bail!(
            "the Hark service at {addr} takes TLS only: give --server tls:{hostport} and {}=the CA file that signed its certificate",
            hark_settings::TLS_CA.name
        );
    }
    Ok(())
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
    let token = match &args.token_file {
        Some(f) => Some(crate::serve::read_token(f)?),
        None => None,
    };
    let v = request_as(&args.server, token.as_deref(), &req)?;
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
/// streaming into the service under a fresh job token, says the job's
/// number and live view once the service has it, tells the service when the
/// command has ended, and prints the summary and the run directory it
/// wrote, as a local `hark run` does.
pub fn run_into_service(args: &RunArgs, addr: &str) -> Result<i32> {
    if args.command.is_empty() {
        bail!("no command to measure: write it after `--`");
    }
    let exe = std::env::current_exe().context("cannot find the hark executable")?;
    let probe = probe::locate(args.probe.as_deref(), &exe)?;
    let secret = hark_server::new_secret().context("cannot read /dev/urandom for a job token")?;
    let job = format!("hark-run-{}", &secret[..16]);
    let tcp = addr.starts_with("tcp:") || addr.starts_with(hark_tls::SCHEME);
    let token = match (&args.token_file, tcp) {
        (Some(f), true) => Some(crate::serve::read_token(f)?),
        (None, true) => bail!("a TCP service needs your token (or the site's): --token-file FILE"),
        _ => None,
    };
    let probe_addr = match &token {
        Some(t) => format!("{t}@{addr}"),
        None => addr.to_string(),
    };
    let mut env = run::probe_env(args, &probe, &probe_addr);
    env.push((hark_settings::JOB.name.into(), job.clone()));
    if addr.starts_with(hark_tls::SCHEME) {
        // Checked here, and given on to every node the launcher reaches.
        let ca = tls_ca()?;
        hark_tls::client_config(&ca).map_err(|e| anyhow!("{e}"))?;
        // Absolute: ranks may start elsewhere (a remote node's home).
        let ca = std::fs::canonicalize(&ca).unwrap_or(ca);
        env.push((hark_settings::TLS_CA.name.into(), ca.display().to_string()));
    }
    check_plaintext_welcome(addr)?;
    let control = match addr.starts_with(hark_tls::SCHEME) {
        true => user_of_token(addr, token.as_deref())?,
        false => !addr.starts_with("tcp:"),
    };
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
    let ended = Arc::new(AtomicBool::new(false));
    let announcer = (!args.quiet && control).then(|| {
        let (addr, token, job, ended) =
            (addr.to_string(), token.clone(), job.clone(), ended.clone());
        std::thread::spawn(move || announce(&addr, token.as_deref(), &job, &ended))
    });
    let status = child.wait().context("cannot wait for the command")?;
    hark_os::stop_forwarding();
    ended.store(true, Ordering::Relaxed);
    if let Some(a) = announcer {
        let _ = a.join();
    }
    let code = run::exit_code(status);
    if !control {
        // Plaintext TCP has no control channel (the token would cross in
        // clear), and the site token asks nothing: hark cannot know
        // whether the service took the streams.
        if !args.quiet {
            print_stderr(&format!(
                "Streamed job {job} to {addr}; hark cannot see whether the service accepted it (a wrong token is refused there): over plaintext TCP or with the site token it cannot ask. The service's log and `hark ctl list` on its host say; a tls: service with your own token reports the run here.\n"
            ));
        }
        return Ok(code);
    }
    let finish = json!({"op": "finish", "run": job, "grace_s": 10});
    match request_as(addr, token.as_deref(), &finish) {
        Ok(v) if !args.quiet => say_finished(addr, &v),
        Ok(_) => {}
        Err(e) => print_stderr(&format!(
            "hark: warning: the service did not report job {job}: {e:#}\n"
        )),
    }
    Ok(code)
}

/// Before a job streams into a `tls:` service: whether it is reachable,
/// its certificate good and the token one it takes, each refused here with
/// its reason rather than in every process. True when the token is a
/// user's (the job is then theirs to ask about), false for the site token.
fn user_of_token(addr: &str, token: Option<&str>) -> Result<bool> {
    let v = request_as(addr, token, &json!({"op": "hello"}))?;
    Ok(!v["user"].is_null())
}

/// Says the job's number and live view once the service has registered
/// it (its first process connected), or gives up when the command ends.
fn announce(addr: &str, token: Option<&str>, job: &str, ended: &AtomicBool) {
    let show = json!({"op": "show", "run": job});
    while !ended.load(Ordering::Relaxed) {
        if let Ok(v) = request_as(addr, token, &show) {
            let id = v["job"]["id"].as_str().unwrap_or("?");
            let live = match v["live"].as_str() {
                Some(url) => format!("; live view at {url}"),
                None => " (the service serves no live view: hark serve --http)".into(),
            };
            print_stderr(&format!("hark: job {id} in the service at {addr}{live}\n"));
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The end of `hark run --server`: the summary and where the run is, as a
/// local run prints them.
fn say_finished(addr: &str, v: &Value) {
    let dir = v["dir"].as_str().unwrap_or("?");
    let host = if addr.starts_with("unix:") || Path::new(addr).is_absolute() {
        ""
    } else {
        " on its host"
    };
    let summary = v["summary"]
        .as_str()
        .map(|s| format!("\n{}", s.trim_end()))
        .unwrap_or_default();
    print_stderr(&format!(
        "{summary}\nRun directory: {dir} (written by the service{host})\n"
    ));
}
