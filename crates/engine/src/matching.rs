//! Message matching and collective instances, across ranks, online.
//!
//! Both are keyed knowledge sources on the board (`on_board.rs`): their
//! inputs come from every stream's tracker (`unpack.rs`), and each key
//! is served by one job at a time while keys run in parallel.
//!
//! **Point-to-point** ([`P2pMatcher`], keyed by the receiving world rank).
//! Every send to a rank and every receive of that rank meet at its key.
//! Within a channel (communicator, source, tag; the destination is the key;
//! communicators sharing an id past the cap told apart by their
//! occurrence) MPI does not let messages overtake, so the n-th send matches
//! the n-th receive. Each matched pair is judged against Scalasca's
//! patterns:
//!
//! - *Late Sender*: the receive blocked (`MPI_Recv`, the receive side of
//!   `MPI_Sendrecv`, a `MPI_Wait*` completing it) and was entered before the
//!   send: it waited `min(send enter, receive leave) − receive enter`. A call
//!   completing several receives (`MPI_Waitall`) is one instance that waited
//!   as long as its latest message, caused by that message's sender (ties:
//!   the smaller rank, then its later message).
//! - *Late Sender / Wrong Order*: a Late Sender while a message the same
//!   sender sent this rank earlier (on another tag or communicator) is still
//!   to be received: the receive order kept the rank waiting while another
//!   message was there to take. "Earlier" is the sender's posting order,
//!   "still to be received" the receiver's order (its receives numbered as
//!   its stream publishes them): two orders of two streams, so neither the
//!   split between servers nor the order partials merge in changes it. Across senders this would need a window of
//!   receives held back, and two ranks' clocks compared; within one sender
//!   it is decided when the pair is matched, on one clock.
//! - *Late Receiver*: a blocking send entered before its receive was
//!   posted and left after it: it waited `receive post − send enter`.
//!
//! **Collectives** ([`Instances`], keyed by communicator and sequence
//! number): an instance is complete when every member has arrived, then:
//! Wait at N×N and Wait at Barrier (each rank waits for the last to enter),
//! Late Broadcast (non-root ranks wait for the root), Early Reduce (the root
//! waits for the first non-root).
//!
//! What cannot be matched (a rank that died, a request never completed, a
//! message to another program) is held, bounded by [`MAX_HELD_PER_KEY`]
//! operations per key and [`MAX_INSTANCES`] instances per key, counted when
//! dropped or left over at the end, and never held forever.
//!
//! The states are partial results: they serialise, and two of one key merge
//! ([`P2pMatcher::merge`], [`Instances::merge`]): what one held unmatched the
//! other may complete, so the merged state is the one a single server would
//! have.

use crate::segq::SegQueue;
use crate::unpack::{occurrence_of, Arrival, Blocked, P2pOp, Pattern, Side, Wait};
use hark_analyses::internal::FxHashMap;
use hark_analyses::IdMap;
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// Operations one key holds unmatched before the oldest are dropped.
pub const MAX_HELD_PER_KEY: usize = 1 << 16;

/// The bound in force: [`MAX_HELD_PER_KEY`] unless a test lowered it.
#[cfg(feature = "test-hooks")]
static HELD_BOUND: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(MAX_HELD_PER_KEY);

/// **For tests only** (the `test-hooks` feature): lowers (or restores) the
/// operations one key holds unmatched, process-wide, so that a test can
/// exceed the bound with a short run (`HARK_TEST_MATCH_BOUND`, read by a
/// `hark` built with its `test-hooks` feature; see `docs/analysers.md`).
/// Clamped to `1..=MAX_HELD_PER_KEY`.
#[cfg(feature = "test-hooks")]
pub fn set_held_bound_for_tests(n: usize) {
    use std::sync::atomic::Ordering;
    HELD_BOUND.store(n.clamp(1, MAX_HELD_PER_KEY), Ordering::Relaxed);
}

/// The operations one key holds unmatched: [`MAX_HELD_PER_KEY`], unless a
/// test build lowered it.
#[inline]
pub fn held_bound() -> usize {
    #[cfg(feature = "test-hooks")]
    return HELD_BOUND.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "test-hooks"))]
    MAX_HELD_PER_KEY
}

/// Incomplete collective instances one key holds before the oldest are
/// dropped.
pub const MAX_INSTANCES: usize = 1 << 12;

/// Counts for the diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmatched {
    /// Sends never matched with a receive (left at the end, or dropped).
    pub sends: u64,
    /// Receives never matched with a send.
    pub recvs: u64,
    /// Collective arrivals of instances that never completed.
    pub arrivals: u64,
    /// Of those, dropped while the run went on because too many were held.
    pub dropped: u64,
    /// Receives that completed before their send began (clock condition
    /// violations: the clocks are not aligned well enough).
    pub clock_violations: u64,
}

impl Unmatched {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Unmatched) {
        self.sends += other.sends;
        self.recvs += other.recvs;
        self.arrivals += other.arrivals;
        self.dropped += other.dropped;
        self.clock_violations += other.clock_violations;
    }
}

/// An operation as its channel's queue holds it: without what the queue,
/// the channel and the matcher's key already say (side, communicator,
/// sender, receiver, tag), 56 bytes instead of 80.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Held {
    seq: u64,
    post_ns: u64,
    block: Blocked,
    call: u32,
    in_call: u32,
    path: u32,
    region: u32,
    site: u32,
    func: u16,
}

