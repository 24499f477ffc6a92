//! Call sites: calls, bytes, time and wait states per place in the program
//! an MPI or I/O function was called from (mpiP's call-site view).
//!
//! Each event carries its call site ([`hark_wire::Event::callsite`]), which
//! the stream's definitions turn into a key of the program's call-path
//! table: object, build id and offset of each frame (`unify.rs`,
//! [`crate::unify::callsite_key`]), the same on every rank and analyser.
//! The per-rank state sums by (call site, function); the waits it is fed
//! add to the waiting call's site, and to the late call's site as what it
//! caused. `finish` names each site's function, file and line
//! ([`crate::resolve`]), once per object.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::derived::Pattern;
use crate::fx::FxHashMap;
use crate::ks::io::{direction, Dir};
use crate::ks::mpi_profile::{completion_bytes, own_bytes};
use crate::sat::{total, Sat};
use crate::stream::StreamCx;
use crate::unify::{callsite_frames, IdMap, SiteFrame, UNDEFINED};
use hark_model::{Callsite, Program, WaitCell};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct Callsites;

static SPEC: Spec = Spec {
    name: "callsites",
    description: "Calls, bytes, time and wait states per MPI and I/O call site (function, file and line of the call).",
    sensitivities: &[Sensitivity::Events, Sensitivity::Waits, Sensitivity::ProgramEnd],
    fills: &["callsites"],
};

/// Distinct (call site, function) pairs one rank keeps; the rest are
/// counted in `dropped` and said in the diagnostics.
const MAX_SITES: usize = 4096;

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Totals {
    calls: u64,
    bytes: u64,
    time: u64,
}

impl Totals {
    fn merge(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.bytes.sat(o.bytes);
        self.time.sat(o.time);
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Cell {
    time: u64,
    instances: u64,
}

impl Cell {
    fn merge(&mut self, o: &Cell) {
        self.time.sat(o.time);
        self.instances += o.instances;
    }
}

/// Per rank: totals per (call site, op code), waits per (call site,
/// pattern) on either side.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    /// Looked up at every call: hashed (the order is made in `finish`).
    sites: FxHashMap<(u32, u16), Totals>,
    // Hashed: a stream's every wait state comes here (one in five events
    // of a CG kernel), and the finish sorts what it publishes.
    waits: FxHashMap<(u32, Pattern), Cell>,
    caused: FxHashMap<(u32, Pattern), Cell>,
    /// The op code of each site's calls, for the late side of waits.
    ops: BTreeMap<u32, u16>,
    dropped: u64,
    /// Per MPI function: one of its sites and how many it has, so that a
    /// completed request finds its function's only site without a walk
    /// over every site. Derived from `sites`; see [`Rank::only_site`].
    #[serde(skip)]
    of_func: Vec<(u32, u32)>,
    /// How many entries of `sites` `of_func` counts. Sites are only ever
    /// added, except by a remap (which sets this to `usize::MAX`), so a
    /// count that differs from `sites.len()` is stale and is rebuilt.
    #[serde(skip)]
    counted: usize,
}

impl Rank {
    fn add(&mut self, site: u32, code: u16, time: u64, bytes: u64) {
        let full = self.sites.len() >= MAX_SITES;
        match self.sites.get_mut(&(site, code)) {
            Some(t) => {
                t.calls += 1;
                t.time.sat(time);
                t.bytes.sat(bytes);
            }
            None if full => self.dropped += 1,
            None => {
                self.sites.insert(
                    (site, code),
                    Totals {
                        calls: 1,
                        bytes,
                        time,
                    },
                );
                self.ops.insert(site, code);
            }
        }
    }

