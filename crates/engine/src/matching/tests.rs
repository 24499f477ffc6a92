//! Message matching and collective instances, checked on hand-made operations.

use super::*;

fn op(side: Side, seq: u64) -> P2pOp {
    P2pOp {
        side,
        comm: 0,
        occ: 0,
        src: 1,
        dst: 0,
        tag: 0,
        seq,
        post_ns: seq,
        block: None::<(u64, u64)>.into(),
        func: 0,
        call: seq as u32,
        in_call: 1,
        path: 0,
        region: 0,
        site: 0,
    }
}

fn capacity(m: &P2pMatcher) -> usize {
    m.channels
        .values()
        .map(|c| c.sends.capacity() + c.recvs.capacity())
        .sum()
}

#[test]
fn a_backlog_that_changes_sides_is_held_once() {
    let (mut m, mut out) = (P2pMatcher::default(), Vec::new());
    let n = 20_000;
    let (mut s, mut r) = (0, 0);
    // The sender runs ahead by n, then the receiver does, then the
    // sender catches up: each queue has held a backlog of n.
    let mut send = |m: &mut P2pMatcher, out: &mut Vec<Wait>| {
        s += 1;
        m.add(&op(Side::Send, s), out);
    };
    (0..n).for_each(|_| send(&mut m, &mut out));
    for _ in 0..2 * n {
        r += 1;
        m.add(&op(Side::Recv, r), &mut out);
    }
    assert_eq!(m.held, n);
    // The emptied send queue holds nothing: one backlog's worth is
    // held, not two, within a segment at each end.
    assert!(
        capacity(&m) <= n + 2 * crate::segq::SEGMENT,
        "{} operations' room for a backlog of {n}",
        capacity(&m)
    );
    (0..n).for_each(|_| send(&mut m, &mut out));
    assert_eq!((m.held, capacity(&m)), (0, 0));
    assert_eq!(m.finish().1, Unmatched::default());
}

fn arrival(rank: i32, seq: i64) -> Arrival {
    Arrival {
        comm: 1,
        seq,
        rank,
        root: -1,
        func: hark_wire::mpi::FUNCTIONS
            .iter()
            .position(|f| f.name == "MPI_Barrier")
            .unwrap() as u16,
        // Rank 0 arrives last: rank 1 waits.
        enter_ns: 10 + 5 * (rank == 0) as u64,
        leave_ns: 20,
        path: 0,
        region: 0,
        size: 2,
        site: 0,
    }
}

#[test]
fn instances_a_rank_never_reaches_are_dropped_oldest_first() {
    let (mut m, mut out) = (Instances::default(), Vec::new());
    // Rank 1 arrives at every instance, rank 0 only at the last ones.
    let n = MAX_INSTANCES as i64 + 100;
    for seq in 0..n {
        m.add(arrival(1, seq), &mut out);
    }
    assert_eq!(m.open_len(), MAX_INSTANCES);
    assert_eq!((m.unmatched.arrivals, m.unmatched.dropped), (100, 100));
    // The oldest went: the newest still complete, and completed keys
    // do not pile up in the order kept for dropping.
    for seq in n - 10..n {
        m.add(arrival(0, seq), &mut out);
    }
    assert_eq!(out.len(), 10);
    assert!(m.order.len() <= 2 * m.open_len() + 64);
    for seq in 0..50 {
        m.add(arrival(0, seq), &mut out);
    }
    // Dropped instances start again with rank 0: 10 below the bound,
    // then each pushes out the oldest.
    assert_eq!(out.len(), 10);
    assert_eq!(m.unmatched.dropped, 140);
    assert_eq!(m.open_len(), MAX_INSTANCES);
    assert_eq!(m.finish().arrivals, 140 + MAX_INSTANCES as u64);
}