impl From<&P2pOp> for Held {
    #[inline]
    fn from(o: &P2pOp) -> Held {
        Held {
            seq: o.seq,
            post_ns: o.post_ns,
            block: o.block,
            call: o.call,
            in_call: o.in_call,
            path: o.path,
            region: o.region,
            site: o.site,
            func: o.func,
        }
    }
}

impl Held {
    fn remap(&mut self, ids: &IdMap) {
        self.region = ids.name(self.region);
        self.path = ids.path(self.path);
        self.site = ids.path(self.site);
    }
}

const _: () = assert!(std::mem::size_of::<Held>() <= 56);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Channel {
    sends: SegQueue<Held>,
    recvs: SegQueue<Held>,
    /// Whether it is its sender's only channel (`by_src`): Wrong Order
    /// then looks at it alone, without looking channels up.
    alone: bool,
}

impl Channel {
    /// The queue of `side`'s operations and the other side's.
    fn sides(&mut self, side: Side) -> (&mut SegQueue<Held>, &mut SegQueue<Held>) {
        match side {
            Side::Send => (&mut self.sends, &mut self.recvs),
            Side::Recv => (&mut self.recvs, &mut self.sends),
        }
    }

    /// What Wrong Order needs of a pair just matched in this channel, its
    /// sender's only one: see [`Judged`].
    fn judge(
        &self,
        matched: &BTreeMap<(i32, u64), u64>,
        src: i32,
        s: &Held,
        r: &Held,
    ) -> (bool, bool) {
        let late = r.block.get().is_some_and(|(enter, _)| s.post_ns > enter);
        let ooo = late && (matched_out_of_order(matched, src, s, r) || self.earlier_waits(s, r));
        (self.waiting_before(r.seq), ooo)
    }

    /// [`P2pMatcher::waiting_before`] for a sender whose only channel
    /// this is.
    fn waiting_before(&self, seq: u64) -> bool {
        self.recvs.front().is_some_and(|w| w.seq < seq)
    }

    /// Is a send of this channel posted before `s` still waiting for a
    /// receive that comes after `r` (or never)? The queued half of
    /// [`P2pMatcher::out_of_order`], for one channel.
    fn earlier_waits(&self, s: &Held, r: &Held) -> bool {
        // Usually the queue holds no send as early (the check is cheaper
        // than starting to walk the segments).
        if self.sends.front().is_none_or(|o| o.seq >= s.seq) {
            return false;
        }
        self.sends
            .iter()
            .take_while(|o| o.seq < s.seq)
            .enumerate()
            .any(|(k, _)| self.recvs.get(k).is_none_or(|taker| taker.seq > r.seq))
    }
}

/// A pair just matched as (send, receive): `came` is of `side`, `partner`
/// of the other.
#[inline]
fn send_first<'a>(side: Side, came: &'a Held, partner: &'a Held) -> (&'a Held, &'a Held) {
    match side {
        Side::Send => (came, partner),
        Side::Recv => (partner, came),
    }
}

/// The matched half of [`P2pMatcher::out_of_order`]: was a send of `s`'s
/// sender posted before it taken by a receive after `r`?
fn matched_out_of_order(matched: &BTreeMap<(i32, u64), u64>, src: i32, s: &Held, r: &Held) -> bool {
    !matched.is_empty()
        && matched
            .range((src, 0)..(src, s.seq))
            .any(|(_, &taken)| taken > r.seq)
}

/// What Wrong Order needs of the queues when a pair is matched, if it was
/// found without looking channels up: whether a receive of the sender's
/// waits ahead of the pair's, and (for a late receive) whether the pair
/// is out of order.
type Judged = Option<(bool, bool)>;

/// A call that completes several receives (`MPI_Waitall`): its longest
/// wait so far, until all its receives are matched.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct CallWait {
    matched: u32,
    in_call: u32,
    wait: Option<Wait>,
    /// The sender's order of the message `wait` waited for.
    send_seq: u64,
}

/// The key of a channel: communicator, source, tag and the communicator's
/// occurrence (`P2pOp::occ`: communicators past the cap share an id); the
/// destination is the matcher's key.
type ChannelKey = (u32, i32, i32, u32);

/// The channel of `op`.
#[inline]
fn channel_of(op: &P2pOp) -> ChannelKey {
    (op.comm, op.src, op.tag, op.occ)
}

/// Point-to-point matching for one receiving rank (see the module doc).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct P2pMatcher {
    channels: FxHashMap<ChannelKey, Channel>,
    held: usize,
    /// The channels of each sender: where Wrong Order looks for its
    /// earlier messages.
    by_src: FxHashMap<i32, Vec<ChannelKey>>,
    /// Sends matched lately, by sender and the sender's order: the order
    /// of the receive that took each. Kept while a later pair could still
    /// be out of order with it.
    matched: BTreeMap<(i32, u64), u64>,
    /// The last receive (by this rank's order) that reached this key.
    last_recv: u64,
    /// `matched` is pruned when it grows past this (doubling, so pruning
    /// costs O(1) per pair).
    prune_at: usize,
    /// Empty channels are swept when there are more channels than this.
    sweep_at: usize,
    /// Calls completing several receives, by (receiver's) call number.
    /// Hashed: an entry is made and removed for every such call; the
    /// finish gives what is left in call order.
    calls: FxHashMap<u32, CallWait>,
    unmatched: Unmatched,
    /// The receiving world rank (the key), once an operation came.
    rank: Option<i32>,
}