    /// The site of MPI function `func`'s calls on this rank when there is
    /// exactly one.
    fn only_site(&mut self, func: usize) -> Option<u32> {
        if self.counted != self.sites.len() {
            self.of_func.clear();
            for &(site, code) in self.sites.keys() {
                let op::OpKind::Mpi(f) = op::kind(code) else {
                    continue;
                };
                if self.of_func.len() <= f {
                    self.of_func.resize(f + 1, (UNDEFINED, 0));
                }
                let e = &mut self.of_func[f];
                *e = (site, e.1 + 1);
            }
            self.counted = self.sites.len();
        }
        match self.of_func.get(func) {
            Some(&(site, 1)) => Some(site),
            _ => None,
        }
    }
}

/// The bytes a call moved, as the MPI and I/O profiles count them.
fn bytes_of(code: u16, ev: &hark_wire::Event) -> u64 {
    match op::kind(code) {
        op::OpKind::Mpi(i) if own_bytes(i) => ev.bytes.get(),
        op::OpKind::Io(_) if direction(code) != Dir::Other => ev.bytes.get(),
        _ => 0,
    }
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        for ev in input.events {
            let code = ev.op();
            if !matches!(op::kind(code), op::OpKind::Mpi(_) | op::OpKind::Io(_)) {
                continue;
            }
            let site = cx.site(ev.callsite());
            if site == UNDEFINED {
                continue;
            }
            self.add(site, code, ev.duration(), bytes_of(code, ev));
        }
        // Received bytes of non-blocking receives go to the site of the
        // call that posted them, as in the MPI profile: the message knows
        // the posting function only, so they go to that function's sites
        // on this rank when there is exactly one.
        for m in input.msgs.iter().filter(|m| completion_bytes(m.func)) {
            let code = op::MPI_BASE + m.func as u16;
            if let Some(site) = self.only_site(m.func) {
                if let Some(t) = self.sites.get_mut(&(site, code)) {
                    t.bytes.sat(m.bytes);
                }
            }
        }
        for w in input.waits {
            if w.site != UNDEFINED {
                let c = self.waits.entry((w.site, w.pattern)).or_default();
                c.time.sat(w.time_ns);
                c.instances += 1;
            }
            if w.late_site != UNDEFINED {
                let c = self.caused.entry((w.late_site, w.pattern)).or_default();
                c.time.sat(w.time_ns);
                c.instances += 1;
            }
        }
    }

    fn remap(&mut self, ids: &IdMap) {
        let path = |id: u32| ids.path(id);
        // Two ids of one path are one site: their totals add up.
        for ((s, c), t) in std::mem::take(&mut self.sites) {
            self.sites.entry((path(s), c)).or_default().merge(&t);
        }
        for map in [&mut self.waits, &mut self.caused] {
            for ((s, p), c) in std::mem::take(map) {
                map.entry((path(s), p)).or_default().merge(&c);
            }
        }
        self.ops = std::mem::take(&mut self.ops)
            .into_iter()
            .map(|(s, c)| (path(s), c))
            .collect();
        self.counted = usize::MAX;
    }

    fn absorbs(&self, _: &Rank) -> bool {
        true
    }

    fn absorb(&mut self, o: &Rank) {
        for (k, t) in &o.sites {
            self.sites.entry(*k).or_default().merge(t);
        }
        for (mine, theirs) in [(&mut self.waits, &o.waits), (&mut self.caused, &o.caused)] {
            for (k, c) in theirs {
                mine.entry(*k).or_default().merge(c);
            }
        }
        self.ops.extend(o.ops.iter());
        self.dropped += o.dropped;
    }
}

/// A frame named for `callers`: `file:line (symbol)`, the symbol, or
/// `object+0xoffset`.
fn describe(f: &SiteFrame) -> String {
    let p = crate::names::place(&f.object, &f.build_id, f.offset);
    match (p.file, p.line, p.symbol) {
        (Some(file), Some(line), Some(s)) => format!("{file}:{line} ({s})"),
        (Some(file), Some(line), None) => format!("{file}:{line}"),
        (_, _, Some(s)) => s,
        _ => format!("{}+{:#x}", f.object, f.offset),
    }
}

