//! Loading knowledge sources from a shared library through the C ABI of
//! [`crate::abi`].
//!
//! The library is opened with `libloading`, its entry symbol called once,
//! and its descriptor checked — ABI version first, then every pointer and
//! name — before anything of it is used. Each knowledge source becomes an
//! ordinary [`KnowledgeSource`] whose operation holds the library open, so
//! the library is unloaded only when no registration uses it any more.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::sync::Arc;

use libloading::Library;

use crate::abi::{self, EntryV1, HostV1, KsV1, OpV1, PluginV1};
use crate::error::ErrorKind;
use crate::{Board, Context, Entry, EntryType, Error, KnowledgeSource};

/// A loaded plugin: its name and its knowledge sources, ready to register.
///
/// ```no_run
/// # fn main() -> Result<(), hark_board::Error> {
/// use hark_board::Board;
/// let board = Board::new(2);
/// // SAFETY: the library is a Hark board plugin we built ourselves.
/// let plugin = unsafe { board.load_plugin("target/debug/libhark_board_plugin_example.so")? };
/// for ks in plugin.knowledge_sources() {
///     let ks = ks.clone();
///     board.register_all(move |_level| ks.clone())?;
/// }
/// # Ok(()) }
/// ```
pub struct Plugin {
    name: String,
    knowledge_sources: Vec<KnowledgeSource>,
    _library: Arc<Library>,
}