impl P2pMatcher {
    /// Takes one operation; returns the wait states it completes.
    pub(crate) fn add(&mut self, op: &P2pOp, out: &mut Vec<Wait>) {
        let key = channel_of(op);
        let (src, side) = (op.src, op.side);
        let op = self.arrived(op);
        let mut shared = false;
        let by_src = &mut self.by_src;
        let mut ch = self.channels.entry(key).or_insert_with(|| {
            let keys = by_src.entry(src).or_default();
            keys.push(key);
            shared = keys.len() > 1;
            Channel {
                alone: !shared,
                ..Channel::default()
            }
        });
        if shared {
            self.not_alone(src);
            ch = self.channels.get_mut(&key).expect("made above");
        }
        let (mine, other) = ch.sides(side);
        // A channel holds one side at most between calls, so an operation
        // pairs with the other side's oldest or waits: the drain below,
        // without looking the channel up again.
        let partner = if mine.is_empty() {
            other.pop_front()
        } else {
            None
        };
        match partner {
            Some(partner) => {
                let empty = other.is_empty();
                self.held -= 1;
                let (s, r) = send_first(side, &op, &partner);
                let judged = ch.alone.then(|| ch.judge(&self.matched, src, s, r));
                self.pair(src, s, r, judged, out);
                if empty && self.channels.len() > self.sweep_at.max(1024) {
                    self.sweep();
                }
            }
            None => {
                let both = !other.is_empty();
                // At the bound, the oldest goes before this one comes, so
                // that the queues never grow past it.
                if self.held >= held_bound() && !both {
                    self.drop_oldest();
                    let ch = self.channels.get_mut(&key).expect("made above");
                    ch.sides(side).0.push_back(op);
                } else {
                    mine.push_back(op);
                }
                self.held += 1;
                if both {
                    self.drain(key, out);
                }
            }
        }
        if self.held > held_bound() {
            self.drop_oldest();
        }
    }

    /// [`P2pMatcher::add`] for each of `ops` in turn, with the same
    /// result: a run of operations of one channel and side (a stream's
    /// part holds its sends to this rank, or this rank's receives, mostly
    /// of one channel) looks its channel up once, not once per operation.
    pub(crate) fn add_all(&mut self, ops: &[P2pOp], out: &mut Vec<Wait>) {
        let same =
            |a: &P2pOp, b: &P2pOp| (a.side, a.dst, channel_of(a)) == (b.side, b.dst, channel_of(b));
        for run in ops.chunk_by(same) {
            // The first makes the channel if need be, as `add` does.
            self.add(&run[0], out);
            let mut rest = &run[1..];
            while let Some(op) = rest.first() {
                let done = self.add_to_channel(rest, out);
                if done == 0 {
                    // What the run's loop leaves to `add`: a channel
                    // shared with other channels of the sender, the bound
                    // on held operations, a sweep due, both sides queued.
                    self.add(op, out);
                    rest = &rest[1..];
                } else {
                    rest = &rest[done..];
                }
            }
        }
    }

    /// Adds operations of `run` (one channel and side, the channel made)
    /// while `add` would take its common path; returns how many it added.
    /// A run either pairs with the other side's queue or joins its own: the
    /// conditions that send an operation to `add` instead are checked once
    /// for the run, or once per pair where pairing can change them.
    fn add_to_channel(&mut self, run: &[P2pOp], out: &mut Vec<Wait>) -> usize {
        let first = &run[0];
        let key = channel_of(first);
        let (src, side) = (first.src, first.side);
        // Out of the map while it is used, so that `pair` may borrow the
        // matcher; `pair` never looks channels up when judged here.
        let Some(mut ch) = self.channels.remove(&key) else {
            return 0;
        };
        let mut done = 0;
        // A channel shared with other channels of the sender: Wrong Order
        // looks them up, which `add` does.
        if ch.alone {
            // Pairs, while the other side has operations queued. A sweep
            // due, or `pair` forgetting matched sends (it looks at every
            // channel's queues, this one's among them): `add` does those.
            if self.channels.len() < self.sweep_at.max(1024) {
                while let Some(op) = run.get(done) {
                    let (mine, other) = ch.sides(side);
                    if !mine.is_empty() || self.matched.len() >= self.prune_at.max(256) {
                        break;
                    }
                    let Some(partner) = other.pop_front() else {
                        break;
                    };
                    self.held -= 1;
                    let held = self.arrived(op);
                    let (s, r) = send_first(side, &held, &partner);
                    let judged = Some(ch.judge(&self.matched, src, s, r));
                    self.pair(src, s, r, judged, out);
                    done += 1;
                }
            }
            // The rest waits in its queue, if the other side is empty,
            // up to the bound on held operations.
            let (mine, other) = ch.sides(side);
            if other.is_empty() {
                let room = held_bound().saturating_sub(self.held);
                let rest = &run[done..run.len().min(done + room)];
                if let Some(last) = rest.last() {
                    if side == Side::Recv {
                        self.last_recv = rest.iter().fold(self.last_recv, |m, o| m.max(o.seq));
                    }
                    self.rank = Some(last.dst);
                    mine.extend_map(rest, |o| Held::from(o));
                    self.held += rest.len();
                    done += rest.len();
                }
            }
        }
        self.channels.insert(key, ch);
        done
    }

    /// Notes an operation reaching this key (the receiving rank, the last
    /// receive) and gives it as its queue holds it.
    #[inline]
    fn arrived(&mut self, op: &P2pOp) -> Held {
        if op.side == Side::Recv {
            self.last_recv = self.last_recv.max(op.seq);
        }
        self.rank = Some(op.dst);
        Held::from(op)
    }

