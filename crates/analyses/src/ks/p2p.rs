//! Point-to-point topology: rank × rank matrices of messages, bytes and time,
//! per point-to-point function and all kinds together.
//!
//! The all-kinds matrices count each message once, on the sending side, when
//! it is sent (or posted: `MPI_Isend`, a persistent `MPI_Start`). The
//! per-function matrices also hold the receiving functions, seen from the
//! receiver: `by_function["MPI_Recv"].messages[i][j]` counts messages rank j
//! received from rank i (the receive side of `MPI_Sendrecv` is left out: its
//! sender counted that message). Messages to processes outside the program (MPMD
//! coupling) are counted in a diagnostic, not in the matrices.
//!
//! One-sided data movement (`MPI_Put`, `MPI_Get`, the accumulates) is no
//! message: its operations go to matrices of their own (`one_sided`, and
//! per function), from origin to target whichever way the data goes.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::derived::Msg;
use crate::fx::FxHashMap;
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{Matrices, Program};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use std::sync::OnceLock;

/// See the module documentation.
pub struct P2pTopology;

static SPEC: Spec = Spec {
    name: "p2p-topology",
    description: "Rank × rank matrices of point-to-point messages, bytes and time, per function and all together, and of one-sided operations.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["p2p"],
};

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Cell {
    messages: u64,
    bytes: u64,
    time: u64,
}

/// Per rank: totals per peer, function and direction (one-sided
/// operations: per target, as sent).
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    /// (peer world rank, function, sent?) → totals.
    cells: FxHashMap<(i32, u16, bool), Cell>,
}

impl Rank {
    fn add(&mut self, peer: i32, func: usize, send: bool, bytes: u64, time: u64) {
        // A lookup first: `entry` is not inlined and makes room before it
        // looks, and all but a stream's first messages find their cell.
        let key = (peer, func as u16, send);
        let c = match self.cells.get_mut(&key) {
            Some(c) => c,
            None => self.cells.entry(key).or_default(),
        };
        c.messages += 1;
        c.bytes.sat(bytes);
        c.time.sat(time);
    }
}

/// Whether MPI function `func` (index in `FUNCTIONS`) moves data one-sided.
fn one_sided(func: usize) -> bool {
    FUNCTIONS[func].class == Class::Rma
}

/// The op codes from the first one-sided function to the last: one run of
/// `FUNCTIONS`, so that every other event costs two comparisons.
fn one_sided_ops() -> RangeInclusive<u16> {
    static OPS: OnceLock<RangeInclusive<u16>> = OnceLock::new();
    OPS.get_or_init(|| {
        let mut funcs = (0..FUNCTIONS.len()).filter(|&f| one_sided(f));
        let first = funcs.next().unwrap_or(0);
        let last = funcs.next_back().unwrap_or(first);
        (op::MPI_BASE + first as u16)..=(op::MPI_BASE + last as u16)
    })
    .clone()
}

impl RankState for Rank {
    fn fold(&mut self, _: &StreamCx<'_>, input: &Input<'_>) {
        // The receive side of MPI_Sendrecv is the message its sender
        // counted already: per-function matrices would hold it twice.
        let counted = |m: &&Msg| m.send || FUNCTIONS[m.func].class != Class::Sendrecv;
        for m in input.msgs.iter().filter(counted) {
            self.add(m.peer, m.func, m.send, m.bytes, m.time_ns);
        }
        // One-sided operations are events, not messages; a target of
        // `MPI_PROC_NULL` (or unknown) is below 0.
        let ops = one_sided_ops();
        for ev in input.events.iter().filter(|ev| ops.contains(&ev.op())) {
            if let op::OpKind::Mpi(f) = op::kind(ev.op()) {
                if one_sided(f) && ev.peer.get() >= 0 {
                    self.add(ev.peer.get(), f, true, ev.bytes.get(), ev.duration());
                }
            }
        }
    }
    fn remap(&mut self, _: &IdMap) {}
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        for (k, c) in &o.cells {
            let into = self.cells.entry(*k).or_default();
            into.messages += c.messages;
            into.bytes.sat(c.bytes);
            into.time.sat(c.time);
        }
    }
}

fn square(n: usize) -> Matrices {
    Matrices {
        messages: vec![vec![0; n]; n],
        bytes: vec![vec![0; n]; n],
        time_ns: vec![vec![0; n]; n],
    }
}

fn add(m: &mut Matrices, i: usize, j: usize, c: &Cell) {
    m.messages[i][j] += c.messages;
    m.bytes[i][j].sat(c.bytes);
    m.time_ns[i][j].sat(c.time);
}

impl Analysis for P2pTopology {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let n = cx.len();
        // Made on the first message: a program of many processes that send
        // none (a shell loop of 40,000) must not cost ranks² cells.
        let (mut all, mut rma): (Option<Matrices>, Option<Matrices>) = (None, None);
        let mut outside = 0u64;
        for (me, rank) in ranks.iter().copied().enumerate() {
            for (&(peer, func, send), c) in &rank.cells {
                let Some(peer) = cx.program_rank(peer) else {
                    outside += c.messages;
                    continue;
                };
                let (from, to) = if send { (me, peer) } else { (peer, me) };
                let name = FUNCTIONS[func as usize].name;
                let m = out
                    .p2p
                    .by_function
                    .entry(name.to_string())
                    .or_insert_with(|| square(n));
                add(m, from, to, c);
                if one_sided(func as usize) {
                    add(rma.get_or_insert_with(|| square(n)), from, to, c);
                } else if send {
                    add(all.get_or_insert_with(|| square(n)), from, to, c);
                }
            }
        }
        if let Some(all) = all {
            out.p2p.messages = all.messages;
            out.p2p.bytes = all.bytes;
            out.p2p.time_ns = all.time_ns;
        }
        if let Some(rma) = rma {
            out.p2p.one_sided = rma;
        }
        if outside > 0 {
            out.diagnostics.push(format!(
                "p2p-topology: {outside} messages went to or came from processes outside this program; they are in the MPI profile but not in the matrices"
            ));
        }
    }
}
