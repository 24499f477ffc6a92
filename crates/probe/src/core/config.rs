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
    /// `HARK_ADDR` without its secret: `unix:/path` or `tcp:host:port`.
    pub addr: String,
    /// The run's secret, the part of `HARK_ADDR` before an `@`
    /// (`secret@unix:/path`); empty when there is none.
    pub secret: String,
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
    /// `HARK_CLOCK_SYNC=0`: do not align clocks with world rank 0 at
    /// `MPI_Init` and `MPI_Finalize` (the server then keeps the handshake's
    /// estimate). Every rank of a job must agree: the ping-pong is collective.
    pub clock_sync: bool,
    /// `HARK_TEST_CLOCK_SKEW_NS`, for tests only: this process's clocks read
    /// this many ns late (see `core::clock`), default 0.
    pub clock_skew_ns: i64,
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
    /// Settings whose values were not usable, each with the warning that
    /// says so (the setting's name is the key of its `warn_once`).
    pub warnings: Vec<(&'static str, String)>,
    /// `HARK_SHM`: whether packs go through a shared-memory ring.
    pub shm: Shm,
    /// `HARK_VIRTUALISE=1`: at `MPI_Init`, split the real world by program
    /// (`MPI_APPNUM`) and give each program its own `MPI_COMM_WORLD`
    /// (`docs/mpi.md`, "Virtualised worlds"), default off. Every process of
    /// the job must agree: the split is collective.
    pub virtualise: bool,
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
        let full = get("HARK_ADDR").filter(|a| !a.is_empty())?;
        let (secret, addr) = split_secret(&full);
        let mut warnings = Vec::new();
        let mut setting = Setting {
            get: &get,
            warnings: &mut warnings,
        };
        let ms = |s: &mut Setting<'_>, name: &'static str, min: u64, default: u64| {
            Duration::from_millis(s.number(
                name,
                min,
                3_600_000,
                default,
                |v| v.parse().ok(),
                |v| format!("{v} ms"),
            ))
        };
        let pack_size = setting.number(
            "HARK_PACK_SIZE",
            PACK_MIN as u64,
            PACK_MAX as u64,
            1 << 20,
            parse_size,
            show_size,
        ) as usize;
        let buffers = setting.number(
            "HARK_BUFFERS",
            2,
            4096,
            8,
            |v| v.parse().ok(),
            |v| v.to_string(),
        ) as usize;
        let connect_timeout = ms(&mut setting, "HARK_CONNECT_TIMEOUT_MS", 1, 3000);
        // 0 would mean "wait forever" to the kernel, which is what this
        // setting exists to prevent: a lossless program blocked for good.
        let send_timeout = ms(&mut setting, "HARK_SEND_TIMEOUT_MS", 1, 60_000);
        let drain_timeout = ms(&mut setting, "HARK_DRAIN_TIMEOUT_MS", 0, 10_000);
        let flush_every = Some(ms(&mut setting, "HARK_FLUSH_MS", 0, 1000)).filter(|d| !d.is_zero());
        let flag_opt = |k: &str| match get(k).as_deref().map(str::trim) {
            Some("1" | "yes" | "true" | "on") => Some(true),
            Some("0" | "no" | "false" | "off") => Some(false),
            _ => None,
        };
        let flag = |k: &str, d: bool| flag_opt(k).unwrap_or(d);
        let (virtualise, bad) = virtualise(&get);
        warnings.extend(bad.map(|w| ("HARK_VIRTUALISE", w)));
        Some(Config {
            addr: addr.to_string(),
            secret: secret.to_string(),
            pack_size,
            buffers,
            lossless: flag("HARK_LOSSLESS", false),
            io: flag("HARK_IO", true),
            clock: get("HARK_CLOCK").unwrap_or_default().trim().to_string(),
            clock_sync: flag("HARK_CLOCK_SYNC", true),
            clock_skew_ns: get("HARK_TEST_CLOCK_SKEW_NS")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
            connect_timeout,
            send_timeout,
            drain_timeout,
            flush_every,
            socket_buffer: get("HARK_SOCKET_BUFFER")
                .and_then(|v| parse_size(&v))
                .map_or(pack_size, |v| v.min(usize::MAX as u64) as usize)
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
            warnings,
            virtualise,
        })
    }

    /// Whether a program of this name must be left alone.
    pub(crate) fn skips(&self, program: &str) -> bool {
        LAUNCHERS.contains(&program) || self.skip.iter().any(|s| s == program)
    }
}

/// `HARK_VIRTUALISE`: whether worlds are virtualised, and the warning to
/// give for a value that is neither on nor off (which counts as off). Read
/// by itself too, since a process whose probe has no stream must still take
/// part in the split.
pub(crate) fn virtualise(get: &dyn Fn(&str) -> Option<String>) -> (bool, Option<String>) {
    let Some(text) = get("HARK_VIRTUALISE") else {
        return (false, None);
    };
    match text.trim() {
        "1" | "yes" | "true" | "on" => (true, None),
        "" | "0" | "no" | "false" | "off" => (false, None),
        _ => (
            false,
            Some(format!(
                "HARK_VIRTUALISE={text:?} is not valid (expected 0 or 1); using 0"
            )),
        ),
    }
}

/// `secret@unix:/path` → (`secret`, `unix:/path`); an address without `@`
/// before its scheme has no secret. (A Unix path may hold `@`; a scheme
/// never does, so only an `@` before `unix:`/`tcp:` separates a secret.)
pub(crate) fn split_secret(addr: &str) -> (&str, &str) {
    match addr.split_once('@') {
        Some((secret, rest))
            if !secret.contains(':')
                && (rest.starts_with("unix:")
                    || rest.starts_with("tcp:")
                    || rest.starts_with("mpi:")) =>
        {
            (secret, rest)
        }
        _ => ("", addr),
    }
}

