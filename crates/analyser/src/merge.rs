//! How the analyser ranks merge their partial results over MPI, at the end
//! of the run and for every live snapshot (`docs/analysers.md`, "Merging").
//!
//! Two shapes, chosen by `HARK_ANALYSER_MERGE`:
//!
//! - `tree` (the default): a binomial reduction tree over the analyser
//!   indexes. Each analyser merges its children's partials into its own,
//!   in index order, then sends the result to its parent; analyser 0 holds
//!   the run. Merges of disjoint subtrees run at the same time, and the
//!   root merges `log2 n` messages.
//! - `gather`: every analyser sends its partials to analyser 0, which
//!   merges them one by one.
//!
//! Both merge in analyser order (a binomial subtree is a contiguous range
//! of indexes), and `Partial::merge` is associative, so both give the same
//! run.

use super::{recv_message, send_message, Peers};
use crate::error::{bail, Context, ErrorKind, Result};
use hark_engine::Partial;

/// The environment variable that chooses the merge's shape.
pub const MERGE_VAR: &str = hark_settings::ANALYSER_MERGE.name;

/// The merge's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A binomial reduction tree.
    Tree,
    /// Every analyser to analyser 0.
    Gather,
}

impl Mode {
    /// The shape `HARK_ANALYSER_MERGE` names (`tree`, the default, or
    /// `gather`).
    pub fn from_env() -> Result<Mode> {
        match std::env::var(MERGE_VAR).as_deref().map(str::trim) {
            Err(_) | Ok("" | "tree") => Ok(Mode::Tree),
            Ok("gather") => Ok(Mode::Gather),
            Ok(other) => bail!(
                Setting,
                "{MERGE_VAR}={other} is not a merge shape: use tree or gather"
            ),
        }
    }

    /// Its name, as `HARK_ANALYSER_MERGE` and `--merge` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tree => "tree",
            Mode::Gather => "gather",
        }
    }
}

/// One analyser's place in the merge: indexes into the analyser partition
/// (0 is the first analyser, which writes the run directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) parent: Option<usize>,
    /// In the order their partials merge: ascending, so the merge follows
    /// analyser order.
    pub(crate) children: Vec<usize>,
}

/// Analyser `i`'s place among `n` in a merge of shape `mode`.
pub(crate) fn place(mode: Mode, i: usize, n: usize) -> Place {
    match mode {
        Mode::Gather if i == 0 => Place {
            parent: None,
            children: (1..n).collect(),
        },
        Mode::Gather => Place {
            parent: Some(0),
            children: Vec::new(),
        },
        Mode::Tree => {
            // Binomial: the lowest set bit of i names the parent; below it,
            // i + 1, i + 2, i + 4, ... are the children.
            let (mut parent, mut children, mut mask) = (None, Vec::new(), 1);
            while mask < n {
                if i & mask != 0 {
                    parent = Some(i - mask);
                    break;
                }
                if i + mask < n {
                    children.push(i + mask);
                }
                mask <<= 1;
            }
            Place { parent, children }
        }
    }
}

/// What one analyser (or a subtree of them) knows: each program's partial
/// result, the diagnostics, and when the last of its streams ended.
pub(crate) struct Share {
    pub(crate) programs: Vec<Partial>,
    pub(crate) problems: Vec<String>,
    /// `CLOCK_REALTIME` in ns (the analysers of one job share a node's
    /// clock, or nearly).
    pub(crate) ended_ns: u64,
}

impl Share {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let programs: Vec<Vec<u8>> = self.programs.iter().map(|p| p.to_bytes()).collect();
        let mut out = self.ended_ns.to_le_bytes().to_vec();
        out.extend(super::encode(&programs, &self.problems));
        out
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Share> {
        if bytes.len() < 8 {
            bail!(Message, "a partial result message is truncated");
        }
        let ended_ns = u64::from_le_bytes(bytes[..8].try_into()?);
        let (programs, problems) = super::keeper::decode_partials(&bytes[8..])?;
        Ok(Share {
            programs,
            problems,
            ended_ns,
        })
    }

    /// Merges `other` (which comes after this one in analyser order) into
    /// this one.
    pub(crate) fn absorb(&mut self, other: Share, analyses: Option<&[String]>) -> Result<()> {
        let mine = std::mem::take(&mut self.programs);
        self.programs = hark_server::merge_programs(vec![mine, other.programs], analyses)
            .context(ErrorKind::Merge, "cannot merge the analysers' results")?;
        self.problems.extend(other.problems);
        self.ended_ns = self.ended_ns.max(other.ended_ns);
        Ok(())
    }
}