    fn drain(&mut self, key: ChannelKey, out: &mut Vec<Wait>) {
        while let Some(ch) = self.channels.get_mut(&key) {
            if ch.sends.is_empty() || ch.recvs.is_empty() {
                // Empty channels stay (a channel is usually used again at
                // once) until there are many of them.
                if self.channels.len() > self.sweep_at.max(1024) {
                    self.sweep();
                }
                return;
            }
            let (s, r) = (
                ch.sends.pop_front().expect("not empty"),
                ch.recvs.pop_front().expect("not empty"),
            );
            self.held -= 2;
            self.pair(key.1, &s, &r, None, out);
        }
    }

    /// Marks every channel of `src` as not its only one.
    #[cold]
    fn not_alone(&mut self, src: i32) {
        for key in self.by_src.get(&src).into_iter().flatten() {
            if let Some(ch) = self.channels.get_mut(key) {
                ch.alone = false;
            }
        }
    }

    /// Sets every channel's `alone` from `by_src`.
    fn set_alone(&mut self) {
        for keys in self.by_src.values() {
            for key in keys {
                if let Some(ch) = self.channels.get_mut(key) {
                    ch.alone = keys.len() == 1;
                }
            }
        }
    }

    /// Judges a matched send and receive (`judged`: what Wrong Order
    /// needs, if already found).
    fn pair(&mut self, src: i32, s: &Held, r: &Held, judged: Judged, out: &mut Vec<Wait>) {
        // Set by the `add` that queued either of them.
        let dst = self.rank.unwrap_or(-1);
        if let Some((_, leave)) = r.block.get() {
            if leave < s.post_ns {
                self.unmatched.clock_violations += 1;
            }
        }
        // Late Receiver: a blocking send entered before the receive was
        // posted, and still in the call when it was.
        if let Some((enter, leave)) = s.block.get() {
            if r.post_ns > enter && leave > r.post_ns {
                out.push(Wait {
                    pattern: Pattern::LateReceiver,
                    waiter: src,
                    enter_ns: enter,
                    time_ns: r.post_ns - enter,
                    func: s.func,
                    path: s.path,
                    region: s.region,
                    late: dst,
                    late_path: r.path,
                    site: s.site,
                    late_site: r.site,
                });
            }
        }
        let late = r.block.get().and_then(|(enter, leave)| {
            (s.post_ns > enter).then(|| Wait {
                // Wrong Order: a message this sender sent earlier, to this
                // rank, is still waiting to be received. Both sends are on
                // the sender's clock, and the earlier one reached this key
                // first, so the judgement never depends on timing.
                pattern: if judged.map_or_else(|| self.out_of_order(src, s, r), |j| j.1) {
                    Pattern::LateSenderWrongOrder
                } else {
                    Pattern::LateSender
                },
                waiter: dst,
                enter_ns: enter,
                time_ns: s.post_ns.min(leave).saturating_sub(enter),
                func: r.func,
                path: r.path,
                region: r.region,
                late: src,
                late_path: s.path,
                site: r.site,
                late_site: s.site,
            })
        });
        // A later pair can be out of order with this one only if one of
        // this sender's receives is still waiting ahead of this one.
        if judged.map_or_else(|| self.waiting_before(src, r.seq), |j| j.0) {
            self.matched.insert((src, s.seq), r.seq);
            if self.matched.len() > self.prune_at.max(256) {
                self.forget_matched();
            }
        }
        if r.in_call <= 1 {
            out.extend(late);
            return;
        }
        let call = self.calls.entry(r.call).or_insert(CallWait {
            matched: 0,
            in_call: r.in_call,
            wait: None,
            send_seq: 0,
        });
        call.matched += 1;
        if let Some(w) = late {
            // The call's instance is its longest wait; ties go to the
            // smaller world rank, then to its later message (its order in
            // the sender's stream: ids of paths differ between servers),
            // so that the result never depends on the order pairs are
            // matched in.
            let longer = call.wait.as_ref().is_none_or(|c| {
                (w.time_ns, std::cmp::Reverse(w.late), s.seq)
                    > (c.time_ns, std::cmp::Reverse(c.late), call.send_seq)
            });
            if longer {
                call.wait = Some(w);
                call.send_seq = s.seq;
            }
        }
        if call.matched >= call.in_call {
            let call = self.calls.remove(&r.call).expect("just used");
            out.extend(call.wait);
        }
    }

    /// Did `r` take `s` while a message the same sender sent earlier was
    /// taken by a later receive, or is still to be taken? Depends only on
    /// the two ranks' orders, never on which pair was matched first.
    fn out_of_order(&self, src: i32, s: &Held, r: &Held) -> bool {
        if matched_out_of_order(&self.matched, src, s, r) {
            return true;
        }
        // An earlier send still queued: online its receive has not come
        // (pairs are matched as soon as both are there), and since a
        // stream publishes its receives in the order of their numbers
        // (`unpack.rs`), it comes after `r` if it comes at all. While
        // partials merge it may be queued too, at the same place in its
        // channel.
        let Some(keys) = self.by_src.get(&src) else {
            return false;
        };
        keys.iter().any(|key| {
            self.channels
                .get(key)
                .is_some_and(|ch| ch.earlier_waits(s, r))
        })
    }

    /// Forgets the channels with nothing queued (a program that uses a new
    /// tag for every message makes a channel per message).
    fn sweep(&mut self) {
        self.channels
            .retain(|_, ch| !(ch.sends.is_empty() && ch.recvs.is_empty()));
        let channels = &self.channels;
        self.by_src.retain(|_, keys| {
            keys.retain(|k| channels.contains_key(k));
            !keys.is_empty()
        });
        self.set_alone();
        self.sweep_at = 2 * self.channels.len();
    }

