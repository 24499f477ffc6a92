//! What the end-to-end tests share: the `hark` binary and its probe, C and
//! Fortran compilers for the MPI flavours, running `hark run` into a
//! directory, and reading the `profile.json` it leaves.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub mod cluster;

/// Quantum ESPRESSO's input for an SCF of bulk silicon (two atoms, 4×4×4
/// k-points, a low cut-off): about a second at np 4. `pw.x` is Fortran
/// calling MPI through `mpif.h` (Open MPI's Fortran layer, which calls
/// `PMPI_*` directly), with ScaLAPACK and FFTs: collectives on communicators
/// it splits and frees as it goes.
pub const QE_SILICON: &str = "&control
  calculation = 'scf'
  prefix = 'si'
  outdir = './out'
  pseudo_dir = '/usr/share/espresso/pseudo'
/
&system
  ibrav = 2, celldm(1) = 10.2, nat = 2, ntyp = 1, ecutwfc = 18.0
/
&electrons
  conv_thr = 1.0d-8
/
ATOMIC_SPECIES
 Si 28.086 Si.pz-vbc.UPF
ATOMIC_POSITIONS alat
 Si 0.00 0.00 0.00
 Si 0.25 0.25 0.25
K_POINTS automatic
 4 4 4 1 1 1
";

/// The pseudopotential [`QE_SILICON`] reads (`quantum-espresso-data`).
pub const QE_PSEUDO: &str = "/usr/share/espresso/pseudo/Si.pz-vbc.UPF";

/// NWChem's input for an SCF of water in 6-31G*: about a second, whose
/// Global Arrays move their data with one-sided calls (`MPI_Get_accumulate`
/// with `MPI_NO_OP` for reads, `MPI_Accumulate`, `MPI_Fetch_and_op`) under
/// passive-target epochs.
pub const NWCHEM_WATER: &str = "start h2o
title \"water scf\"
geometry units angstroms
  O  0.000  0.000  0.000
  H  0.000  0.757  0.587
  H  0.000 -0.757  0.587
end
basis
  * library 6-31g*
end
task scf energy
";

/// The `hark` binary under test.
pub fn hark() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hark"))
}

/// Makes sure `libhark.so` sits next to `hark`, building it with the same
/// cargo and profile if it does not (`cargo test` builds binaries, not the
/// probe's cdylib).
pub fn probe() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let so = hark().with_file_name("libhark.so");
            if !so.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let mut cmd = Command::new(cargo);
                cmd.args(["build", "-q", "-p", "hark-probe"]);
                if hark().components().any(|c| c.as_os_str() == "release") {
                    cmd.arg("--release");
                }
                let status = cmd.status().expect("cannot run cargo to build the probe");
                assert!(status.success(), "building the probe failed");
            }
            assert!(
                so.exists(),
                "{} missing after building hark-probe",
                so.display()
            );
            so
        })
        .clone()
}

/// Whether the probe and `hark` were built with their `test-hooks` features
/// (settings only Hark's own tests use: a skewed clock, emulated nodes, a
/// lowered matching bound), as `scripts/test.sh` builds them; if not, says
/// the test is skipped and how to run it.
pub fn test_hooks_or_skip() -> bool {
    let probe = std::fs::read(probe()).unwrap_or_default();
    let marker = b"HARK_PROBE_TEST_HOOKS";
    let in_probe = probe.windows(marker.len()).any(|w| w == marker);
    let ok = in_probe && cfg!(feature = "test-hooks");
    if !ok {
        eprintln!(
            "skipped: needs the test hooks; build and test with \
             --features hark-cli/test-hooks,hark-probe/test-hooks (scripts/test.sh does)"
        );
    }
    ok
}

