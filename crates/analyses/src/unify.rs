//! Unification: every process numbers its communicators, files and names on
//! its own; the analyses need one numbering per program so that "the file
//! `out.dat`" or "the region `solve`" is the same thing on every rank.
//!
//! A [`Unifier`] holds a program's global tables. Each stream translates its
//! local ids through a [`Translation`] filled when its definitions arrive
//! (definitions always precede the events that use them, so a translation is
//! complete for every event of the same stream that follows).
//!
//! Names unify by kind and text and files by path. Communicators unify by
//! their member lists *and* by how many communicators with those same members
//! the process defined before: creating a communicator is collective, so every
//! member defines the same sequence, and `MPI_Comm_dup(MPI_COMM_WORLD)` stays
//! apart from `MPI_COMM_WORLD` itself.
//!
//! Global ids are given in order of arrival, so two servers number the same
//! program differently. A partial result carries its [`Tables`]; joining them
//! into another unifier ([`Unifier::absorb`]) gives an [`IdMap`] that
//! renumbers its states. Before a program is folded its tables are put in a
//! canonical order ([`Unifier::canonical`]: by kind and text, by path, by
//! size and members), so that the model never depends on arrival order.
//!
//! Each kind of record is capped, as Darshan caps its records per module: a
//! program's first [`MAX_FILES`] files, [`MAX_NAMES`] regions (counters,
//! marks) and [`MAX_COMMS`] communicators get their own global ids; any
//! further one maps to a single "other" id of its kind, whose events are
//! counted together. The model, the report and the server's memory then
//! stay bounded however many files a program touches, and
//! [`Unifier::diagnostics`] says what was folded. (Which records keep ids of
//! their own past a cap depends on the order they arrived in.)
//!
//! Communicators are folded by members, not into one: codes that split a
//! communicator for every step and free it (Quantum ESPRESSO defines some
//! 1,650 a second) make ever more with the same members. The first
//! [`MAX_ALIKE_COMMS`] with given members keep ids of their own; every
//! later one, and every one past [`MAX_COMMS`] in all, shares one id per
//! member set, whose occurrence is [`FOLDED`]. The stream's
//! [`Translation`] keeps each one's own occurrence
//! ([`Translation::comm_occurrence`]), so that collective instances on
//! them stay apart (`unpack.rs` puts it in the instance's sequence number)
//! and their members are known. Occurrences are the same on every server,
//! so the first rule folds the same communicators wherever a program's
//! streams are analysed (analysers over MPI, merged partials); the total
//! cap depends on what else a server saw, so an [`IdMap`] renumbers
//! another server's folded communicator by occurrence too
//! ([`IdMap::comm_at`]). Only past [`MAX_COMMS`] member sets does a
//! communicator fall into the "other" one, which has no members.

use crate::fx::FxHashMap;
use hark_wire::{Def, NameKind};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Largest local id a stream may use; ids come from one counter per process,
/// so a larger one is a corrupt stream and is ignored rather than allowed to
/// grow a translation table without bound.
const MAX_LOCAL_ID: u32 = 1 << 24;

/// A global id meaning "no definition".
pub const UNDEFINED: u32 = u32::MAX;

/// Distinct files a program's profile keeps; further ones count as one.
pub const MAX_FILES: usize = 1000;
/// Distinct names of each kind (regions, counters, marks) a program's
/// profile keeps; further ones of a kind count as one.
pub const MAX_NAMES: usize = 1000;
/// Distinct communicators a program's profile keeps; further ones count as
/// one per member set (as many sets again), then as one with no members.
pub const MAX_COMMS: usize = 1000;

/// Communicators with the same members that keep ids of their own; later
/// ones share one per member set (see the module doc).
pub const MAX_ALIKE_COMMS: u32 = 64;

/// The occurrence of the id that communicators with the same members share
/// past the caps (the first 64 alike, the first 1,000 in all).
pub const FOLDED: u32 = u32::MAX;

/// The path that stands for every file beyond [`MAX_FILES`].
pub const OTHER_FILES: &str = "<other files>";

const OTHER_FILE: usize = 0;
const OTHER_COMM: usize = 1;

fn other_name_slot(kind: NameKind) -> usize {
    match kind {
        NameKind::Region => 2,
        NameKind::Counter => 3,
        NameKind::Mark => 4,
        NameKind::Construct => 5,
        // Functions share the regions' cap: both are nodes of call paths.
        NameKind::Function => 2,
    }
}

fn kind_plural(kind: NameKind) -> &'static str {
    match kind {
        NameKind::Region => "regions",
        NameKind::Counter => "counters",
        NameKind::Mark => "marks",
        NameKind::Construct => "OpenMP constructs",
        NameKind::Function => "functions",
    }
}

/// A communicator, by the world ranks of its members.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CommDef {
    /// World ranks of the local group, in communicator rank order.
    pub members: Vec<i32>,
    /// World ranks of the remote group (inter-communicators), else empty.
    pub remote: Vec<i32>,
}

