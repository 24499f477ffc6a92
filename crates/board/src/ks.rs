//! Knowledge sources and the context their operations run in.

use std::fmt;
use std::sync::Arc;

use crate::board::{KsInst, Shared};
use crate::{Entry, EntryKind, EntryType, Error, Level, Typed};

/// The operation of a knowledge source: called once per job with the job's
/// entries, one per sensitivity, in the order the sensitivities were given.
pub type Operation = dyn Fn(&mut Context<'_>, &[Entry]) + Send + Sync;

/// Identifies one registration of a knowledge source (on one level, or on
/// every level for [`crate::Board::register_all`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KsId(pub(crate) u64);

/// A knowledge source: a name, sensitivities and an operation.
///
/// A job is made when every sensitivity holds an entry: the operation then
/// gets one entry per sensitivity, in the order given here. An entry of a
/// type that appears at several sensitivities is queued at each of them (the
/// seed's rule), so a knowledge source sensitive to `[a, a]` gets every `a`
/// entry twice in one job; to pair successive entries, keep state instead.
///
/// Cloning shares the operation (and whatever state it captured).
#[derive(Clone)]
pub struct KnowledgeSource {
    pub(crate) name: Arc<str>,
    pub(crate) sensitivities: Vec<EntryType>,
    pub(crate) op: Arc<Operation>,
    pub(crate) serial_by_key: bool,
}

impl KnowledgeSource {
    /// A knowledge source named `name`, sensitive to `sensitivities`,
    /// running `op`.
    ///
    /// Operations run on worker threads, many at once (on other jobs of the
    /// same knowledge source too, unless [`KnowledgeSource::serial_by_key`]).
    /// A panic in `op` is caught, counted in [`crate::KsStats::panics`] and
    /// the board goes on. Registration fails if `sensitivities` is empty.
    pub fn new<F>(name: &str, sensitivities: &[EntryType], op: F) -> KnowledgeSource
    where
        F: Fn(&mut Context<'_>, &[Entry]) + Send + Sync + 'static,
    {
        KnowledgeSource {
            name: name.into(),
            sensitivities: sensitivities.to_vec(),
            op: Arc::new(op),
            serial_by_key: false,
        }
    }

    /// A knowledge source named `name`, subscribed to the entries of one
    /// kind: `op` gets each entry's payload as a `T`.
    ///
    /// An entry of the kind's type that holds another payload (made with
    /// [`crate::Entry::new`] under the same name) is not given to `op`: it
    /// is reported as an error of this knowledge source
    /// ([`Context::report_error`]). Otherwise as [`KnowledgeSource::new`].
    pub fn on<T, F>(name: &str, kind: Typed<T>, op: F) -> KnowledgeSource
    where
        T: std::any::Any + Send + Sync,
        F: Fn(&mut Context<'_>, &T) + Send + Sync + 'static,
    {
        KnowledgeSource::new(name, &[kind.ty()], move |ctx, entries| {
            match kind.get(&entries[0]) {
                Some(payload) => op(ctx, payload),
                None => ctx.report_error(format!(
                    "an entry of type `{}` holds a payload of another type than its kind's; \
                     it was skipped (give each payload type its own entry name)",
                    ctx.type_name(kind.ty()).as_deref().unwrap_or("?")
                )),
            }
        })
    }

    /// Runs the jobs of one key one at a time, in the order they were made;
    /// jobs of different keys still run in parallel.
    ///
    /// A job's key is the key its first entry was submitted with
    /// ([`crate::Board::submit_keyed`], or inherited inside an operation);
    /// jobs without a key form one more key of their own. Jobs are "made" in
    /// submission order as the board sees it: entries submitted one after
    /// the other by one thread (a connection reader, or a serial job) keep
    /// their order all the way down a chain of serial knowledge sources.
    pub fn serial_by_key(mut self) -> KnowledgeSource {
        self.serial_by_key = true;
        self
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sensitivities given at creation.
    pub fn sensitivities(&self) -> &[EntryType] {
        &self.sensitivities
    }
}

impl fmt::Debug for KnowledgeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnowledgeSource")
            .field("name", &self.name)
            .field("sensitivities", &self.sensitivities)
            .field("serial_by_key", &self.serial_by_key)
            .finish_non_exhaustive()
    }
}

/// What an operation may do while it runs: submit entries, register and
/// remove knowledge sources, report errors.
///
/// Everything here acts at once (an entry submitted here may be processed by
/// another worker before the operation returns). A context is only valid for
/// the call it is given to.
pub struct Context<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) ks: &'a Arc<KsInst>,
    pub(crate) key: Option<u64>,
}

