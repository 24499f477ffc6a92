//! Live snapshots of a job under `--analysers` (`docs/analysers.md`,
//! "The live view").
//!
//! About once a second ([`PERIOD`]) each analyser takes its server's
//! partial results so far (from its keeper process, `keeper.rs`), merges into them the latest snapshot each of its
//! children in the merge ([`super::merge::place`], the same tree or gather
//! as the end of the run) sent it, and sends the result to its parent;
//! analyser 0 folds it into a run and sends it, as JSON, over its link to
//! the `hark run` that serves the live page (`relay.rs`).
//!
//! Nothing here blocks the streams. The receive loop calls
//! [`Snapshots::poll`] between its receives: it tests the snapshot
//! messages with `MPI_Test` and starts sends with `MPI_Issend`, while
//! taking, merging and encoding a snapshot run on a thread of their own
//! (which makes no MPI call). An analyser does not wait for its children:
//! it merges the latest snapshot each sent (a snapshot is cumulative, so
//! a late one only lags), and a child sends its next one only once the
//! parent received the last, so snapshots never pile up in MPI.

use super::merge::{Group, Place, Share};
use super::relay::Link;
use crate::error::{bail, Context, ErrorKind, Result};
use hark_mpi::call as mpi_call;
use hark_mpi::Abi;
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// How often an analyser takes a snapshot (the live page redraws about
/// once a second).
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// How often [`Snapshots::poll`] tests its requests; between, it returns
/// at once.
const POLL: Duration = Duration::from_millis(1);

/// A snapshot's header (its length) and body travel with these tags on the
/// stream communicator.
const HEADER_TAG: i32 = hark_wire::partition::STREAM_TAG + 16;
const BODY_TAG: i32 = hark_wire::partition::STREAM_TAG + 17;

/// A header that says the sender takes no more snapshots.
const DONE: u64 = u64::MAX;

/// A snapshot larger than this is not sent (a header of 0 stands for it):
/// MPI counts are C ints.
const LARGEST: usize = 1 << 30;

/// One child's snapshots, as they arrive.
struct Child {
    world: i32,
    header: Box<[u8; 8]>,
    header_req: Option<usize>,
    body: Vec<u8>,
    body_req: Option<usize>,
    latest: Option<Arc<Vec<u8>>>,
    done: bool,
}

impl Child {
    fn progress(&mut self, abi: &Abi, comm: usize) -> Result<()> {
        if self.done {
            return Ok(());
        }
        if self.header_req.is_none() && self.body_req.is_none() {
            let mut req = 0usize;
            // SAFETY: the header lives in a box of this child, which is
            // kept until the request completes (`finish` waits for every
            // child's last header).
            let ok = unsafe {
                mpi_call::irecv_bytes(
                    abi,
                    self.header.as_mut_ptr(),
                    8,
                    self.world,
                    HEADER_TAG,
                    comm,
                    &mut req as *mut usize as *mut u8,
                )
            };
            if !ok {
                bail!(Mpi, "MPI_Irecv of a snapshot failed in an analyser rank");
            }
            self.header_req = Some(abi.handle_arg(req));
        }
        if let Some(r) = self.header_req {
            if done(abi, r)? {
                self.header_req = None;
                let len = u64::from_le_bytes(*self.header);
                if len == DONE {
                    self.done = true;
                    return Ok(());
                }
                if len > 0 && len as usize <= LARGEST {
                    self.body = vec![0; len as usize];
                    let mut req = 0usize;
                    // SAFETY: `body` is not touched until the request
                    // completes.
                    let ok = unsafe {
                        mpi_call::irecv_bytes(
                            abi,
                            self.body.as_mut_ptr(),
                            self.body.len(),
                            self.world,
                            BODY_TAG,
                            comm,
                            &mut req as *mut usize as *mut u8,
                        )
                    };
                    if !ok {
                        bail!(Mpi, "MPI_Irecv of a snapshot failed in an analyser rank");
                    }
                    self.body_req = Some(abi.handle_arg(req));
                }
            }
        }
        if let Some(r) = self.body_req {
            if done(abi, r)? {
                self.body_req = None;
                self.latest = Some(Arc::new(std::mem::take(&mut self.body)));
            }
        }
        Ok(())
    }
}