/// The global tables of one program: names, files and communicators.
#[derive(Debug, Default)]
pub struct Unifier {
    names: Vec<(NameKind, String)>,
    name_ids: HashMap<(u8, String), u32>,
    files: Vec<String>,
    file_ids: HashMap<String, u32>,
    comms: Vec<CommDef>,
    /// Per global comm id: how many with the same members came before it.
    comm_occurrence: Vec<u32>,
    comm_ids: HashMap<(CommDef, u32), u32>,
    /// Region call paths (`outer/inner`, `""` outside any region), which
    /// the tracker names once per stack.
    paths: Vec<String>,
    path_ids: HashMap<String, u32>,
    /// The "other" id of each kind once its cap is reached, and how many
    /// definitions were folded into it: files, communicators, then names
    /// by [`NameKind`] (region, counter, mark).
    other: [Option<u32>; 6],
    folded: [u64; 6],
    /// Records of each kind with their own id, in the same order.
    kept: [usize; 6],
    /// Member sets with a [`FOLDED`] id.
    groups: usize,
    /// Tables rebuilt from tables already capped are not capped again.
    uncapped: bool,
}

/// A unifier's tables as data: what a partial result carries so that its
/// ids can be understood elsewhere. Entry `i` of each list has global id `i`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tables {
    /// Names: kind (`NameKind` as a byte) and text.
    pub names: Vec<(u8, String)>,
    /// File paths.
    pub files: Vec<String>,
    /// Communicators and their occurrence (see the module doc).
    pub comms: Vec<(CommDef, u32)>,
    /// Region call paths.
    pub paths: Vec<String>,
    /// Definitions folded into each kind's "other" entry (files,
    /// communicators, regions, counters, marks).
    pub folded: [u64; 6],
}

/// Renumbers global ids from one set of tables to another (see
/// [`RankState::remap`](crate::RankState::remap)). Ids it does not know
/// (and [`UNDEFINED`]) become [`UNDEFINED`].
#[derive(Clone, Debug, Default)]
pub struct IdMap {
    identity: bool,
    paths: Vec<u32>,
    names: Vec<u32>,
    files: Vec<u32>,
    comms: Vec<u32>,
    /// The other side's communicators folded past the caps ([`FOLDED`]),
    /// by its id: one of them may be a communicator of its own here.
    folded: FxHashMap<u32, CommDef>,
    /// The id here of (the other side's folded id, occurrence), for those
    /// [`IdMap::resolve`] was told of.
    at: FxHashMap<(u32, u32), u32>,
}

impl IdMap {
    /// The map that changes nothing.
    pub fn identity() -> IdMap {
        IdMap {
            identity: true,
            ..IdMap::default()
        }
    }

    /// How many names, communicators and paths it translates (a map
    /// grown by `Unifier::absorb_more`).
    pub fn lengths(&self) -> [u32; 3] {
        [
            self.names.len() as u32,
            self.comms.len() as u32,
            self.paths.len() as u32,
        ]
    }

    /// The new id of communicator `id` as its `occurrence`-th with its
    /// members (`Translation::comm_occurrence`): whether a communicator is
    /// folded past the caps depends on what else a server saw, so one
    /// folded on the other side may keep an id of its own here, which its
    /// messages and collective instances must take to meet the others'.
    /// Occurrences of folded ids not resolved (`IdMap::resolve`) map as
    /// [`IdMap::comm`] does.
    #[inline]
    pub fn comm_at(&self, id: u32, occurrence: u32) -> u32 {
        if self.at.is_empty() {
            return self.comm(id);
        }
        match self.at.get(&(id, occurrence)) {
            Some(&here) => here,
            None => self.comm(id),
        }
    }

    /// Makes [`IdMap::comm_at`] exact for the pairs of communicator id and
    /// occurrence in `uses`, interning each in `unifier` (the one this map
    /// leads into), which decides once for all whether it is folded here.
    /// Occurrences from `MAX_ALIKE_COMMS` on are folded on every server
    /// and need nothing: what it keeps is bounded by that many per member
    /// set, however many communicators a long run folds.
    pub fn resolve(&mut self, uses: impl IntoIterator<Item = (u32, u32)>, unifier: &mut Unifier) {
        if self.identity || self.folded.is_empty() {
            return;
        }
        // Nothing is counted as folded: the other side counted its own.
        let folded = unifier.folded;
        for (id, occurrence) in uses {
            if occurrence >= MAX_ALIKE_COMMS {
                continue;
            }
            let Some(comm) = self.folded.get(&id) else {
                continue;
            };
            if let std::collections::hash_map::Entry::Vacant(e) = self.at.entry((id, occurrence)) {
                e.insert(unifier.intern_comm(comm.clone(), occurrence));
            }
        }
        unifier.folded = folded;
    }