    /// Is a receive of sender `src`'s messages waiting, ahead of receive
    /// `seq`, in some channel?
    fn waiting_before(&self, src: i32, seq: u64) -> bool {
        self.by_src.get(&src).is_some_and(|keys| {
            keys.iter().any(|k| {
                self.channels
                    .get(k)
                    .and_then(|ch| ch.recvs.front())
                    .is_some_and(|w| w.seq < seq)
            })
        })
    }

    /// Forgets matched sends whose receive comes before any receive still
    /// to be paired: no later pair can be out of order with them.
    fn forget_matched(&mut self) {
        let first_open = self
            .channels
            .values()
            .filter_map(|ch| ch.recvs.front().map(|r| r.seq))
            .min()
            .unwrap_or(self.last_recv + 1);
        self.matched.retain(|_, taken| *taken >= first_open);
        // A receive that is never matched would keep everything after it:
        // past the bound, the earliest-taken go first.
        if self.matched.len() > held_bound() {
            let mut taken: Vec<u64> = self.matched.values().copied().collect();
            let cut = taken.len() - held_bound();
            let (_, &mut keep_from, _) = taken.select_nth_unstable(cut);
            self.matched.retain(|_, t| *t >= keep_from);
        }
        self.prune_at = 2 * self.matched.len();
    }

    fn drop_oldest(&mut self) {
        // The channel whose oldest operation is oldest loses it.
        let oldest = self
            .channels
            .iter()
            .filter_map(|(k, ch)| {
                let s = ch.sends.front().map(|o| o.post_ns);
                let r = ch.recvs.front().map(|o| o.post_ns);
                s.into_iter().chain(r).min().map(|t| (t, *k))
            })
            .min();
        let Some((_, key)) = oldest else { return };
        let ch = self.channels.get_mut(&key).expect("found above");
        let send_first = match (ch.sends.front(), ch.recvs.front()) {
            (Some(s), Some(r)) => s.post_ns <= r.post_ns,
            (Some(_), None) => true,
            _ => false,
        };
        if send_first {
            ch.sends.pop_front();
            self.unmatched.sends += 1;
        } else {
            ch.recvs.pop_front();
            self.unmatched.recvs += 1;
        }
        self.unmatched.dropped += 1;
        self.held -= 1;
    }

    /// Merges another server's state of the same key into this one; returns
    /// the wait states that only the two together complete.
    pub fn merge(&mut self, other: P2pMatcher) -> Vec<Wait> {
        let mut out = Vec::new();
        self.unmatched.add(&other.unmatched);
        self.calls.extend(other.calls);
        self.matched.extend(other.matched);
        self.rank = self.rank.or(other.rank);
        self.last_recv = self.last_recv.max(other.last_recv);
        // Channels in a fixed order, so that what they complete comes out
        // the same whatever the map's order.
        let mut channels: Vec<(ChannelKey, Channel)> = other.channels.into_iter().collect();
        channels.sort_by_key(|c| c.0);
        let mut keys = Vec::new();
        for (key, ch) in channels {
            let mine = self.channels.entry(key).or_insert_with(|| {
                self.by_src.entry(key.1).or_default().push(key);
                Channel::default()
            });
            self.held += ch.sends.len() + ch.recvs.len();
            // A channel's sends all come from one stream, and so do its
            // receives: one side is empty here or there.
            mine.sends.extend(ch.sends);
            mine.recvs.extend(ch.recvs);
            keys.push(key);
        }
        self.set_alone();
        for key in keys {
            self.drain(key, &mut out);
        }
        out
    }

    /// The end: gives the calls still open their longest wait, counts what
    /// is left.
    pub fn finish(&mut self) -> (Vec<Wait>, Unmatched) {
        let mut open: Vec<(u32, CallWait)> = std::mem::take(&mut self.calls).into_iter().collect();
        open.sort_unstable_by_key(|c| c.0);
        let out = open.into_iter().filter_map(|(_, c)| c.wait).collect();
        for ch in std::mem::take(&mut self.channels).into_values() {
            self.unmatched.sends += ch.sends.len() as u64;
            self.unmatched.recvs += ch.recvs.len() as u64;
        }
        self.by_src.clear();
        self.matched.clear();
        self.held = 0;
        (out, std::mem::take(&mut self.unmatched))
    }

    /// The communicators and occurrences its channels are of, for
    /// [`IdMap::resolve`].
    pub(crate) fn comm_uses(&self) -> Vec<(u32, u32)> {
        self.channels.keys().map(|k| (k.0, k.3)).collect()
    }

    /// Renumbers communicator, region and call path ids.
    pub fn remap(&mut self, ids: &IdMap) {
        for w in self.calls.values_mut().filter_map(|c| c.wait.as_mut()) {
            w.remap(ids);
        }
        for keys in self.by_src.values_mut() {
            for key in keys.iter_mut() {
                key.0 = ids.comm_at(key.0, key.3);
            }
        }
        let channels = std::mem::take(&mut self.channels);
        for ((comm, src, tag, occ), mut ch) in channels {
            ch.sends.iter_mut().for_each(|o| o.remap(ids));
            ch.recvs.iter_mut().for_each(|o| o.remap(ids));
            let into = (self.channels)
                .entry((ids.comm_at(comm, occ), src, tag, occ))
                .or_default();
            into.sends.extend(ch.sends);
            into.recvs.extend(ch.recvs);
        }
        self.set_alone();
    }
}

