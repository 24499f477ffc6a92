//! Emulated cluster nodes for end-to-end tests: a thin wrapper over
//! `scripts/cluster.sh` (docs/cluster.md, "Testing on emulated nodes").
//!
//! Each node `n1..nN` has its own network, UTS, mount, IPC and time
//! namespaces: its own hostname, address, `/tmp`, `/dev/shm` and
//! CLOCK_MONOTONIC (node k runs k×1000 s ahead). The rest of the file
//! system is shared, so put what every node must see under
//! [`shared_scratch`], never under `/tmp`.
//!
//! ```ignore
//! let Some(cluster) = Cluster::up(2) else { return }; // printed why
//! let out = cluster.exec("n1", &["mpirun.openmpi", "--host", "n1,n2", /* … */]);
//! ```
//!
//! The cluster is removed when the value drops, also when the test
//! panics; a cluster whose test process was killed is removed by the next
//! `Cluster::up` of any test.

use super::{OutputWithin, Scratch};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `scripts/cluster.sh` of this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cluster.sh")
}

/// A fresh scratch directory that every node sees at the same path (under
/// the build's target directory; `/tmp` is private to each node). Removed
/// when the test passes, kept when it fails.
pub fn shared_scratch(tag: &str) -> Scratch {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(super::scratch_name(tag));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// N emulated nodes, up until dropped.
pub struct Cluster {
    id: String,
    nodes: usize,
}

impl Cluster {
    /// Brings up `nodes` nodes named `n1..nN`, or prints one line saying
    /// why this test is skipped and returns `None` when namespaces cannot
    /// be made here (not root, no time namespaces). Panics when they can
    /// but the cluster still does not come up: that is a failure.
    pub fn up(nodes: usize) -> Option<Cluster> {
        if !namespaces_or_skip() {
            return None;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let id = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let out = Command::new(script())
            .args(["up", &id, &nodes.to_string(), "--owner"])
            .arg(std::process::id().to_string())
            .output_within()
            .expect("cannot run scripts/cluster.sh");
        assert!(
            out.status.success(),
            "cluster.sh up {id} {nodes} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Cluster { id, nodes })
    }

    /// The cluster's id, as `scripts/cluster.sh` takes it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The nodes' host names, `n1..nN`.
    pub fn hosts(&self) -> Vec<String> {
        (1..=self.nodes).map(|k| format!("n{k}")).collect()
    }

    /// The command that runs `args` on `node` (all its namespaces, its
    /// clock), from the caller's working directory, which must exist on
    /// the node (not under `/tmp`), with the caller's environment.
    pub fn command<S: AsRef<OsStr>>(&self, node: &str, args: &[S]) -> Command {
        let mut cmd = Command::new(script());
        cmd.args(["exec", &self.id, node]).args(args);
        cmd
    }

    /// Runs `args` on `node` and waits for it, bounded like every command
    /// of the tests.
    pub fn exec<S: AsRef<OsStr>>(&self, node: &str, args: &[S]) -> Output {
        self.command(node, args)
            .output_within()
            .unwrap_or_else(|e| panic!("cannot run cluster.sh exec on {node}: {e}"))
    }

    /// Starts `args` on `node` with its output piped, without waiting.
    pub fn spawn<S: AsRef<OsStr>>(&self, node: &str, args: &[S]) -> Child {
        self.command(node, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run cluster.sh exec on {node}: {e}"))
    }

    /// The rsh agent: ssh's conventions (`agent [OPTS] HOST CMD...`, one
    /// shell line, a fresh environment as ssh gives). For Open MPI's
    /// `--mca plm_rsh_agent` and Hydra's `-bootstrap-exec`.
    pub fn rsh_agent(&self) -> PathBuf {
        PathBuf::from(self.ask(&["agent", &self.id]))
    }

    /// How far `node`'s CLOCK_MONOTONIC runs ahead of the host's, in
    /// nanoseconds.
    pub fn clock_offset_ns(&self, node: &str) -> i64 {
        let v = self.ask(&["offset", &self.id, node]);
        v.parse()
            .unwrap_or_else(|_| panic!("cluster.sh offset {node} printed {v:?}"))
    }

    /// Mounts an empty tmpfs over `dir` on `node` only: the other nodes
    /// (and the host) keep seeing the shared directory.
    pub fn make_private(&self, node: &str, dir: &Path) {
        self.ask(&[
            "private".as_ref(),
            self.id.as_ref(),
            node.as_ref(),
            dir.as_os_str(),
        ]);
    }

    /// Starts Slurm (munged on every node, slurmctld on n1, slurmd on
    /// every node) and waits until every node is idle; or prints why the
    /// test is skipped and returns false when Slurm is not installed.
    pub fn slurm(&self) -> bool {
        if !super::have("slurmctld") || !super::have("slurmd") || !super::have("munged") {
            eprintln!(
                "skipped: Slurm is not installed (scripts/deps.sh installs slurm-wlm and munge)"
            );
            return false;
        }
        self.ask(&["slurm", &self.id]);
        true
    }

    /// Runs `cluster.sh ARGS` and returns its trimmed output, panicking
    /// with its error if it fails.
    fn ask<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = Command::new(script())
            .args(args)
            .output_within()
            .expect("cannot run scripts/cluster.sh");
        let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        assert!(
            out.status.success(),
            "cluster.sh {} failed: {}{}",
            shown.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = Command::new(script()).args(["down", &self.id]).output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "cluster.sh down {} failed: {}",
                self.id,
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("cannot run cluster.sh down {}: {e}", self.id),
        }
    }
}

/// Whether this process may make the namespaces a node needs; if not,
/// prints the one line that says the test is skipped and why.
fn namespaces_or_skip() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: emulated nodes need root (network, mount and time namespaces)");
        return false;
    }
    for tool in ["ip", "unshare", "nsenter"] {
        if !super::have(tool) {
            eprintln!("skipped: emulated nodes need '{tool}' (scripts/deps.sh installs iproute2)");
            return false;
        }
    }
    let probe = Command::new("unshare")
        .args([
            "--net", "--uts", "--mount", "--ipc", "--time", "--fork", "true",
        ])
        .output_within();
    match probe {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!(
                "skipped: cannot make namespaces for emulated nodes here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: cannot run unshare for emulated nodes: {e}");
            false
        }
    }
}

