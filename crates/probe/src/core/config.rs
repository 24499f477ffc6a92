//! The probe's settings, read once from `HARK_*` environment variables at
//! load time through the table of settings (`hark_settings`), which gives
//! each one's valid values, default and warning; `docs/probe.md` lists them.

use hark_settings::{self as settings, Setting};
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
    "salloc",
    "sbatch",
    "slurmstepd",
    "slurmd",
    "ssh",
    "rsh",
    "hark",
];

/// The daemons launchers start on each node, through an agent (`ssh`,
/// `rsh`, a shell, whatever `plm_rsh_agent` or `-launcher-exec` names).
const NODE_DAEMONS: &[&str] = &["orted", "prted", "hydra_pmi_proxy", "slurmstepd"];

/// Whether a process that holds no rank, started by the process with
/// command line `parent`, works for a launcher: its parent is an agent
/// ([`is_agent`]: the rsh agent's script runs `readlink`, `cat`, `id`...)
/// or a launcher other than `hark`, `salloc` and `sbatch` (whose children
/// without a rank are the user's commands).
pub(crate) fn helps_a_launcher(parent: &[String]) -> bool {
    let name = parent
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a))
        .unwrap_or_default();
    let users = ["hark", "salloc", "sbatch"];
    (LAUNCHERS.contains(&name) && !users.contains(&name)) || is_agent(parent, false)
}

/// Whether a process with command line `argv` is a launcher's agent: it
/// holds no rank (`has_rank`: a launcher gave it none), and its arguments
/// name a node daemon it is to start (`bash -c "... /usr/bin/orted ..."`,
/// `ssh n2 hydra_pmi_proxy ...`). Such a process is left alone as a
/// launcher is; the daemon and the ranks below it are judged by their own
/// names.
pub(crate) fn is_agent(argv: &[String], has_rank: bool) -> bool {
    let separators = |c: char| c.is_whitespace() || "\"';&|()`".contains(c);
    !has_rank
        && (argv.iter().skip(1))
            .flat_map(|a| a.split(separators))
            .any(|w| NODE_DAEMONS.contains(&w.rsplit('/').next().unwrap_or(w)))
}

/// Everything the probe reads from its environment.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// `HARK_ADDR` without its secret: `unix:/path`, `tcp:host:port`, or a
    /// list of those separated by commas, tried in turn (`ship::reach`).
    pub addr: String,
    /// The run's secret, the part of `HARK_ADDR` before an `@`
    /// (`secret@unix:/path`); empty when there is none.
    pub secret: String,
    /// `HARK_TLS_CA`: the CA file a `tls:` service is checked against.
    pub tls_ca: Option<String>,
    /// `HARK_PACK_SIZE`: bytes per pack (and per buffer), default 1 MiB.
    pub pack_size: usize,
    /// `HARK_BUFFERS`: most buffers the pool holds, default 8.
    pub buffers: usize,
    /// `HARK_LOSSLESS=1`: block instead of dropping when no buffer is free.
    pub lossless: bool,
    /// `HARK_IO=0`: do not record POSIX and STDIO calls.
    pub io: bool,
    /// Frames per call site (`HARK_CALLSITE_DEPTH`).
    pub callsite_depth: u32,
    /// `HARK_FILTER`: the instrumented functions left out (none when unset
    /// or unreadable, with a warning).
    pub filter: hark_settings::Filter,
    /// `HARK_THROTTLE`: when an instrumented function stops being recorded.
    pub throttle: Option<hark_settings::Throttle>,
    /// `HARK_CLOCK`: `tsc`, `monotonic`, or empty for the best available.
    pub clock: String,
    /// `HARK_CLOCK_SYNC=0`: do not align clocks with world rank 0 at
    /// `MPI_Init` and `MPI_Finalize` (the server then keeps the handshake's
    /// estimate). Every rank of a job must agree: the ping-pong is collective.
    pub clock_sync: bool,
    /// `HARK_TEST_CLOCK_SKEW_NS`, read only with the `test-hooks` feature: this process's clocks read
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
    /// `HARK_CPU_MS`: how often the shipper reads the threads' CPU
    /// availability; `None` never.
    pub cpu_every: Option<Duration>,
    /// `HARK_SENSORS_MS`: how often the node's sensors are read (by one
    /// process per node); `None` never.
    pub sensors_every: Option<Duration>,
    /// `HARK_COUNTERS`: the performance counters read (numbers in
    /// `hark_wire::counters::EVENTS`); empty for none.
    pub counters: Vec<u16>,
    /// `HARK_COUNTERS_IN_MPI`: read the counters around every MPI call.
    pub counters_in_mpi: bool,
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
    /// `HARK_FORWARD`: whether the stream goes through the node's forwarder.
    pub forward: Forward,
    /// `HARK_BIN`: the `hark` executable that starts a node's forwarder.
    pub bin: Option<String>,
    /// `HARK_VIRTUALISE=1`: at `MPI_Init`, split the real world by program
    /// (`MPI_APPNUM`) and give each program its own `MPI_COMM_WORLD`
    /// (`docs/mpi.md`, "Virtualised worlds"), default off. Every process of
    /// the job must agree: the split is collective.
    pub virtualise: bool,
}