/// A fresh scratch directory for one test.
pub fn scratch(tag: &str) -> Scratch {
    let dir = std::env::temp_dir().join(scratch_name(tag));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A scratch directory's name, `hark-e2e-TAG-PID-N`: the tests of one
/// binary run at once in one process, and two of them may use one tag
/// (CI saw `srun_on_2_nodes` and `hydra_on_2_nodes` share
/// `every-rank-mpicc.mpich-2`, and the first to pass removed the other's
/// program), so every call gets a number of its own.
pub fn scratch_name(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("hark-e2e-{tag}-{}-{n}", std::process::id())
}

/// A test's scratch directory: removed when the test passes (runs leave
/// tens of megabytes each), kept for a look when it fails.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// An MPI flavour's tools.
#[derive(Clone, Copy, Debug)]
pub struct Mpi {
    pub name: &'static str,
    pub cc: &'static str,
    pub fc: &'static str,
    pub run: &'static str,
}

pub const OPEN_MPI: Mpi = Mpi {
    name: "Open MPI",
    cc: "mpicc.openmpi",
    fc: "mpif90.openmpi",
    run: "mpirun.openmpi",
};
pub const MPICH: Mpi = Mpi {
    name: "MPICH",
    cc: "mpicc.mpich",
    fc: "mpif90.mpich",
    run: "mpirun.mpich",
};

/// Whether `program` can be run (it is on PATH).
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output_within()
        .is_ok_and(|o| o.status.success())
}

/// The launcher's first words for `np` ranks, with what Open MPI needs to
/// run as root and with more ranks than cores.
pub fn launcher(mpi: Mpi, np: usize) -> Vec<String> {
    let mut v = vec![mpi.run.to_string()];
    if mpi.run.contains("openmpi") || mpi.run == "mpirun" {
        v.push("--oversubscribe".into());
    }
    v.extend(["-np".to_string(), np.to_string()]);
    v
}

/// Compiles the test program `src` (a path relative to this crate's
/// `tests/programs/`, or absolute) with `compiler` into `dir`.
pub fn compile(compiler: &str, src: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = if src.is_absolute() {
        src.to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/programs")
            .join(src)
    };
    let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
    let exe = dir.join(format!("{stem}-{}", compiler.replace('.', "-")));
    let out = Command::new(compiler)
        .args(extra)
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output_within()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Sets what Open MPI needs to run in a test (as root, oversubscribed).
pub fn mpi_env(cmd: &mut Command) -> &mut Command {
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        // Keep Open MPI off network interfaces a container may lack.
        .env("OMPI_MCA_btl", "self,vader")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
}

/// How long one command of a test may run before it is taken for a hang:
/// `HARK_TEST_LIMIT` seconds, 300 unless set. Generous: the heaviest test,
/// LAMMPS and HPCC at np 4 to 6 over 1 to 3 analysers, took 216 s for all
/// its runs together on a 2-core machine with both cores kept busy.
pub fn limit() -> Duration {
    let secs = std::env::var("HARK_TEST_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// [`Command::output`], bounded by [`limit`]: a command that hangs fails
/// its test with what each of its processes was doing, instead of hanging
/// the suite.
pub trait OutputWithin {
    fn output_within(&mut self) -> std::io::Result<Output>;
}

impl OutputWithin for Command {
    fn output_within(&mut self) -> std::io::Result<Output> {
        let what = format!("{self:?}");
        let child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(wait_within(child, limit(), &what))
    }
}

/// Waits for `child` (its output piped or not) at most `limit`: past it,
/// the child and every process below it are killed and the test fails
/// with `what`, a snapshot of those processes, the child's output so far
/// and the space left in the temporary directory (a full disk makes MPI
/// jobs fail in odd ways).
pub fn wait_within(child: std::process::Child, limit: Duration, what: &str) -> Output {
    let started = Instant::now();
    let pid = child.id();
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !out.is_finished() {
        if started.elapsed() > limit {
            let mut tree = process_tree(pid);
            // Ranks a remote node's daemon started are outside the tree;
            // they run the program built in the child's directory.
            let dir = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            tree.extend(strays(&tree, &dir));
            let snapshot: Vec<String> = tree.iter().map(|&p| describe(p)).collect();
            // The program's processes first: they may end meanwhile.
            let mut worth: Vec<(bool, u32)> = (tree.iter())
                .filter_map(|&p| worth_a_stack(p, &dir).map(|hark| (hark, p)))
                .collect();
            worth.sort();
            let stacks: Vec<String> = worth.iter().take(6).map(|&(_, p)| stacks(p)).collect();
            let _ = Command::new("kill")
                .arg("-KILL")
                .args(tree.iter().map(|p| p.to_string()))
                .status();
            // The pipes close once the killed processes are gone (unless
            // one escaped the tree and holds them).
            let deadline = Instant::now() + Duration::from_secs(10);
            while !out.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let output = if out.is_finished() {
                let out = out.join().unwrap();
                format!(
                    "--- stdout\n{}\n--- stderr\n{}",
                    tail(&out.stdout),
                    tail(&out.stderr)
                )
            } else {
                "(its output is held open by a process outside its tree)".to_string()
            };
            let df = Command::new("df")
                .arg("-h")
                .arg(std::env::temp_dir())
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            panic!(
                "{what}\nstill running after {limit:?}; killed. Its processes (pid state wchan command; the program's directory {}):\n{}\n{output}\n--- space\n{df}\n{}",
                dir.display(),
                snapshot.join("\n"),
                stacks.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    out.join().unwrap()
}

/// Field `n` of `/proc/<pid>/stat` after the command (which ends at the
/// last ')'): 0 is the state, 1 the parent, 2 the process group, 3 the
/// session. Empty if the process is gone.
pub fn stat_field(pid: impl std::fmt::Display, n: usize) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_default()
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(n).map(String::from))
        .unwrap_or_default()
}

/// `pid` and every process below it, parents first.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(ppid) = stat_field(p, 1).parse::<u32>() {
            children.entry(ppid).or_default().push(p);
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        tree.extend(children.get(&p).into_iter().flatten());
        i += 1;
    }
    tree
}

/// The processes outside `tree` that run a program in `dir` (none when
/// `dir` is empty).
fn strays(tree: &[u32], dir: &Path) -> Vec<u32> {
    if dir.as_os_str().is_empty() {
        return Vec::new();
    }
    (std::fs::read_dir("/proc").into_iter().flatten().flatten())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| !tree.contains(p))
        .filter(|p| {
            std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|exe| exe.starts_with(dir))
        })
        .collect()
}