#[test]
fn vectors_kept_for_reuse_are_bounded_by_the_arrivals_they_hold() {
    // A large communicator's vectors: 16 of 1,000 places fit.
    let mut spare = Spare::default();
    for _ in 0..100 {
        spare.keep(Vec::with_capacity(1000));
    }
    assert_eq!((spare.vecs.len(), spare.places), (16, 16_000));
    assert!(spare.take().capacity() >= 1000);
    assert_eq!(spare.places, 15_000);
}

#[test]
fn communicators_sharing_an_id_past_the_cap_keep_their_instances_apart() {
    // Two communicators of the same members past the cap share id 1
    // (`unify.rs`), and each numbers its collectives from 0. Rank 0
    // runs through both before rank 1 arrives at the first: with the
    // occurrence in the sequence number, no instance takes arrivals of
    // both, and every one completes.
    use crate::unpack::instance_seq;
    let (mut m, mut out) = (Instances::strided(4), Vec::new());
    for rank in [0, 1] {
        for occurrence in [1000, 1001] {
            for seq in 0..40 {
                let mut a = arrival(rank, instance_seq(occurrence, seq));
                a.enter_ns = if rank == 0 { 10 } else { 20 };
                a.leave_ns = 30;
                m.add(a, &mut out);
            }
        }
    }
    assert_eq!(m.unmatched.arrivals, 0);
    assert_eq!(m.open_len(), 0);
    // One wait per instance: rank 0 waits 10 ns for rank 1.
    assert_eq!(out.len(), 80);
    assert!(out.iter().all(|w| w.waiter == 0 && w.time_ns == 10));
    // Without the occurrence, rank 0's second pass meets its first:
    // refused as its second arrival there, and rank 1's second pass
    // opens instances that never complete.
    let (mut m, mut out) = (Instances::strided(4), Vec::new());
    for rank in [0, 1] {
        for _ in [1000, 1001] {
            for seq in 0..40 {
                m.add(arrival(rank, seq), &mut out);
            }
        }
    }
    assert_eq!((m.unmatched.arrivals, m.open_len()), (40, 40));
}

#[test]
fn messages_on_communicators_sharing_an_id_past_the_cap_pair_within_each() {
    // Rank 1 sends on two communicators of the same members that share
    // id 5 past the cap (occurrences 64 and 65), first on 64, then on
    // 65; rank 0 receives the second first, blocking from 150 ns until
    // it is sent at 200 ns, then the first. MPI matches within a
    // communicator: the second receive waited 50 ns (Late Sender, in
    // the wrong order as an earlier message was there), the first none.
    let at = |side, seq, occ, post_ns, block: Option<(u64, u64)>| P2pOp {
        comm: 5,
        occ,
        post_ns,
        block: block.into(),
        ..op(side, seq)
    };
    let ops = [
        at(Side::Send, 1, 64, 100, None),
        at(Side::Send, 2, 65, 200, None),
        at(Side::Recv, 1, 65, 150, Some((150, 250))),
        at(Side::Recv, 2, 64, 300, Some((300, 310))),
    ];
    let (mut m, mut out) = (P2pMatcher::default(), Vec::new());
    ops.iter().for_each(|o| m.add(o, &mut out));
    let waits: Vec<(Pattern, u64)> = out.iter().map(|w| (w.pattern, w.time_ns)).collect();
    assert_eq!(waits, [(Pattern::LateSenderWrongOrder, 50)]);
    assert_eq!(m.finish(), (Vec::new(), Unmatched::default()));
    // In one channel for all tags, the first send would pair with the
    // first receive and no wait be found.
    let (mut m, mut out) = (P2pMatcher::default(), Vec::new());
    ops.iter()
        .for_each(|o| m.add(&P2pOp { occ: 0, ..*o }, &mut out));
    assert!(out.is_empty());
}