    /// The new id of name `id`.
    #[inline]
    pub fn name(&self, id: u32) -> u32 {
        if self.identity {
            return id;
        }
        get(&self.names, id)
    }
    /// The new id of file `id`.
    #[inline]
    pub fn file(&self, id: u32) -> u32 {
        if self.identity {
            return id;
        }
        get(&self.files, id)
    }
    /// The new id of call path `id`.
    #[inline]
    pub fn path(&self, id: u32) -> u32 {
        if self.identity {
            return id;
        }
        get(&self.paths, id)
    }
    /// The new id of communicator `id`.
    #[inline]
    pub fn comm(&self, id: u32) -> u32 {
        if self.identity {
            return id;
        }
        get(&self.comms, id)
    }
}

fn name_kind(byte: u8) -> NameKind {
    match byte {
        2 => NameKind::Counter,
        3 => NameKind::Mark,
        4 => NameKind::Construct,
        5 => NameKind::Function,
        _ => NameKind::Region,
    }
}

impl Unifier {
    /// An empty set of tables.
    pub fn new() -> Unifier {
        Unifier::default()
    }

    /// The name with global id `id`.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(|(_, n)| n.as_str())
    }

    /// The kind of the name with global id `id`.
    pub fn name_kind(&self, id: u32) -> Option<NameKind> {
        self.names.get(id as usize).map(|(k, _)| *k)
    }

    /// The path of the file with global id `id`.
    pub fn file(&self, id: u32) -> Option<&str> {
        self.files.get(id as usize).map(|p| p.as_str())
    }

    /// The communicator with global id `id`.
    pub fn comm(&self, id: u32) -> Option<&CommDef> {
        self.comms.get(id as usize)
    }

    /// Number of communicators defined so far.
    pub fn comm_count(&self) -> usize {
        self.comms.len()
    }

    /// The tables as data.
    pub fn tables(&self) -> Tables {
        Tables {
            names: self
                .names
                .iter()
                .map(|(k, n)| (*k as u8, n.clone()))
                .collect(),
            files: self.files.clone(),
            comms: self
                .comms
                .iter()
                .cloned()
                .zip(self.comm_occurrence.iter().copied())
                .collect(),
            paths: self.paths.clone(),
            folded: self.folded,
        }
    }

    /// Interns every entry of `tables` (from another unifier) and returns the
    /// map from their ids to this unifier's.
    pub fn absorb(&mut self, tables: &Tables) -> IdMap {
        for (into, n) in self.folded.iter_mut().zip(tables.folded) {
            *into += n;
        }
        IdMap {
            identity: false,
            names: tables
                .names
                .iter()
                .map(|(k, n)| self.intern_name(name_kind(*k), n))
                .collect(),
            files: tables.files.iter().map(|p| self.intern_file(p)).collect(),
            comms: tables
                .comms
                .iter()
                .map(|(c, o)| self.intern_comm(c.clone(), *o))
                .collect(),
            paths: tables.paths.iter().map(|p| self.intern_path(p)).collect(),
            folded: folded_of(&tables.comms, 0),
            at: FxHashMap::default(),
        }
    }

    /// Interns entries another unifier added since it last sent (names,
    /// communicators, paths, in its id order) and extends `map`, which
    /// translates that unifier's ids into this one's
    /// (`hark_engine::exchange`: parcels between analysers). Unlike
    /// [`Unifier::absorb`] it counts nothing as folded: the sender's
    /// partial counts its own.
    pub fn absorb_more(
        &mut self,
        names: &[(u8, String)],
        comms: &[(CommDef, u32)],
        paths: &[String],
        map: &mut IdMap,
    ) {
        let folded = self.folded;
        map.identity = false;
        for (k, n) in names {
            let id = self.intern_name(name_kind(*k), n);
            map.names.push(id);
        }
        let first = map.comms.len() as u32;
        map.folded.extend(folded_of(comms, first));
        for (c, o) in comms {
            let id = self.intern_comm(c.clone(), *o);
            map.comms.push(id);
        }
        for p in paths {
            let id = self.intern_path(p);
            map.paths.push(id);
        }
        self.folded = folded;
    }

    /// How many names, communicators and paths the tables hold.
    pub fn lengths(&self) -> [usize; 3] {
        [self.names.len(), self.comms.len(), self.paths.len()]
    }

    /// The entries from `from` on (names, communicators, paths), for
    /// [`Unifier::absorb_more`] elsewhere.
    pub fn entries_from(&self, from: [usize; 3]) -> TableEntries {
        (
            self.names[from[0].min(self.names.len())..]
                .iter()
                .map(|(k, n)| (*k as u8, n.clone()))
                .collect(),
            self.comms[from[1].min(self.comms.len())..]
                .iter()
                .cloned()
                .zip(
                    self.comm_occurrence[from[1].min(self.comm_occurrence.len())..]
                        .iter()
                        .copied(),
                )
                .collect(),
            self.paths[from[2].min(self.paths.len())..].to_vec(),
        )
    }

    /// The same tables in canonical order (names by kind and text, files by
    /// path, communicators by size, largest first, then members, remote
    /// group and occurrence), and the
    /// map from this unifier's ids to the canonical ones.
    pub fn canonical(&self) -> (Unifier, IdMap) {
        let mut t = self.tables();
        t.names.sort();
        t.files.sort();
        t.paths.sort();
        // The largest first, so that the world leads as it was made first.
        t.comms.sort_by(|a, b| {
            (std::cmp::Reverse(a.0.members.len()), a)
                .cmp(&(std::cmp::Reverse(b.0.members.len()), b))
        });
        let mut canonical = Unifier {
            uncapped: true,
            ..Unifier::new()
        };
        canonical.absorb(&t);
        let mut again = self.tables();
        again.folded = [0; 6];
        let ids = canonical.absorb(&again);
        (canonical, ids)
    }

    /// The call path with id `id`.
    pub fn path(&self, id: u32) -> Option<&str> {
        self.paths.get(id as usize).map(String::as_str)
    }

    /// The id of call path `path`, interned.
    pub fn intern_path(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.path_ids.get(path) {
            return id;
        }
        let id = self.paths.len() as u32;
        self.paths.push(path.to_string());
        self.path_ids.insert(path.to_string(), id);
        id
    }

    /// One sentence per kind whose cap was reached, for the program's
    /// diagnostics.
    pub fn diagnostics(&self) -> Vec<String> {
        let mut out = Vec::new();
        let say = |out: &mut Vec<String>, slot: usize, what: String| {
            if self.folded[slot] > 0 {
                out.push(format!(
                    "{what}: {} further definition(s) (over all ranks) are counted together as one \"other\" entry",
                    self.folded[slot]
                ));
            }
        };
        say(
            &mut out,
            OTHER_FILE,
            format!(
                "more than {MAX_FILES} distinct files; those beyond are listed as {OTHER_FILES}"
            ),
        );
        if self.folded[OTHER_COMM] > 0 {
            let memberless = CommDef {
                members: Vec::new(),
                remote: Vec::new(),
            };
            // The "other" one, made here or absorbed from tables that had it.
            let other =
                self.other[OTHER_COMM].is_some() || self.comm_ids.contains_key(&(memberless, 0));
            let rest = if other {
                format!("; past {MAX_COMMS} sets, the rest as one with no members, whose collectives are not")
            } else {
                String::new()
            };
            out.push(format!(
                "communicators: {} definition(s) (over all ranks) beyond the first {MAX_ALIKE_COMMS} with the same members or the first {MAX_COMMS} in all are counted as one communicator per member set ({} set(s)), whose collectives are still matched into wait states{rest}",
                self.folded[OTHER_COMM], self.groups,
            ));
        }
        for kind in [
            NameKind::Region,
            NameKind::Counter,
            NameKind::Mark,
            NameKind::Construct,
        ] {
            let plural = kind_plural(kind);
            say(
                &mut out,
                other_name_slot(kind),
                format!("more than {MAX_NAMES} distinct {plural}; those beyond are listed as <other {plural}>"),
            );
        }
        out
    }

    /// Is kind `slot` full (its further records go to "other")?
    fn full(&self, slot: usize, cap: usize) -> bool {
        !self.uncapped && self.kept[slot] >= cap
    }

    /// The "other" id of `slot`, made on first use by `make`.
    fn other(&mut self, slot: usize, make: impl FnOnce(&mut Unifier) -> u32) -> u32 {
        self.folded[slot] += 1;
        match self.other[slot] {
            Some(id) => id,
            None => {
                let id = make(self);
                self.other[slot] = Some(id);
                id
            }
        }
    }

    fn intern_name(&mut self, kind: NameKind, name: &str) -> u32 {
        let key = (kind as u8, name.to_string());
        if let Some(&id) = self.name_ids.get(&key) {
            return id;
        }
        let slot = other_name_slot(kind);
        if self.full(slot, MAX_NAMES) {
            return self.other(slot, |u| {
                u.names
                    .push((kind, format!("<other {}>", kind_plural(kind))));
                u.names.len() as u32 - 1
            });
        }
        let id = self.names.len() as u32;
        self.names.push((kind, name.to_string()));
        self.name_ids.insert(key, id);
        self.kept[slot] += 1;
        id
    }

    fn intern_file(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.file_ids.get(path) {
            return id;
        }
        if self.full(OTHER_FILE, MAX_FILES) {
            return self.other(OTHER_FILE, |u| {
                u.files.push(OTHER_FILES.to_string());
                u.files.len() as u32 - 1
            });
        }
        let id = self.files.len() as u32;
        self.files.push(path.to_string());
        self.file_ids.insert(path.to_string(), id);
        self.kept[OTHER_FILE] += 1;
        id
    }

    fn intern_comm(&mut self, comm: CommDef, occurrence: u32) -> u32 {
        let mut key = (comm, occurrence);
        if let Some(&id) = self.comm_ids.get(&key) {
            return id;
        }
        // Past the caps, one id per member set (see the module doc).
        let folding = occurrence != FOLDED
            && !self.uncapped
            && (occurrence >= MAX_ALIKE_COMMS || self.full(OTHER_COMM, MAX_COMMS));
        if folding {
            self.folded[OTHER_COMM] += 1;
            key.1 = FOLDED;
            if let Some(&id) = self.comm_ids.get(&key) {
                return id;
            }
        }
        if key.1 == FOLDED && !self.uncapped && self.groups >= MAX_COMMS {
            if folding {
                // `other` counts it.
                self.folded[OTHER_COMM] -= 1;
            }
            return self.other(OTHER_COMM, |u| {
                u.comms.push(CommDef {
                    members: Vec::new(),
                    remote: Vec::new(),
                });
                u.comm_occurrence.push(0);
                u.comms.len() as u32 - 1
            });
        }
        if key.1 == FOLDED {
            self.groups += 1;
        } else {
            self.kept[OTHER_COMM] += 1;
        }
        let id = self.comms.len() as u32;
        self.comms.push(key.0.clone());
        self.comm_occurrence.push(key.1);
        self.comm_ids.insert(key, id);
        id
    }

    /// Whether global communicator `id` stands for every communicator past
    /// the caps with its members ([`FOLDED`]).
    #[cfg(test)]
    fn is_folded(&self, id: u32) -> bool {
        self.comm_occurrence.get(id as usize) == Some(&FOLDED)
    }
}