fn done(abi: &Abi, req: usize) -> Result<bool> {
    match mpi_call::test(abi, req) {
        Some(d) => Ok(d),
        None => bail!(Mpi, "MPI_Test of a snapshot failed in an analyser rank"),
    }
}

/// What a snapshot round's thread gives back: the bytes to send to the
/// parent (`None` at analyser 0, which wrote its run to `hark run`).
type Round = Result<Option<Vec<u8>>>;

/// An analyser's side of the live snapshots.
pub(crate) struct Snapshots<'scope, 'env> {
    abi: &'static Abi,
    comm: usize,
    place: Place,
    parent_world: Option<i32>,
    keeper: &'env super::keeper::Keeper,
    scope: &'scope Scope<'scope, 'env>,
    analyses: Option<Arc<Vec<String>>>,
    /// Analyser 0's connection to `hark run` (`None` elsewhere, or once
    /// it broke).
    sink: Arc<Mutex<Option<Link>>>,
    children: Vec<Child>,
    worker: Option<ScopedJoinHandle<'scope, Round>>,
    /// The send to the parent in flight: its requests and buffers.
    out: Vec<usize>,
    out_header: Box<[u8; 8]>,
    out_body: Vec<u8>,
    done_sent: bool,
    next_at: Instant,
    last_poll: Instant,
    warned: bool,
    /// Rounds analyser 0 completed, and how long each took.
    pub(crate) took: Vec<Duration>,
    round_started: Instant,
}

impl<'scope, 'env> Snapshots<'scope, 'env> {
    /// An analyser's snapshots; `sink` is analyser 0's link to `hark run`
    /// (used by analyser 0 only).
    pub(crate) fn new(
        abi: &'static Abi,
        comm: usize,
        group: &Group<'_>,
        keeper: &'env super::keeper::Keeper,
        scope: &'scope Scope<'scope, 'env>,
        analyses: Option<Vec<String>>,
        sink: Option<Arc<Mutex<Option<Link>>>>,
    ) -> Snapshots<'scope, 'env> {
        let place = group.place();
        let sink = match place.parent {
            None => sink.unwrap_or_default(),
            Some(_) => Arc::default(),
        };
        let children = place
            .children
            .iter()
            .map(|&c| Child {
                world: group.world(c),
                header: Box::new([0; 8]),
                header_req: None,
                body: Vec::new(),
                body_req: None,
                latest: None,
                done: false,
            })
            .collect();
        let now = Instant::now();
        Snapshots {
            abi,
            comm,
            parent_world: place.parent.map(|p| group.world(p)),
            place,
            keeper,
            scope,
            analyses: analyses.map(Arc::new),
            sink,
            children,
            worker: None,
            out: Vec::new(),
            out_header: Box::new([0; 8]),
            out_body: Vec::new(),
            done_sent: false,
            next_at: now + PERIOD,
            last_poll: now,
            warned: false,
            took: Vec::new(),
            round_started: now,
        }
    }

    /// Moves the snapshots on, without waiting: call it between receives.
    pub(crate) fn poll(&mut self) -> Result<()> {
        let now = Instant::now();
        if now < self.last_poll + POLL {
            return Ok(());
        }
        self.last_poll = now;
        self.progress(true)
    }

    /// Once this analyser's streams ended: goes on merging its children's
    /// snapshots until every child is done, then tells its parent it is
    /// done too. Leaves no request of its own pending.
    pub(crate) fn finish(&mut self) -> Result<()> {
        loop {
            let children_done = self.children.iter().all(|c| c.done);
            self.progress(!children_done)?;
            if self.children.iter().all(|c| c.done) && self.worker.is_none() && self.out.is_empty()
            {
                match self.parent_world {
                    Some(p) if !self.done_sent => {
                        self.done_sent = true;
                        self.send_up(None, p)?;
                    }
                    _ => return Ok(()),
                }
            }
            std::thread::sleep(POLL);
        }
    }

