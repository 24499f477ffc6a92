//! Names for call sites, given by the program that runs the analyses: the
//! analyses read no files (they are a function of their input), so the
//! reading of objects' symbol and line tables lives with the server
//! (`hark_server::resolve`), which installs it here when it starts.

use std::sync::OnceLock;

/// Where a return address is, as far as the object tells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// Source file, with line information only.
    pub file: Option<String>,
    /// Source line, with line information only.
    pub line: Option<u32>,
    /// The enclosing function, demangled (with `+0x..` when no line is
    /// known), from the symbol table or the debug information.
    pub symbol: Option<String>,
}

/// What names a return address: `offset` (less the load bias) in the
/// object at `path` whose build id is `build_id`.
pub trait Names: Send + Sync {
    /// Where the address is; [`Place::default`] when nothing is known.
    fn place(&self, path: &str, build_id: &str, offset: u64) -> Place;

    /// The demangled name of the function whose entry is `offset`; by
    /// default the function [`Names::place`] finds there.
    fn function(&self, path: &str, build_id: &str, offset: u64) -> Option<String> {
        // `place` takes a return address, the byte after a call.
        let symbol = self.place(path, build_id, offset + 1).symbol?;
        Some(match symbol.rsplit_once('+') {
            Some((name, off)) if off.starts_with("0x") => name.to_string(),
            _ => symbol,
        })
    }
}

static NAMES: OnceLock<&'static dyn Names> = OnceLock::new();

/// Installs the names the analyses use (the first one installed holds).
pub fn install(names: &'static dyn Names) {
    let _ = NAMES.set(names);
}

/// Where `offset` in the object at `path` is, by the installed names;
/// nothing when none are installed.
pub fn place(path: &str, build_id: &str, offset: u64) -> Place {
    NAMES
        .get()
        .map_or_else(Place::default, |n| n.place(path, build_id, offset))
}

/// The name of the function whose entry is `offset` in the object at
/// `path`, by the installed names; `None` when none are installed or they
/// know nothing of it.
pub fn function(path: &str, build_id: &str, offset: u64) -> Option<String> {
    NAMES.get()?.function(path, build_id, offset)
}
