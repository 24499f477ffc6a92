//! The MPI profile: per function and rank, calls, time (total, min, max) and
//! bytes; across ranks, the spread of each function's time and a histogram
//! of it; per function, a histogram of message sizes (mpiP's view).

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::hist::{rank_histogram, size_bin, size_histogram, SIZE_BINS};
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use hark_model::{FunctionProfile, Program, Spread};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op;
use serde::{Deserialize, Serialize};

/// See the module documentation.
pub struct MpiProfile;

static SPEC: Spec = Spec {
    name: "mpi-profile",
    description: "Calls, time and bytes per MPI function and rank, their spread across ranks, and message-size histograms.",
    sensitivities: &[Sensitivity::Events, Sensitivity::ProgramEnd],
    fills: &["mpi"],
};

#[derive(Clone, Serialize, Deserialize)]
struct Func {
    calls: u64,
    bytes: u64,
    time: u64,
    min: u64,
    max: u64,
    sizes: Box<[u64]>,
}

impl Default for Func {
    fn default() -> Func {
        Func {
            calls: 0,
            bytes: 0,
            time: 0,
            min: u64::MAX,
            max: 0,
            sizes: vec![0; SIZE_BINS].into_boxed_slice(),
        }
    }
}

/// Does a call of function `func` carry its bytes in its own record? Sends
/// do (`MPI_Isend` too: the bytes it sends, as a PMPI counter counts them,
/// whether or not its request is ever completed), blocking receives carry the
/// received bytes, collectives their send side, one-sided calls and MPI-IO
/// what they moved (non-blocking MPI-IO: what they asked to move).
pub(crate) fn own_bytes(func: usize) -> bool {
    matches!(
        FUNCTIONS[func].class,
        Class::Send
            | Class::Recv
            | Class::Sendrecv
            | Class::Isend
            | Class::Collective
            | Class::Icollective
            | Class::Rma
            | Class::FileRead
            | Class::FileWrite
    )
}

/// Does function `func` get its bytes when its requests complete?
/// Non-blocking and persistent receives (the received bytes) and persistent
/// sends (at each completion).
pub(crate) fn completion_bytes(func: usize) -> bool {
    matches!(
        FUNCTIONS[func].class,
        Class::Irecv | Class::SendInit | Class::RecvInit
    )
}

/// Per rank: per function totals.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    /// Indexed like `FUNCTIONS`; boxed lazily, since a program calls few.
    funcs: Vec<Option<Box<Func>>>,
    /// Since when (ns from the program's origin) this rank sent counts in
    /// place of events: sampled out by a service (`hark ctl sample`).
    #[serde(default)]
    sampled_from_ns: Option<u64>,
}

impl Rank {
    #[inline]
    fn func(&mut self, i: usize) -> &mut Func {
        if self.funcs.len() <= i {
            self.funcs.resize(i + 1, None);
        }
        self.funcs[i].get_or_insert_with(Box::default)
    }
}

