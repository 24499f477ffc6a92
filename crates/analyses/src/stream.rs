//! The view a knowledge source gets of the stream an input comes from
//! ([`StreamCx`]): its clock mapping, its id translation and the program's
//! tables. The engine (`hark-engine`) makes one per batch.

use crate::clock::Mapping;
use crate::unify::{Translation, Unifier, UNDEFINED};
use std::sync::{Mutex, RwLockReadGuard};

/// What a knowledge source may ask about the stream an input comes from.
///
/// Waits folded when partial results merge come with no stream: then ids
/// are all undefined and times are already on the common timeline.
pub struct StreamCx<'a> {
    /// The program's tables, for names and call paths; `None` without a
    /// stream.
    tables: Option<&'a Mutex<Unifier>>,
    /// The stream's clock mapping, fixed for the whole input.
    mapping: Mapping,
    translation: Option<RwLockReadGuard<'a, Translation>>,
    origin_ns: u64,
    slice_shift: u32,
    slices: usize,
}

impl<'a> StreamCx<'a> {
    /// The view of a stream whose clock maps by `mapping` and whose ids
    /// translate by `translation` into `tables` (made by the engine, once
    /// per batch).
    pub fn new(
        mapping: Mapping,
        translation: RwLockReadGuard<'a, Translation>,
        tables: &'a Mutex<Unifier>,
        origin_ns: u64,
        slice_shift: u32,
        slices: usize,
    ) -> StreamCx<'a> {
        StreamCx {
            tables: Some(tables),
            mapping,
            translation: Some(translation),
            origin_ns,
            slice_shift,
            slices,
        }
    }

    /// A view with no stream behind it (see the type's doc).
    pub fn bare(origin_ns: u64, slice_shift: u32, slices: usize) -> StreamCx<'static> {
        StreamCx {
            tables: None,
            mapping: Mapping::constant(0),
            translation: None,
            origin_ns,
            slice_shift,
            slices,
        }
    }
    /// A probe timestamp on the run's common timeline, in ns.
    #[inline]
    pub fn common(&self, probe_ns: u64) -> u64 {
        self.mapping.common(probe_ns)
    }
    /// Whether [`StreamCx::common`] is one offset for this input (it keeps
    /// the order of timestamps).
    #[inline]
    pub fn is_offset(&self) -> bool {
        self.mapping.is_offset()
    }
    /// A probe timestamp as ns since the program's origin (0 if before it).
    #[inline]
    pub fn since_origin(&self, probe_ns: u64) -> u64 {
        self.common(probe_ns).saturating_sub(self.origin_ns)
    }
    /// The program's origin on the common timeline.
    pub fn origin_ns(&self) -> u64 {
        self.origin_ns
    }
    /// The initial width of a time slice is `1 << slice_shift()` ns.
    pub fn slice_shift(&self) -> u32 {
        self.slice_shift
    }
    /// The fixed number of time slices.
    pub fn slices(&self) -> usize {
        self.slices
    }
    /// The global id of local communicator `local` ([`crate::UNDEFINED`] if not defined).
    #[inline]
    pub fn comm(&self, local: u32) -> u32 {
        self.translation
            .as_ref()
            .map_or(UNDEFINED, |t| t.comm(local))
    }
    /// Which communicator with its members local communicator `local` is
    /// (`Translation::comm_occurrence`); 0 for the first.
    #[inline]
    pub fn comm_occurrence(&self, local: u32) -> u32 {
        self.translation
            .as_ref()
            .map_or(0, |t| t.comm_occurrence(local))
    }
    /// The global id of local file `local` ([`crate::UNDEFINED`] if not defined).
    #[inline]
    pub fn file(&self, local: u32) -> u32 {
        self.translation
            .as_ref()
            .map_or(UNDEFINED, |t| t.file(local))
    }
    /// The global id of local call site `local` (an event's
    /// [`callsite`](hark_wire::Event::callsite)): a call path of the
    /// program's tables, [`crate::UNDEFINED`] if unknown.
    #[inline]
    pub fn site(&self, local: u16) -> u32 {
        self.translation
            .as_ref()
            .map_or(UNDEFINED, |t| t.site(local))
    }
    /// The global name id of local function `local` (an instrumented
    /// function's `obj`; [`crate::UNDEFINED`] if not defined).
    #[inline]
    pub fn function(&self, local: u32) -> u32 {
        self.translation
            .as_ref()
            .map_or(UNDEFINED, |t| t.function(local))
    }
    /// The global id of local name `local` ([`crate::UNDEFINED`] if not defined).
    #[inline]
    pub fn name(&self, local: u32) -> u32 {
        self.translation
            .as_ref()
            .map_or(UNDEFINED, |t| t.name(local))
    }
    /// The id of the region call path named by the global name ids
    /// `stack`, outermost first (takes the program's tables' lock: call it
    /// once per new stack, not per event); `None` without a stream.
    pub fn path_of(&self, stack: &[u32]) -> Option<u32> {
        let mut unifier = self.tables?.lock().unwrap_or_else(|e| e.into_inner());
        let text = stack
            .iter()
            .map(|&id| unifier.name(id).unwrap_or("?"))
            .collect::<Vec<_>>()
            .join("/");
        Some(unifier.intern_path(&text))
    }

    /// The id of call path `text` (takes the program's tables' lock).
    pub fn path_of_text(&self, text: &str) -> Option<u32> {
        let mut unifier = self.tables?.lock().unwrap_or_else(|e| e.into_inner());
        Some(unifier.intern_path(text))
    }

    /// The text of global name `global` (takes the program's tables' lock:
    /// call it once per new name, not per event).
    pub fn name_text(&self, global: u32) -> Option<String> {
        let unifier = self.tables?.lock().unwrap_or_else(|e| e.into_inner());
        unifier.name(global).map(str::to_string)
    }
    /// The number of members of global communicator `global` (takes the
    /// program's tables' lock), 0 if undefined.
    pub fn comm_size(&self, global: u32) -> usize {
        let Some(tables) = self.tables else { return 0 };
        let unifier = tables.lock().unwrap_or_else(|e| e.into_inner());
        unifier.comm(global).map_or(0, |c| c.members.len())
    }
}
