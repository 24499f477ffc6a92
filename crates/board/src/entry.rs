//! Data entries: a type, an optional accounting size, and a read-only payload
//! shared by reference counting.
//!
//! An entry is one `Arc` allocation holding a small header and the payload
//! itself (no second box), so cloning it into a job is one atomic increment.
//! The header records, on first submission, the level whose counters it is
//! charged to; when the last reference goes, `Drop` gives the entry and its
//! bytes back to that level. That is how "live entries" and "bytes held" in
//! [`crate::Stats`] return to zero once every job over them is done.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::stats::LevelCounters;

/// The type of a data entry: an interned name ([`crate::Board::intern`]).
///
/// Types are small dense integers, valid on the board that interned them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryType(pub(crate) u32);

impl EntryType {
    /// The type's index, dense from 0 in order of interning.
    pub fn index(self) -> u32 {
        self.0
    }
}

/// One level of the board: the entries and knowledge sources of one measured
/// program. Created by [`crate::Board::create_level`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Level(pub(crate) u32);

impl Level {
    /// The level's number, unique for the board's life (never reused).
    pub fn index(self) -> u32 {
        self.0
    }
}

struct Inner<P: ?Sized> {
    ty: EntryType,
    bytes: usize,
    /// The level this entry is charged to, set on first submission.
    charged: OnceLock<Arc<LevelCounters>>,
    payload: P,
}

impl<P: ?Sized> Drop for Inner<P> {
    fn drop(&mut self) {
        if let Some(level) = self.charged.get() {
            level.entries_live.fetch_sub(1, Ordering::Relaxed);
            level
                .bytes_live
                .fetch_sub(self.bytes as u64, Ordering::Relaxed);
        }
    }
}

/// A data entry: a type and a payload of any `Send + Sync + 'static` Rust
/// type, shared read-only by every job that receives it.
///
/// Cloning is cheap (a reference count). The payload is writable only while
/// the entry is not shared ([`Entry::get_mut`]). The entry is freed when the
/// last clone goes — normally when the last job over it is done — and only
/// then stops counting in its level's `entries_live` and `bytes_live`.
///
/// ```
/// use hark_board::{Board, Entry};
/// let board = Board::new(1);
/// let numbers = board.intern("numbers");
/// let e = Entry::with_bytes(numbers, vec![1u64, 2, 3], 24);
/// assert_eq!(e.get::<Vec<u64>>().map(|v| v.len()), Some(3));
/// assert!(e.get::<String>().is_none());
/// ```
#[derive(Clone)]
pub struct Entry(Arc<Inner<dyn Any + Send + Sync>>);

impl Entry {
    /// An entry of type `ty` whose accounted size is `size_of::<T>()`.
    ///
    /// Use [`Entry::with_bytes`] when the payload owns heap memory (a `Vec`,
    /// a buffer), so that the level's `bytes_live` means something.
    pub fn new<T: Any + Send + Sync>(ty: EntryType, payload: T) -> Entry {
        Entry::with_bytes(ty, payload, std::mem::size_of::<T>())
    }

    /// An entry of type `ty` that holds `bytes` bytes for accounting (the
    /// board never reads the payload; `bytes` is only counted).
    pub fn with_bytes<T: Any + Send + Sync>(ty: EntryType, payload: T, bytes: usize) -> Entry {
        let inner: Arc<Inner<dyn Any + Send + Sync>> = Arc::new(Inner {
            ty,
            bytes,
            charged: OnceLock::new(),
            payload,
        });
        Entry(inner)
    }

    /// A batch: `items` as one entry of type `ty`, accounted at the bytes
    /// they hold. Read it back with `get::<Vec<T>>()`.
    ///
    /// Entries are meant to be batches — a pack, or one kind of event from a
    /// pack — so that one job does real work: a job dispatch costs about
    /// a hundred nanoseconds, an event a few.
    ///
    /// ```
    /// use hark_board::{Board, Entry};
    /// let board = Board::new(1);
    /// let e = Entry::batch(board.intern("samples"), vec![1.5f64; 1000]);
    /// assert_eq!(e.bytes(), 8000);
    /// assert_eq!(e.get::<Vec<f64>>().unwrap().len(), 1000);
    /// ```
    pub fn batch<T: Any + Send + Sync>(ty: EntryType, items: Vec<T>) -> Entry {
        let bytes = std::mem::size_of_val(&items[..]);
        Entry::with_bytes(ty, items, bytes)
    }

    /// The entry's type.
    #[inline]
    pub fn ty(&self) -> EntryType {
        self.0.ty
    }

