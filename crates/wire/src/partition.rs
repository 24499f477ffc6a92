//! Partitions of an MPMD job and the map from writer ranks to analyser
//! ranks.
//!
//! In Besnard et al., *Event Streaming for Online Performance Measurements
//! Reduction* (sections II and III-A), the instrumented programs and the
//! analyser run as one MPMD job: each program is a partition, named by its
//! MPMD context (`MPI_APPNUM`), and each writer (a rank of a program)
//! streams to one reader (a rank of the analyser partition). This module is
//! the pure part of that: how many analyser ranks a job gets
//! ([`Analysers`], `--analysers 3` or the ratio form `--analysers 1:10`),
//! and which analyser each writer streams to ([`Map`], by one of three
//! [`Policy`]s). Writers and analysers are identified by their rank in the
//! job's real `MPI_COMM_WORLD` (the universe, `docs/mpi.md`).
//!
//! The map is **additive across programs**: it is built one program at a
//! time ([`Map::add_program`]), each continuing where the previous one left
//! off, so adding a program never moves a writer of the programs before it,
//! and the load of the whole job stays balanced (with round-robin and
//! blocks, the number of writers of any two analysers differs by at most
//! one).
//!
//! ```
//! use hark_wire::partition::{Analysers, Map, Policy, Rank};
//!
//! let n = Analysers::parse("1:2").unwrap().count(6);
//! assert_eq!(n, 3);
//! let analysers: Vec<Rank> = (6..9).map(|r| Rank { rank: r, node: 0 }).collect();
//! let mut map = Map::new(&analysers, Policy::Blocks).unwrap();
//! let app: Vec<Rank> = (0..4).map(|r| Rank { rank: r, node: 0 }).collect();
//! let other: Vec<Rank> = (4..6).map(|r| Rank { rank: r, node: 0 }).collect();
//! map.add_program(&app);
//! map.add_program(&other);
//! assert_eq!(map.analyser_of(0), Some(6));
//! assert_eq!(map.writers_of(6), [0, 1]);
//! ```

use crate::{Error, ErrorKind};

/// How many analyser ranks a job gets: `--analysers N` or `--analysers R:W`
/// (R readers per W writers; *Event Streaming for Online Performance
/// Measurements Reduction* found `1:10` a good trade-off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Analysers {
    /// A fixed number of analyser ranks (at least 1).
    Count(u32),
    /// `readers` analyser ranks per `writers` writer ranks, rounded up.
    Ratio {
        /// Analyser ranks per group.
        readers: u32,
        /// Writer ranks per group.
        writers: u32,
    },
}

impl Analysers {
    /// Reads `N` (a positive count) or `R:W` (two positive counts).
    pub fn parse(text: &str) -> Result<Analysers, Error> {
        let bad = || {
            Error::from(ErrorKind::Invalid(format!(
                "--analysers {text:?} is not valid: give a number of analyser ranks (`--analysers 3`) or readers per writers (`--analysers 1:10`), all positive"
            )))
        };
        let positive = |s: &str| s.trim().parse::<u32>().ok().filter(|&n| n > 0);
        match text.split_once(':') {
            None => positive(text).map(Analysers::Count).ok_or_else(bad),
            Some((r, w)) => match (positive(r), positive(w)) {
                (Some(readers), Some(writers)) => Ok(Analysers::Ratio { readers, writers }),
                _ => Err(bad()),
            },
        }
    }

    /// Analyser ranks for a job of `writers` writer ranks: the count, or the
    /// ratio rounded up; at least 1.
    pub fn count(&self, writers: usize) -> usize {
        match *self {
            Analysers::Count(n) => n as usize,
            Analysers::Ratio {
                readers,
                writers: per,
            } => {
                let groups = writers.div_ceil(per as usize);
                (groups * readers as usize).max(1)
            }
        }
    }
}

/// How writers are spread over analysers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Writer after writer, each to the next analyser in turn.
    RoundRobin,
    /// Each analyser takes a contiguous range of each program's ranks.
    Blocks,
    /// A writer streams to an analyser on its own node when there is one
    /// (round-robin among that node's analysers), otherwise round-robin
    /// over all of them.
    SameNodeFirst,
}

