//! The hidden `hark forward` subcommand: a node's forwarder, started by the
//! first measured process of a node (`HARK_FORWARD`); the forwarder itself
//! is the `hark-forward` crate, and `docs/cluster.md` ("The forwarder")
//! its design.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options of `hark forward` (started by the probe, not by hand).
#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// The node-local socket the node's probes connect to: `unix:/path`.
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// How long to stay with no stream open before ending, in ms.
    #[arg(long = "linger-ms", value_name = "MS", default_value_t = 1000)]
    pub linger_ms: u64,
    /// Start the forwarder in a process of its own and return at once:
    /// the probe that starts it then has no child to reap.
    #[arg(long)]
    pub detach: bool,
    /// Say what was forwarded, and the CPU time it took, when it ends.
    #[arg(short, long)]
    pub verbose: bool,
    /// Append that to this file instead (`HARK_FORWARD_STATS`).
    #[arg(long, value_name = "FILE", env = "HARK_FORWARD_STATS")]
    pub stats: Option<std::path::PathBuf>,
}

/// Runs a forwarder to `hark` at `HARK_ADDR` (its secret, if any, stays
/// out of the forwarder's frames: every stream proves it on its own).
pub fn run(args: &ForwardArgs) -> Result<i32> {
    if args.detach {
        return detach(args);
    }
    // Before the node's probes open their counters: they then open them
    // without patching the kernel's text (`probe::hold_counter_kinds`).
    let _held = crate::probe::hold_counter_kinds(None);
    let addr = std::env::var(hark_settings::ADDR.name).unwrap_or_default();
    let upstream = upstream_addresses(&addr);
    if upstream.is_empty() {
        bail!(
            "the forwarder of this node: {} names no address of hark to forward to; `hark run` sets it",
            hark_settings::ADDR.name
        );
    }
    let config = hark_forward::Config {
        listen: args.listen.clone(),
        upstream,
        tls_ca: std::env::var_os(hark_settings::TLS_CA.name).map(Into::into),
        linger: Duration::from_millis(args.linger_ms),
        connect_timeout: Duration::from_secs(3),
        // The probes' election lock beside the socket (`NAME.sock`,
        // `NAME.lock`).
        lock_file: args
            .listen
            .strip_prefix("unix:")
            .and_then(|p| p.strip_suffix(".sock"))
            .map(|base| format!("{base}.lock").into()),
    };
    let report = hark_forward::run(&config)
        .map_err(|e| anyhow::anyhow!("the forwarder of this node: {e}"))?;
    let line = format!(
        "streams={} events={} bytes={} clock_alignments={} cpu_ms={}{}",
        report.streams,
        report.events,
        report.bytes,
        report.clock_alignments,
        report.cpu_ms.map_or("?".into(), |c| c.to_string()),
        if report.upstream_lost {
            " upstream_lost"
        } else {
            ""
        }
    );
    if let Some(path) = &args.stats {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            // One write: `writeln!` makes two (the line, then its newline),
            // and the node's other forwarders append to the same file.
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "hark forward: cannot write its statistics to {}: {e}",
                path.display()
            );
        }
    }
    if args.verbose {
        eprintln!("hark forward: {line}");
    }
    Ok(0)
}

/// Starts `hark forward` again without `--detach`, in a process group of
/// its own (a terminal's signals for the job do not reach it), and returns.
fn detach(args: &ForwardArgs) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the hark executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("forward")
        .arg("--listen")
        .arg(&args.listen)
        .arg("--linger-ms")
        .arg(args.linger_ms.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0);
    if args.verbose {
        cmd.arg("--verbose");
    }
    use std::os::unix::process::CommandExt;
    cmd.spawn()
        .with_context(|| format!("cannot start the forwarder for {}", args.listen))?;
    Ok(0)
}

/// What an upstream address starts with.
const SCHEMES: [&str; 3] = ["unix:", "tcp:", hark_tls::SCHEME];

/// The addresses in `HARK_ADDR`, without the run's secret: one, or a list
/// separated by commas, tried in order.
fn upstream_addresses(addr: &str) -> Vec<String> {
    let schemed = |a: &str| SCHEMES.iter().any(|s| a.starts_with(s));
    let rest = match addr.split_once('@') {
        Some((_, r)) if schemed(r) => r,
        _ => addr,
    };
    // A comma separates two addresses only before a scheme: a Unix path
    // may hold one.
    let mut out: Vec<String> = Vec::new();
    for part in rest.split(',') {
        match out.last_mut() {
            Some(last) if !schemed(part) => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    out.retain(|a| !a.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::upstream_addresses;

    #[test]
    fn the_secret_is_left_out_and_a_list_kept_in_order() {
        assert_eq!(
            upstream_addresses("abc@unix:/tmp/h/sock"),
            ["unix:/tmp/h/sock"]
        );
        assert_eq!(
            upstream_addresses("abc@unix:/p,tcp:10.0.0.1:7000"),
            ["unix:/p", "tcp:10.0.0.1:7000"]
        );
        assert_eq!(upstream_addresses("tcp:h:1"), ["tcp:h:1"]);
        assert_eq!(
            upstream_addresses("abc@tls:hark.example:7000"),
            ["tls:hark.example:7000"]
        );
        assert_eq!(
            upstream_addresses("s@unix:/a,b/sock,tcp:h:1"),
            ["unix:/a,b/sock", "tcp:h:1"]
        );
        assert!(upstream_addresses("").is_empty());
    }
}