/// Reads numeric settings, collecting a warning for each unusable value.
struct Setting<'a> {
    get: &'a dyn Fn(&str) -> Option<String>,
    warnings: &'a mut Vec<(&'static str, String)>,
}

impl Setting<'_> {
    /// `name` parsed by `parse` and within `min..=max`; else `default` (if
    /// not a number, or 0 where 0 is not allowed) or the nearest bound (if
    /// out of range), with a warning
    /// naming the setting, the bad value, the valid range and the value used.
    fn number(
        &mut self,
        name: &'static str,
        min: u64,
        max: u64,
        default: u64,
        parse: impl Fn(&str) -> Option<u64>,
        show: fn(u64) -> String,
    ) -> u64 {
        let Some(text) = (self.get)(name) else {
            return default;
        };
        let used = match parse(text.trim()) {
            Some(v) if (min..=max).contains(&v) => return v,
            Some(v) if v > 0 => v.clamp(min, max),
            // Zero where it is not allowed is no size at all, like a word.
            _ => default,
        };
        self.warnings.push((
            name,
            format!(
                "{name}={text:?} is not valid (expected {} to {}); using {}",
                show(min),
                show(max),
                show(used)
            ),
        ));
        used
    }
}

/// Bytes as `parse_size` reads them back: `64M`, `4K`, `1000`.
fn show_size(v: u64) -> String {
    match v {
        0 => "0".into(),
        v if v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

/// `4096`, `64K`, `1M`, `2MiB` → bytes.
fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
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

    fn warning(var: &str, value: &str) -> (usize, Option<String>) {
        let c = config(&[("HARK_ADDR", "unix:/x"), (var, value)]).unwrap();
        let w = c.warnings.iter().find(|(k, _)| *k == var);
        (c.warnings.len(), w.map(|(_, m)| m.clone()))
    }

    #[test]
    fn bad_values_are_named_with_their_range_and_the_value_used() {
        for (var, value, expect) in [
            ("HARK_PACK_SIZE", "abc", "HARK_PACK_SIZE=\"abc\" is not valid (expected 4K to 64M); using 1M"),
            ("HARK_PACK_SIZE", "10G", "HARK_PACK_SIZE=\"10G\" is not valid (expected 4K to 64M); using 1M"),
            ("HARK_PACK_SIZE", "-5", "HARK_PACK_SIZE=\"-5\" is not valid (expected 4K to 64M); using 1M"),
            ("HARK_PACK_SIZE", "1000M", "HARK_PACK_SIZE=\"1000M\" is not valid (expected 4K to 64M); using 64M"),
            ("HARK_BUFFERS", "0", "HARK_BUFFERS=\"0\" is not valid (expected 2 to 4096); using 8"),
            ("HARK_BUFFERS", "-1", "HARK_BUFFERS=\"-1\" is not valid (expected 2 to 4096); using 8"),
            ("HARK_BUFFERS", "abc", "HARK_BUFFERS=\"abc\" is not valid (expected 2 to 4096); using 8"),
            ("HARK_SEND_TIMEOUT_MS", "0", "HARK_SEND_TIMEOUT_MS=\"0\" is not valid (expected 1 ms to 3600000 ms); using 60000 ms"),
            ("HARK_VIRTUALISE", "2", "HARK_VIRTUALISE=\"2\" is not valid (expected 0 or 1); using 0"),
            ("HARK_VIRTUALISE", "maybe", "HARK_VIRTUALISE=\"maybe\" is not valid (expected 0 or 1); using 0"),
        ] {
            assert_eq!(warning(var, value), (1, Some(expect.to_string())), "{var}={value}");
        }
        assert_eq!(warning("HARK_BUFFERS", "16"), (0, None));
        assert_eq!(warning("HARK_PACK_SIZE", "64K"), (0, None));
        assert_eq!(warning("HARK_VIRTUALISE", "1"), (0, None));
    }

    #[test]
    fn worlds_are_virtualised_only_when_asked() {
        let on = |v: &str| config(&[("HARK_ADDR", "unix:/x"), ("HARK_VIRTUALISE", v)]).unwrap();
        assert!(!config(&[("HARK_ADDR", "unix:/x")]).unwrap().virtualise);
        for v in ["1", "on", " yes "] {
            assert!(on(v).virtualise, "{v}");
        }
        for v in ["0", "off", "", "2"] {
            assert!(!on(v).virtualise, "{v}");
        }
        // Without an address (a passive probe) the setting is read all the same.
        assert_eq!(virtualise(&|_| Some("1".into())), (true, None));
    }

    #[test]
    fn a_send_timeout_of_zero_never_means_wait_forever() {
        let c = config(&[("HARK_ADDR", "unix:/x"), ("HARK_SEND_TIMEOUT_MS", "0")]).unwrap();
        assert_eq!(c.send_timeout, Duration::from_millis(60_000));
    }

    #[test]
    fn a_secret_is_what_comes_before_the_scheme() {
        for (addr, secret, rest) in [
            ("k3y@unix:/tmp/s", "k3y", "unix:/tmp/s"),
            ("k3y@tcp:127.0.0.1:5", "k3y", "tcp:127.0.0.1:5"),
            ("unix:/tmp/a@unix:/b", "", "unix:/tmp/a@unix:/b"),
            ("unix:/tmp/x@y", "", "unix:/tmp/x@y"),
            ("tcp:h:1", "", "tcp:h:1"),
        ] {
            assert_eq!(split_secret(addr), (secret, rest), "{addr}");
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
