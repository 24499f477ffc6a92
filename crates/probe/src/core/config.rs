//! The probe's settings, read once from `HARK_*` environment variables at
//! load time. `docs/probe.md` lists them all.

use std::time::Duration;

/// Launchers and daemons that must never be measured themselves: they start
/// the measured processes, which inherit `LD_PRELOAD` and `HARK_ADDR`.
pub(crate) const LAUNCHERS: &[&str] = &[
    "mpirun",
    "mpiexec",
    "orterun",
    "orted",
    "prterun",
    "prted",
    "prte",
    "mpiexec.hydra",
    "mpirun.openmpi",
    "mpiexec.openmpi",
    "mpirun.mpich",
    "mpiexec.mpich",
    "hydra_pmi_proxy",
    "srun",
    "hark",
];

/// Everything the probe reads from its environment.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// `HARK_ADDR`: `unix:/path` or `tcp:host:port`.
    pub addr: String,
    /// `HARK_PACK_SIZE`: bytes per pack (and per buffer), default 1 MiB.
    pub pack_size: usize,
    /// `HARK_BUFFERS`: most buffers the pool holds, default 8.
    pub buffers: usize,
    /// `HARK_LOSSLESS=1`: block instead of dropping when no buffer is free.
    pub lossless: bool,
    /// `HARK_IO=0`: do not record POSIX and STDIO calls.
    pub io: bool,
    /// `HARK_CLOCK`: `tsc`, `monotonic`, or empty for the best available.
    pub clock: String,
    /// `HARK_CONNECT_TIMEOUT_MS`, default 3000.
    pub connect_timeout: Duration,
    /// `HARK_SEND_TIMEOUT_MS`: a server that takes nothing for this long is
    /// treated as dead, default 60000.
    pub send_timeout: Duration,
    /// `HARK_DRAIN_TIMEOUT_MS`: how long exit waits for the shipper, default 10000.
    pub drain_timeout: Duration,
    /// `HARK_FLUSH_MS`: how often threads are asked for their partial
    /// buffers (at their next event), default 1000; 0 never.
    pub flush_every: Option<Duration>,
    /// `HARK_SOCKET_BUFFER`: the kernel send buffer asked for, in bytes;
    /// default the pack size (at least 256 KiB).
    pub socket_buffer: usize,
    /// `HARK_SKIP`: more program names to leave unmeasured.
    pub skip: Vec<String>,
    /// `HARK_SHM`: whether packs go through a shared-memory ring.
    pub shm: Shm,
}

/// `HARK_SHM`: the node-local transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shm {
    /// Default: a ring when `HARK_ADDR` is a Unix socket and one can be
    /// made; the socket otherwise, silently.
    Auto,
    /// `1`: as `Auto`, but say so on stderr when no ring can be made.
    On,
    /// `0`: always the socket.
    Off,
}

/// Smallest and largest pack sizes accepted.
const PACK_MIN: usize = 4 << 10;
const PACK_MAX: usize = 64 << 20;

impl Config {
    /// Reads the environment; `None` when `HARK_ADDR` is unset or empty
    /// (the probe then stays passive).
    pub(crate) fn from_env() -> Option<Config> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let addr = get("HARK_ADDR").filter(|a| !a.is_empty())?;
        let ms = |k: &str, d: u64| {
            Duration::from_millis(get(k).and_then(|v| v.trim().parse().ok()).unwrap_or(d))
        };
        let flag_opt = |k: &str| match get(k).as_deref().map(str::trim) {
            Some("1" | "yes" | "true" | "on") => Some(true),
            Some("0" | "no" | "false" | "off") => Some(false),
            _ => None,
        };
        let flag = |k: &str, d: bool| flag_opt(k).unwrap_or(d);
        let pack_size = get("HARK_PACK_SIZE")
            .and_then(|v| parse_size(&v))
            .unwrap_or(1 << 20)
            .clamp(PACK_MIN, PACK_MAX);
        let buffers = get("HARK_BUFFERS")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(8)
            .clamp(2, 4096);
        Some(Config {
            addr,
            pack_size,
            buffers,
            lossless: flag("HARK_LOSSLESS", false),
            io: flag("HARK_IO", true),
            clock: get("HARK_CLOCK").unwrap_or_default().trim().to_string(),
            connect_timeout: ms("HARK_CONNECT_TIMEOUT_MS", 3000),
            send_timeout: ms("HARK_SEND_TIMEOUT_MS", 60_000),
            drain_timeout: ms("HARK_DRAIN_TIMEOUT_MS", 10_000),
            flush_every: Some(ms("HARK_FLUSH_MS", 1000)).filter(|d| !d.is_zero()),
            socket_buffer: get("HARK_SOCKET_BUFFER")
                .and_then(|v| parse_size(&v))
                .unwrap_or(pack_size)
                .max(256 << 10),
            shm: match flag_opt("HARK_SHM") {
                None => Shm::Auto,
                Some(true) => Shm::On,
                Some(false) => Shm::Off,
            },
            skip: get("HARK_SKIP")
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        })
    }

    /// Whether a program of this name must be left alone.
    pub(crate) fn skips(&self, program: &str) -> bool {
        LAUNCHERS.contains(&program) || self.skip.iter().any(|s| s == program)
    }
}

/// `4096`, `64K`, `1M`, `2MiB` → bytes.
fn parse_size(v: &str) -> Option<usize> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: usize = num.parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Option<Config> {
        Config::from_lookup(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn without_an_address_the_probe_stays_passive() {
        assert!(config(&[]).is_none());
        assert!(config(&[("HARK_ADDR", "")]).is_none());
    }

    #[test]
    fn sizes_take_units_and_are_clamped() {
        for (text, bytes) in [
            ("65536", 65536),
            ("64K", 65536),
            ("2M", 2 << 20),
            ("2MiB", 2 << 20),
            ("1", PACK_MIN),
            ("1000M", PACK_MAX),
            ("nonsense", 1 << 20),
        ] {
            let c = config(&[("HARK_ADDR", "unix:/x"), ("HARK_PACK_SIZE", text)]).unwrap();
            assert_eq!(c.pack_size, bytes, "HARK_PACK_SIZE={text}");
        }
    }

    #[test]
    fn launchers_and_listed_programs_are_skipped() {
        let c = config(&[("HARK_ADDR", "unix:/x"), ("HARK_SKIP", "bash, make")]).unwrap();
        for p in ["mpirun", "orted", "hydra_pmi_proxy", "bash", "make"] {
            assert!(c.skips(p), "{p}");
        }
        assert!(!c.skips("a.out"));
    }
}