/// Names, communicators and paths added to a unifier's tables since some
/// point ([`Unifier::entries_from`]).
pub type TableEntries = (Vec<(u8, String)>, Vec<(CommDef, u32)>, Vec<String>);

/// One stream's map from its local ids to the program's global ids.
#[derive(Debug, Default)]
pub struct Translation {
    comms: Vec<u32>,
    /// Per local communicator, its occurrence: which communicator with its
    /// members this stream defined it as (0 past the end).
    comm_occurrences: Vec<u32>,
    files: Vec<u32>,
    names: Vec<u32>,
    /// How many communicators with these members this stream defined so far.
    occurrences: FxHashMap<u64, u32>,
    /// The objects mapped into the process, as it defined them.
    objects: Vec<MappedObject>,
    /// Per local call-site id, its global id: the call path of its key
    /// ([`callsite_key`]) in the program's tables.
    sites: Vec<u32>,
    /// Per local function id, the global id of its name
    /// ([`NameKind::Function`]).
    functions: Vec<u32>,
    /// Definitions ignored because their id was out of range.
    pub ignored: u64,
}

/// One object mapped into a measured process ([`Def::Object`]).
#[derive(Clone, Debug)]
struct MappedObject {
    path: String,
    build_id: String,
    bias: u64,
    start: u64,
    end: u64,
}

