//! The analysis server of an analyser rank, in a process of its own that
//! outlives the rank (`docs/analysers.md`, "When a rank dies").
//!
//! When a rank of an MPI job dies, the launcher ends the others: Open MPI's
//! `mpirun` with SIGTERM, then SIGKILL; MPICH's Hydra with SIGKILL at once.
//! No process of the job can act on SIGKILL, so an analyser rank cannot save
//! what it received itself. Its server therefore runs in a **keeper**: a
//! process forked before `MPI_Init` (so it never touches MPI), in a process
//! group of its own (`setpgid`: the launchers signal the processes they
//! started, or their process groups, never a new group), with no standard
//! streams the launcher forwards. Not in a session of its own: a session is
//! a scheduling autogroup where the kernel has them (Linux's
//! `sched_autogroup_enabled`), and there a mostly idle keeper was runnable
//! and given no CPU for up to 8 s under load, with its rank waiting for it
//! (`docs/analysers.md`, "Writers that give up at `MPI_Finalize`"). The rank relays each writer's
//! bytes to it through a local socket and holds a *lifeline*,
//! one end of a socket pair, through which it passes the clock reference and
//! its analyser index.
//!
//! The lifeline's end, however it comes (the rank is done and shuts it, or
//! the rank died and the kernel closed it), makes the keeper end its server
//! with [`hark_server::Server::finish_partials`]: streams that never ended
//! are cut and their ranks marked partial, exactly as the socket path marks a
//! killed rank. The keeper then writes the serialised partial into the run
//! directory's `.partials/` (best effort; a run directory on a file system
//! the analyser's node does not share is skipped) and sends it back over the
//! lifeline. A rank that is alive reads it there and merges over MPI as
//! usual; if the job died instead, `hark run`, which outlives the launcher,
//! waits for the keepers (each holds an `flock` on its `.lock` file while it
//! works) and merges whatever partials exist ([`salvage`]).

use crate::error::{bail, Context, ErrorKind, Result};
use hark_engine::exchange::Exchange;
use hark_server::{Server, ServerConfig};
use hark_sync::lock;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The directory of the run directory that holds the keepers' partials.
pub const PARTIALS: &str = ".partials";

/// How long a keeper waits for its local connections to close once the
/// lifeline ended.
const GRACE: Duration = Duration::from_secs(10);

/// Lifeline messages from the rank: a tag byte, a length, the bytes. The
/// first two are told; the others are asked, and the keeper answers each
/// with a length and the bytes, in the order asked.
const INDEX: u8 = b'I';
const REFERENCE: u8 = b'R';
/// The server's partial results so far (a live snapshot), as
/// [`super::encode`] makes them.
const SNAPSHOT: u8 = b'S';
/// The exchange between analysers (`super::exchange`): its set-up (this
/// analyser's index, their number, each writer's owner), a parcel to
/// inject, whether the server is quiet, a flush of its trackers, its
/// outbox, whether entries are still queued, and its traffic as a line.
const EXCHANGE: u8 = b'X';
const INJECT: u8 = b'J';
const QUIET: u8 = b'Q';
const FLUSH: u8 = b'F';
const OUTBOX: u8 = b'O';
const QUEUED: u8 = b'U';
const TRAFFIC: u8 = b'W';

/// The rank's side of its keeper.
pub struct Keeper {
    /// Locked for each message and its answer.
    life: Mutex<UnixStream>,
    /// The live snapshots' own channel (the rank's snapshot thread asks,
    /// a thread of the keeper answers): a snapshot never holds up the
    /// receive loop's requests.
    snap: Mutex<UnixStream>,
    socket: PathBuf,
    dir: PathBuf,
    pid: libc::pid_t,
}