impl Plugin {
    /// Opens the plugin library at `path`, checks its ABI version and
    /// descriptor, and makes its knowledge sources, with their sensitivity
    /// names interned on `board`.
    ///
    /// Errors: [`ErrorKind::PluginLoad`] if the library cannot be opened or
    /// has no `hark_board_plugin_v1` symbol, [`ErrorKind::PluginAbi`] if it
    /// was built for another ABI version, [`ErrorKind::PluginInvalid`] if its
    /// descriptor is malformed.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisers, and the board then calls its
    /// entry symbol and operations: the library must be a plugin whose code
    /// is sound (in particular, it keeps the descriptor valid while loaded
    /// and its operations never unwind — see [`abi::guard`]). Everything the
    /// board can check, it checks.
    pub unsafe fn load(board: &Board, path: &Path) -> Result<Plugin, Error> {
        let shown = path.display();
        // SAFETY: the caller vouches for the library's initialisers.
        let library = unsafe { Library::new(path) }.map_err(|e| {
            Error::new(
                ErrorKind::PluginLoad,
                format!("cannot open plugin {shown}: {e}"),
            )
        })?;
        // SAFETY: the symbol's type is fixed by the ABI; the caller vouches
        // that the library is a plugin, so the symbol has that type.
        let entry: abi::EntryPointV1 = unsafe {
            *library
                .get::<abi::EntryPointV1>(abi::ENTRY_SYMBOL.as_bytes())
                .map_err(|e| {
                    Error::new(
                        ErrorKind::PluginLoad,
                        format!(
                            "{shown} is not a Hark board plugin: no `{}` symbol ({e})",
                            abi::ENTRY_SYMBOL
                        ),
                    )
                })?
        };
        // SAFETY: calling the plugin's entry point, per the caller's promise.
        let desc = unsafe { entry() };
        if desc.is_null() {
            return Err(invalid(
                &shown,
                "its entry point returned a null descriptor",
            ));
        }
        // SAFETY: non-null, and valid while the library is loaded (ABI rule);
        // the version field comes first in every version of the descriptor.
        let version = unsafe { (*desc).abi_version };
        if version != abi::ABI_VERSION {
            return Err(Error::new(
                ErrorKind::PluginAbi,
                format!(
                    "plugin {shown} was built for board plugin ABI version {version}, but this \
                     board speaks version {}: rebuild the plugin against this hark-board",
                    abi::ABI_VERSION
                ),
            ));
        }
        // SAFETY: the version matches, so `desc` is a `PluginV1`.
        let desc: &PluginV1 = unsafe { &*desc };
        // SAFETY: a descriptor's strings are NUL-terminated (checked non-null).
        let name = unsafe { text(desc.name) }
            .ok_or_else(|| invalid(&shown, "its name is null or not UTF-8"))?;
        if desc.knowledge_source_count > 0 && desc.knowledge_sources.is_null() {
            return Err(invalid(&shown, "its knowledge-source table is null"));
        }
        let table: &[KsV1] = if desc.knowledge_source_count == 0 {
            &[]
        } else {
            // SAFETY: non-null, with the count the plugin gave.
            unsafe {
                std::slice::from_raw_parts(desc.knowledge_sources, desc.knowledge_source_count)
            }
        };
        let library = Arc::new(library);
        let mut knowledge_sources = Vec::with_capacity(table.len());
        for (i, ks) in table.iter().enumerate() {
            // SAFETY: as above for the descriptor's strings and tables.
            let made = unsafe { make_ks(board, ks, &library) };
            knowledge_sources.push(made.map_err(|why| {
                invalid(
                    &shown,
                    &format!("its knowledge source #{i} is malformed: {why}"),
                )
            })?);
        }
        Ok(Plugin {
            name: name.to_string(),
            knowledge_sources,
            _library: library,
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its knowledge sources; clone one to register it.
    pub fn knowledge_sources(&self) -> &[KnowledgeSource] {
        &self.knowledge_sources
    }
}

fn invalid(path: &std::path::Display<'_>, why: &str) -> Error {
    Error::new(
        ErrorKind::PluginInvalid,
        format!("plugin {path} is malformed: {why}"),
    )
}

/// # Safety
///
/// `p` is null or points to a NUL-terminated string that outlives `'a`.
unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// What the operation closure needs of one plugin knowledge source.
struct PluginOp {
    op: OpV1,
    user: *const c_void,
    /// The sensitivities' names, as the plugin will see them per entry.
    type_names: Vec<CString>,
    _library: Arc<Library>,
}

// SAFETY: `user` is only handed back to the plugin, whose ABI contract says
// its operations may run on any thread, many at once.
unsafe impl Send for PluginOp {}
// SAFETY: as above.
unsafe impl Sync for PluginOp {}

/// # Safety
///
/// `ks` comes from a descriptor validated for version 1.
unsafe fn make_ks(
    board: &Board,
    ks: &KsV1,
    library: &Arc<Library>,
) -> Result<KnowledgeSource, String> {
    // SAFETY: descriptor strings per the ABI.
    let name = unsafe { text(ks.name) }.ok_or("its name is null or not UTF-8")?;
    if ks.sensitivity_count == 0 || ks.sensitivities.is_null() {
        return Err(format!("'{name}' has no sensitivity"));
    }
    // SAFETY: non-null with the plugin's count.
    let names = unsafe { std::slice::from_raw_parts(ks.sensitivities, ks.sensitivity_count) };
    let mut types: Vec<EntryType> = Vec::with_capacity(names.len());
    let mut type_names = Vec::with_capacity(names.len());
    for &n in names {
        // SAFETY: descriptor strings per the ABI.
        let n = unsafe { text(n) }
            .ok_or_else(|| format!("'{name}' has a null or non-UTF-8 sensitivity"))?;
        types.push(board.intern(n));
        type_names.push(CString::new(n).map_err(|_| "a sensitivity name holds a NUL")?);
    }
    let op = PluginOp {
        op: ks.op,
        user: ks.user,
        type_names,
        _library: library.clone(),
    };
    let made = KnowledgeSource::new(name, &types, move |ctx, entries| run(&op, ctx, entries));
    Ok(if ks.flags & abi::FLAG_SERIAL_BY_KEY != 0 {
        made.serial_by_key()
    } else {
        made
    })
}

/// The host side of one call: what the plugin's callbacks act on.
struct Call<'c, 'b> {
    ctx: &'c mut Context<'b>,
    reported: Option<String>,
}

fn run(op: &PluginOp, ctx: &mut Context<'_>, entries: &[Entry]) {
    let key = ctx.key();
    let raw: Vec<EntryV1> = entries
        .iter()
        .zip(&op.type_names)
        .map(|(e, ty)| {
            let bytes = e.get::<Vec<u8>>().map(|v| v.as_slice());
            EntryV1 {
                type_name: ty.as_ptr(),
                data: bytes.map_or(std::ptr::null(), |b| b.as_ptr()),
                len: bytes.map_or(0, |b| b.len()),
                key: key.unwrap_or(0),
                has_key: key.is_some() as u32,
            }
        })
        .collect();
    let mut call = Call {
        ctx,
        reported: None,
    };
    let host = HostV1 {
        abi_version: abi::ABI_VERSION,
        ctx: &mut call as *mut Call<'_, '_> as *mut c_void,
        submit: host_submit,
        report: host_report,
    };
    // SAFETY: calling the plugin's operation with a valid host, `raw.len()`
    // valid entries (kept alive by `entries` during the call) and its own
    // `user` pointer, as the ABI says.
    let status = unsafe { (op.op)(&host, raw.as_ptr(), raw.len(), op.user) };
    let reported = call.reported.take();
    let counters = &call.ctx.ks.counters;
    match status {
        abi::STATUS_OK => {
            if let Some(message) = reported {
                counters.record_error(false, message);
            }
        }
        abi::STATUS_PANICKED => counters.record_error(
            true,
            reported.unwrap_or_else(|| "plugin operation panicked".into()),
        ),
        other => counters.record_error(
            false,
            reported.unwrap_or_else(|| format!("plugin operation failed with status {other}")),
        ),
    }
}

unsafe extern "C" fn host_submit(
    ctx: *mut c_void,
    type_name: *const c_char,
    data: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: `ctx` is the `Call` this board put in the `HostV1` for the
    // running operation; the plugin passes it back during that call.
    let call = unsafe { &mut *(ctx as *mut Call<'_, '_>) };
    // SAFETY: the ABI requires a NUL-terminated type name.
    let Some(name) = (unsafe { text(type_name) }) else {
        call.reported = Some("plugin submitted an entry with a null or non-UTF-8 type name".into());
        return abi::STATUS_ERROR;
    };
    let bytes = if data.is_null() || len == 0 {
        Vec::new()
    } else {
        // SAFETY: the ABI requires `len` readable bytes at `data`.
        unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
    };
    let ty = call.ctx.intern(name);
    call.ctx.submit(Entry::with_bytes(ty, bytes, len));
    abi::STATUS_OK
}

unsafe extern "C" fn host_report(ctx: *mut c_void, message: *const c_char) {
    // SAFETY: as in `host_submit`.
    let call = unsafe { &mut *(ctx as *mut Call<'_, '_>) };
    // SAFETY: the ABI requires a NUL-terminated message.
    let text = unsafe { text(message) }.unwrap_or("(a message that is not UTF-8)");
    call.reported = Some(text.to_string());
}