impl Policy {
    /// The name [`Policy::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::Blocks => "blocks",
            Policy::SameNodeFirst => "same-node",
        }
    }

    /// Reads `round-robin`, `blocks` or `same-node`.
    pub fn parse(text: &str) -> Result<Policy, Error> {
        match text.trim() {
            "round-robin" => Ok(Policy::RoundRobin),
            "blocks" => Ok(Policy::Blocks),
            "same-node" => Ok(Policy::SameNodeFirst),
            _ => Err(ErrorKind::Invalid(format!(
                "map policy {text:?} is not known: use `round-robin`, `blocks` or `same-node`"
            ))
            .into()),
        }
    }
}

/// A process of the job: its rank in the real world and the node it runs
/// on (any number that is equal for processes of the same node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    /// Rank in the job's real `MPI_COMM_WORLD`.
    pub rank: u32,
    /// Its node.
    pub node: u32,
}

/// Which analyser each writer streams to, built one program at a time.
#[derive(Clone, Debug)]
pub struct Map {
    policy: Policy,
    analysers: Vec<Rank>,
    /// `(writer, index into analysers)`, in the order writers were added.
    pairs: Vec<(u32, usize)>,
    /// The next analyser in turn (round-robin, blocks, off-node writers).
    cursor: usize,
    /// Per node with analysers: its analysers' indices and their turn.
    nodes: Vec<(u32, Vec<usize>, usize)>,
}

impl Map {
    /// An empty map onto `analysers` (in rank order as given). Fails
    /// without analysers.
    pub fn new(analysers: &[Rank], policy: Policy) -> Result<Map, Error> {
        if analysers.is_empty() {
            return Err(ErrorKind::Invalid(
                "a writer-to-analyser map needs at least one analyser rank".into(),
            )
            .into());
        }
        let mut nodes: Vec<(u32, Vec<usize>, usize)> = Vec::new();
        for (i, a) in analysers.iter().enumerate() {
            match nodes.iter_mut().find(|(n, _, _)| *n == a.node) {
                Some((_, v, _)) => v.push(i),
                None => nodes.push((a.node, vec![i], 0)),
            }
        }
        Ok(Map {
            policy,
            analysers: analysers.to_vec(),
            pairs: Vec::new(),
            cursor: 0,
            nodes,
        })
    }

    /// Maps the writers of one more program (its ranks in rank order),
    /// continuing where the programs before it left off. Writers already
    /// mapped keep their analyser.
    pub fn add_program(&mut self, writers: &[Rank]) {
        let a = self.analysers.len();
        match self.policy {
            Policy::RoundRobin => {
                for w in writers {
                    self.pairs.push((w.rank, self.cursor));
                    self.cursor = (self.cursor + 1) % a;
                }
            }
            Policy::Blocks => {
                // A analysers in turn from the cursor; the first `extra` of
                // them take one writer more, and the next program starts
                // after them, so loads stay within one of each other.
                let (base, extra) = (writers.len() / a, writers.len() % a);
                let mut next = writers.iter();
                for k in 0..a {
                    let take = base + usize::from(k < extra);
                    let to = (self.cursor + k) % a;
                    for w in next.by_ref().take(take) {
                        self.pairs.push((w.rank, to));
                    }
                }
                self.cursor = (self.cursor + extra) % a;
            }
            Policy::SameNodeFirst => {
                for w in writers {
                    let to = match self.nodes.iter_mut().find(|(n, _, _)| *n == w.node) {
                        Some((_, local, turn)) => {
                            let to = local[*turn];
                            *turn = (*turn + 1) % local.len();
                            to
                        }
                        None => {
                            let to = self.cursor;
                            self.cursor = (self.cursor + 1) % a;
                            to
                        }
                    };
                    self.pairs.push((w.rank, to));
                }
            }
        }
    }

    /// The analyser rank `writer` streams to, if it was added.
    pub fn analyser_of(&self, writer: u32) -> Option<u32> {
        self.pairs
            .iter()
            .find(|(w, _)| *w == writer)
            .map(|&(_, i)| self.analysers[i].rank)
    }

    /// The writers of analyser rank `analyser`, in the order they were
    /// added.
    pub fn writers_of(&self, analyser: u32) -> Vec<u32> {
        self.pairs
            .iter()
            .filter(|&&(_, i)| self.analysers[i].rank == analyser)
            .map(|&(w, _)| w)
            .collect()
    }

    /// Every `(writer, analyser)` pair, in the order writers were added.
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.pairs.iter().map(|&(w, i)| (w, self.analysers[i].rank))
    }
}

/// Receives an analyser rank pre-posts per writer (N_A in Besnard et al.),
/// and so the most chunks a writer has unmatched at a time.
pub const STREAM_RECVS: usize = 4;

