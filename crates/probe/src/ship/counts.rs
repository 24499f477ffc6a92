//! Counting instead of shipping: what a rank sampled out by a service
//! (`hark ctl sample K/N`) sends in place of its packs.
//!
//! The program's threads record as on any rank: a sampled-out rank's
//! hot path is the same code, so it costs nothing to have the filter and
//! nothing to switch it. The shipping thread, when it takes a full buffer,
//! folds its events into per-function totals ([`fold`]) and sends one
//! [`Counts`] frame instead of the pack. Every recorded event is counted,
//! so calls, bytes and times stay exact; what the server loses is the
//! single events (their order, peers, tags and timestamps).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op::{self, OpKind};
use hark_wire::{ClockSource, Count, Counts, Event};

/// Whether world rank `rank` keeps its detailed events under a filter of
/// `keep` of every `of` ranks: `rank % of < keep`. A process without a
/// rank (not an MPI process) always keeps them.
pub(crate) fn keeps_details(rank: i32, keep: u32, of: u32) -> bool {
    rank < 0 || of == 0 || (rank as u32) % of < keep
}

/// The cell an event is counted in: I/O calls by file (`obj`, or the
/// descriptor in `peer` for a file never seen opened), user events by
/// name, MPI calls by function alone.
fn key(ev: &Event) -> (u16, u32, i32) {
    let code = ev.op();
    match op::kind(code) {
        OpKind::Io(_) => (code, ev.obj.get(), ev.peer.get()),
        OpKind::Mpi(i)
            if matches!(
                FUNCTIONS[i].class,
                Class::FileMeta | Class::FileRead | Class::FileWrite
            ) =>
        {
            (code, ev.obj.get(), ev.peer.get())
        }
        OpKind::User => (code, ev.obj.get(), 0),
        _ => (code, 0, 0),
    }
}

/// A multiply-and-rotate hash (as rustc's `FxHasher`): the keys are a
/// few small integers the probe made itself, so no defence against chosen
/// keys is needed, and SipHash cost most of the fold.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64)
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v as u64)
    }
    fn write_i32(&mut self, v: i32) {
        self.write_u64(v as u32 as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Folds `events` (timestamps as the probe's `clock` writes them) into one
/// frame's worth of totals, in nanoseconds.
pub(crate) fn fold(events: &[Event], clock: ClockSource) -> Counts {
    let ns = |t: u64| match clock {
        ClockSource::Tsc(scale) => scale.ns(t),
        ClockSource::Monotonic => t,
    };
    let mut at: HashMap<(u16, u32, i32), usize, BuildHasherDefault<Fx>> = HashMap::default();
    let mut cells: Vec<Count> = Vec::new();
    // Loops repeat a call: the last cell is the likeliest.
    let mut last: Option<((u16, u32, i32), usize)> = None;
    let (mut since, mut until) = (u64::MAX, 0);
    for ev in events {
        let start = ns(ev.start.get());
        let end = ns(ev.end.get());
        let d = end.saturating_sub(start);
        since = since.min(start);
        until = until.max(end);
        let k = key(ev);
        let i = match last {
            Some((l, i)) if l == k => i,
            _ => {
                let i = *at.entry(k).or_insert_with(|| {
                    cells.push(Count {
                        op: k.0,
                        obj: k.1,
                        peer: k.2,
                        min_ns: u64::MAX,
                        ..Count::default()
                    });
                    cells.len() - 1
                });
                last = Some((k, i));
                i
            }
        };
        let c = &mut cells[i];
        c.calls += 1;
        c.bytes = c.bytes.saturating_add(ev.bytes.get());
        c.time_ns = c.time_ns.saturating_add(d);
        c.min_ns = c.min_ns.min(d);
        c.max_ns = c.max_ns.max(d);
    }
    cells.sort_unstable_by_key(|c| (c.op, c.obj, c.peer));
    Counts {
        since_ns: if events.is_empty() { 0 } else { since },
        until_ns: until,
        events: events.len() as u64,
        cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_wire::TickScale;

    #[test]
    fn k_of_every_n_ranks_keep_their_details() {
        let kept: Vec<i32> = (0..8).filter(|&r| keeps_details(r, 1, 2)).collect();
        assert_eq!(kept, [0, 2, 4, 6]);
        let kept: Vec<i32> = (0..8).filter(|&r| keeps_details(r, 3, 4)).collect();
        assert_eq!(kept, [0, 1, 2, 4, 5, 6]);
        assert!((0..8).all(|r| keeps_details(r, 4, 4)));
        assert!(!keeps_details(0, 0, 4));
        assert!(keeps_details(-1, 0, 4));
    }

    #[test]
    fn folding_sums_calls_bytes_and_times_per_function() {
        let send = op::mpi_op("MPI_Send").unwrap();
        let mut evs = Vec::new();
        for i in 0..5u64 {
            let mut e = Event::new(send, 100 * i, 100 * i + 10 + i);
            e.bytes.set(8);
            e.peer.set(i as i32);
            evs.push(e);
        }
        let mut w = Event::new(op::io::WRITE, 50, 60);
        w.obj.set(3);
        w.bytes.set(100);
        evs.push(w);
        let c = fold(&evs, ClockSource::Monotonic);
        assert_eq!(c.events, 6);
        assert_eq!((c.since_ns, c.until_ns), (0, 414));
        assert_eq!(c.cells.len(), 2);
        let s = c.cells.iter().find(|c| c.op == send).unwrap();
        assert_eq!((s.calls, s.bytes, s.time_ns), (5, 40, 60));
        assert_eq!((s.min_ns, s.max_ns), (10, 14));
        let io = c.cells.iter().find(|c| c.op == op::io::WRITE).unwrap();
        assert_eq!((io.calls, io.bytes, io.obj), (1, 100, 3));
    }

    #[test]
    fn ticks_become_nanoseconds() {
        // Two ticks per ns: mult = 2^32 / 2.
        let scale = TickScale {
            tsc0: 1000,
            ns0: 0,
            mult: 1 << 31,
        };
        let c = fold(
            &[Event::new(op::io::READ, 3000, 5000)],
            ClockSource::Tsc(scale),
        );
        assert_eq!((c.since_ns, c.until_ns), (1000, 2000));
        assert_eq!(c.cells[0].time_ns, 1000);
    }
}