/// Collective instances of one key (see the module doc).
///
/// Most open instances sit in a ring by sequence number: a rank goes
/// through its instances in order, so its arrivals walk a ring from front
/// to back (memory the processor fetches ahead), where a hash map scatters
/// them over the heap and costs a cache miss or two per arrival while ranks
/// drift apart by thousands of instances. What a ring cannot hold (more
/// communicators, instances far ahead, inconsistent sizes, state read from
/// a partial) is kept in a hash map, with the same results.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(into = "InstancesRepr", from = "InstancesRepr")]
pub struct Instances {
    /// (communicator, sequence number) → arrivals so far, for the open
    /// instances not in a ring.
    open: FxHashMap<(u32, i64), Vec<Arrival>>,
    /// The rings, of [`RINGS`] communicators at most.
    rings: Vec<Ring>,
    /// The sequence numbers of one communicator that reach this key are
    /// `1 << shift` apart (the board's keys take them in turn,
    /// `on_board.rs`): a ring has a place for each of them only.
    shift: u32,
    /// Keys of the open instances in the order they began, and keys since
    /// completed, skipped when met: the oldest open instance is the first
    /// dropped.
    order: VecDeque<(u32, i64)>,
    unmatched: Unmatched,
    /// Vectors of instances judged, for the next ones (an allocation per
    /// instance costs as much as judging it).
    spare: Spare,
}

/// Vectors kept for reuse, and the arrivals they have room for.
#[derive(Clone, Debug, Default)]
struct Spare {
    vecs: Vec<Vec<Arrival>>,
    places: usize,
}

impl Spare {
    /// A vector kept for reuse, or a new one.
    fn take(&mut self) -> Vec<Arrival> {
        let v = self.vecs.pop().unwrap_or_default();
        self.places -= v.capacity();
        v
    }

    /// Keeps `v` for reuse, if there is room.
    fn keep(&mut self, mut v: Vec<Arrival>) {
        if self.places + v.capacity() <= SPARE_PLACES {
            self.places += v.capacity();
            v.clear();
            self.vecs.push(v);
        }
    }
}

/// How [`Instances`] serialise: the open instances in one map, wherever
/// they were held.
#[derive(Serialize, Deserialize)]
struct InstancesRepr {
    open: FxHashMap<(u32, i64), Vec<Arrival>>,
    unmatched: Unmatched,
}

impl From<Instances> for InstancesRepr {
    fn from(mut m: Instances) -> InstancesRepr {
        m.unring();
        InstancesRepr {
            open: m.open,
            unmatched: m.unmatched,
        }
    }
}

impl From<InstancesRepr> for Instances {
    fn from(r: InstancesRepr) -> Instances {
        Instances {
            open: r.open,
            unmatched: r.unmatched,
            ..Instances::default()
        }
    }
}

/// Communicators an [`Instances`] keeps a ring for.
const RINGS: usize = 4;

/// Arrivals an [`Instances`]' rings have room for together: their
/// instances times the members of their communicators (56 bytes each, so
/// at most 896 KiB per key, a ring's slots staying from its oldest open
/// instance to its newest; what does not fit goes to the map).
const RING_PLACES: usize = 1 << 14;

/// Arrivals the vectors an [`Instances`] keeps for reuse have room for
/// together: a rank running ahead opens some hundreds of instances per key
/// and pack, which should not take an allocation each while a rank behind
/// frees as many; bounded in bytes (896 KiB), as communicators can be
/// large.
const SPARE_PLACES: usize = 1 << 14;

/// The open instances of one communicator, by sequence number.
#[derive(Clone, Debug)]
struct Ring {
    comm: u32,
    /// Members: the arrivals that complete an instance, and the places
    /// each slot has.
    size: usize,
    /// The slot number (`seq >> shift`) of the front slot.
    first: i64,
    /// Per slot: the sequence number of its instance and how many have
    /// arrived (0: no instance open there).
    slots: VecDeque<(i64, u32)>,
    /// `size` places per slot.
    places: VecDeque<Arrival>,
    /// Slots with an instance open.
    open: usize,
}

impl Ring {
    fn new(comm: u32, size: usize) -> Ring {
        Ring {
            comm,
            size,
            first: 0,
            slots: VecDeque::new(),
            places: VecDeque::new(),
            open: 0,
        }
    }

    /// The slot of sequence number `seq`, if it is open here.
    fn find(&self, seq: i64, shift: u32) -> Option<usize> {
        let i = usize::try_from((seq >> shift) - self.first).ok()?;
        match self.slots.get(i) {
            Some(&(s, n)) if n > 0 && s == seq => Some(i),
            _ => None,
        }
    }

    /// The slot for an arrival at `seq`, made if need be within `room`
    /// places; `None` if the ring cannot hold it (behind its front, too far
    /// ahead, or the slot taken by another instance).
    fn place(&mut self, a: &Arrival, shift: u32, room: usize) -> Option<usize> {
        let slot = a.seq >> shift;
        if self.open == 0 {
            self.slots.clear();
            self.places.clear();
            self.first = slot;
        }
        let i = usize::try_from(slot - self.first).ok()?;
        if i >= self.slots.len() {
            if (i + 1).saturating_mul(self.size) > room {
                return None;
            }
            self.slots.resize(i + 1, (0, 0));
            self.places.resize((i + 1) * self.size, *a);
        }
        let (s, n) = self.slots[i];
        (n == 0 || s == a.seq).then_some(i)
    }

    /// The arrivals of slot `i`.
    fn arrivals(&self, i: usize) -> impl Iterator<Item = &Arrival> {
        let from = i * self.size;
        self.places.range(from..from + self.slots[i].1 as usize)
    }