/// Rounds of each clock ping-pong series at `MPI_Init` and `MPI_Finalize`
/// ([`clock_plan`]), and its tag on the clock's private communicator.
pub const CLOCK_ROUNDS: usize = 10;
/// See [`CLOCK_ROUNDS`].
pub const CLOCK_TAG: i32 = 1;

/// The tag of stream chunks on Hark's private stream communicator.
pub const STREAM_TAG: i32 = 7;

/// The tag of a writer's notice that it gave up its stream at
/// `MPI_Finalize` (its analyser took no chunk for the drain timeout): 8
/// bytes, the number of chunks it had started sending (`u64`,
/// little-endian). Its analyser pre-posts one receive per writer, and
/// once that many chunks arrived it ends the stream as cut instead of
/// waiting for an end that will not come (`docs/analysers.md`, "Flow
/// control").
pub const GIVE_UP_TAG: i32 = STREAM_TAG + 3;

/// The tag of an analyser's release of its writers at the end of the run
/// (1 byte, on the stream communicator): a writer whose stream went out
/// whole waits in `MPI_Finalize` for it (bounded by
/// `HARK_RELEASE_TIMEOUT_MS`), sent once the analysers merged and the
/// model reached `hark run`, so that writers and analysers call the real
/// `MPI_Finalize` together (`docs/analysers.md`, "Finalizing together").
pub const RELEASE_TAG: i32 = STREAM_TAG + 24;

/// The largest chunk of a stream over MPI for packs of `pack_size` bytes:
/// one full pack with its frame header (larger frames are cut).
pub fn stream_chunk(pack_size: usize) -> usize {
    pack_size + crate::HEADER_SIZE + crate::PACK_HEADER_SIZE
}

/// What every process of the job tells the others at `MPI_Init` (one
/// `MPI_Allgather` on the stream communicator, `docs/analysers.md` step 2):
/// its node and its program (`MPI_APPNUM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The node it runs on ([`node_id`]).
    pub node: u32,
    /// Its MPMD context, `MPI_APPNUM` (0 when unset).
    pub program: u32,
}

impl Place {
    /// The 8 bytes a process contributes to the gather.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&self.node.to_le_bytes());
        b[4..].copy_from_slice(&self.program.to_le_bytes());
        b
    }

    /// The places of every process, from the gathered bytes (8 per rank,
    /// in world-rank order); `None` if the length is not a multiple of 8.
    pub fn all_from_bytes(bytes: &[u8]) -> Option<Vec<Place>> {
        if !bytes.len().is_multiple_of(8) {
            return None;
        }
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| Place {
                    node: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    program: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                })
                .collect(),
        )
    }
}

/// A node's number: FNV-1a of its host name, so processes of the same host
/// agree without talking.
pub fn node_id(host: &[u8]) -> u32 {
    host.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The test-only node override, `HARK_TEST_NODES=a,b,c,...`: world rank `r`
/// claims node number `r`-th entry (the last entry for ranks past the
/// list). It lets the tests of a one-node machine exercise same-node-first
/// as if ranks ran on several nodes; nothing else sets it. `None` when the
/// value is absent or not a list of numbers.
pub fn test_node(value: Option<&str>, rank: u32) -> Option<u32> {
    let nodes: Vec<u32> = value?
        .split(',')
        .map(|n| n.trim().parse().ok())
        .collect::<Option<_>>()?;
    nodes.get(rank as usize).or(nodes.last()).copied()
}

/// The map of a job launched by `hark run --analysers n`, from every
/// process's [`Place`] in world-rank order: the analysers are the last `n`
/// ranks (their context is added after the programs'), every rank before
/// them is a writer. Programs are the runs of equal `MPI_APPNUM` in rank
/// order, added one after the other (the map is additive across them).
/// Writer and analyser compute it alike from the same gathered places.
/// `None` unless there is at least one rank of each.
pub fn job_map(places: &[Place], n: u32, policy: Policy) -> Option<Map> {
    let size = u32::try_from(places.len()).ok()?;
    if n == 0 || n >= size {
        return None;
    }
    let writers = size - n;
    let rank = |r: u32| Rank {
        rank: r,
        node: places[r as usize].node,
    };
    let analysers: Vec<Rank> = (writers..size).map(rank).collect();
    let mut map = Map::new(&analysers, policy).ok()?;
    let mut start = 0;
    while start < writers {
        let program = places[start as usize].program;
        let mut end = start + 1;
        while end < writers && places[end as usize].program == program {
            end += 1;
        }
        map.add_program(&(start..end).map(rank).collect::<Vec<_>>());
        start = end;
    }
    Some(map)
}

/// One process's part in the clock alignment over MPI (`hark run
/// --analysers`): whom it pings, if anyone, and whom it answers, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClockPlan {
    /// The rank this one pings ([`CLOCK_ROUNDS`] rounds) before it answers
    /// anyone: world rank 0 for a node's leader, the leader for the other
    /// writers of its node; `None` for world rank 0 and the analysers.
    pub upstream: Option<u32>,
    /// The ranks whose pings this one answers, each series in turn, in
    /// rank order, with its own clock mapped onto world rank 0's.
    pub serve: Vec<u32>,
    /// Whether this is world rank 0, whose clock is the reference.
    pub reference: bool,
}

