//! The registry's view of a knowledge source: [`Analysis`] with its state
//! type erased, so that knowledge sources of different state types live in
//! one list.
//!
//! Knowledge sources are written against the typed [`Analysis`] trait; the
//! one blanket implementation here is the only place a state is downcast,
//! and every state it downcasts was made by the same knowledge source's
//! `new_rank` or `load`, so the types always agree.

use crate::analysis::{Analysis, Finish, Input, RankState, Spec};
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::{Error, ErrorKind};
use hark_model::Program;
use std::any::Any;

/// A rank's state with its type erased. `Sync`: while a snapshot reads a
/// state, the worker that owns it may read it too (to copy it).
pub trait DynRank: Any + Send + Sync {
    /// [`RankState::fold`].
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>);
    /// The state as a partial result: its serialised bytes.
    fn save(&self) -> Vec<u8>;
    /// A copy of the state (through its serialised form, which every state
    /// has): what a worker folds into while a snapshot still reads the
    /// original.
    fn duplicate(&self) -> Box<dyn DynRank>;
    /// Itself, for the downcast in `finish`.
    fn as_any(&self) -> &dyn Any;
    /// [`RankState::absorbs`]; false for a state of another type.
    fn absorbs(&self, other: &dyn DynRank) -> bool;
    /// [`RankState::absorb`]; nothing for a state of another type.
    fn absorb(&mut self, other: &dyn DynRank);
}

impl<T: RankState> DynRank for T {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        RankState::fold(self, cx, input)
    }
    fn save(&self) -> Vec<u8> {
        // Serialising plain data into a Vec cannot fail; an empty result
        // would load as an error and be reported, never misread.
        postcard::to_allocvec(self).unwrap_or_default()
    }
    fn duplicate(&self) -> Box<dyn DynRank> {
        // What `save` wrote, `T` reads back: a failure is a bug in the
        // state's serde derive, and the board reports the panic.
        Box::new(
            postcard::from_bytes::<T>(&DynRank::save(self))
                .expect("a state reads back what it saved"),
        )
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn absorbs(&self, other: &dyn DynRank) -> bool {
        other
            .as_any()
            .downcast_ref::<T>()
            .is_some_and(|o| RankState::absorbs(self, o))
    }
    fn absorb(&mut self, other: &dyn DynRank) {
        if let Some(o) = other.as_any().downcast_ref::<T>() {
            RankState::absorb(self, o)
        }
    }
}

/// A knowledge source with its state type erased (see the module doc).
pub trait DynAnalysis: Send + Sync + 'static {
    /// [`Analysis::spec`].
    fn spec(&self) -> &'static Spec;
    /// [`Analysis::new_rank`], boxed.
    fn new_rank(&self) -> Box<dyn DynRank>;
    /// A state saved by [`DynRank::save`] (possibly by another server),
    /// its ids renumbered through `ids`.
    fn load(&self, bytes: &[u8], ids: &IdMap) -> Result<Box<dyn DynRank>, Error>;
    /// [`Analysis::finish`] over states this knowledge source made.
    fn finish(&self, cx: &Finish<'_>, ranks: &[&dyn DynRank], out: &mut Program);
}

impl<A: Analysis> DynAnalysis for A {
    fn spec(&self) -> &'static Spec {
        Analysis::spec(self)
    }
    fn new_rank(&self) -> Box<dyn DynRank> {
        Box::new(Analysis::new_rank(self))
    }
    fn load(&self, bytes: &[u8], ids: &IdMap) -> Result<Box<dyn DynRank>, Error> {
        let mut state: A::Rank = postcard::from_bytes(bytes).map_err(|e| {
            Error::new(ErrorKind::Partial(format!(
                "the saved state of `{}` does not decode ({e}): was it saved by another version of Hark?",
                Analysis::spec(self).name
            )))
        })?;
        state.remap(ids);
        Ok(Box::new(state))
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&dyn DynRank], out: &mut Program) {
        let typed: Vec<&A::Rank> = ranks
            .iter()
            .map(|r| {
                r.as_any()
                    .downcast_ref::<A::Rank>()
                    .expect("states are made by their own knowledge source")
            })
            .collect();
        Analysis::finish(self, cx, &typed, out)
    }
}

impl std::fmt::Debug for dyn DynAnalysis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec().name)
    }
}