    /// Closes slot `i` (its instance complete or dropped) and drops the
    /// closed slots at the front.
    fn close(&mut self, i: usize) {
        self.slots[i].1 = 0;
        self.open -= 1;
        while self.slots.front().is_some_and(|s| s.1 == 0) {
            self.slots.pop_front();
            self.places.drain(..self.size);
            self.first += 1;
        }
    }
}

/// Where an open instance is held: a ring's slot, or the map.
enum Site {
    Ring(usize, usize),
    Map,
}

impl Instances {
    /// Instances whose sequence numbers (per communicator) reach this key
    /// `1 << shift` apart.
    pub(crate) fn strided(shift: u32) -> Instances {
        Instances {
            shift,
            ..Instances::default()
        }
    }

    /// Open instances.
    fn open_len(&self) -> usize {
        self.open.len() + self.rings.iter().map(|r| r.open).sum::<usize>()
    }

    /// Where the instance `key` is open, if it is.
    fn site(&self, key: (u32, i64)) -> Option<Site> {
        if let Some(r) = self.rings.iter().position(|r| r.comm == key.0) {
            if let Some(i) = self.rings[r].find(key.1, self.shift) {
                return Some(Site::Ring(r, i));
            }
        }
        self.open.contains_key(&key).then_some(Site::Map)
    }

    /// The ring for `a`'s communicator, made or taken over if there is
    /// room; `None` to use the map.
    fn ring_for(&mut self, a: &Arrival) -> Option<usize> {
        let size = a.size as usize;
        if let Some(r) = self.rings.iter().position(|r| r.comm == a.comm) {
            return Some(r);
        }
        if size == 0 || size > RING_PLACES / 64 {
            return None;
        }
        if self.rings.len() < RINGS {
            self.rings.push(Ring::new(a.comm, size));
            return Some(self.rings.len() - 1);
        }
        let r = self.rings.iter().position(|r| r.open == 0)?;
        self.rings[r] = Ring::new(a.comm, size);
        Some(r)
    }

    /// Takes one arrival; returns the wait states of the instance it
    /// completes, if it does.
    pub(crate) fn add(&mut self, a: Arrival, out: &mut Vec<Wait>) {
        let key = (a.comm, a.seq);
        let in_map = !self.open.is_empty() && self.open.contains_key(&key);
        if !in_map {
            if let Some(r) = self.ring_for(&a) {
                if self.rings[r].size == a.size as usize {
                    let others: usize = self.rings.iter().map(|r| r.places.len()).sum::<usize>()
                        - self.rings[r].places.len();
                    let room = RING_PLACES.saturating_sub(others);
                    if let Some(i) = self.rings[r].place(&a, self.shift, room) {
                        self.add_to_ring(r, i, a, out);
                        return;
                    }
                } else if let Some(i) = self.rings[r].find(a.seq, self.shift) {
                    // Its members said otherwise before: the map, which
                    // goes by each arrival's own count, takes the instance.
                    let arrivals = self.rings[r].arrivals(i).copied().collect();
                    self.rings[r].close(i);
                    self.open.insert(key, arrivals);
                }
            }
        }
        self.add_to_map(a, out);
    }

    fn add_to_ring(&mut self, r: usize, i: usize, a: Arrival, out: &mut Vec<Wait>) {
        let ring = &mut self.rings[r];
        let n = ring.slots[i].1 as usize;
        if n > 0 && ring.arrivals(i).any(|x| x.rank == a.rank) {
            // A rank arriving twice at one instance: its sequence numbers
            // are off (it paused differently?); keep the first.
            self.unmatched.arrivals += 1;
            return;
        }
        if n == 0 {
            ring.slots[i].0 = a.seq;
            ring.open += 1;
            self.order.push_back((a.comm, a.seq));
        }
        ring.places[i * ring.size + n] = a;
        ring.slots[i].1 += 1;
        if n + 1 >= ring.size {
            let mut arrivals = self.spare.take();
            arrivals.extend(ring.arrivals(i).copied());
            ring.close(i);
            self.judged(arrivals, out);
        } else if self.open_len() > MAX_INSTANCES {
            self.drop_oldest();
        }
    }