/// Whether the stacks of `pid` help tell why a test hung: `Some(false)`
/// for the program built in `dir` (a rank), `Some(true)` for `hark`
/// itself, `None` for the launchers.
fn worth_a_stack(pid: u32, dir: &Path) -> Option<bool> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if !dir.as_os_str().is_empty() && exe.starts_with(dir) {
        Some(false)
    } else {
        exe.file_name().is_some_and(|n| n == "hark").then_some(true)
    }
}

/// Every thread's stack of `pid`, from gdb if it is installed, with what
/// each thread is doing in the kernel.
fn stacks(pid: u32) -> String {
    let threads: Vec<String> = (std::fs::read_dir(format!("/proc/{pid}/task")).into_iter())
        .flatten()
        .flatten()
        .map(|t| {
            let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
            format!(
                "  {} {} {}",
                t.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan")
            )
        })
        .collect();
    let gdb = Command::new("timeout")
        .args(["30", "gdb", "-p", &pid.to_string(), "-batch", "-nx"])
        .args(["-ex", "set pagination off", "-ex", "thread apply all bt 10"])
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| format!("(no gdb: {e})"));
    let frames: Vec<&str> = (gdb.lines())
        .filter(|l| l.starts_with('#') || l.starts_with("Thread "))
        .map(|l| l.get(..l.floor_char_boundary(180)).unwrap_or(l))
        .collect();
    format!(
        "--- stacks of {}\nthreads (tid comm wchan):\n{}\n{}",
        describe(pid),
        threads.join("\n"),
        frames.join("\n")
    )
}

/// One line of what process `pid` is doing: its state, where it sleeps in
/// the kernel, and its command line.
fn describe(pid: u32) -> String {
    let read = |f: &str| std::fs::read(format!("/proc/{pid}/{f}")).unwrap_or_default();
    let state = stat_field(pid, 0);
    let wchan = String::from_utf8_lossy(&read("wchan")).into_owned();
    let cmd: String = String::from_utf8_lossy(&read("cmdline"))
        .replace('\0', " ")
        .chars()
        .take(160)
        .collect();
    format!("{pid} {state} {wchan} {cmd}")
}

/// The last lines of a command's output.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Runs `hark run -o <dir>/run <hark_args> -- <command>` in `dir`.
pub fn hark_run(dir: &Path, hark_args: &[&str], command: &[String]) -> (Output, PathBuf) {
    hark_run_env(dir, hark_args, command, &[])
}

/// [`hark_run`] with more environment variables for `hark` and all it starts.
pub fn hark_run_env(
    dir: &Path,
    hark_args: &[&str],
    command: &[String],
    env: &[(&str, &str)],
) -> (Output, PathBuf) {
    probe();
    let out_dir = dir.join("run");
    let mut cmd = hark_run_command(dir, &out_dir, hark_args, command);
    cmd.envs(env.iter().copied());
    let out = cmd.output_within().expect("cannot run hark");
    (out, out_dir)
}

