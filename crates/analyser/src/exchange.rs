//! The exchange between analyser ranks, over MPI (`docs/analysers.md`,
//! "Keys routed between analysers").
//!
//! Each analyser's server puts the cross-rank entries whose key another
//! analyser owns in its outbox (`hark_engine::exchange`): a byte stream
//! per destination. Here those bytes travel: cut into messages of at most
//! [`CHUNK`] bytes, sent with `MPI_Issend` on the stream communicator under
//! a tag of their own ([`EXCHANGE_TAG`]), at most [`RECVS`] in flight per
//! peer, into [`RECVS`] receives each analyser pre-posts for every other
//! one. What arrives is injected into the local server, parcel by parcel,
//! in the order it was sent (one source, one tag: MPI does not reorder).
//! All of it is progressed from the analyser's receive loop, between its
//! streams' receives. The server is in the rank's keeper process
//! (`keeper.rs`): its outbox and the parcels travel over the lifeline, the
//! outbox taken at most once every [`TAKE_EVERY`] while the streams run.
//!
//! The end, in two rounds, since a parcel of operations may yield wait
//! states for a third analyser's rank... or the sender's own:
//!
//! 1. once this analyser's streams ended, its server analysed all it read
//!    and its trackers were flushed, it sends what its outbox holds and an
//!    end marker (round 1, with the count of bytes it sent that peer) to
//!    every peer: it will send no more operations or arrivals;
//! 2. once every peer's round-1 marker came (and the bytes it counts) and
//!    its server analysed them, every wait state they yield is in the
//!    outbox: it sends those and a round-2 marker;
//! 3. once every peer's round-2 marker came and was analysed, and its own
//!    sends completed, it is done: `finish_partials` follows.

use super::keeper::Keeper;
use super::Requests;
use crate::error::{bail, Result};
use hark_mpi::call as mpi_call;
use hark_mpi::Abi;
use hark_wire::partition::STREAM_TAG;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The exchange's tag on the stream communicator: apart from the streams'
/// and the partials' tags.
pub(super) const EXCHANGE_TAG: i32 = STREAM_TAG + 40;

/// Largest message, header included.
pub(super) const CHUNK: usize = 256 << 10;

/// Receives pre-posted per peer, and sends in flight per peer.
pub(super) const RECVS: usize = 4;

/// How often the keeper's outbox is taken while the streams run: each take
/// is a round trip to the keeper process.
const TAKE_EVERY: Duration = Duration::from_millis(1);

/// The longest the receive loop holds its writers' chunks back at a
/// stretch, and how long it then takes them again before the next hold
/// (see [`Exchanger::holds_back`]).
const HOLD_MAX: Duration = Duration::from_millis(500);
const BREATHE: Duration = Duration::from_millis(50);

const DATA: u8 = 0;
const END: u8 = 1;

/// What crossed, for `HARK_EXCHANGE_STATS`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sent {
    pub messages: u64,
    pub bytes: u64,
}

/// One analyser's MPI side of the exchange (see the module doc).
pub(super) struct Exchanger<'a> {
    abi: &'a Abi,
    comm: usize,
    /// When the outbox was last taken.
    taken_at: Instant,
    /// Peers: index in the exchange and world rank.
    peers: Vec<(u32, i32)>,
    /// The local server's connections: all its streams.
    streams: u64,
    /// Per peer: RECVS receive slots, then (after all peers') RECVS send
    /// slots.
    reqs: Requests,
    recv_bufs: Vec<Vec<u8>>,
    ready: Vec<Option<usize>>,
    next: Vec<usize>,
    /// Per peer: bytes of a parcel not complete yet.
    inbound: Vec<Vec<u8>>,
    queue: Vec<VecDeque<Vec<u8>>>,
    sending: Vec<Option<Vec<u8>>>,
    /// Per peer: data bytes sent and received.
    out: Vec<u64>,
    into: Vec<u64>,
    /// Per peer: the byte counts its round markers announced.
    ends: Vec<[Option<u64>; 2]>,
    /// Bytes taken from the outbox that their peer has not received yet
    /// (queued here, or sent and not yet matched), and the most there were.
    backlog: u64,
    pub peak_backlog: u64,
    /// Past this backlog the analyser holds back its own streams
    /// ([`Exchanger::holds_back`]).
    backlog_max: u64,
    /// Since when it holds them back, and how long it did before.
    held_since: Option<Instant>,
    /// Until when it takes them again after a hold of [`HOLD_MAX`].
    breathe_until: Option<Instant>,
    pub held_back: Duration,
    /// Holds ended by [`HOLD_MAX`] rather than by the backlog draining.
    pub breaths: u64,
    /// 0: streaming; 1, 2: that round's marker sent; 3: done.
    round: u8,
    flushed: bool,
    pub sent: Sent,
    pub received: Sent,
    /// Requests that injected parcels into the keeper's server.
    pub injects: u64,
    /// The longest one [`Exchanger::progress`] took: the receive loop took
    /// no writer's chunk meanwhile.
    pub longest_pass: Duration,
    pub problems: Vec<String>,
}

