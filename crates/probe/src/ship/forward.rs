//! The node's forwarder, from the probe's side: whether to stream through
//! it, and starting it when this process is the node's first.
//!
//! A forwarder (`hark forward`, `docs/cluster.md`, "The forwarder") takes
//! every stream of its node and sends them to `hark` over one connection.
//! It listens on a Unix socket whose name comes from the run's secret and
//! `HARK_ADDR` (so every process of a run, and only those, finds the same
//! one), owned by the user. The first process of the node to find no
//! forwarder there takes a lock file beside it (`flock`), looks again, and
//! starts one with `posix_spawn` of `HARK_BIN forward --detach`; the others
//! wait for the lock and find it. Anything that fails on the way (no
//! `HARK_BIN`, a lock or socket of another user, a forwarder that does not
//! come up in time) costs one line on stderr and the process connects to
//! `hark` itself, as without a forwarder.
//!
//! This runs once, where the stream connects: at load for the process
//! itself (before `main`, when opening a file cannot take a descriptor the
//! program is about to reuse), and only to look for a running forwarder in
//! a forked child, which never starts one.

use std::ffi::CString;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::transport;
use crate::core::config::{Config, Forward};

/// Connects to this node's forwarder, starting it if `may_start` and none
/// runs; the connected socket and the forwarder's address, or `None` to
/// connect to `hark` directly.
pub(crate) fn connect(cfg: &Config, may_start: bool) -> Option<(RawFd, String)> {
    if !wanted(cfg) {
        return None;
    }
    let bin = cfg.bin.as_deref()?;
    let base = base_path(cfg);
    let sock = format!("{base}.sock");
    if let Some(fd) = try_connect(&sock) {
        return Some((fd, format!("unix:{sock}")));
    }
    if !may_start {
        return None;
    }
    // The forwarder may try hark's addresses one by one (a second each but
    // the last, `HARK_CONNECT_TIMEOUT_MS`) before it listens.
    let wait = cfg.connect_timeout + Duration::from_secs(2);
    match start(bin, &base, &sock, wait) {
        Ok(fd) => Some((fd, format!("unix:{sock}"))),
        Err(why) => {
            crate::core::warn_once(
                "forward",
                &format!("cannot use this node's forwarder ({why}); connecting to hark directly"),
            );
            None
        }
    }
}

/// Whether this process should go through a forwarder: `HARK_FORWARD`,
/// and in `auto` whether hark's own Unix socket is on this node.
fn wanted(cfg: &Config) -> bool {
    if cfg.addr.starts_with("mpi:") {
        return false;
    }
    match cfg.forward {
        Forward::Never => false,
        Forward::Always => true,
        Forward::Auto => !super::reach::split(&cfg.addr).iter().any(|a| {
            a.strip_prefix("unix:")
                .is_some_and(|p| std::path::Path::new(p).exists())
        }),
    }
}

/// `/tmp/hark-fwd-UID-HASH`: the run's forwarder on this node, named from
/// the run's secret and address (the secret itself never appears).
fn base_path(cfg: &Config) -> String {
    let mut named = cfg.secret.as_bytes().to_vec();
    named.push(0);
    named.extend_from_slice(cfg.addr.as_bytes());
    let hash = hark_wire::sha256(&named);
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    format!("/tmp/hark-fwd-{uid}-{hex}{}", test_node())
}

/// A probe built for Hark's tests (`test-hooks`) claims the node
/// `HARK_TEST_NODES` gives its rank, and with it a forwarder of that node's
/// own: one host then stands for several nodes. Empty otherwise.
#[cfg(feature = "test-hooks")]
fn test_node() -> String {
    let rank = [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse::<u32>().ok());
    let nodes = std::env::var(hark_settings::TEST_NODES.name).ok();
    match (
        rank,
        hark_wire::partition::test_node(nodes.as_deref(), rank.unwrap_or(0)),
    ) {
        (Some(_), Some(node)) => format!("-n{node}"),
        _ => String::new(),
    }
}

#[cfg(not(feature = "test-hooks"))]
fn test_node() -> String {
    String::new()
}

/// A connection to the forwarder at `sock`, if one answers there and runs
/// as this user (another user's socket at that name is never used).
fn try_connect(sock: &str) -> Option<RawFd> {
    let fd = transport::connect_unix(sock, Duration::ZERO).ok()?;
    if peer_uid(fd)
        == Some(
            // SAFETY: getuid has no preconditions.
            unsafe { libc::getuid() },
        )
    {
        Some(fd)
    } else {
        close(fd);
        None
    }
}