/// The command `hark run -o <out_dir> <hark_args> -- <command>` in `dir`,
/// with [`mpi_env`], for a test that adds to it or waits for it its own way.
pub fn hark_run_command(
    dir: &Path,
    out_dir: &Path,
    hark_args: &[&str],
    command: &[String],
) -> Command {
    let mut cmd = Command::new(hark());
    cmd.current_dir(dir)
        .arg("run")
        .arg("-o")
        .arg(out_dir)
        .args(hark_args)
        .arg("--")
        .args(command);
    mpi_env(&mut cmd);
    cmd
}

/// Runs `command` without Hark, in `dir`, for comparison.
pub fn bare_run(dir: &Path, command: &[String]) -> Output {
    let mut cmd = Command::new(&command[0]);
    cmd.current_dir(dir).args(&command[1..]);
    mpi_env(&mut cmd);
    cmd.output_within().expect("cannot run the command")
}

/// Panics with hark's stderr unless it exited with `code`.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "hark exited with {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `profile.json` of a run directory, as JSON.
pub fn profile(run_dir: &Path) -> serde_json::Value {
    let path = run_dir.join("profile.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// `profile["programs"][p]["mpi"][function][field]` as numbers per rank
/// (empty when the function was not recorded).
pub fn per_rank(profile: &serde_json::Value, p: usize, function: &str, field: &str) -> Vec<u64> {
    profile["programs"][p]["mpi"][function][field]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_u64().unwrap()).collect())
        .unwrap_or_default()
}

/// A matrix of the profile as numbers.
pub fn matrix(v: &serde_json::Value) -> Vec<Vec<u64>> {
    v.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What each thread of `tests/programs/omp_imbalance.c` said of itself
/// on stdout: (rank, thread, work ns, barrier ns).
pub fn omp_imbalance_threads(stdout: &str) -> Vec<(usize, i64, u64, u64)> {
    (thread_reports(stdout, "thread").into_iter())
        .map(|(r, t, v)| (r, t, v[0] as u64, v[1] as u64))
        .collect()
}

/// Lost events of the whole run: written − analysed.
pub fn lost(profile: &serde_json::Value) -> u64 {
    let a = &profile["accounting"];
    a["events_written"].as_u64().unwrap() - a["events_analysed"].as_u64().unwrap()
}

/// The wait-state patterns of `programs[i].waits`, in the order of
/// Scalasca's catalogue.
pub const WAIT_PATTERNS: [&str; 7] = [
    "late_sender",
    "late_sender_wrong_order",
    "late_receiver",
    "wait_nxn",
    "wait_barrier",
    "late_broadcast",
    "early_reduce",
];

/// `programs[p].waits[pattern]` as `(time_ns, instances)` per rank; panics
/// naming the missing key.
pub fn waits(profile: &serde_json::Value, p: usize, pattern: &str) -> (Vec<u64>, Vec<u64>) {
    let w = &profile["programs"][p]["waits"][pattern];
    let field = |f: &str| -> Vec<u64> {
        w[f].as_array()
            .unwrap_or_else(|| panic!("profile.json has no programs[{p}].waits.{pattern}.{f}"))
            .iter()
            .map(|v| {
                v.as_u64()
                    .unwrap_or_else(|| panic!("waits.{pattern}.{f}: {v}"))
            })
            .collect()
    };
    (field("time_ns"), field("instances"))
}

/// Checks what holds for the waits of every MPI program: every pattern has
/// a value per rank, and no rank waits longer (over all patterns) than it
/// spent in MPI.
pub fn check_waits_fit(profile: &serde_json::Value, p: usize) {
    let prog = &profile["programs"][p];
    let ranks = prog["ranks"].as_u64().unwrap() as usize;
    let in_mpi: Vec<u64> = prog["mpi_time_ns"]
        .as_array()
        .expect("programs[p].mpi_time_ns")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let mut total = vec![0u64; ranks];
    for pattern in WAIT_PATTERNS {
        let (time, instances) = waits(profile, p, pattern);
        assert_eq!(time.len(), ranks, "waits.{pattern}.time_ns: one per rank");
        assert_eq!(
            instances.len(),
            ranks,
            "waits.{pattern}.instances: one per rank"
        );
        for r in 0..ranks {
            assert!(
                time[r] == 0 || instances[r] > 0,
                "rank {r} waited {} ns in {pattern} in no instance",
                time[r]
            );
            total[r] += time[r];
        }
    }
    for r in 0..ranks {
        assert!(
            total[r] <= in_mpi[r],
            "rank {r} waited {} ns in all patterns but spent only {} ns in MPI",
            total[r],
            in_mpi[r]
        );
    }
}

/// `programs[p].efficiency`, after checking that every one is a fraction of
/// 1 and that `parallel = load_balance × communication` and
/// `communication = serialisation × transfer` hold to 1e-9.
pub fn efficiency(profile: &serde_json::Value, p: usize) -> BTreeMap<&'static str, f64> {
    let e = &profile["programs"][p]["efficiency"];
    let names = [
        "parallel",
        "load_balance",
        "communication",
        "serialisation",
        "transfer",
    ];
    let map: BTreeMap<&str, f64> = names
        .iter()
        .map(|&n| {
            let v = e[n]
                .as_f64()
                .unwrap_or_else(|| panic!("profile.json has no programs[{p}].efficiency.{n}: {e}"));
            assert!(
                (0.0..=1.0).contains(&v),
                "efficiency.{n} = {v} is not in [0, 1]"
            );
            (n, v)
        })
        .collect();
    let product = map["load_balance"] * map["communication"];
    assert!(
        (map["parallel"] - product).abs() <= 1e-9,
        "parallel {} != load_balance × communication {product}",
        map["parallel"]
    );
    let product = map["serialisation"] * map["transfer"];
    assert!(
        (map["communication"] - product).abs() <= 1e-9,
        "communication {} != serialisation × transfer {product}",
        map["communication"]
    );
    map
}