/// What call paths that stand for call sites start with: no region name
/// holds it, so the two never meet in the tables.
pub const CALLSITE_PREFIX: &str = "\u{1}site\n";

/// One frame of a call site, as its key holds it: the object's path, its
/// build id (empty without one) and the return address relative to the
/// object's load bias (the address in the file; absolute when no object
/// holds it, with an empty path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteFrame {
    /// Path of the object.
    pub object: String,
    /// Its GNU build id in hex, or empty.
    pub build_id: String,
    /// The return address, less the object's load bias.
    pub offset: u64,
}

/// The key of a call site in the program's call-path table: the same text
/// for the same place in the same binary on every rank, whatever its load
/// address.
pub fn callsite_key(frames: &[SiteFrame]) -> String {
    let mut key = CALLSITE_PREFIX.to_string();
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            key.push('\n');
        }
        key.push_str(&format!("{}\t{}\t{:x}", f.object, f.build_id, f.offset));
    }
    key
}

/// The frames of a call-site key; `None` for any other call path.
pub fn callsite_frames(key: &str) -> Option<Vec<SiteFrame>> {
    let rest = key.strip_prefix(CALLSITE_PREFIX)?;
    rest.split('\n')
        .map(|line| {
            let mut parts = line.rsplitn(3, '\t');
            let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
            let build_id = parts.next()?.to_string();
            let object = parts.next()?.to_string();
            Some(SiteFrame {
                object,
                build_id,
                offset,
            })
        })
        .collect()
}

/// The name of the function whose entry is `f`: the installed names'
/// ([`crate::names::function`]), else its address in its object, which
/// is the same on every rank running the same binary.
fn function_name(f: &SiteFrame) -> String {
    crate::names::function(&f.object, &f.build_id, f.offset).unwrap_or_else(|| {
        let object = f.object.rsplit('/').next().unwrap_or("");
        format!("{object}+{:#x}", f.offset)
    })
}

/// The folded ones of `comms` (a table's, its first at id `first`), by id.
fn folded_of(comms: &[(CommDef, u32)], first: u32) -> FxHashMap<u32, CommDef> {
    (comms.iter().zip(first..))
        .filter(|((_, o), _)| *o == FOLDED)
        .map(|((c, _), id)| (id, c.clone()))
        .collect()
}

fn put(table: &mut Vec<u32>, local: u32, global: u32) -> bool {
    if local >= MAX_LOCAL_ID {
        return false;
    }
    let i = local as usize;
    if table.len() <= i {
        table.resize(i + 1, UNDEFINED);
    }
    table[i] = global;
    true
}