    /// The size given for accounting.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.0.bytes
    }

    /// The payload, if it is a `T`.
    #[inline]
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.payload.downcast_ref::<T>()
    }

    /// Whether the payload is a `T`.
    #[inline]
    pub fn is<T: Any>(&self) -> bool {
        self.0.payload.is::<T>()
    }

    /// The payload for writing, if it is a `T` and this is the only reference
    /// to the entry (no clone, no queued job holds it).
    pub fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        Arc::get_mut(&mut self.0).and_then(|inner| inner.payload.downcast_mut::<T>())
    }

    /// How many references to this entry exist now (clones and queued jobs).
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// Charges the entry to `level` unless it already is charged somewhere.
    /// Resubmitting an entry (a dispatcher forwarding it) never counts twice.
    pub(crate) fn charge(&self, level: &Arc<LevelCounters>) {
        if self.0.charged.get().is_some() {
            return;
        }
        if self.0.charged.set(level.clone()).is_ok() {
            level.entries_live.fetch_add(1, Ordering::Relaxed);
            level
                .bytes_live
                .fetch_add(self.0.bytes as u64, Ordering::Relaxed);
        }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("ty", &self.0.ty)
            .field("bytes", &self.0.bytes)
            .finish_non_exhaustive()
    }
}

/// A kind of entry whose payload's Rust type is fixed at compile time: a
/// name and a payload type, declared once as a constant where the entries
/// are made.
///
/// A kind means nothing until a board interns it ([`crate::Board::typed`]);
/// the [`Typed`] handle it gives is what publishers and subscribers hold, so
/// that the route of a payload from the one who publishes it to the one who
/// reads it is in the types of both. Two kinds with one name are one entry
/// type on a board: give every payload type a name of its own.
///
/// ```
/// use hark_board::{Board, EntryKind, KnowledgeSource};
/// use std::sync::{Arc, Mutex};
///
/// /// Numbers to sum, one batch per entry.
/// const NUMBERS: EntryKind<Vec<u64>> = EntryKind::new("numbers");
///
/// let board = Board::new(1);
/// let level = board.create_level("program");
/// let numbers = board.typed(&NUMBERS);
/// let total = Arc::new(Mutex::new(0));
/// let t = total.clone();
/// board.register(level, KnowledgeSource::on("sum", numbers, move |_ctx, batch: &Vec<u64>| {
///     *t.lock().unwrap() += batch.iter().sum::<u64>();
/// }))?;
/// board.publish_keyed(level, numbers, 0, vec![1, 2, 3], 24)?;
/// board.drain();
/// assert_eq!(*total.lock().unwrap(), 6);
/// board.shutdown();
/// # Ok::<(), hark_board::Error>(())
/// ```
pub struct EntryKind<T> {
    name: &'static str,
    _payload: PhantomData<fn(T) -> T>,
}

impl<T> EntryKind<T> {
    /// The kind of entry named `name` whose payload is a `T`.
    pub const fn new(name: &'static str) -> EntryKind<T> {
        EntryKind {
            name,
            _payload: PhantomData,
        }
    }

    /// Its name: the entry type it is interned as.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<T> fmt::Debug for EntryKind<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EntryKind").field(&self.name).finish()
    }
}

/// An [`EntryKind`] interned on one board ([`crate::Board::typed`]): the
/// entry type it is there, with its payload type. A `Copy` handle: what
/// [`crate::Board::publish_keyed`], [`crate::Context::publish`] and
/// [`crate::KnowledgeSource::on`] take, so that entries of it are made and
/// read as `T` only.
pub struct Typed<T> {
    ty: EntryType,
    _payload: PhantomData<fn(T) -> T>,
}

impl<T> Clone for Typed<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Typed<T> {}

impl<T> fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Typed").field(&self.ty).finish()
    }
}

impl<T: Any + Send + Sync> Typed<T> {
    pub(crate) fn new(ty: EntryType) -> Typed<T> {
        Typed {
            ty,
            _payload: PhantomData,
        }
    }

    /// The entry type it is on its board (for [`crate::KnowledgeSource::new`]
    /// with several sensitivities).
    #[inline]
    pub fn ty(self) -> EntryType {
        self.ty
    }

    /// An entry of this kind holding `payload`, accounted at `bytes`
    /// ([`Entry::with_bytes`]).
    #[inline]
    pub fn entry(self, payload: T, bytes: usize) -> Entry {
        Entry::with_bytes(self.ty, payload, bytes)
    }

    /// The payload of `entry`, if it is of this kind and holds a `T` (an
    /// entry made under the kind's name with [`Entry::new`] may hold
    /// something else).
    #[inline]
    pub fn get(self, entry: &Entry) -> Option<&T> {
        if entry.ty() != self.ty {
            return None;
        }
        entry.get::<T>()
    }
}