/// The node forwarders' statistics lines (`HARK_FORWARD_STATS`) in
/// `path`, once there are `n` (each forwarder writes its line as it ends,
/// when hark's connection does).
pub fn forwarder_stats(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Whole lines only: a forwarder may be writing one right now.
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        let lines: Vec<String> = (whole.lines())
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect();
        if lines.len() >= n || Instant::now() > deadline {
            assert_eq!(lines.len(), n, "{lines:?}");
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of `key=` in a forwarder's statistics line.
pub fn forwarder_field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// What a test program printed of each of its threads, one line
/// `<prefix> <rank> <thread> <value>...` each: (rank, thread, values).
pub fn thread_reports(stdout: &str, prefix: &str) -> Vec<(usize, i64, Vec<f64>)> {
    let bad = |l: &str| -> ! { panic!("a bad line from the program: {prefix} {l}") };
    (stdout.lines())
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
        .map(|l| {
            let mut v = l.split_whitespace();
            let rank = v
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| bad(l));
            let thread = v
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| bad(l));
            let values = v.map(|x| x.parse().unwrap_or_else(|_| bad(l))).collect();
            (rank, thread, values)
        })
        .collect()
}

/// The connections the forwarders of `lines` made into hark to align
/// their clocks: at least one each (their ranks' pings were answered),
/// and independent of how many ranks each carries.
pub fn clock_alignments(lines: &[String]) -> u64 {
    assert!(
        lines
            .iter()
            .all(|l| forwarder_field(l, "clock_alignments") >= 1),
        "a forwarder never aligned its clock: {lines:?}"
    );
    lines
        .iter()
        .map(|l| forwarder_field(l, "clock_alignments"))
        .sum()
}

/// The checkout's `.venv/` Python, which has the trace readers' packages
/// (`scripts/deps.sh` makes it).
pub fn venv_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: run scripts/deps.sh, which makes it",
        venv.display()
    );
    venv
}

/// What `otf2-print` prints of the OTF2 archive `anchor`, after checking
/// it read the archive without a complaint.
pub fn otf2_print(anchor: &Path) -> String {
    let print = Command::new("otf2-print")
        .arg(anchor)
        .output_within()
        .unwrap();
    assert!(
        print.status.success() && print.stderr.is_empty(),
        "otf2-print: {}",
        String::from_utf8_lossy(&print.stderr)
    );
    String::from_utf8_lossy(&print.stdout).into_owned()
}

/// What the reader `tests/programs/<script>` prints as JSON for `file`.
pub fn read_with(script: &str, file: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(script);
    let out = Command::new(venv_python())
        .arg(&script)
        .arg(file)
        .output_within()
        .expect("cannot run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed on {}: {}{}",
        script.display(),
        file.display(),
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    // The reader's JSON is its last line (perfetto may print before it).
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap()
}