#[inline]
fn get(table: &[u32], local: u32) -> u32 {
    table.get(local as usize).copied().unwrap_or(UNDEFINED)
}

impl Translation {
    /// Learns `defs`, interning them in `unifier`.
    pub fn define(&mut self, defs: &[Def], unifier: &mut Unifier) {
        for def in defs {
            let ok = match def {
                Def::Comm {
                    id,
                    members,
                    remote,
                } => {
                    let comm = CommDef {
                        members: members.clone(),
                        remote: remote.clone(),
                    };
                    let seen = self.occurrences.entry(comm_hash(&comm)).or_insert(0);
                    let occurrence = *seen;
                    *seen += 1;
                    let global = unifier.intern_comm(comm, occurrence);
                    let ok = put(&mut self.comms, *id, global);
                    // Kept whether or not this server folded it: another
                    // analyser of the job, or a partial merged, may have.
                    if ok {
                        let i = *id as usize;
                        if self.comm_occurrences.len() <= i {
                            self.comm_occurrences.resize(i + 1, 0);
                        }
                        self.comm_occurrences[i] = occurrence;
                    }
                    ok
                }
                Def::File { id, path } => {
                    let global = unifier.intern_file(path);
                    put(&mut self.files, *id, global)
                }
                Def::Name { id, kind, name } => {
                    let resolved = match kind {
                        NameKind::Construct => self.construct_name(name),
                        _ => None,
                    };
                    let global = unifier.intern_name(*kind, resolved.as_deref().unwrap_or(name));
                    put(&mut self.names, *id, global)
                }
                Def::Object {
                    path,
                    build_id,
                    bias,
                    start,
                    size,
                } => {
                    self.objects.push(MappedObject {
                        path: path.clone(),
                        build_id: build_id.clone(),
                        bias: *bias,
                        start: *start,
                        end: start.saturating_add(*size),
                    });
                    true
                }
                Def::Callsite { id, frames } => {
                    let frames: Vec<SiteFrame> = frames.iter().map(|&a| self.frame(a)).collect();
                    let global = unifier.intern_path(&callsite_key(&frames));
                    *id <= u16::MAX as u32 && put(&mut self.sites, *id, global)
                }
                Def::Function { id, addr } => {
                    let name = function_name(&self.frame(*addr));
                    let global = unifier.intern_name(NameKind::Function, &name);
                    put(&mut self.functions, *id, global)
                }
            };
            if !ok {
                self.ignored += 1;
            }
        }
    }

    /// The function an OpenMP construct named `object+0xoffset` by the
    /// probe (no dynamic symbol held it) is in, by the object's full symbol
    /// table and debug information; `None` when the name is not of that
    /// form, no object of this process has that file name, or nothing
    /// names the place.
    fn construct_name(&self, name: &str) -> Option<String> {
        let (file, offset) = name.rsplit_once("+0x")?;
        let offset = u64::from_str_radix(offset, 16).ok()?;
        let object = self
            .objects
            .iter()
            .rev()
            .find(|o| o.path.rsplit('/').next() == Some(file))?;
        crate::names::function(&object.path, &object.build_id, offset)
    }

    /// Where absolute address `addr` of this process lies: in the latest
    /// object defined over it (a range reused after `dlclose`), or nowhere.
    fn frame(&self, addr: u64) -> SiteFrame {
        match self
            .objects
            .iter()
            .rev()
            .find(|o| (o.start..o.end).contains(&addr))
        {
            Some(o) => SiteFrame {
                object: o.path.clone(),
                build_id: o.build_id.clone(),
                offset: addr.wrapping_sub(o.bias),
            },
            None => SiteFrame {
                object: String::new(),
                build_id: String::new(),
                offset: addr,
            },
        }
    }

    /// The global id (a call path) of local call site `local`, or
    /// [`UNDEFINED`] (0, or never defined).
    #[inline]
    pub fn site(&self, local: u16) -> u32 {
        if local == 0 {
            return UNDEFINED;
        }
        get(&self.sites, local as u32)
    }

    /// The global id of local communicator `local`, or [`UNDEFINED`].
    #[inline]
    pub fn comm(&self, local: u32) -> u32 {
        get(&self.comms, local)
    }

    /// The global name id of local function `local`, or [`UNDEFINED`].
    #[inline]
    pub fn function(&self, local: u32) -> u32 {
        get(&self.functions, local)
    }
    /// Which communicator with its members local communicator `local` is
    /// (0 for the first): the same on every member and every server. Past
    /// the caps ([`FOLDED`]) its global id is shared, and this tells its
    /// collectives and messages apart; it is carried for every
    /// communicator, since whether one is folded depends on what else a
    /// server saw.
    #[inline]
    pub fn comm_occurrence(&self, local: u32) -> u32 {
        self.comm_occurrences
            .get(local as usize)
            .copied()
            .unwrap_or(0)
    }
    /// The global id of local file `local`, or [`UNDEFINED`].
    #[inline]
    pub fn file(&self, local: u32) -> u32 {
        get(&self.files, local)
    }
    /// The global id of local name `local`, or [`UNDEFINED`].
    #[inline]
    pub fn name(&self, local: u32) -> u32 {
        get(&self.names, local)
    }
}