impl Keeper {
    /// Forks the keeper; must be called before anything starts a thread or
    /// loads MPI. `output` is the run directory, `secret` the probes'.
    pub fn start(
        output: &Path,
        analyses: Option<Vec<String>>,
        secret: Option<String>,
    ) -> Result<Keeper> {
        let dir = super::tempdir()?;
        let socket = dir.join("s");
        let (life, theirs) =
            UnixStream::pair().context(ErrorKind::Keeper, "cannot make the keeper's lifeline")?;
        let (snap, snap_theirs) =
            UnixStream::pair().context(ErrorKind::Keeper, "cannot make the keeper's lifeline")?;
        // SAFETY: the process has one thread here (the analyser forks first
        // thing), so the child may run anything.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => bail!(
                Keeper,
                "cannot fork the analyser's keeper: {}",
                std::io::Error::last_os_error()
            ),
            0 => {
                drop((life, snap));
                let code = match keep(&socket, output, analyses, secret, theirs, snap_theirs) {
                    Ok(()) => 0,
                    Err(_) => 1,
                };
                // SAFETY: ends the child without running the parent's
                // atexit handlers or destructors twice.
                unsafe { libc::_exit(code) }
            }
            _ => {}
        }
        drop((theirs, snap_theirs));
        // The keeper says it listens by one byte on the lifeline.
        let mut b = [0u8; 1];
        let mut l = &life;
        if l.read_exact(&mut b).is_err() || b[0] != b'+' {
            bail!(
                Keeper,
                "the analyser's keeper could not start its analysis server"
            );
        }
        Ok(Keeper {
            life: Mutex::new(life),
            snap: Mutex::new(snap),
            socket,
            dir,
            pid,
        })
    }

    /// The socket the writers' bytes go to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Tells the keeper this rank's analyser index (names its partial).
    pub fn set_index(&self, index: u32) {
        let _ = message(&mut lock(&self.life), INDEX, &index.to_le_bytes());
    }

    /// Passes world rank 0's clock reference on to the keeper's server.
    pub fn set_clock_reference(&self, job: &str, reference_ns: i64) {
        let mut m = reference_ns.to_le_bytes().to_vec();
        m.extend(job.as_bytes());
        let _ = message(&mut lock(&self.life), REFERENCE, &m);
    }

    /// Each program's partial result so far, while the programs run: this
    /// rank's share of a live snapshot (`snapshots.rs`).
    pub fn snapshot_partials(&self) -> Result<Vec<hark_engine::Partial>> {
        decode_partials(&ask(&self.snap, SNAPSHOT, &[])?).map(|(programs, _)| programs)
    }

    /// Makes the keeper's server analyser `me` of `owners`' analysers
    /// (`owners[r]`: the analyser that receives world rank r's stream),
    /// exchanging keys with the others: before any writer's stream
    /// connects.
    pub fn exchange(&self, me: u32, analysers: u32, owners: &[u32]) -> Result<()> {
        let mut m = Vec::with_capacity(8 + 4 * owners.len());
        for v in [me, analysers].iter().chain(owners) {
            m.extend(v.to_le_bytes());
        }
        match self.ask(EXCHANGE, &m)?.as_slice() {
            [1] => Ok(()),
            _ => bail!(
                Keeper,
                "the analyser's keeper could not set up the exchange"
            ),
        }
    }

    /// Injects parcels from analyser `from` into the keeper's server:
    /// `parcels` is whole parcels, each after its length (`u32`,
    /// little-endian), in the order `from` sent them. Returns what the
    /// server refused, one line a parcel; fails only if the keeper is gone.
    pub fn inject(&self, from: u32, parcels: &[u8]) -> Result<Vec<String>> {
        let mut m = from.to_le_bytes().to_vec();
        m.extend(parcels);
        let why = self.ask(INJECT, &m)?;
        Ok(String::from_utf8_lossy(&why)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Whether the server is done with all it was given (see
    /// `hark_server::Server::exchange_quiet`); false if the keeper is gone.
    pub fn exchange_quiet(&self, streams: u64) -> bool {
        self.ask(QUIET, &streams.to_le_bytes())
            .is_ok_and(|a| a == [1])
    }

    /// Publishes what the server's trackers still hold.
    pub fn flush_trackers(&self) -> Result<()> {
        self.ask(FLUSH, &[]).map(drop)
    }

    /// Takes the outbox: for each other analyser with bytes for it, its
    /// index and the bytes.
    pub fn take_outbox(&self) -> Result<Vec<(u32, Vec<u8>)>> {
        let a = self.ask(OUTBOX, &[])?;
        let mut out = Vec::new();
        let mut at = 0;
        while at < a.len() {
            let Some(head) = a.get(at..at + 8) else {
                bail!(Keeper, "the analyser's keeper sent a truncated outbox");
            };
            let to = u32::from_le_bytes(head[..4].try_into()?);
            let len = u32::from_le_bytes(head[4..].try_into()?) as usize;
            let Some(bytes) = a.get(at + 8..at + 8 + len) else {
                bail!(Keeper, "the analyser's keeper sent a truncated outbox");
            };
            out.push((to, bytes.to_vec()));
            at += 8 + len;
        }
        Ok(out)
    }

    /// Whether the outbox holds entries (after the last round: none should).
    pub fn outbox_queued(&self) -> bool {
        self.ask(QUEUED, &[]).is_ok_and(|a| a == [1])
    }

    /// What the server put in its outbox and took in, as one line.
    pub fn exchange_traffic(&self) -> String {
        self.ask(TRAFFIC, &[])
            .map(|a| String::from_utf8_lossy(&a).into_owned())
            .unwrap_or_default()
    }

    /// Sends a request on the lifeline and reads its answer.
    fn ask(&self, tag: u8, body: &[u8]) -> Result<Vec<u8>> {
        ask(&self.life, tag, body)
    }

    /// Ends the keeper's server (the rank closed every connection first) and
    /// returns its partial results, encoded as [`super::encode`] does.
    pub fn finish(self) -> Result<Vec<u8>> {
        // The snapshot channel first: the keeper's thread that answers it
        // ends, and then the server can end.
        drop(self.snap);
        let life = self.life.into_inner().unwrap_or_else(|e| e.into_inner());
        life.shutdown(std::net::Shutdown::Write)
            .context(ErrorKind::Keeper, "cannot reach the analyser's keeper")?;
        let mut out = Vec::new();
        (&life)
            .read_to_end(&mut out)
            .context(ErrorKind::Keeper, "the analyser's keeper did not answer")?;
        let _ = std::fs::remove_dir_all(&self.dir);
        // SAFETY: the keeper is this process's child; reaping it takes no
        // more than its exit, which closing the lifeline's end announced.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
        if out.is_empty() {
            bail!(
                Keeper,
                "the analyser's keeper ended without its partial results"
            );
        }
        Ok(out)
    }
}

/// Sends a request on `ch` and reads its answer.
fn ask(ch: &Mutex<UnixStream>, tag: u8, body: &[u8]) -> Result<Vec<u8>> {
    let mut ch = lock(ch);
    message(&mut ch, tag, body).context(ErrorKind::Keeper, "cannot reach the analyser's keeper")?;
    let mut len = [0u8; 4];
    ch.read_exact(&mut len)
        .context(ErrorKind::Keeper, "the analyser's keeper did not answer")?;
    let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
    ch.read_exact(&mut bytes)
        .context(ErrorKind::Keeper, "the analyser's keeper did not answer")?;
    Ok(bytes)
}

/// Reads one message: its tag and body; `None` once the channel ended.
fn read_message(from: &mut UnixStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    from.read_exact(&mut head).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize];
    from.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

/// Answers `to` (a length, then the bytes).
fn reply(to: &mut UnixStream, answer: Vec<u8>) -> std::io::Result<()> {
    let mut m = (answer.len() as u32).to_le_bytes().to_vec();
    m.extend(answer);
    to.write_all(&m)
}

fn message(to: &mut UnixStream, tag: u8, bytes: &[u8]) -> std::io::Result<()> {
    let mut m = vec![tag];
    m.extend((bytes.len() as u32).to_le_bytes());
    m.extend(bytes);
    to.write_all(&m)
}

/// The keeper process: serves until the lifeline ends, then writes and
/// answers its partial.
fn keep(
    socket: &Path,
    output: &Path,
    analyses: Option<Vec<String>>,
    secret: Option<String>,
    mut life: UnixStream,
    mut snap: UnixStream,
) -> Result<()> {
    // SAFETY: plain system calls in a single-threaded child.
    unsafe {
        libc::setpgid(0, 0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }
    // Nor any other descriptor the launcher gave the rank (a launcher may
    // wait for a pipe's end): only the lifeline and the snapshots' channel
    // stay.
    let keep_fds = [life.as_raw_fd(), snap.as_raw_fd()];
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds
        .into_iter()
        .filter(|&fd| fd > 2 && !keep_fds.contains(&fd))
    {
        // SAFETY: this process owns no other object that uses these
        // descriptors (it was forked from a single thread and runs only
        // this function); closing the directory's own, gone, is harmless.
        unsafe { libc::close(fd) };
    }
    let lock = lock_file(output);
    let server = Server::start(ServerConfig {
        addr: format!("unix:{}", socket.display()),
        analyses,
        secret,
        // The streams waited for MPI_Init: their handshakes are late.
        probe_realtime: true,
        ..ServerConfig::default()
    });
    let Ok(server) = server else {
        let _ = life.write_all(b"-");
        bail!(Keeper, "cannot start the analysis server");
    };
    life.write_all(b"+").context(
        ErrorKind::Keeper,
        "the keeper cannot tell the analyser rank it started",
    )?;
    let mut index = None;
    let mut exchange = None;
    let mut peak = Peak::default();
    std::thread::scope(|scope| {
        // Snapshots, on a thread of their own, until their channel ends
        // (the rank closes it first when it finishes, or dies).
        scope.spawn(|| {
            while let Some((tag, body)) = read_message(&mut snap) {
                let answer = answer(&server, &mut None, &mut Peak::default(), tag, &body)
                    .unwrap_or_default();
                if reply(&mut snap, answer).is_err() {
                    break;
                }
            }
        });
        while let Some((tag, body)) = read_message(&mut life) {
            match tag {
                INDEX if body.len() == 4 => {
                    index = Some(u32::from_le_bytes([body[0], body[1], body[2], body[3]]))
                }
                REFERENCE if body.len() >= 8 => server.set_clock_reference(
                    &String::from_utf8_lossy(&body[8..]),
                    i64::from_le_bytes(body[..8].try_into().expect("8 bytes")),
                ),
                tag => {
                    if let Some(answer) = answer(&server, &mut exchange, &mut peak, tag, &body) {
                        if reply(&mut life, answer).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    });
    let (partials, problems) = server.finish_partials(GRACE);
    // The socket's private directory, left behind by a rank that died.
    if let Some(d) = socket.parent() {
        let _ = std::fs::remove_dir_all(d);
    }
    let bytes = super::encode(
        &partials.iter().map(|p| p.to_bytes()).collect::<Vec<_>>(),
        &problems,
    );
    if let Some((dir, _)) = &lock {
        // Named by analyser index (the merge's order), or by process for a
        // rank that died before it knew its index.
        let name = match index {
            Some(i) => format!("{i:08}"),
            None => format!("x-{}", std::process::id()),
        };
        let tmp = dir.join(format!("{name}.tmp"));
        if std::fs::write(&tmp, &bytes).is_ok() {
            let _ = std::fs::rename(&tmp, dir.join(format!("{name}.partial")));
        }
    }
    let _ = life.write_all(&bytes);
    if let Some((dir, path)) = lock {
        let _ = std::fs::remove_file(path);
        let _ = dir;
    }
    Ok(())
}

/// The most the keeper's server held waiting for its analyses, sampled
/// each time the rank takes the outbox (about once a millisecond), for the
/// exchange's statistics (`HARK_EXCHANGE_STATS`).
#[derive(Default)]
struct Peak {
    in_flight: u64,
}

/// The keeper's answer to a request of the rank (`None`: not a request).
fn answer(
    server: &Server,
    exchange: &mut Option<Arc<Exchange>>,
    peak: &mut Peak,
    tag: u8,
    body: &[u8],
) -> Option<Vec<u8>> {
    let flag = |b: bool| vec![u8::from(b)];
    let words = |b: &[u8]| -> Vec<u32> {
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    Some(match tag {
        SNAPSHOT => {
            let parts: Vec<Vec<u8>> = server
                .snapshot_partials()
                .iter()
                .map(|p| p.to_bytes())
                .collect();
            super::encode(&parts, &[])
        }
        EXCHANGE => {
            let w = words(body);
            let ok = w.len() >= 2 && exchange.is_none() && {
                let x = Arc::new(Exchange::new(w[0], w[1], w[2..].to_vec()));
                *exchange = Some(x.clone());
                server.set_exchange(x)
            };
            flag(ok)
        }
        INJECT if body.len() >= 4 => {
            let from = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
            let mut why = String::new();
            let mut rest = &body[4..];
            while rest.len() >= 4 {
                let size = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                let Some(parcel) = rest.get(4..4 + size) else {
                    why.push_str(&format!(
                        "the analyser rank passed a truncated parcel from analyser {from} ({} of {size} bytes); it was not analysed\n",
                        rest.len() - 4
                    ));
                    break;
                };
                if let Err(e) = server.inject(from, parcel) {
                    why.push_str(&format!("{e}\n"));
                }
                rest = &rest[4 + size..];
            }
            why.into_bytes()
        }
        QUIET if body.len() == 8 => {
            flag(server.exchange_quiet(u64::from_le_bytes(body.try_into().ok()?)))
        }
        FLUSH => {
            server.flush_trackers();
            Vec::new()
        }
        OUTBOX => {
            peak.in_flight = peak.in_flight.max(server.status().bytes_in_flight);
            let mut out = Vec::new();
            if let Some(x) = exchange {
                for to in (0..x.analysers()).filter(|&to| to != x.me()) {
                    let bytes = x.take(to);
                    if !bytes.is_empty() {
                        out.extend(to.to_le_bytes());
                        out.extend((bytes.len() as u32).to_le_bytes());
                        out.extend(bytes);
                    }
                }
            }
            out
        }
        QUEUED => flag(exchange.as_ref().is_some_and(|x| x.queued())),
        TRAFFIC => match exchange {
            Some(x) => {
                let (mut parcels, mut ops, mut arrivals, mut waits) = (0, 0, 0, 0);
                for to in 0..x.analysers() {
                    let t = x.sent_to(to);
                    parcels += t.parcels;
                    ops += t.ops;
                    arrivals += t.arrivals;
                    waits += t.waits;
                }
                let status = server.status();
                format!(
                    "{parcels} parcels: {ops} operations, {arrivals} arrivals, {waits} waits; received {} parcels; server: at most {} bytes waiting for analysis, readers throttled {} ms",
                    x.received().parcels,
                    peak.in_flight,
                    status.throttled_ns / 1_000_000
                )
                .into_bytes()
            }
            None => Vec::new(),
        },
        _ => return None,
    })
}

/// Creates `<output>/.partials/<pid>.lock` and holds an exclusive `flock`
/// on it for the keeper's life (the descriptor is leaked: the lock goes
/// when the process ends). `None` where the run directory is not there.
fn lock_file(output: &Path) -> Option<(PathBuf, PathBuf)> {
    // Only where `hark run` made the run directory: on a node that does not
    // share its file system the path is not made (nothing would read it).
    if !output.is_dir() {
        return None;
    }
    let dir = output.join(PARTIALS);
    if let Err(e) = std::fs::create_dir(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return None;
        }
    }
    let path = dir.join(format!("{}.lock", std::process::id()));
    let f = std::fs::File::create(&path).ok()?;
    // SAFETY: a valid descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return None;
    }
    std::mem::forget(f);
    Some((dir, path))
}

/// What `hark run` found of a job that ended without a run directory.
pub struct Salvage {
    /// The partials, decoded, in analyser order.
    pub parts: Vec<Vec<hark_engine::Partial>>,
    /// The keepers' diagnostics.
    pub problems: Vec<String>,
}

/// After the job: waits (up to `wait`) for the keepers still working, then
/// reads every partial they wrote into `run_dir`. `None` when there is
/// none.
pub fn salvage(run_dir: &Path, wait: Duration) -> Result<Option<Salvage>> {
    let dir = run_dir.join(PARTIALS);
    if !dir.is_dir() {
        return Ok(None);
    }
    let deadline = Instant::now() + wait;
    for entry in std::fs::read_dir(&dir)
        .with_context(ErrorKind::Io, || format!("cannot read {}", dir.display()))?
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "lock") {
            continue;
        }
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        // SAFETY: a valid descriptor; polled so that the wait is bounded.
        while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(ErrorKind::Io, || format!("cannot read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "partial"))
        .collect();
    names.sort();
    let mut parts = Vec::new();
    let mut problems = Vec::new();
    for path in names {
        let bytes = std::fs::read(&path)
            .with_context(ErrorKind::Io, || format!("cannot read {}", path.display()))?;
        let (programs, probs) = decode_partials(&bytes).with_context(ErrorKind::Message, || {
            format!("a partial result in {}", path.display())
        })?;
        parts.push(programs);
        problems.extend(probs);
    }
    if parts.is_empty() {
        return Ok(None);
    }
    Ok(Some(Salvage { parts, problems }))
}

/// Decodes what a keeper answers or writes: each program's partial, and
/// the diagnostics.
pub fn decode_partials(bytes: &[u8]) -> Result<(Vec<hark_engine::Partial>, Vec<String>)> {
    let (ps, problems) = super::decode(bytes)?;
    let mut programs = Vec::new();
    for p in ps {
        programs.push(
            hark_engine::Partial::from_bytes(&p)
                .context(ErrorKind::Message, "a partial result cannot be read")?,
        );
    }
    Ok((programs, problems))
}

/// Removes the keepers' files once the run directory is written.
pub fn clean(run_dir: &Path) {
    let _ = std::fs::remove_dir_all(run_dir.join(PARTIALS));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hark-keeper-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join(PARTIALS)).unwrap();
        d
    }

    #[test]
    fn salvage_finds_nothing_where_no_keeper_wrote() {
        let d = scratch("none");
        assert!(salvage(&d.join("absent"), Duration::ZERO)
            .unwrap()
            .is_none());
        // A keeper that died before its partial leaves only its lock.
        std::fs::write(d.join(PARTIALS).join("1.lock"), b"").unwrap();
        assert!(salvage(&d, Duration::ZERO).unwrap().is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_truncated_partial_is_an_error_not_a_panic() {
        let d = scratch("truncated");
        std::fs::write(d.join(PARTIALS).join("00000000.partial"), [1, 0, 0]).unwrap();
        let e = salvage(&d, Duration::ZERO).err().unwrap();
        assert!(format!("{e:#}").contains("00000000.partial"), "{e:#}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn salvage_waits_for_a_keeper_that_holds_its_lock() {
        let d = scratch("waits");
        let lock = d.join(PARTIALS).join("7.lock");
        let f = std::fs::File::create(&lock).unwrap();
        // SAFETY: a valid descriptor.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        let dir = d.clone();
        let keeper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            let bytes = super::super::encode(&[], &["kept".to_string()]);
            std::fs::write(dir.join(PARTIALS).join("00000001.partial"), bytes).unwrap();
            drop(f);
        });
        // The partial is written only before the lock goes: found only if
        // salvage waited for the lock.
        let found = salvage(&d, Duration::from_secs(60)).unwrap().unwrap();
        keeper.join().unwrap();
        assert_eq!(found.parts.len(), 1);
        assert_eq!(found.problems, ["kept"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