/// Who aligns with whom: one ping-pong series per node over the network,
/// the others within their node. Ranks of a node read one clock (or its
/// TSC, calibrated per process), so a node's leader (its lowest writer
/// rank) pings world rank 0 and answers its node's other writers with rank
/// 0's time as its measurement maps it; each of those then holds the
/// leader's bound plus its own half round trip on the node. World rank 0
/// answers the other nodes' leaders and the writers of its own node. The
/// analysers (the last `n` ranks) take no part: nothing of theirs is
/// measured. `places` are every process's, in world-rank order, as every
/// process gathered them; all compute the same plans.
pub fn clock_plan(places: &[Place], n: u32, rank: u32) -> ClockPlan {
    let size = u32::try_from(places.len()).unwrap_or(u32::MAX);
    let writers = size.saturating_sub(n);
    if rank >= writers {
        return ClockPlan::default();
    }
    let node = |r: u32| places[r as usize].node;
    // The leader of a node: world rank 0 on its own, else the lowest writer.
    let leader = |r: u32| {
        if node(r) == node(0) {
            0
        } else {
            (0..writers).find(|&w| node(w) == node(r)).unwrap_or(r)
        }
    };
    let lead = leader(rank);
    let upstream = if rank == 0 {
        None
    } else if lead == rank {
        Some(0)
    } else {
        Some(lead)
    };
    let serve = if lead == rank {
        (1..writers)
            .filter(|&w| w != rank && (leader(w) == rank || (rank == 0 && leader(w) == w)))
            .collect()
    } else {
        Vec::new()
    };
    ClockPlan {
        upstream,
        serve,
        reference: rank == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_pings_cross_the_network_once_per_node() {
        // Nodes 5, 6, 5, 7, 6, 6 for writers 0..6, then two analysers.
        let p = places(&[5, 6, 5, 7, 6, 6, 6, 7], &[0; 8]);
        let plan = |r| clock_plan(&p, 2, r);
        assert_eq!(plan(0).upstream, None);
        assert!(plan(0).reference && !plan(1).reference);
        assert_eq!(plan(0).serve, [1, 2, 3]);
        assert_eq!(plan(1).upstream, Some(0));
        assert_eq!(plan(1).serve, [4, 5]);
        assert_eq!(plan(2).upstream, Some(0));
        assert!(plan(2).serve.is_empty());
        assert_eq!(plan(3).upstream, Some(0));
        assert!(plan(3).serve.is_empty());
        assert_eq!(plan(4).upstream, Some(1));
        assert_eq!(plan(5).upstream, Some(1));
        assert_eq!(plan(6), ClockPlan::default());
        assert_eq!(plan(7), ClockPlan::default());
        // Every ping has its answerer, and nobody else answers it.
        for r in 0..8 {
            if let Some(u) = plan(r).upstream {
                assert!(plan(u).serve.contains(&r), "rank {r}");
            }
            for s in plan(r).serve {
                assert_eq!(plan(s).upstream, Some(r), "rank {s}");
            }
        }
        // Only the leaders' series (three nodes: two) leave a node.
        let crossing = (0..8)
            .filter_map(|r| plan(r).upstream.map(|u| (r, u)))
            .filter(|&(r, u)| p[r as usize].node != p[u as usize].node)
            .count();
        assert_eq!(crossing, 2);
    }

    fn ranks(range: std::ops::Range<u32>, node: impl Fn(u32) -> u32) -> Vec<Rank> {
        range
            .map(|rank| Rank {
                rank,
                node: node(rank),
            })
            .collect()
    }

    fn loads(m: &Map, analysers: &[Rank]) -> Vec<usize> {
        analysers
            .iter()
            .map(|a| m.writers_of(a.rank).len())
            .collect()
    }

    #[test]
    fn counts_and_ratios_are_read_and_bad_ones_named() {
        assert_eq!(Analysers::parse("3").unwrap(), Analysers::Count(3));
        assert_eq!(
            Analysers::parse("1:10").unwrap(),
            Analysers::Ratio {
                readers: 1,
                writers: 10
            }
        );
        for bad in ["0", "", "x", "1:0", ":10", "-2", "1:2:3", "2.5"] {
            let e = Analysers::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("1:10"),
                "{bad}: {e}"
            );
        }
        assert!(Policy::parse("sideways")
            .unwrap_err()
            .to_string()
            .contains("same-node"));
        assert_eq!(Policy::parse("same-node").unwrap(), Policy::SameNodeFirst);
    }

    #[test]
    fn a_ratio_rounds_up_and_never_gives_zero() {
        let r = Analysers::parse("1:10").unwrap();
        assert_eq!(
            [r.count(1), r.count(10), r.count(11), r.count(4096)],
            [1, 1, 2, 410]
        );
        assert_eq!(r.count(0), 1);
        assert_eq!(Analysers::parse("2:3").unwrap().count(7), 6);
        assert_eq!(Analysers::Count(4).count(1000), 4);
    }

    #[test]
    fn round_robin_takes_turns_across_programs() {
        let an = ranks(10..13, |_| 0);
        let mut m = Map::new(&an, Policy::RoundRobin).unwrap();
        m.add_program(&ranks(0..4, |_| 0));
        m.add_program(&ranks(4..6, |_| 0));
        let got: Vec<_> = m.pairs().collect();
        assert_eq!(got, [(0, 10), (1, 11), (2, 12), (3, 10), (4, 11), (5, 12)]);
    }

    #[test]
    fn blocks_are_contiguous_per_program_and_balanced_over_the_job() {
        let an = ranks(100..103, |_| 0);
        let mut m = Map::new(&an, Policy::Blocks).unwrap();
        m.add_program(&ranks(0..7, |_| 0));
        // 7 over 3: 3, 2, 2 — the next program starts after the analyser
        // that took the extra one.
        assert_eq!(m.writers_of(100), [0, 1, 2]);
        assert_eq!(m.writers_of(101), [3, 4]);
        assert_eq!(m.writers_of(102), [5, 6]);
        m.add_program(&ranks(7..9, |_| 0));
        assert_eq!(m.writers_of(101), [3, 4, 7]);
        assert_eq!(m.writers_of(102), [5, 6, 8]);
        assert_eq!(loads(&m, &an), [3, 3, 3]);
    }

    #[test]
    fn adding_a_program_never_moves_the_writers_before_it() {
        for policy in [Policy::RoundRobin, Policy::Blocks, Policy::SameNodeFirst] {
            let an = ranks(50..54, |r| r % 2);
            let mut m = Map::new(&an, policy).unwrap();
            let mut before: Vec<(u32, u32)> = Vec::new();
            let mut start = 0;
            for size in [5, 1, 8, 3, 4] {
                m.add_program(&ranks(start..start + size, |r| r % 3));
                start += size;
                let now: Vec<_> = m.pairs().collect();
                assert_eq!(now[..before.len()], before[..], "{policy:?}");
                before = now;
            }
            // Every writer has exactly one analyser.
            assert_eq!(before.len(), start as usize);
            for w in 0..start {
                assert!(m.analyser_of(w).is_some(), "{policy:?}: {w}");
            }
        }
    }

    #[test]
    fn round_robin_and_blocks_stay_within_one_writer_of_each_other() {
        for policy in [Policy::RoundRobin, Policy::Blocks] {
            for a in 1..6u32 {
                let an = ranks(1000..1000 + a, |_| 0);
                let mut m = Map::new(&an, policy).unwrap();
                let mut start = 0;
                for size in [1, 7, 2, 9, 4, 0, 3] {
                    m.add_program(&ranks(start..start + size, |_| 0));
                    start += size;
                    let l = loads(&m, &an);
                    let (lo, hi) = (l.iter().min().unwrap(), l.iter().max().unwrap());
                    assert!(hi - lo <= 1, "{policy:?} over {a}: {l:?}");
                }
            }
        }
    }

    #[test]
    fn same_node_first_keeps_writers_on_their_node_when_it_can() {
        // Analysers on nodes 0 and 1; writers on nodes 0, 1 and 2.
        let an = vec![
            Rank { rank: 20, node: 0 },
            Rank { rank: 21, node: 1 },
            Rank { rank: 22, node: 0 },
        ];
        let mut m = Map::new(&an, Policy::SameNodeFirst).unwrap();
        let writers = ranks(0..9, |r| r % 3);
        m.add_program(&writers[..5]);
        m.add_program(&writers[5..]);
        for w in &writers {
            let to = m.analyser_of(w.rank).unwrap();
            let node = an.iter().find(|a| a.rank == to).unwrap().node;
            if w.node < 2 {
                assert_eq!(node, w.node, "writer {} went off its node", w.rank);
            }
        }
        // Node 0's writers (0, 3, 6) alternate between its two analysers;
        // node 2's (2, 5, 8) take turns over all three.
        assert_eq!([0, 3, 6].map(|w| m.analyser_of(w).unwrap()), [20, 22, 20]);
        assert_eq!([2, 5, 8].map(|w| m.analyser_of(w).unwrap()), [20, 21, 22]);
    }

    #[test]
    fn a_map_needs_an_analyser() {
        let e = Map::new(&[], Policy::Blocks).unwrap_err().to_string();
        assert!(e.contains("at least one analyser"), "{e}");
    }

    #[test]
    fn the_job_map_of_one_program_spreads_the_writers_over_the_last_ranks() {
        let map = job_map(&places(&[0; 7], &[0; 7]), 3, Policy::RoundRobin).unwrap();
        assert_eq!(map.writers_of(4), [0, 3]);
        assert_eq!(map.writers_of(5), [1]);
        assert_eq!(map.writers_of(6), [2]);
        assert_eq!(map.analyser_of(3), Some(4));
        assert_eq!(map.analyser_of(4), None);
        assert!(job_map(&places(&[0; 3], &[0; 3]), 3, Policy::Blocks).is_none());
        assert!(job_map(&places(&[0; 3], &[0; 3]), 0, Policy::Blocks).is_none());
    }

    fn places(nodes: &[u32], programs: &[u32]) -> Vec<Place> {
        nodes
            .iter()
            .zip(programs)
            .map(|(&node, &program)| Place { node, program })
            .collect()
    }

    #[test]
    fn the_job_map_adds_each_program_after_the_one_before() {
        // Two programs (3 and 2 ranks) and 2 analysers, all on one node.
        let p = places(&[0; 7], &[0, 0, 0, 1, 1, 2, 2]);
        let blocks = job_map(&p, 2, Policy::Blocks).unwrap();
        // 3 over 2: 2, 1; the next program starts after analyser 5.
        assert_eq!(blocks.writers_of(5), [0, 1, 4]);
        assert_eq!(blocks.writers_of(6), [2, 3]);
        let rr = job_map(&p, 2, Policy::RoundRobin).unwrap();
        assert_eq!(rr.writers_of(5), [0, 2, 4]);
        // One node: same-node-first is round-robin over that node's analysers.
        let same = job_map(&p, 2, Policy::SameNodeFirst).unwrap();
        assert_eq!(
            same.pairs().collect::<Vec<_>>(),
            rr.pairs().collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_job_map_keeps_writers_on_their_node() {
        // Writers 0..4 on nodes 7, 7, 9, 9; analysers 4 on node 9, 5 on node 7.
        let p = places(&[7, 7, 9, 9, 9, 7], &[0, 0, 0, 0, 1, 1]);
        let m = job_map(&p, 2, Policy::SameNodeFirst).unwrap();
        assert_eq!(m.writers_of(4), [2, 3]);
        assert_eq!(m.writers_of(5), [0, 1]);
        let rr = job_map(&p, 2, Policy::RoundRobin).unwrap();
        assert_eq!(rr.writers_of(4), [0, 2]);
    }

    #[test]
    fn places_survive_the_gather_and_the_override_reads_a_list() {
        let p = places(&[node_id(b"alpha"), 3], &[0, 1]);
        let bytes: Vec<u8> = p.iter().flat_map(|x| x.to_bytes()).collect();
        assert_eq!(Place::all_from_bytes(&bytes).unwrap(), p);
        assert!(Place::all_from_bytes(&bytes[..5]).is_none());
        assert_ne!(node_id(b"alpha"), node_id(b"beta"));
        assert_eq!(test_node(Some("0,0,1"), 1), Some(0));
        assert_eq!(test_node(Some("0,0,1"), 2), Some(1));
        assert_eq!(test_node(Some("0,0,1"), 9), Some(1));
        assert_eq!(test_node(Some("0,x"), 0), None);
        assert_eq!(test_node(None, 0), None);
    }
}