impl<'a> Exchanger<'a> {
    /// Posts the receives from every other analyser. `analysers` are the
    /// world ranks of all analysers, in exchange order; this one is `me`.
    pub fn new(
        abi: &'a Abi,
        comm: usize,
        me: u32,
        analysers: &[i32],
        streams: u64,
    ) -> Result<Exchanger<'a>> {
        let peers: Vec<(u32, i32)> = analysers
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as u32 != me)
            .map(|(i, &r)| (i as u32, r))
            .collect();
        let n = peers.len();
        let mut x = Exchanger {
            abi,
            comm,
            taken_at: Instant::now(),
            reqs: Requests::new(abi, 2 * n * RECVS),
            recv_bufs: (0..n * RECVS).map(|_| vec![0u8; CHUNK]).collect(),
            ready: vec![None; n * RECVS],
            next: vec![0; n],
            inbound: vec![Vec::new(); n],
            queue: vec![VecDeque::new(); n],
            sending: vec![None; n * RECVS],
            out: vec![0; n],
            into: vec![0; n],
            ends: vec![[None; 2]; n],
            backlog: 0,
            peak_backlog: 0,
            backlog_max: hark_engine::exchange::outbound_backlog(),
            held_since: None,
            breathe_until: None,
            held_back: Duration::ZERO,
            breaths: 0,
            round: 0,
            flushed: false,
            sent: Sent::default(),
            received: Sent::default(),
            injects: 0,
            longest_pass: Duration::ZERO,
            problems: Vec::new(),
            peers,
            streams,
        };
        for slot in 0..n * RECVS {
            x.post(slot)?;
        }
        Ok(x)
    }

    /// Whether everything was exchanged (see the module doc).
    pub fn done(&self) -> bool {
        self.round == 3
    }

    /// Whether the receive loop should leave its writers' chunks where
    /// they are for now: more than `outbound_backlog` bytes of what this
    /// analyser owes its peers still wait to reach them (see
    /// `hark_engine::exchange::outbound_backlog`). Its writers then wait
    /// on their sends, the programs they talk to wait on them, and the
    /// peers' streams, which the waiting operations are matched against,
    /// stop running ahead. The exchange itself is never held back, so the
    /// backlog drains whatever the streams do: no cycle of analysers
    /// waiting on one another can form.
    ///
    /// A hold lasts at most [`HOLD_MAX`]; the loop then takes its writers'
    /// chunks for [`BREATHE`] before it may hold again. So a writer is
    /// never starved, however long the peers take: its chunks move at
    /// least every 550 ms, far within the drain timeout after which a
    /// writer at `MPI_Finalize` gives its stream up (10 s), and the flow
    /// control costs the streams at most 91 % of the time, never all of it.
    pub fn holds_back(&mut self) -> bool {
        let now = Instant::now();
        if self.breathe_until.is_some_and(|t| now < t) {
            return false;
        }
        self.breathe_until = None;
        let held = self.backlog > self.backlog_max;
        match (held, self.held_since) {
            (true, None) => self.held_since = Some(now),
            (true, Some(since)) if now - since >= HOLD_MAX => {
                self.held_back += now - since;
                self.held_since = None;
                self.breathe_until = Some(now + BREATHE);
                self.breaths += 1;
                return false;
            }
            (false, Some(since)) => {
                self.held_back += now - since;
                self.held_since = None;
            }
            _ => {}
        }
        held
    }

    fn post(&mut self, slot: usize) -> Result<()> {
        let from = self.peers[slot / RECVS].1;
        // SAFETY: the buffer and the handle slot live in `self` until the
        // request completes or is cancelled (`Drop`).
        let ok = unsafe {
            mpi_call::irecv_bytes(
                self.abi,
                self.recv_bufs[slot].as_mut_ptr(),
                CHUNK,
                from,
                EXCHANGE_TAG,
                self.comm,
                self.reqs.at(slot),
            )
        };
        if !ok {
            bail!(Mpi, "MPI_Irecv failed in an analyser rank (exchange)");
        }
        Ok(())
    }

    /// Moves the exchange on; `streams_done` once every writer's stream
    /// ended. Returns whether anything happened.
    pub fn progress(&mut self, keeper: &Keeper, streams_done: bool) -> Result<bool> {
        let started = Instant::now();
        let busy = self.pass(keeper, streams_done);
        self.longest_pass = self.longest_pass.max(started.elapsed());
        busy
    }

    fn pass(&mut self, keeper: &Keeper, streams_done: bool) -> Result<bool> {
        let mut busy = self.complete(keeper)?;
        // Not after the round-2 marker: a peer takes nothing from this one
        // past it (its receives are not posted again), so a message queued
        // behind it would never be matched and this analyser would wait for
        // its send forever. Nothing should come then (round 2 only carries
        // wait states, which stay with their owner); if something does, the
        // last round says so.
        if self.round < 2 && (streams_done || self.taken_at.elapsed() >= TAKE_EVERY) {
            busy |= self.take_outbox(keeper)?;
        }
        busy |= self.start_sends()?;
        match self.round {
            0 if streams_done && keeper.exchange_quiet(self.streams) => {
                if !self.flushed {
                    keeper.flush_trackers()?;
                    self.flushed = true;
                } else {
                    self.end_round(keeper, 1)?;
                }
                busy = true;
            }
            1 if self.all_ended(0) && keeper.exchange_quiet(self.streams) => {
                self.end_round(keeper, 2)?;
                busy = true;
            }
            2 if self.all_ended(1)
                && keeper.exchange_quiet(self.streams)
                && self.queue.iter().all(VecDeque::is_empty)
                && self.sending.iter().all(Option::is_none) =>
            {
                if keeper.outbox_queued() {
                    self.problems.push(
                        "the exchange between analysers had entries queued after its last round; they were not sent".into(),
                    );
                }
                self.round = 3;
                busy = true;
            }
            _ => {}
        }
        Ok(busy)
    }

    fn all_ended(&self, round: usize) -> bool {
        self.ends.iter().all(|e| e[round].is_some())
    }

    /// Queues the outbox and the round's marker for every peer.
    fn end_round(&mut self, keeper: &Keeper, round: u8) -> Result<()> {
        self.take_outbox(keeper)?;
        for p in 0..self.peers.len() {
            let mut m = vec![END, round];
            m.extend(self.out[p].to_le_bytes());
            self.backlog += m.len() as u64;
            self.queue[p].push_back(m);
        }
        self.round = round;
        Ok(())
    }

    /// Cuts what the outbox holds for each peer into messages.
    fn take_outbox(&mut self, keeper: &Keeper) -> Result<bool> {
        self.taken_at = Instant::now();
        let mut any = false;
        for (index, bytes) in keeper.take_outbox()? {
            let Some(p) = self.peers.iter().position(|&(i, _)| i == index) else {
                bail!(
                    Message,
                    "the keeper's outbox names analyser {index}, which is not a peer"
                );
            };
            any = true;
            self.out[p] += bytes.len() as u64;
            for part in bytes.chunks(CHUNK - 1) {
                let mut m = Vec::with_capacity(part.len() + 1);
                m.push(DATA);
                m.extend_from_slice(part);
                self.backlog += m.len() as u64;
                self.queue[p].push_back(m);
            }
        }
        self.peak_backlog = self.peak_backlog.max(self.backlog);
        Ok(any)
    }

    fn start_sends(&mut self) -> Result<bool> {
        let n = self.peers.len();
        let mut any = false;
        for p in 0..n {
            for k in 0..RECVS {
                let slot = p * RECVS + k;
                if self.sending[slot].is_some() {
                    continue;
                }
                let Some(m) = self.queue[p].pop_front() else {
                    break;
                };
                let Some(req) =
                    mpi_call::issend_bytes(self.abi, &m, self.peers[p].1, EXCHANGE_TAG, self.comm)
                else {
                    bail!(Mpi, "MPI_Issend failed in an analyser rank (exchange)");
                };
                let v = req.to_le_bytes();
                let size = self.reqs.size;
                let at = (n * RECVS + slot) * size;
                self.reqs.bytes[at..at + size].copy_from_slice(&v[..size]);
                self.sent.messages += 1;
                self.sent.bytes += m.len() as u64;
                self.sending[slot] = Some(m);
                any = true;
            }
        }
        Ok(any)
    }

    /// Handles every request that completed, but injects the parcels of
    /// at most one message per call: an injection is a round trip to the
    /// keeper, whose server decodes, translates and submits the parcels
    /// before it answers, so under load one takes as long as the keeper
    /// waits for a core (1 to 2.5 s were seen at load 20 to 30). The
    /// receive loop takes its writers' chunks between two calls; handling
    /// every message that had arrived in one call (up to 4 per peer) held
    /// them all that many times over. The messages left wait, in order,
    /// for the next calls (their receives are posted again once handled).
    fn complete(&mut self, keeper: &Keeper) -> Result<bool> {
        let n = self.peers.len();
        let mut status = vec![0u8; self.abi.status_size.max(32)];
        let mut injected = false;
        let mut any = false;
        // What arrived before and waited behind an injection.
        for p in 0..n {
            any |= self.handle_ready(keeper, p, &mut injected)?;
        }
        loop {
            // SAFETY: `reqs` holds 2 * n * RECVS handles, `status` one status.
            let i = match unsafe {
                mpi_call::testany(2 * n * RECVS, self.reqs.at(0), status.as_mut_ptr())
            } {
                Some(Some(i)) => i,
                Some(None) => return Ok(any),
                None => bail!(Mpi, "MPI_Testany failed in an analyser rank (exchange)"),
            };
            any = true;
            if i >= n * RECVS {
                if let Some(m) = self.sending[i - n * RECVS].take() {
                    self.backlog -= m.len() as u64;
                }
                continue;
            }
            // SAFETY: MPI wrote a whole status.
            let (_, _, len) = unsafe { self.abi.read_status(status.as_mut_ptr() as usize) };
            self.ready[i] = Some(len as usize);
            self.handle_ready(keeper, i / RECVS, &mut injected)?;
        }
    }

    /// Handles peer `p`'s messages that arrived, in order, until one
    /// injects parcels (`injected`, which also stops it from the start).
    /// A peer's receives match its messages in posting order (a ring), but
    /// complete in any order.
    fn handle_ready(&mut self, keeper: &Keeper, p: usize, injected: &mut bool) -> Result<bool> {
        let mut any = false;
        while !*injected {
            let slot = p * RECVS + self.next[p];
            let Some(len) = self.ready[slot].take() else {
                break;
            };
            let before = self.injects;
            let last = self.handle(keeper, p, slot, len)?;
            *injected = self.injects != before;
            self.next[p] = (self.next[p] + 1) % RECVS;
            if !last {
                self.post(slot)?;
            }
            any = true;
        }
        Ok(any)
    }

    /// One message from peer `p`; true if it was the peer's last.
    fn handle(&mut self, keeper: &Keeper, p: usize, slot: usize, len: usize) -> Result<bool> {
        let m = &self.recv_bufs[slot][..len.min(CHUNK)];
        self.received.messages += 1;
        self.received.bytes += m.len() as u64;
        match m.first() {
            Some(&DATA) => {
                self.into[p] += m.len() as u64 - 1;
                self.inbound[p].extend_from_slice(&m[1..]);
                let from = self.peers[p].0;
                // The whole parcels this message completes go to the
                // keeper in one request: a round trip to another process
                // per parcel held the receive loop (and the streams it
                // relays) as many times.
                let mut at = 0;
                let buf = &self.inbound[p];
                while buf.len() - at >= 4 {
                    let size = u32::from_le_bytes(buf[at..at + 4].try_into()?) as usize;
                    if buf.len() - at - 4 < size {
                        break;
                    }
                    at += 4 + size;
                }
                if at > 0 {
                    for e in keeper.inject(from, &buf[..at])? {
                        if self.problems.len() < 8 {
                            self.problems.push(e);
                        }
                    }
                    self.injects += 1;
                }
                self.inbound[p].drain(..at);
                Ok(false)
            }
            Some(&END) if m.len() == 10 => {
                let round = m[1];
                let count = u64::from_le_bytes(m[2..10].try_into()?);
                if count != self.into[p] || !self.inbound[p].is_empty() {
                    bail!(
                        Io, "analyser world rank {} says it sent {count} bytes for the exchange, {} arrived",
                        self.peers[p].1,
                        self.into[p]
                    );
                }
                match round {
                    1 => self.ends[p][0] = Some(count),
                    2 => self.ends[p][1] = Some(count),
                    _ => bail!(Message, "an exchange message of an unknown round came"),
                }
                Ok(round == 2)
            }
            _ => bail!(
                Message,
                "a malformed exchange message came from analyser world rank {}",
                self.peers[p].1
            ),
        }
    }
}

impl Drop for Exchanger<'_> {
    fn drop(&mut self) {
        // Receives still posted (after a peer's last message, or on an
        // error) are cancelled, so that no buffer is freed under MPI.
        let n = self.peers.len();
        let null = self.abi.request_null.to_le_bytes();
        let size = self.reqs.size;
        for slot in 0..n * RECVS {
            let at = slot * size;
            if self.reqs.bytes[at..at + size] != null[..size] {
                // SAFETY: a live receive request of this rank.
                unsafe { mpi_call::cancel(self.abi, self.reqs.at(slot)) };
            }
        }
    }
}