    fn add_to_map(&mut self, a: Arrival, out: &mut Vec<Wait>) {
        let size = a.size as usize;
        let key = (a.comm, a.seq);
        let arrivals = match self.open.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                self.order.push_back(key);
                let mut v = self.spare.take();
                v.reserve(size);
                e.insert(v)
            }
        };
        if arrivals.iter().any(|x| x.rank == a.rank) {
            self.unmatched.arrivals += 1;
            return;
        }
        arrivals.push(a);
        if arrivals.len() >= size.max(1) {
            let arrivals = self.open.remove(&key).expect("just used");
            self.judged(arrivals, out);
        } else if self.open_len() > MAX_INSTANCES {
            self.drop_oldest();
        }
    }

    /// Judges a complete instance and keeps its vector.
    fn judged(&mut self, mut arrivals: Vec<Arrival>, out: &mut Vec<Wait>) {
        judge_instance(&mut arrivals, out);
        self.spare.keep(arrivals);
        self.trim_order();
    }

    /// Drops the oldest open instance, counting its arrivals.
    #[cold]
    fn drop_oldest(&mut self) {
        if self.order.len() < self.open_len() {
            self.order_by_key();
        }
        loop {
            let Some(key) = self.order.pop_front() else {
                if self.open_len() == 0 {
                    return;
                }
                self.order_by_key();
                continue;
            };
            let lost = match self.site(key) {
                Some(Site::Ring(r, i)) => {
                    let n = self.rings[r].slots[i].1;
                    self.rings[r].close(i);
                    n as u64
                }
                Some(Site::Map) => self.open.remove(&key).map_or(0, |v| v.len() as u64),
                None => continue,
            };
            self.unmatched.arrivals += lost;
            self.unmatched.dropped += lost;
            return;
        }
    }

    /// `order` when it lacks keys (a state read from a partial, or
    /// renumbered): the open ones by communicator and sequence number.
    fn order_by_key(&mut self) {
        let mut keys: Vec<_> = self.open.keys().copied().collect();
        for r in &self.rings {
            let open = r.slots.iter().filter(|s| s.1 > 0);
            keys.extend(open.map(|s| (r.comm, s.0)));
        }
        keys.sort_unstable();
        self.order = keys.into();
    }

    /// Forgets completed keys at the front of `order`, and all of them
    /// once they outnumber the open ones (an instance that never
    /// completes must not keep every later key in `order`).
    fn trim_order(&mut self) {
        while let Some(&key) = self.order.front() {
            if self.site(key).is_some() {
                break;
            }
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.open_len() + 64 {
            let mut order = std::mem::take(&mut self.order);
            order.retain(|&k| self.site(k).is_some());
            self.order = order;
        }
    }

    /// Moves the rings' open instances into the map.
    fn unring(&mut self) {
        for r in std::mem::take(&mut self.rings) {
            for (i, &(seq, n)) in r.slots.iter().enumerate() {
                if n > 0 {
                    self.open
                        .insert((r.comm, seq), r.arrivals(i).copied().collect());
                }
            }
        }
    }

    /// Merges another server's state; returns the wait states of the
    /// instances only the two together complete.
    pub fn merge(&mut self, mut other: Instances) -> Vec<Wait> {
        let mut out = Vec::new();
        self.unmatched.add(&other.unmatched);
        other.unring();
        // In key order, as the instances began: the same on every server.
        let mut open: Vec<_> = other.open.into_iter().collect();
        open.sort_unstable_by_key(|(k, _)| *k);
        for (_, arrivals) in open {
            for a in arrivals {
                self.add(a, &mut out);
            }
        }
        out
    }

    /// The end: counts what never completed.
    pub fn finish(&mut self) -> Unmatched {
        self.unring();
        self.order.clear();
        for (_, arrivals) in std::mem::take(&mut self.open) {
            self.unmatched.arrivals += arrivals.len() as u64;
        }
        std::mem::take(&mut self.unmatched)
    }

    /// The communicators and occurrences of its open instances, for
    /// [`IdMap::resolve`].
    pub(crate) fn comm_uses(&self) -> Vec<(u32, u32)> {
        let ringed = self.rings.iter().flat_map(|r| {
            (r.slots.iter())
                .filter(|s| s.1 > 0)
                .map(|s| (r.comm, occurrence_of(s.0)))
        });
        (self.open.keys())
            .map(|&(comm, seq)| (comm, occurrence_of(seq)))
            .chain(ringed)
            .collect()
    }

    /// Renumbers communicator, region and call path ids.
    pub fn remap(&mut self, ids: &IdMap) {
        self.unring();
        let open = std::mem::take(&mut self.open);
        for ((comm, seq), mut arrivals) in open {
            arrivals.iter_mut().for_each(|a| a.remap(ids));
            self.open
                .entry((ids.comm_at(comm, occurrence_of(seq)), seq))
                .or_default()
                .extend(arrivals);
        }
        self.order_by_key();
    }
}

/// The wait states of one complete collective instance.
fn judge_instance(arrivals: &mut [Arrival], out: &mut Vec<Wait>) {
    // Rank order, so that ties are broken the same on every server.
    arrivals.sort_by_key(|a| a.rank);
    let Some(first) = arrivals.first() else {
        return;
    };
    let Some(pattern) = crate::unpack::collective_pattern(first.func as usize) else {
        return;
    };
    let wait = |w: &Arrival, until: u64, late: &Arrival| Wait {
        pattern,
        waiter: w.rank,
        enter_ns: w.enter_ns,
        time_ns: until.min(w.leave_ns).saturating_sub(w.enter_ns),
        func: w.func,
        path: w.path,
        region: w.region,
        late: late.rank,
        late_path: late.path,
        site: w.site,
        late_site: late.site,
    };
    match pattern {
        Pattern::WaitNxN | Pattern::WaitBarrier => {
            let last = arrivals
                .iter()
                .max_by_key(|a| (a.enter_ns, std::cmp::Reverse(a.rank)))
                .expect("not empty");
            for a in arrivals.iter() {
                if a.rank != last.rank && last.enter_ns > a.enter_ns {
                    out.push(wait(a, last.enter_ns, last));
                }
            }
        }
        Pattern::LateBroadcast => {
            let Some(root) = arrivals.iter().find(|a| a.rank == a.root) else {
                return;
            };
            for a in arrivals.iter() {
                if a.rank != root.rank && root.enter_ns > a.enter_ns {
                    out.push(wait(a, root.enter_ns, root));
                }
            }
        }
        Pattern::EarlyReduce => {
            let Some(root) = arrivals.iter().find(|a| a.rank == a.root) else {
                return;
            };
            let first = arrivals
                .iter()
                .filter(|a| a.rank != root.rank)
                .min_by_key(|a| (a.enter_ns, a.rank));
            if let Some(first) = first {
                if first.enter_ns > root.enter_ns {
                    out.push(wait(root, first.enter_ns, first));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