impl Analysis for Callsites {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let mut all = Rank::default();
        for r in ranks {
            all.absorb(r);
        }
        let mut sites: BTreeMap<(u32, u16), Callsite> = BTreeMap::new();
        let mut named: BTreeMap<u32, Option<Callsite>> = BTreeMap::new();
        let mut name = |site: u32| -> Option<Callsite> {
            named
                .entry(site)
                .or_insert_with(|| {
                    let frames = callsite_frames(cx.unifier.path(site)?)?;
                    let first = frames.first()?;
                    let p = crate::names::place(&first.object, &first.build_id, first.offset);
                    Some(Callsite {
                        file: p.file,
                        line: p.line,
                        symbol: p
                            .symbol
                            .or_else(|| Some(format!("{}+{:#x}", first.object, first.offset))),
                        object: first.object.clone(),
                        callers: frames[1..].iter().map(describe).collect(),
                        ..Callsite::default()
                    })
                })
                .clone()
        };
        for (&(site, code), t) in &all.sites {
            let Some(mut c) = name(site) else { continue };
            c.function = op::name(code).to_string();
            c.calls = t.calls;
            c.bytes = t.bytes;
            c.time_ns = t.time;
            sites.insert((site, code), c);
        }
        // Waits belong to the site's (only) function; a site seen only
        // through another rank's waits gets its entry here.
        let code_of = |site: u32| all.ops.get(&site).copied();
        for (caused, map) in [(false, &all.waits), (true, &all.caused)] {
            for (&(site, pattern), cell) in map {
                let Some(code) = code_of(site) else { continue };
                let Some(c) = sites.get_mut(&(site, code)) else {
                    continue;
                };
                let into = if caused { &mut c.caused } else { &mut c.waits };
                let e = into.entry(pattern.key().to_string()).or_insert(WaitCell {
                    time_ns: 0,
                    instances: 0,
                });
                e.time_ns.sat(cell.time);
                e.instances += cell.instances;
            }
        }
        let mut list: Vec<Callsite> = sites.into_values().collect();
        let cost = |c: &Callsite| {
            c.time_ns
                .saturating_add(total(c.caused.values().map(|w| w.time_ns)))
        };
        list.sort_by(|a, b| {
            cost(b)
                .cmp(&cost(a))
                .then_with(|| a.place().cmp(&b.place()))
        });
        out.callsites = list;
        if all.dropped > 0 {
            out.diagnostics.push(format!(
                "call sites: {} call(s) at sites past the first {MAX_SITES} per rank are in the profiles but in no call site",
                all.dropped
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_s_only_site_is_known_through_reloads_merges_and_remaps() {
        let (irecv, _) = hark_wire::mpi::by_name("MPI_Irecv").unwrap();
        let code = op::MPI_BASE + irecv as u16;
        let mut a = Rank::default();
        a.add(7, code, 10, 0);
        a.add(7, code, 5, 0);
        assert_eq!(a.only_site(irecv), Some(7));
        // A state sent between analysers comes back without its index.
        let mut b: Rank = postcard::from_bytes(&postcard::to_allocvec(&a).unwrap()).unwrap();
        assert_eq!(b.only_site(irecv), Some(7));
        b.add(8, code, 1, 0);
        assert_eq!(b.only_site(irecv), None);
        let mut all = Rank::default();
        all.absorb(&a);
        assert_eq!(all.only_site(irecv), Some(7));
        all.absorb(&b);
        assert_eq!(all.only_site(irecv), None);
        // A remap that makes both ids one path makes them one site.
        all.remap(&IdMap::default());
        assert_eq!(all.only_site(irecv), Some(UNDEFINED));
        let t = all.sites[&(UNDEFINED, code)];
        assert_eq!((t.calls, t.time), (5, 31));
    }

    #[test]
    fn a_remap_that_makes_two_sites_one_sums_their_waits() {
        let mut a = Rank::default();
        for (site, time) in [(7, 10), (8, 5), (7, 1)] {
            a.waits.entry((site, Pattern::LateSender)).or_default().time += time;
            a.waits
                .entry((site, Pattern::LateSender))
                .or_default()
                .instances += 1;
            a.caused
                .entry((site, Pattern::LateSender))
                .or_default()
                .time += time;
        }
        // Every id to one path (`IdMap::default` maps all to UNDEFINED).
        a.remap(&IdMap::default());
        let w = a.waits[&(UNDEFINED, Pattern::LateSender)];
        assert_eq!((w.time, w.instances), (16, 3));
        assert_eq!(a.caused[&(UNDEFINED, Pattern::LateSender)].time, 16);
        assert_eq!((a.waits.len(), a.caused.len()), (1, 1));
    }
}