fn comm_hash(c: &CommDef) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_servers_folded_communicator_maps_by_occurrence_within_bounds() {
        // The other server folded members {0, 1} (occurrences 1 and 70);
        // here occurrence 1 has an id of its own, 70 is folded everywhere.
        let members = CommDef {
            members: vec![0, 1],
            remote: Vec::new(),
        };
        let mut there = Unifier::new();
        let folded = there.intern_comm(members.clone(), FOLDED);
        let mut here = Unifier::new();
        let own = here.intern_comm(members.clone(), 1);
        let mut ids = here.absorb(&there.tables());
        let plain = ids.comm(folded);
        assert_ne!(plain, own);
        ids.resolve([(folded, 1), (folded, 70), (folded, 1)], &mut here);
        assert_eq!(ids.comm_at(folded, 1), own);
        assert_eq!(ids.comm_at(folded, 70), plain);
        assert_eq!(
            ids.at.len(),
            1,
            "occurrences past the alike cap need no entry"
        );
    }

    #[test]
    fn two_processes_agree_on_global_ids_whatever_their_local_ids() {
        let mut u = Unifier::new();
        let (mut a, mut b) = (Translation::default(), Translation::default());
        let world = |id| Def::Comm {
            id,
            members: vec![0, 1],
            remote: vec![],
        };
        a.define(
            &[
                world(1),
                world(2),
                Def::File {
                    id: 3,
                    path: "out".into(),
                },
            ],
            &mut u,
        );
        b.define(
            &[
                Def::File {
                    id: 7,
                    path: "out".into(),
                },
                world(8),
                world(9),
            ],
            &mut u,
        );
        assert_eq!(a.file(3), b.file(7));
        assert_eq!(a.comm(1), b.comm(8), "the first comm over {{0,1}} is one");
        assert_eq!(a.comm(2), b.comm(9), "the dup is another");
        assert_ne!(a.comm(1), a.comm(2));
        assert_eq!(a.comm(5), UNDEFINED);
        assert_eq!(u.comm_count(), 2);
    }

    #[test]
    fn tables_absorbed_elsewhere_map_to_the_same_things_and_canonical_order_ignores_arrival() {
        let defs = |first: &str, second: &str| {
            vec![
                Def::File {
                    id: 1,
                    path: first.into(),
                },
                Def::File {
                    id: 2,
                    path: second.into(),
                },
                Def::Comm {
                    id: 3,
                    members: vec![0, 1],
                    remote: vec![],
                },
                Def::Comm {
                    id: 4,
                    members: vec![0, 1],
                    remote: vec![],
                },
            ]
        };
        let (mut a, mut b) = (Unifier::new(), Unifier::new());
        let (mut ta, mut tb) = (Translation::default(), Translation::default());
        ta.define(&defs("x", "y"), &mut a);
        tb.define(&defs("y", "x"), &mut b);
        assert_ne!(ta.file(1), tb.file(2), "arrival order numbers them");
        let ids = a.absorb(&b.tables());
        assert_eq!(ids.file(tb.file(2)), ta.file(1));
        assert_eq!(ids.comm(tb.comm(4)), ta.comm(4));
        assert_eq!(ids.file(UNDEFINED), UNDEFINED);
        let (ca, _) = a.canonical();
        let (cb, _) = b.canonical();
        assert_eq!(ca.tables(), cb.tables());
    }

    #[test]
    fn files_beyond_the_cap_share_one_other_id_and_are_said() {
        let mut u = Unifier::new();
        let mut t = Translation::default();
        let defs: Vec<Def> = (0..MAX_FILES as u32 + 500)
            .map(|i| Def::File {
                id: i + 1,
                path: format!("/data/f{i}"),
            })
            .collect();
        t.define(&defs, &mut u);
        let last_own = t.file(MAX_FILES as u32);
        assert_eq!(
            u.file(last_own),
            Some(format!("/data/f{}", MAX_FILES - 1).as_str())
        );
        let other = t.file(MAX_FILES as u32 + 1);
        assert_eq!(u.file(other), Some(OTHER_FILES));
        assert_eq!(t.file(MAX_FILES as u32 + 500), other);
        assert_eq!(u.files.len(), MAX_FILES + 1);
        assert_eq!(
            u.file_ids.len(),
            MAX_FILES,
            "names beyond the cap are not kept"
        );
        let said = u.diagnostics();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("500 further"), "{said:?}");
        // Another kind is not affected.
        t.define(
            &[Def::Name {
                id: 1,
                kind: NameKind::Region,
                name: "solve".into(),
            }],
            &mut u,
        );
        assert_eq!(u.name(t.name(1)), Some("solve"));
    }

    #[test]
    fn communicators_past_the_caps_share_an_id_per_member_set_and_keep_their_occurrence() {
        // Two ranks split the world and free the result 1,500 times (as
        // Quantum ESPRESSO does every step), each its own stream.
        let comm = |id: u32, members: Vec<i32>| Def::Comm {
            id,
            members,
            remote: Vec::new(),
        };
        let splits =
            |first: u32| -> Vec<Def> { (0..1500).map(|i| comm(first + i, vec![0, 1])).collect() };
        let mut u = Unifier::new();
        let (mut a, mut b) = (Translation::default(), Translation::default());
        a.define(&splits(1), &mut u);
        b.define(&splits(7), &mut u);
        // The first MAX_ALIKE_COMMS are their own; the rest share one id,
        // with the members, and the same occurrence on both ranks (which
        // the ones with ids of their own keep too: another server may have
        // folded them).
        let alike = MAX_ALIKE_COMMS;
        let own = a.comm(alike);
        assert_eq!(own, b.comm(6 + alike));
        assert_eq!(a.comm_occurrence(alike), alike - 1);
        assert_eq!(b.comm_occurrence(6 + alike), alike - 1);
        let shared = a.comm(1 + alike);
        assert_ne!(shared, own);
        assert_eq!(a.comm(1500), shared);
        assert_eq!(b.comm(7 + 1499), shared);
        assert_eq!(u.comm(shared).unwrap().members, vec![0, 1]);
        for i in [alike, 1499] {
            assert_eq!(a.comm_occurrence(1 + i), i);
            assert_eq!(b.comm_occurrence(7 + i), i);
        }
        assert_eq!(u.comm_count(), alike as usize + 1);
        let said = u.diagnostics();
        assert_eq!(said.len(), 1, "{said:?}");
        let folded = 2 * (1500 - alike as u64);
        assert!(
            said[0].contains(&format!("{folded} definition(s)")) && said[0].contains("(1 set(s))"),
            "{said:?}"
        );
        assert!(!said[0].contains("no members"), "{said:?}");
        // A server that saw 900 other communicators first folds the same
        // ones: occurrences, not what else came, decide.
        let mut v = Unifier::new();
        let mut c = Translation::default();
        let others: Vec<Def> = (0..900)
            .map(|i| comm(5000 + i, vec![9, 10 + i as i32]))
            .collect();
        c.define(&others, &mut v);
        c.define(&splits(1), &mut v);
        for i in 1..=1500 {
            assert_eq!(v.is_folded(c.comm(i)), u.is_folded(a.comm(i)), "split {i}");
            assert_eq!(c.comm_occurrence(i), a.comm_occurrence(i), "split {i}");
        }
        // Past MAX_COMMS in all, further member sets get a shared id each;
        // past as many sets (999 more here), the rest are one with no
        // members.
        let defs: Vec<Def> = (0..MAX_COMMS as i32 * 2)
            .map(|i| comm(2000 + i as u32, vec![0, 2 + i]))
            .collect();
        a.define(&defs, &mut u);
        let kept = MAX_COMMS - alike as usize;
        let first_set = a.comm(2000 + kept as u32);
        assert!(u.is_folded(first_set) && first_set != shared);
        assert_eq!(u.comm(first_set).unwrap().members, vec![0, 2 + kept as i32]);
        let last = a.comm(2000 + kept as u32 + MAX_COMMS as u32 - 2);
        assert!(u.is_folded(last));
        let other = a.comm(2000 + kept as u32 + MAX_COMMS as u32 - 1);
        assert!(u.comm(other).unwrap().members.is_empty());
        let said = u.diagnostics();
        assert!(said[0].contains("(1000 set(s))"), "{said:?}");
        assert!(said[0].contains("one with no members"), "{said:?}");
        // Tables keep the shared ids apart from the others when merged
        // and put in canonical order.
        let (canonical, ids) = u.canonical();
        let c = ids.comm(shared);
        assert_eq!(canonical.comm(c).unwrap().members, vec![0, 1]);
        assert_ne!(c, ids.comm(own));
        assert!(canonical.is_folded(c) && !canonical.is_folded(ids.comm(own)));
    }

    #[test]
    fn regions_beyond_the_cap_share_one_other_name() {
        let mut u = Unifier::new();
        let mut t = Translation::default();
        let defs: Vec<Def> = (0..MAX_NAMES as u32 + 2)
            .map(|i| Def::Name {
                id: i + 1,
                kind: NameKind::Region,
                name: format!("r{i}"),
            })
            .collect();
        t.define(&defs, &mut u);
        let other = t.name(MAX_NAMES as u32 + 1);
        assert_eq!(u.name(other), Some("<other regions>"));
        assert_eq!(t.name(MAX_NAMES as u32 + 2), other);
        assert_eq!(u.diagnostics().len(), 1);
    }

    #[test]
    fn an_absurd_local_id_is_ignored_not_allocated() {
        let mut u = Unifier::new();
        let mut t = Translation::default();
        t.define(
            &[Def::File {
                id: u32::MAX - 1,
                path: "x".into(),
            }],
            &mut u,
        );
        assert_eq!(t.ignored, 1);
        assert_eq!(t.file(u32::MAX - 1), UNDEFINED);
    }
}