impl Rank {
    /// Adds a sampled-out rank's exact totals. The message-size histogram
    /// gets nothing: the totals hold no single call's size.
    fn fold_counts(&mut self, cx: &StreamCx<'_>, counts: &hark_wire::Counts) {
        if counts.events > 0 {
            let from = cx.since_origin(counts.since_ns);
            self.sampled_from_ns = Some(self.sampled_from_ns.map_or(from, |t| t.min(from)));
        }
        for c in &counts.cells {
            if c.op >= op::IO_BASE || c.calls == 0 {
                continue;
            }
            if let op::OpKind::Mpi(i) = op::kind(c.op) {
                let f = self.func(i);
                f.calls += c.calls;
                f.time.sat(c.time_ns);
                f.min = f.min.min(c.min_ns);
                f.max = f.max.max(c.max_ns);
                if own_bytes(i) {
                    f.bytes.sat(c.bytes);
                }
            }
        }
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        if let Some(counts) = input.counts {
            self.fold_counts(cx, counts);
        }
        let events = input.events;
        for ev in events {
            let code = ev.op();
            if code >= op::IO_BASE {
                continue;
            }
            if let op::OpKind::Mpi(i) = op::kind(code) {
                let d = ev.duration();
                let f = self.func(i);
                f.calls += 1;
                f.time.sat(d);
                f.min = f.min.min(d);
                f.max = f.max.max(d);
                if own_bytes(i) {
                    let b = ev.bytes.get();
                    f.bytes.sat(b);
                    f.sizes[size_bin(b)] += 1;
                }
            }
        }
        // A request completed: its bytes belong to the function that
        // posted it (MPI_Irecv, MPI_Send_init), if that one did not count
        // them when called.
        for m in input.msgs.iter().filter(|m| completion_bytes(m.func)) {
            let f = self.func(m.func);
            f.bytes.sat(m.bytes);
            f.sizes[size_bin(m.bytes)] += 1;
        }
    }
    fn remap(&mut self, _: &IdMap) {}
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        self.sampled_from_ns = match (self.sampled_from_ns, o.sampled_from_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (i, g) in o.funcs.iter().enumerate() {
            let Some(g) = g else { continue };
            let f = self.func(i);
            f.calls += g.calls;
            f.bytes.sat(g.bytes);
            f.time.sat(g.time);
            f.min = f.min.min(g.min);
            f.max = f.max.max(g.max);
            for (a, b) in f.sizes.iter_mut().zip(g.sizes.iter()) {
                *a += b;
            }
        }
    }
}

/// Names the ranks a service sampled out, and from when: their counts are
/// exact, but no analysis that needs events saw them after that.
fn sampled_diagnostic(cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
    let out_ranks: Vec<(String, u64)> = ranks
        .iter()
        .enumerate()
        .filter_map(|(r, s)| {
            let from = s.sampled_from_ns?;
            let name = match cx.ranks.get(r) {
                Some(m) if m.world_rank >= 0 => m.world_rank.to_string(),
                Some(m) => format!("pid {}", m.pid),
                None => r.to_string(),
            };
            Some((name, from))
        })
        .collect();
    let Some(first) = out_ranks.iter().map(|(_, t)| *t).min() else {
        return;
    };
    let names: Vec<&str> = out_ranks.iter().map(|(n, _)| n.as_str()).collect();
    out.diagnostics.push(format!(
        "sampling: ranks {} sampled out from t={:.3} s: their counts are exact, their messages and waits are not analysed (nor their time slices, regions and trace after that time)",
        names.join(","),
        first as f64 / 1e9
    ));
}

impl Analysis for MpiProfile {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let ranks: Vec<&Rank> = ranks.to_vec();
        sampled_diagnostic(cx, &ranks, out);
        let n = ranks.len();
        let used = ranks.iter().map(|r| r.funcs.len()).max().unwrap_or(0);
        for (i, func) in FUNCTIONS.iter().enumerate().take(used) {
            if !ranks
                .iter()
                .any(|r| matches!(r.funcs.get(i), Some(Some(_))))
            {
                continue;
            }
            let mut p = FunctionProfile {
                calls: vec![0; n],
                bytes: vec![0; n],
                time_ns: vec![0; n],
                min_ns: vec![0; n],
                max_ns: vec![0; n],
                ..FunctionProfile::default()
            };
            let mut sizes = [0u64; SIZE_BINS];
            for (r, rank) in ranks.iter().enumerate() {
                if let Some(Some(f)) = rank.funcs.get(i) {
                    p.calls[r] = f.calls;
                    p.bytes[r] = f.bytes;
                    p.time_ns[r] = f.time;
                    p.min_ns[r] = if f.calls > 0 { f.min } else { 0 };
                    p.max_ns[r] = f.max;
                    for (s, c) in sizes.iter_mut().zip(f.sizes.iter()) {
                        *s += c;
                    }
                }
            }
            let times: Vec<f64> = p.time_ns.iter().map(|&t| t as f64).collect();
            p.time_across_ranks = Spread::of(&times);
            p.time_histogram = rank_histogram(&times);
            p.size_histogram = size_histogram(&sizes);
            out.mpi.insert(func.name.to_string(), p);
        }
    }
}