    fn progress(&mut self, new_rounds: bool) -> Result<()> {
        for c in &mut self.children {
            c.progress(self.abi, self.comm)?;
        }
        let mut still = Vec::new();
        for &r in &self.out {
            if !done(self.abi, r)? {
                still.push(r);
            }
        }
        self.out = still;
        if self.worker.as_ref().is_some_and(|w| w.is_finished()) {
            let result = self.worker.take().map(|w| w.join());
            match result {
                Some(Ok(Ok(Some(bytes)))) => {
                    if let Some(p) = self.parent_world {
                        self.send_up(Some(bytes), p)?;
                    }
                }
                Some(Ok(Ok(None))) => self.took.push(self.round_started.elapsed()),
                Some(Ok(Err(e))) => self.warn(&format!("{e:#}")),
                Some(Err(_)) | None => self.warn("its thread panicked"),
            }
        }
        if new_rounds
            && self.worker.is_none()
            && self.out.is_empty()
            && !self.done_sent
            && Instant::now() >= self.next_at
        {
            self.start_round();
        }
        Ok(())
    }

    fn warn(&mut self, why: &str) {
        if !self.warned {
            self.warned = true;
            eprintln!("hark: a live snapshot failed in an analyser rank: {why}; the run itself is not affected");
        }
    }

    /// Sends `bytes` (or, for `None`, the end of this analyser's
    /// snapshots) to the parent, without waiting.
    fn send_up(&mut self, bytes: Option<Vec<u8>>, world: i32) -> Result<()> {
        let len = match &bytes {
            None => DONE,
            Some(b) if b.len() > LARGEST => 0,
            Some(b) => b.len() as u64,
        };
        *self.out_header = len.to_le_bytes();
        self.out_body = match bytes {
            Some(b) if len > 0 => b,
            _ => Vec::new(),
        };
        let header =
            mpi_call::issend_bytes(self.abi, &self.out_header[..], world, HEADER_TAG, self.comm);
        let Some(h) = header else {
            bail!(Mpi, "MPI_Issend of a snapshot failed in an analyser rank");
        };
        self.out.push(h);
        if !self.out_body.is_empty() {
            match mpi_call::issend_bytes(self.abi, &self.out_body, world, BODY_TAG, self.comm) {
                Some(b) => self.out.push(b),
                None => bail!(Mpi, "MPI_Issend of a snapshot failed in an analyser rank"),
            }
        }
        Ok(())
    }

    /// Takes this analyser's snapshot and merges its children's latest on
    /// a thread of its own.
    fn start_round(&mut self) {
        let now = Instant::now();
        self.round_started = now;
        self.next_at = now + PERIOD;
        let theirs: Vec<Arc<Vec<u8>>> = self
            .children
            .iter()
            .filter_map(|c| c.latest.clone())
            .collect();
        let keeper = self.keeper;
        let analyses = self.analyses.clone();
        let sink = (self.place.parent.is_none()).then(|| self.sink.clone());
        self.worker = Some(self.scope.spawn(move || -> Round {
            let analyses = analyses.as_ref().map(|a| a.as_slice());
            let mut share = Share {
                programs: keeper.snapshot_partials()?,
                problems: Vec::new(),
                ended_ns: 0,
            };
            for bytes in theirs {
                share.absorb(Share::from_bytes(&bytes)?, analyses)?;
            }
            let Some(sink) = sink else {
                return Ok(Some(share.to_bytes()));
            };
            let mut sink = hark_sync::lock(&sink);
            if let Some(s) = sink.as_mut() {
                let run = hark_server::fold_merged(share.programs, share.problems, analyses, true)
                    .context(ErrorKind::Merge, "cannot fold a snapshot")?;
                let json = serde_json::to_vec(&run)
                    .context(ErrorKind::Merge, "cannot write a snapshot as JSON")?;
                if let Err(e) = s.snapshot(&json) {
                    *sink = None;
                    bail!(Io, "hark run's live view closed its connection ({e})");
                }
            }
            Ok(None)
        }));
    }
}