/// The line that names Open MPI 4.1's known death in `MPI_Init` under
/// `srun` on a loaded machine, if `stderr` has it (docs/cluster.md,
/// "Known problems"; it comes without Hark too): waiting in the modex
/// fence, a rank takes a peer's first message over TCP before its PML has
/// registered the callback, and calls through the null pointer. Under
/// Hark the probe's line names it; without, Open MPI's own report does: a
/// segmentation fault at address 0 whose backtrace is the signal frame
/// alone (a jump to 0 leaves no frame to unwind), the report's
/// `Failing at address: (nil)` line is returned. A fault anywhere else, or
/// a null call from another library under Hark, is not this.
pub fn open_mpi_init_crash(stderr: &str) -> Option<&str> {
    let hark = stderr.lines().find(|l| {
        l.starts_with("hark: SIGSEGV")
            && l.contains(
                "a call through a null function pointer (to 0x0), called from mca_btl_tcp.so+",
            )
    });
    hark.or_else(|| {
        stderr.lines().find(|l| {
            let Some((process, rest)) = l.split_once("] ") else {
                return false;
            };
            let of_it = |text: &str| {
                stderr
                    .lines()
                    .filter(|l| l.strip_prefix(process).is_some_and(|r| r.starts_with("] ")))
                    .filter(|l| l.contains(text))
                    .count()
            };
            process.starts_with('[')
                && rest == "Failing at address: (nil)"
                && of_it("] Signal: Segmentation fault (11)") == 1
                && of_it("] [ 0] ") == 1
                && of_it("] [ 1] ") == 0
                && of_it("] *** End of error message ***") == 1
        })
    })
}

/// Runs of a cluster job that the MPI library's own faults (Open MPI's
/// death in `MPI_Init`, MPICH's finalize hang) may end before a test gives
/// up on it.
pub const RUNS: usize = 3;

/// Whether run `run` (from 1) of a job, which ended with `out` and said
/// `said`, is run again: it failed of Open MPI's death in `MPI_Init`
/// ([`open_mpi_init_crash`]) and fewer than [`RUNS`] runs were made. Says
/// so in one line that names `what`.
pub fn run_again(out: &Output, said: &str, run: usize, what: &str) -> bool {
    match open_mpi_init_crash(said).filter(|_| !out.status.success() && run < RUNS) {
        Some(line) => {
            eprintln!("note: run {run} of {what}: {line}; running it again");
            true
        }
        None => false,
    }
}