/// `HARK_FORWARD`: whether streams go through the node's forwarder
/// (`docs/cluster.md`, "The forwarder").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forward {
    /// Default: when hark's own Unix socket is not on this node.
    Auto,
    /// Also on hark's node.
    Always,
    /// Never: every process connects to hark itself.
    Never,
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

impl Config {
    /// Reads the environment; `None` when `HARK_ADDR` is unset or empty
    /// (the probe then stays passive).
    pub(crate) fn from_env() -> Option<Config> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the settings `get` gives, each through its entry in the
    /// table of settings (`hark_settings`), keeping every warning.
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let full = get(settings::ADDR.name).filter(|a| !a.is_empty())?;
        let (secret, addr) = split_secret(&full);
        let mut warnings = Vec::new();
        let mut keep = |s: &Setting, warning: Option<String>| {
            warnings.extend(warning.map(|w| (s.name, w)));
        };
        let text = |s: &Setting| get(s.name);
        let mut number = |s: &'static Setting| {
            let r = s.number(text(s).as_deref());
            keep(s, r.warning);
            r.value
        };
        let ms = |v: u64| Duration::from_millis(v);
        let pack_size = number(&settings::PACK_SIZE) as usize;
        let buffers = number(&settings::BUFFERS) as usize;
        let callsite_depth = number(&settings::CALLSITE_DEPTH) as u32;
        let connect_timeout = ms(number(&settings::CONNECT_TIMEOUT_MS));
        // 0 would mean "wait forever" to the kernel, which is what this
        // setting exists to prevent: a lossless program blocked for good.
        let send_timeout = ms(number(&settings::SEND_TIMEOUT_MS));
        let drain_timeout = ms(number(&settings::DRAIN_TIMEOUT_MS));
        let flush_every = Some(ms(number(&settings::FLUSH_MS))).filter(|d| !d.is_zero());
        let cpu_every = Some(ms(number(&settings::CPU_MS))).filter(|d| !d.is_zero());
        let sensors_every = Some(ms(number(&settings::SENSORS_MS))).filter(|d| !d.is_zero());
        let filter = match text(&settings::FILTER).filter(|f| !f.is_empty()) {
            None => hark_settings::Filter::default(),
            Some(path) => hark_settings::Filter::read(&path).unwrap_or_else(|e| {
                keep(
                    &settings::FILTER,
                    Some(format!("{e}; every instrumented function is recorded")),
                );
                hark_settings::Filter::default()
            }),
        };
        let throttle =
            hark_settings::Throttle::parse(&text(&settings::THROTTLE).unwrap_or_default())
                .unwrap_or_else(|e| {
                    keep(&settings::THROTTLE, Some(format!("{e}; using 100000,10")));
                    Some(hark_settings::Throttle::DEFAULT)
                });
        let (counters, unknown) = hark_wire::counters::parse_list(
            &text(&settings::COUNTERS).unwrap_or_else(|| "default".into()),
        );
        if !unknown.is_empty() {
            keep(
                &settings::COUNTERS,
                Some(format!(
                    "HARK_COUNTERS names counters Hark does not know: {}; they are not read \
                     (the known ones are those of `perf list`'s software and hardware events, e.g. page-faults, instructions)",
                    unknown.join(", ")
                )),
            );
        }
        let socket_buffer = settings::SOCKET_BUFFER
            .number_or(text(&settings::SOCKET_BUFFER).as_deref(), pack_size as u64);
        keep(&settings::SOCKET_BUFFER, socket_buffer.warning);
        let mut flag = |s: &'static Setting| {
            let r = s.flag(text(s).as_deref());
            keep(s, r.warning);
            r.value
        };
        let lossless = flag(&settings::LOSSLESS);
        let io = flag(&settings::IO);
        let clock_sync = flag(&settings::CLOCK_SYNC);
        let counters_in_mpi = flag(&settings::COUNTERS_IN_MPI);
        let (virtualise, bad) = virtualise(&get);
        keep(&settings::VIRTUALISE, bad);
        let shm = settings::SHM.flag_or_auto(text(&settings::SHM).as_deref());
        keep(&settings::SHM, shm.warning);
        let forward = settings::FORWARD.word(text(&settings::FORWARD).as_deref());
        keep(&settings::FORWARD, forward.warning);
        let clock = settings::CLOCK.word(text(&settings::CLOCK).as_deref());
        keep(&settings::CLOCK, clock.warning);
        // Read only by a probe built for Hark's tests (the `test-hooks`
        // feature): a production probe has no way to skew its clock.
        #[cfg(feature = "test-hooks")]
        let skew = {
            let r =
                settings::TEST_CLOCK_SKEW_NS.signed(text(&settings::TEST_CLOCK_SKEW_NS).as_deref());
            keep(&settings::TEST_CLOCK_SKEW_NS, r.warning);
            r.value
        };
        #[cfg(not(feature = "test-hooks"))]
        let skew = 0;
        Some(Config {
            addr: addr.to_string(),
            secret: secret.to_string(),
            tls_ca: text(&settings::TLS_CA).filter(|c| !c.is_empty()),
            pack_size,
            buffers,
            lossless,
            io,
            callsite_depth,
            filter,
            throttle,
            clock: clock.value.unwrap_or_default().to_string(),
            clock_sync,
            clock_skew_ns: skew,
            connect_timeout,
            send_timeout,
            drain_timeout,
            flush_every,
            cpu_every,
            sensors_every,
            counters_in_mpi,
            counters,
            socket_buffer: (socket_buffer.value.min(usize::MAX as u64) as usize).max(256 << 10),
            shm: match shm.value {
                None => Shm::Auto,
                Some(true) => Shm::On,
                Some(false) => Shm::Off,
            },
            forward: match forward.value {
                Some("always") => Forward::Always,
                Some("never") => Forward::Never,
                _ => Forward::Auto,
            },
            bin: text(&settings::BIN).filter(|b| !b.is_empty()),
            skip: text(&settings::SKIP)
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
    let r = settings::VIRTUALISE.flag(get(settings::VIRTUALISE.name).as_deref());
    (r.value, r.warning)
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
                    || rest.starts_with(hark_tls::SCHEME)
                    || rest.starts_with("mpi:")) =>
        {
            (secret, rest)
        }
        _ => ("", addr),
    }
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
            ("1", 4 << 10),
            ("1000M", 64 << 20),
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
            ("HARK_CLOCK_SYNC", "2", "HARK_CLOCK_SYNC=\"2\" is not valid (expected 0 or 1); using 1"),
            ("HARK_SHM", "7", "HARK_SHM=\"7\" is not valid (expected 0, 1 or auto); using auto"),
            ("HARK_CLOCK", "sundial", "HARK_CLOCK=\"sundial\" is not valid (expected tsc, monotonic); using best"),
            ("HARK_SOCKET_BUFFER", "lots", "HARK_SOCKET_BUFFER=\"lots\" is not valid (expected 4K to 1024M); using 1M"),
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
            ("k3y@tls:h:1", "k3y", "tls:h:1"),
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

    #[test]
    fn a_launcher_s_agent_is_known_by_the_daemon_it_starts() {
        let argv = |s: &str| -> Vec<String> { s.split('|').map(str::to_string).collect() };
        for (line, rank, agent) in [
            (
                "/bin/bash|-c|PATH=/usr/bin:$PATH; /usr/bin/orted -mca ess \"env\"",
                false,
                true,
            ),
            (
                "ssh|n2|\"/usr/bin/hydra_pmi_proxy\"|--control-port|n1:5",
                false,
                true,
            ),
            ("ip|netns|exec|n2|prted|--prtemca|x", false, true),
            ("bash|agent.sh|n2|orted", false, true),
            // A rank is never an agent, whatever its arguments.
            ("bash|-c|echo orted", true, false),
            // The daemon itself is skipped by its name, not as an agent.
            ("orted|-mca|ess|env", false, false),
            ("bash|-c|./ring", false, false),
            ("./orted_stats|in.txt", false, false),
        ] {
            assert_eq!(is_agent(&argv(line), rank), agent, "{line}");
        }
        // What an agent or a launcher starts without a rank works for it;
        // what `hark` or `salloc` starts is the user's.
        for (parent, helps) in [
            ("/bin/bash|/run/c/rsh|n2|orted -mca ess env", true),
            ("mpirun|-np|2|./a", true),
            ("/usr/bin/ssh|n2|hydra_pmi_proxy", true),
            ("/usr/bin/hark|run|--|./serial", false),
            ("salloc|-N2|./job.sh", false),
            ("bash|./job.sh", false),
            ("", false),
        ] {
            assert_eq!(helps_a_launcher(&argv(parent)), helps, "{parent}");
        }
    }
}