/// The analyser partition and how it merges.
pub(crate) struct Group<'a> {
    pub(crate) peers: &'a Peers,
    pub(crate) mode: Mode,
}

impl Group<'_> {
    /// This analyser's index in the partition.
    pub(crate) fn index(&self) -> usize {
        self.peers
            .analysers
            .iter()
            .position(|&a| a == self.peers.me)
            .unwrap_or(0)
    }

    pub(crate) fn place(&self) -> Place {
        place(self.mode, self.index(), self.peers.analysers.len())
    }

    /// World rank of analyser `i`.
    pub(crate) fn world(&self, i: usize) -> i32 {
        self.peers.analysers[i]
    }
}

/// Merges every analyser's `mine` over MPI (blocking point-to-point calls
/// on `comm`, `PARTIAL_TAG`): the whole run's share at analyser 0, `None`
/// elsewhere.
pub(crate) fn reduce(
    abi: &hark_mpi::Abi,
    comm: usize,
    group: &Group<'_>,
    mine: Share,
    analyses: Option<&[String]>,
) -> Result<Option<Share>> {
    let place = group.place();
    let mut share = mine;
    for c in place.children {
        let from = group.world(c);
        let bytes = recv_message(abi, from, comm)?;
        let theirs = Share::from_bytes(&bytes).with_context(ErrorKind::Message, || {
            format!("the partial result of analyser world rank {from}")
        })?;
        share.absorb(theirs, analyses)?;
    }
    match place.parent {
        Some(p) => {
            send_message(abi, &share.to_bytes(), group.world(p), comm)?;
            Ok(None)
        }
        None => Ok(Some(share)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every analyser but the root has one parent; every child is named
    /// once, by that parent; children come after their parent in index
    /// order; an analyser's depth in the tree is the number of bits set in
    /// its index (at most log2 n + 1 levels).
    #[test]
    fn both_shapes_cover_every_analyser_once() {
        for n in 1..40 {
            for mode in [Mode::Tree, Mode::Gather] {
                let places: Vec<Place> = (0..n).map(|i| place(mode, i, n)).collect();
                assert_eq!(places[0].parent, None);
                let mut seen = vec![0; n];
                for (i, p) in places.iter().enumerate() {
                    for &c in &p.children {
                        assert!(c > i);
                        assert_eq!(places[c].parent, Some(i), "{mode:?} n={n} child {c}");
                        seen[c] += 1;
                    }
                    assert!(p.children.windows(2).all(|w| w[0] < w[1]));
                }
                assert_eq!(seen[0], 0);
                assert!(seen[1..].iter().all(|&s| s == 1), "{mode:?} n={n}");
                let depth = |mut i: usize| {
                    let mut d = 0;
                    while let Some(p) = places[i].parent {
                        i = p;
                        d += 1;
                    }
                    d
                };
                for i in 0..n {
                    match mode {
                        Mode::Tree => assert_eq!(depth(i), i.count_ones() as usize),
                        Mode::Gather => assert_eq!(depth(i), usize::from(i > 0)),
                    }
                }
            }
        }
    }

    /// A binomial subtree is a contiguous range of indexes starting at its
    /// root, so merging children in order follows analyser order.
    #[test]
    fn a_binomial_subtree_is_a_contiguous_range() {
        let n = 13;
        let places: Vec<Place> = (0..n).map(|i| place(Mode::Tree, i, n)).collect();
        fn members(places: &[Place], i: usize, out: &mut Vec<usize>) {
            out.push(i);
            for &c in &places[i].children {
                members(places, c, out);
            }
        }
        for i in 0..n {
            let mut m = Vec::new();
            members(&places, i, &mut m);
            let want: Vec<usize> = (i..i + m.len()).collect();
            assert_eq!(m, want, "subtree of {i}");
        }
    }

    #[test]
    fn the_shape_comes_from_the_environment_and_a_bad_one_is_refused() {
        // One test touches the variable, so no other test races it.
        std::env::set_var(MERGE_VAR, "gather");
        assert_eq!(Mode::from_env().unwrap(), Mode::Gather);
        std::env::set_var(MERGE_VAR, "tree");
        assert_eq!(Mode::from_env().unwrap(), Mode::Tree);
        std::env::set_var(MERGE_VAR, "ring");
        let e = Mode::from_env().unwrap_err().to_string();
        assert!(e.contains("tree or gather"), "{e}");
        std::env::remove_var(MERGE_VAR);
        assert_eq!(Mode::from_env().unwrap(), Mode::Tree);
    }
}
