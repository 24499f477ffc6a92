//! `hark query RUN --from T0 --to T1`: the profile, or the per-rank
//! timeline, of a time interval, as JSON on stdout. RUN is a run directory
//! (computed here) or a live view's address (asked over HTTP); both give
//! the same answer (`docs/api.md`).

use crate::output::print_stdout;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use hark_live::interval::{self, Interval};

pub const EXAMPLES: &str = "\
Examples:
  hark query hark-app-20260101-120000 --from 2s --to 2.5s
  hark query http://127.0.0.1:40123/ --from 10s --timeline --bins 50
  hark query hark-app-20260101-120000 --from 1500000000ns

Times are since the run's start: a number with a unit (ns, us, ms, s, min,
h), seconds without one. The interval is widened to whole time slices
(256 per run, each at least 1 ms and doubling as the run grows); each
program's first diagnostic says which interval the answer covers.";

/// Options of `hark query`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// A run directory (or its profile.json), or the address of a live view
    /// (`http://HOST:PORT/`, as `hark run` prints).
    #[arg(value_name = "RUN")]
    pub run: String,

    /// Start of the interval (default: the run's start).
    #[arg(long, value_name = "T0", value_parser = parse_time)]
    pub from: Option<u64>,

    /// End of the interval (default: the run's end, or now).
    #[arg(long, value_name = "T1", value_parser = parse_time)]
    pub to: Option<u64>,

    /// Print the per-rank timeline of MPI, I/O and useful time instead of
    /// the profile.
    #[arg(long)]
    pub timeline: bool,

    /// Bins of the timeline (each a whole number of time slices).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub bins: usize,

    /// Which run of a live view serving several (default: the only one, or
    /// the first still running).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
}

/// Runs `hark query`.
pub fn query(args: &QueryArgs) -> Result<i32> {
    let iv = Interval {
        from_ns: args.from,
        to_ns: args.to,
    }
    .checked()
    .map_err(|e| anyhow!("{e} (--from, --to)"))?;
    let json = if args.run.starts_with("http://") {
        let base = base_url(&args.run);
        let id = pick_run(&base, args.id.as_deref())?;
        let mut url = format!(
            "{base}api/runs/{id}/{}?",
            if args.timeline { "timeline" } else { "profile" }
        );
        if let Some(v) = iv.from_ns {
            url.push_str(&format!("from_ns={v}&"));
        }
        if let Some(v) = iv.to_ns {
            url.push_str(&format!("to_ns={v}&"));
        }
        if args.timeline {
            url.push_str(&format!("bins={}", args.bins));
        }
        let body = hark_live::client::get(&url)?;
        let value: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| anyhow!("{url} did not answer JSON: {e}"))?;
        serde_json::to_string_pretty(&value)?
    } else {
        let (_, run) = crate::open::read_run(std::path::Path::new(&args.run))?;
        if args.timeline {
            serde_json::to_string_pretty(&interval::timeline(&run, iv, args.bins))?
        } else {
            serde_json::to_string_pretty(&interval::profile(&run, iv))?
        }
    };
    print_stdout(&format!("{json}\n"))?;
    Ok(0)
}

/// The live view's own address, `http://HOST:PORT/` or
/// `http://HOST:PORT/TOKEN/` (the path token `hark run` prints), from any
/// address on it: a page's (with `#run=…`) or an API's.
pub fn base_url(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = match path.find("api/") {
        Some(i) if i == 0 || path[..i].ends_with('/') => &path[..i],
        _ => path,
    };
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        format!("http://{host}/")
    } else {
        format!("http://{host}/{path}/")
    }
}

/// The run to ask about: `id`, else the only run, else the first running.
pub fn pick_run(base: &str, id: Option<&str>) -> Result<String> {
    let list = hark_live::client::get(&format!("{base}api/runs"))?;
    let runs: Vec<serde_json::Value> = serde_json::from_str(&list)
        .map_err(|e| anyhow!("{base}api/runs is not a run list: {e}"))?;
    let ids: Vec<&str> = runs.iter().filter_map(|r| r["id"].as_str()).collect();
    if let Some(id) = id {
        if ids.contains(&id) {
            return Ok(id.to_string());
        }
        bail!("{base} has no run `{id}`; it has: {}", ids.join(", "));
    }
    runs.iter()
        .find(|r| runs.len() == 1 || r["state"] == "running")
        .and_then(|r| r["id"].as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            anyhow!(
                "{base} serves {} runs: say which with --id ({})",
                ids.len(),
                ids.join(", ")
            )
        })
}

/// A time since the run's start: a number with a unit, seconds without.
fn parse_time(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let num: f64 = num
        .parse()
        .map_err(|_| format!("`{v}` is not a time: write e.g. 2.5s, 300ms or 1500000ns"))?;
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "min" => 60e9,
        "h" => 3600e9,
        u => {
            return Err(format!(
                "`{u}` is not a unit of time: ns, us, ms, s, min or h"
            ))
        }
    };
    let ns = num * scale;
    if !ns.is_finite() || ns > u64::MAX as f64 {
        return Err(format!("`{v}` is too long a time"));
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_take_units_and_default_to_seconds() {
        assert_eq!(parse_time("2"), Ok(2_000_000_000));
        assert_eq!(parse_time("2.5s"), Ok(2_500_000_000));
        assert_eq!(parse_time("300ms"), Ok(300_000_000));
        assert_eq!(parse_time("15ns"), Ok(15));
        assert_eq!(parse_time("1min"), Ok(60_000_000_000));
        assert!(parse_time("soon").is_err());
        assert!(parse_time("3 weeks").is_err());
        assert!(parse_time("-1s").is_err());
    }

    #[test]
    fn any_address_on_a_live_view_gives_its_base() {
        assert_eq!(base_url("http://127.0.0.1:5/"), "http://127.0.0.1:5/");
        assert_eq!(
            base_url("http://127.0.0.1:5/api/runs"),
            "http://127.0.0.1:5/"
        );
        assert_eq!(base_url("http://h:5"), "http://h:5/");
        assert_eq!(base_url("http://h:5/ab12/"), "http://h:5/ab12/");
        assert_eq!(base_url("http://h:5/ab12"), "http://h:5/ab12/");
        assert_eq!(
            base_url("http://h:5/ab12/api/runs/run/profile?to_ns=9"),
            "http://h:5/ab12/"
        );
        assert_eq!(base_url("http://h:5/ab12/#run=run"), "http://h:5/ab12/");
    }
}