#[test]
fn a_stuck_instance_holds_the_rings_within_their_room() {
    // Rank 0 never arrives at the first instance: its ring's slots stay
    // from there on, up to the room rings have; later instances go to
    // the map, and complete there.
    let (mut m, mut out) = (Instances::default(), Vec::new());
    let n = 3 * RING_PLACES as i64;
    for seq in 0..n {
        m.add(arrival(1, seq), &mut out);
        if seq > 0 {
            m.add(arrival(0, seq), &mut out);
        }
        let places: usize = m.rings.iter().map(|r| r.places.len()).sum();
        assert!(places <= RING_PLACES, "{places} places at {seq}");
    }
    assert_eq!(out.len(), n as usize - 1);
    assert_eq!(m.open_len(), 1);
    assert_eq!(m.finish().arrivals, 1);
}

#[test]
fn an_instance_whose_members_disagree_on_its_size_is_judged_as_each_says() {
    // Rank 0 says 3 members, rank 1 says 2: the instance completes
    // with rank 1, as it would were every instance kept in the map.
    let (mut m, mut out) = (Instances::default(), Vec::new());
    let three = Arrival {
        size: 3,
        ..arrival(0, 0)
    };
    m.add(three, &mut out);
    assert!(out.is_empty());
    m.add(arrival(1, 0), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(m.open_len(), 0);
    assert_eq!(m.finish(), Unmatched::default());
}

/// Arrivals of several communicators (sizes 1 to 5) whose ranks each
/// go through their instances in order but drift apart at random;
/// with `twice`, a rank arrives twice at an instance now and then.
fn drifting(seed: u64, twice: bool) -> Vec<Arrival> {
    let mut x = seed | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let comms: Vec<(u32, u32, i32)> = (0..3).map(|c| (c + 7, 1 + next(5) as u32, 200)).collect();
    // Per (communicator, rank): the next sequence number.
    let mut at: Vec<Vec<i32>> = comms.iter().map(|c| vec![0; c.1 as usize]).collect();
    let mut out = Vec::new();
    loop {
        let live: Vec<(usize, usize)> = (0..comms.len())
            .flat_map(|c| (0..at[c].len()).map(move |r| (c, r)))
            .filter(|&(c, r)| at[c][r] < comms[c].2)
            .collect();
        if live.is_empty() {
            return out;
        }
        let (c, r) = live[next(live.len() as u64) as usize];
        let seq = at[c][r];
        let (comm, size, _) = comms[c];
        let mut a = arrival(r as i32, seq as i64);
        (a.comm, a.size) = (comm, size);
        a.enter_ns = next(1000);
        a.leave_ns = 1000;
        out.push(a);
        if !twice || next(50) != 0 {
            at[c][r] += 1;
        }
    }
}

/// The instances of `arrivals` judged one by one, as they complete.
fn judged_directly(arrivals: &[Arrival]) -> (Vec<Wait>, u64) {
    let mut open: BTreeMap<(u32, i64), Vec<Arrival>> = BTreeMap::new();
    let (mut out, mut twice) = (Vec::new(), 0);
    for a in arrivals {
        let v = open.entry((a.comm, a.seq)).or_default();
        if v.iter().any(|x| x.rank == a.rank) {
            twice += 1;
            continue;
        }
        v.push(*a);
        if v.len() >= a.size as usize {
            let mut v = open.remove(&(a.comm, a.seq)).unwrap();
            judge_instance(&mut v, &mut out);
        }
    }
    (
        out,
        twice + open.values().map(|v| v.len() as u64).sum::<u64>(),
    )
}

#[test]
fn instances_are_judged_as_they_complete_however_ranks_drift() {
    for seed in 1..40 {
        let arrivals = drifting(seed, true);
        let (want, left) = judged_directly(&arrivals);
        // Rings of consecutive sequence numbers, and rings told they
        // are 4 apart (most arrivals then share a slot with another
        // instance and go to the map): the same results.
        for shift in [0, 2] {
            let (mut m, mut out) = (Instances::strided(shift), Vec::new());
            arrivals.iter().for_each(|a| m.add(*a, &mut out));
            assert!(out == want, "seed {seed}, shift {shift}");
            assert_eq!(m.finish().arrivals, left, "seed {seed}, shift {shift}");
        }
        // Split at random between two states, one of them sent as a
        // partial is: the merge completes the same instances. (Which
        // of a rank's two arrivals counts depends on the split.)
        let arrivals = drifting(seed, false);
        let (want, _) = judged_directly(&arrivals);
        let (mut one, mut two, mut got) = (Instances::default(), Instances::default(), Vec::new());
        for (k, a) in arrivals.iter().enumerate() {
            let m = if (k as u64 * seed).is_multiple_of(3) {
                &mut one
            } else {
                &mut two
            };
            m.add(*a, &mut got);
        }
        let two: Instances = postcard::from_bytes(&postcard::to_allocvec(&two).unwrap()).unwrap();
        got.extend(one.merge(two));
        let key = |w: &Wait| (w.waiter, w.enter_ns, w.time_ns, w.late);
        got.sort_by_key(key);
        let mut want = want;
        want.sort_by_key(key);
        assert!(got == want, "seed {seed}");
    }
}

/// A matcher's state, its maps in key order.
fn canon(m: &P2pMatcher) -> String {
    let mut channels: Vec<_> = (m.channels.iter())
        .map(|(k, c)| {
            let q = |q: &SegQueue<Held>| q.iter().copied().collect::<Vec<_>>();
            (*k, q(&c.sends), q(&c.recvs), c.alone)
        })
        .collect();
    channels.sort_by_key(|c| c.0);
    let mut by_src: Vec<_> = m.by_src.iter().collect();
    by_src.sort();
    format!(
        "{channels:?} {by_src:?} {} {:?} {:?} {} {:?} {:?}",
        m.held, m.matched, m.calls, m.last_recv, m.unmatched, m.rank
    )
}

/// `add_all` over parts of any length gives what `add` one by one
/// gives: the same waits in the same order, the same state.
#[test]
fn adding_a_part_at_once_is_adding_its_operations_in_turn() {
    for seed in 1..=40u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // Parts as streams publish them: runs of one sender's sends
        // (sender 3 on two tags, so its channels are not alone) or of
        // this rank's receives, some completed by one call.
        let (mut sends, mut recvs) = ([0u64; 4], 0u64);
        let mut parts: Vec<Vec<P2pOp>> = Vec::new();
        for _ in 0..60 {
            let src = 1 + next(3) as i32;
            let len = 1 + next(40);
            let recv = next(2) == 0;
            let mut part = Vec::new();
            for _ in 0..len {
                let tag = if src == 3 { next(2) as i32 } else { 0 };
                let t = 1000 * (sends[src as usize] + recvs) + next(900);
                let mut o = op(if recv { Side::Recv } else { Side::Send }, 0);
                (o.src, o.tag, o.post_ns) = (src, tag, t);
                if recv {
                    recvs += 1;
                    o.seq = recvs;
                    o.block = Some((t, t + next(3000))).into();
                    o.call = (recvs / 3) as u32;
                    o.in_call = 1 + (next(4) == 0) as u32;
                } else {
                    sends[src as usize] += 1;
                    o.seq = sends[src as usize];
                    o.block = (next(2) == 0).then_some((t, t + next(2000))).into();
                }
                part.push(o);
            }
            parts.push(part);
        }
        let (mut one, mut one_out) = (P2pMatcher::default(), Vec::new());
        let (mut all, mut all_out) = (P2pMatcher::default(), Vec::new());
        for part in &parts {
            for o in part {
                one.add(o, &mut one_out);
            }
            all.add_all(part, &mut all_out);
        }
        assert_eq!(one_out, all_out, "seed {seed}");
        assert!(!one_out.is_empty(), "seed {seed}: nothing waited");
        assert_eq!(canon(&one), canon(&all), "seed {seed}");
    }
}