impl Context<'_> {
    /// The level this job runs on.
    pub fn level(&self) -> Level {
        self.ks.level
    }

    /// The job's key (see [`KnowledgeSource::serial_by_key`]).
    pub fn key(&self) -> Option<u64> {
        self.key
    }

    /// The registration this job's knowledge source belongs to.
    pub fn ks_id(&self) -> KsId {
        self.ks.id
    }

    /// Interns a type name ([`crate::Board::intern`]).
    pub fn intern(&self, name: &str) -> EntryType {
        self.shared.intern(name)
    }

    /// Interns a kind of entry ([`crate::Board::typed`]).
    pub fn typed<T: std::any::Any + Send + Sync>(&self, kind: &EntryKind<T>) -> Typed<T> {
        Typed::new(self.shared.intern(kind.name()))
    }

    /// The name of a type.
    pub fn type_name(&self, ty: EntryType) -> Option<Arc<str>> {
        self.shared.type_name(ty)
    }

    /// Submits `entry` to this job's level with this job's key.
    ///
    /// If the level was retired meanwhile, the entry is dropped and counted
    /// in [`crate::LevelStats::refused`].
    pub fn submit(&mut self, entry: Entry) {
        self.submit_keyed_opt(self.key, entry);
    }

    /// Submits `entry` to this job's level with another key.
    pub fn submit_keyed(&mut self, key: u64, entry: Entry) {
        self.submit_keyed_opt(Some(key), entry);
    }

    /// Publishes `payload` as an entry of `kind`, accounted at `bytes`, to
    /// this job's level with this job's key ([`Context::submit`]).
    #[inline]
    pub fn publish<T: std::any::Any + Send + Sync>(
        &mut self,
        kind: Typed<T>,
        payload: T,
        bytes: usize,
    ) {
        self.submit(kind.entry(payload, bytes));
    }

    /// Publishes `payload` as an entry of `kind`, accounted at `bytes`, to
    /// this job's level with `key` ([`Context::submit_keyed`]).
    #[inline]
    pub fn publish_keyed<T: std::any::Any + Send + Sync>(
        &mut self,
        kind: Typed<T>,
        key: u64,
        payload: T,
        bytes: usize,
    ) {
        self.submit_keyed(key, kind.entry(payload, bytes));
    }

    fn submit_keyed_opt(&mut self, key: Option<u64>, entry: Entry) {
        if self.shared.submit(self.ks.level, key, entry, true).is_err() {
            self.ks
                .level_counters
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Submits `entry` to another level with this job's key (a dispatcher
    /// routing entries to their program's level).
    pub fn submit_to(&mut self, level: Level, entry: Entry) -> Result<(), Error> {
        self.shared.submit(level, self.key, entry, true)
    }

    /// Registers a knowledge source on this job's level.
    pub fn register(&mut self, ks: KnowledgeSource) -> Result<KsId, Error> {
        self.shared.register(self.ks.level, ks)
    }

    /// Removes a registration (on every level it is on). Returns whether it
    /// existed. Jobs of it not yet started are dropped unrun.
    pub fn remove(&mut self, id: KsId) -> bool {
        self.shared.remove(id)
    }

    /// Removes this job's own knowledge source (its whole registration).
    pub fn remove_self(&mut self) -> bool {
        self.shared.remove(self.ks.id)
    }

    /// Reports an error: counted in [`crate::KsStats::errors`], the message
    /// kept as [`crate::KsStats::last_error`]. Operations report instead of
    /// printing; the owner of the board decides what to show.
    pub fn report_error(&mut self, message: impl Into<String>) {
        self.ks.counters.record_error(false, message.into());
    }
}