/// Elects this process to start the node's forwarder (or finds that
/// another did), and connects to it.
fn start(bin: &str, base: &str, sock: &str, wait: Duration) -> Result<RawFd, String> {
    let deadline = Instant::now() + wait;
    let lock = Lock::take(&format!("{base}.lock"), deadline)?;
    // Another process may have started it while this one waited.
    if let Some(fd) = try_connect(sock) {
        return Ok(fd);
    }
    if let Err(why) = spawn(bin, sock) {
        lock.remove();
        return Err(why);
    }
    let found = loop {
        if let Some(fd) = try_connect(sock) {
            break Ok(fd);
        }
        if Instant::now() >= deadline {
            break Err(format!(
                "{bin} forward did not listen on {sock} within {} ms",
                wait.as_millis()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if found.is_err() {
        lock.remove();
    }
    found
}

/// Starts `bin forward --detach --listen unix:SOCK` with this process's
/// environment less `LD_PRELOAD` and none of its descriptors (its standard
/// streams on `/dev/null`), and reaps the short-lived process that detaches
/// the forwarder.
fn spawn(bin: &str, sock: &str) -> Result<(), String> {
    let args = [
        bin.to_string(),
        "forward".into(),
        "--detach".into(),
        "--listen".into(),
        format!("unix:{sock}"),
    ];
    let args: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| format!("{a:?} holds a NUL byte")))
        .collect::<Result<_, _>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != "LD_PRELOAD")
        .filter_map(|(k, v)| {
            let mut kv = k.into_encoded_bytes();
            kv.push(b'=');
            kv.extend_from_slice(&v.into_encoded_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut argv: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|e| e.as_ptr().cast_mut()).collect();
    envp.push(std::ptr::null_mut());
    let mut pid: libc::pid_t = 0;
    let null = c"/dev/null";
    // SAFETY: the file actions are initialised before use and destroyed
    // after; argv and envp are NUL-terminated arrays of C strings that live
    // until the call returns.
    let r = unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        // Nothing of the program's: its standard streams are the
        // launcher's pipes, and a launcher waits for their end (Hydra's
        // proxy does) while the forwarder waits for hark's, which waits
        // for the launcher; its other descriptors (MPICH's PMI socket)
        // are the job's.
        libc::posix_spawn_file_actions_addopen(&mut fa, 0, null.as_ptr(), libc::O_RDONLY, 0);
        libc::posix_spawn_file_actions_addopen(&mut fa, 1, null.as_ptr(), libc::O_WRONLY, 0);
        libc::posix_spawn_file_actions_addopen(&mut fa, 2, null.as_ptr(), libc::O_WRONLY, 0);
        libc::posix_spawn_file_actions_addclosefrom_np(&mut fa, 3);
        let r = libc::posix_spawn(
            &mut pid,
            args[0].as_ptr(),
            &fa,
            std::ptr::null(),
            argv.as_ptr(),
            envp.as_ptr(),
        );
        libc::posix_spawn_file_actions_destroy(&mut fa);
        r
    };
    if r != 0 {
        return Err(format!(
            "cannot start {bin}: {}",
            std::io::Error::from_raw_os_error(r)
        ));
    }
    let mut status = 0;
    // SAFETY: waits for the child just started; a program that ignores
    // SIGCHLD makes this fail with ECHILD, which changes nothing.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(())
}

/// An exclusive `flock` on the election's lock file, released on drop.
struct Lock(RawFd, String);

impl Lock {
    fn take(path: &str, deadline: Instant) -> Result<Lock, String> {
        let c = CString::new(path).map_err(|_| "a NUL byte in the lock's path".to_string())?;
        // SAFETY: a raw openat (not the probe's own `open` wrapper) of a
        // NUL-terminated path; O_NOFOLLOW refuses a symlink planted there.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        } as RawFd;
        if fd < 0 {
            return Err(format!(
                "cannot open {path}: {}",
                std::io::Error::last_os_error()
            ));
        }
        loop {
            // SAFETY: flock on our own descriptor.
            if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                // A forwarder that ends removes the file: a lock on the
                // removed one elects nobody, so take the new one.
                if same_file(fd, &c) {
                    return Ok(Lock(fd, path.to_string()));
                }
                close(fd);
                if Instant::now() >= deadline {
                    return Err(format!("{path} kept being replaced"));
                }
                return Lock::take(path, deadline);
            }
            if Instant::now() >= deadline {
                close(fd);
                return Err(format!("{path} stayed locked by another process"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Lock {
    /// Removes the lock file while holding it (no forwarder came up to
    /// remove it as it ends): a process waiting on it sees it replaced.
    fn remove(&self) {
        if let Ok(c) = CString::new(self.1.as_str()) {
            // SAFETY: a raw unlinkat of a NUL-terminated path.
            unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, c.as_ptr(), 0) };
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Closing releases the lock.
        close(self.0);
    }
}

/// Whether the open file `fd` is the one at `path` now.
fn same_file(fd: RawFd, path: &CString) -> bool {
    // SAFETY: stat structs are plain data, valid when zeroed; fstat and
    // stat write into them.
    unsafe {
        let mut a: libc::stat = std::mem::zeroed();
        let mut b: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut a) == 0
            && libc::stat(path.as_ptr(), &mut b) == 0
            && (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    }
}

/// The uid of the process at the other end of the Unix socket `fd`.
fn peer_uid(fd: RawFd) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing and sized for
    // SO_PEERCRED's answer.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

fn close(fd: RawFd) {
    // SAFETY: our own descriptor; the raw syscall bypasses the probe's
    // `close` wrapper.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}
