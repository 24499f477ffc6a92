//! Names for call sites: the function, file and line of a return address in
//! an object (executable or library), read from the object's symbol tables
//! and DWARF line tables.
//!
//! Each object is read once per `hark` process and kept, keyed by its path
//! and build id ([`Resolver`]), with the places found in it: a served job's
//! end names its call sites, and the next job of the same program names
//! the same ones. The line comes only from debug information
//! (the object's own, or the one Debian's `-dbgsym` packages install under
//! `/usr/lib/debug/.build-id/`) and only when the file on disk is the one
//! the process ran (same build id): otherwise the call site keeps the
//! function and offset from the symbol table, or only the object's name —
//! never a line that may be wrong.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use hark_analyses::names::{Names, Place};
use object::{Object, ObjectSymbol, SymbolKind};

/// One object's symbols and line tables.
struct Image {
    /// Text symbols, by start address: (address, size, mangled name).
    symbols: Vec<(u64, u64, String)>,
    /// DWARF lines and functions, when the object or its debug file has
    /// them (the loader caches what it parsed, so it is not shared).
    lines: Option<Mutex<addr2line::Loader>>,
    /// Places found so far, by return address: as many as the object has
    /// call sites that ran, at most.
    places: Mutex<HashMap<u64, Place>>,
}

/// An object's path and build id.
type ObjectKey = (String, String);

/// Objects read so far, by path and build id: a report reads each once
/// (`None`: missing, unreadable or another build).
pub struct Resolver {
    images: Mutex<HashMap<ObjectKey, Option<Arc<Image>>>>,
}

impl Resolver {
    /// The process's resolver.
    pub fn get() -> &'static Resolver {
        static R: OnceLock<Resolver> = OnceLock::new();
        R.get_or_init(|| Resolver {
            images: Mutex::new(HashMap::new()),
        })
    }

    /// Where return address `offset` (less the load bias) of the object at
    /// `path` with build id `build_id` is.
    pub fn place(&self, path: &str, build_id: &str, offset: u64) -> Place {
        let Some(image) = self.image(path, build_id) else {
            return Place::default();
        };
        if let Some(p) = hark_sync::lock(&image.places).get(&offset) {
            return p.clone();
        }
        let place = image.place(offset);
        hark_sync::lock(&image.places).insert(offset, place.clone());
        place
    }

    fn image(&self, path: &str, build_id: &str) -> Option<Arc<Image>> {
        let key = (path.to_string(), build_id.to_string());
        if let Some(i) = hark_sync::lock(&self.images).get(&key) {
            return i.clone();
        }
        // Read outside the lock: another call site's object may be read
        // meanwhile (the same one at worst twice).
        let image = Image::read(path, build_id).map(Arc::new);
        hark_sync::lock(&self.images).insert(key, image.clone());
        image
    }
}

impl Image {
    /// Reads the object at `path`; `None` when it is missing, unreadable,
    /// or another build than `build_id` (when the process knew one).
    fn read(path: &str, build_id: &str) -> Option<Image> {
        if path.is_empty() {
            return None;
        }
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let on_disk = file.build_id().ok().flatten().map(hex).unwrap_or_default();
        if !build_id.is_empty() && on_disk != build_id {
            return None;
        }
        let mut symbols: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            // Demangled when found ([`Image::symbol`]): a C++ library has
            // tens of thousands of symbols, and a report needs a few.
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        symbols.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        symbols.dedup_by_key(|s| s.0);
        let has_lines = file.section_by_name(".debug_line").is_some();
        let lines = if has_lines {
            addr2line::Loader::new(path).ok()
        } else {
            debug_file(build_id).and_then(|p| addr2line::Loader::new(p).ok())
        }
        .map(Mutex::new);
        Some(Image {
            symbols,
            lines,
            places: Mutex::default(),
        })
    }

    /// Where return address `offset` is: symbol, and file and line when the
    /// line tables have them.
    fn place(&self, offset: u64) -> Place {
        // The return address follows the call: the call is the byte before.
        let pc = offset.saturating_sub(1);
        let func = self.symbol(pc);
        let (file, line, dwarf_func) = self.line(pc);
        let symbol = match (line, func) {
            (Some(_), Some((name, _))) => Some(name),
            (Some(_), None) => dwarf_func,
            (None, Some((name, off))) => Some(format!("{name}+{off:#x}")),
            (None, None) => None,
        };
        Place {
            file: line.and(file),
            line,
            symbol,
        }
    }

    /// The text symbol holding `pc`, and the offset in it.
    fn symbol(&self, pc: u64) -> Option<(String, u64)> {
        let i = self.symbols.partition_point(|s| s.0 <= pc).checked_sub(1)?;
        let (addr, size, name) = &self.symbols[i];
        // A symbol without a size holds up to the next one.
        let end = if *size > 0 {
            addr + size
        } else {
            self.symbols.get(i + 1).map_or(u64::MAX, |s| s.0)
        };
        let name = addr2line::demangle_auto(name.as_str().into(), None);
        (pc < end).then(|| (name.into_owned(), pc - addr))
    }

    /// File, line and function of `pc` from the line tables.
    fn line(&self, pc: u64) -> (Option<String>, Option<u32>, Option<String>) {
        let Some(loader) = &self.lines else {
            return (None, None, None);
        };
        let loader = hark_sync::lock(loader);
        let loc = loader.find_location(pc).ok().flatten();
        let (file, line) = match loc {
            Some(l) if l.line.is_some_and(|n| n > 0) => (l.file.map(str::to_string), l.line),
            _ => (None, None),
        };
        let func = loader.find_frames(pc).ok().and_then(|mut frames| {
            let mut last = None;
            while let Ok(Some(f)) = frames.next() {
                if let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                    last = Some(name.into_owned());
                }
            }
            last
        });
        (file, line, func)
    }
}

/// The separate debug file Debian's `-dbgsym` packages install for an
/// object with build id `build_id`, if there is one.
fn debug_file(build_id: &str) -> Option<PathBuf> {
    if build_id.len() < 3 {
        return None;
    }
    let p = Path::new("/usr/lib/debug/.build-id")
        .join(&build_id[..2])
        .join(format!("{}.debug", &build_id[2..]));
    p.exists().then_some(p)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Names for Resolver {
    fn place(&self, path: &str, build_id: &str, offset: u64) -> Place {
        Resolver::place(self, path, build_id, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_object_gives_no_place() {
        let p = Resolver::get().place("/nonexistent/object", "", 0x1000);
        assert_eq!(p, Place::default());
    }

    #[test]
    fn a_place_is_found_once_per_object() {
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        let r = Resolver::get();
        let first = r.place(exe, "", 0x1234);
        let image = r.image(exe, "").expect("the test binary reads");
        assert_eq!(hark_sync::lock(&image.places).get(&0x1234), Some(&first));
        assert_eq!(r.place(exe, "", 0x1234), first);
        assert_eq!(
            image.place(0x1234),
            first,
            "the cache holds what a lookup finds"
        );
    }

    #[test]
    fn another_build_than_the_process_ran_gives_no_line() {
        let exe = std::env::current_exe().unwrap();
        let p = Resolver::get().place(exe.to_str().unwrap(), "00112233", 0x1000);
        assert_eq!(p, Place::default());
    }
}
