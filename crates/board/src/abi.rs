//! The plugin C ABI, version 1: the `#[repr(C)]` types a plugin library and
//! the board exchange, and helpers for plugins written in Rust.
//!
//! A plugin is a shared library exporting one function,
//! [`ENTRY_SYMBOL`] (`hark_board_plugin_v1`), of type [`EntryPointV1`]. It
//! returns a pointer to a [`PluginV1`] descriptor that lives as long as the
//! library: the ABI version, a name, and a table of knowledge sources
//! ([`KsV1`]: name, sensitivities as type names, flags, operation).
//!
//! Entries cross the boundary as bytes ([`EntryV1`]): an entry whose payload
//! is a `Vec<u8>` is shown as its bytes; any other payload as a null pointer
//! and zero length (the plugin still sees its type and key). What a plugin
//! submits through [`HostV1::submit`] becomes an entry with a `Vec<u8>`
//! payload, with the job's key.
//!
//! Panics: a Rust panic cannot cross an `extern "C"` function (Rust aborts
//! the process if one tries), and a panic from the plugin's own copy of the
//! standard library could not be caught by the board anyway. So a Rust plugin
//! wraps each operation in [`guard`], which catches the panic inside the
//! plugin and returns [`STATUS_PANICKED`]; the board counts it in
//! [`crate::KsStats::panics`] and goes on. Operations return
//! [`STATUS_OK`], or [`STATUS_ERROR`] after [`HostV1::report`]ing why.
//!
//! See `crates/board/plugin-example` for a complete plugin.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The ABI version this board speaks. A plugin whose descriptor says
/// otherwise is refused.
pub const ABI_VERSION: u32 = 1;

/// The name of the function a plugin exports.
pub const ENTRY_SYMBOL: &str = "hark_board_plugin_v1";

/// The type of the exported entry function: returns the descriptor, which
/// must stay valid and unchanged while the library is loaded.
pub type EntryPointV1 = unsafe extern "C" fn() -> *const PluginV1;

/// [`KsV1::flags`]: run the jobs of one key in order
/// ([`crate::KnowledgeSource::serial_by_key`]).
pub const FLAG_SERIAL_BY_KEY: u32 = 1;

/// An operation's result: done.
pub const STATUS_OK: i32 = 0;
/// An operation's result: failed (after reporting why); counted as an error.
pub const STATUS_ERROR: i32 = 1;
/// An operation's result: panicked (caught by [`guard`]); counted as a panic.
pub const STATUS_PANICKED: i32 = 2;

/// A plugin's descriptor.
#[repr(C)]
pub struct PluginV1 {
    /// Must be [`ABI_VERSION`].
    pub abi_version: u32,
    /// The plugin's name, UTF-8, NUL-terminated.
    pub name: *const c_char,
    /// The knowledge sources the plugin offers.
    pub knowledge_sources: *const KsV1,
    /// How many.
    pub knowledge_source_count: usize,
}

// SAFETY: a descriptor is immutable data (pointers to static strings and
// tables) once returned; sharing it between threads reads only.
unsafe impl Sync for PluginV1 {}

/// One knowledge source of a plugin.
#[repr(C)]
pub struct KsV1 {
    /// Its name, UTF-8, NUL-terminated.
    pub name: *const c_char,
    /// Its sensitivities: type names, UTF-8, NUL-terminated.
    pub sensitivities: *const *const c_char,
    /// How many sensitivities (at least one).
    pub sensitivity_count: usize,
    /// [`FLAG_SERIAL_BY_KEY`] or 0.
    pub flags: u32,
    /// The operation.
    pub op: OpV1,
    /// Passed back to `op` untouched.
    pub user: *const c_void,
}

// SAFETY: as for `PluginV1`; `user` is only passed back to the plugin, which
// promises its operations may run on many threads at once.
unsafe impl Sync for KsV1 {}

/// An operation: called with the host, the job's entries (one per
/// sensitivity) and the knowledge source's `user` pointer. May run on many
/// threads at once. Returns a `STATUS_*`.
pub type OpV1 = unsafe extern "C" fn(
    host: *const HostV1,
    entries: *const EntryV1,
    entry_count: usize,
    user: *const c_void,
) -> i32;

/// An entry as a plugin sees it. Valid only during the operation call.
#[repr(C)]
pub struct EntryV1 {
    /// The entry's type name, UTF-8, NUL-terminated.
    pub type_name: *const c_char,
    /// The payload's bytes, or null if the payload is not bytes.
    pub data: *const u8,
    /// Their length (0 if `data` is null).
    pub len: usize,
    /// The job's key, if `has_key` is 1.
    pub key: u64,
    /// 1 if the job has a key, else 0.
    pub has_key: u32,
}

/// What the board offers an operation. Valid only during the call.
#[repr(C)]
pub struct HostV1 {
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// Opaque; pass it back to the functions below.
    pub ctx: *mut c_void,
    /// Submits `len` bytes at `data` as an entry of type `type_name` to the
    /// job's level with the job's key. Returns [`STATUS_OK`] or
    /// [`STATUS_ERROR`] (bad type name).
    pub submit: unsafe extern "C" fn(
        ctx: *mut c_void,
        type_name: *const c_char,
        data: *const u8,
        len: usize,
    ) -> i32,
    /// Records an error message (UTF-8, NUL-terminated) for the statistics.
    pub report: unsafe extern "C" fn(ctx: *mut c_void, message: *const c_char),
}

/// Runs a plugin operation, turning a panic into [`STATUS_PANICKED`] (and
/// reporting the panic message through `host`, when there is one).
///
/// Use it as the whole body of every `extern "C"` operation of a Rust plugin.
///
/// # Safety
///
/// `host` must be null or the pointer passed to the running operation.
pub unsafe fn guard(host: *const HostV1, op: impl FnOnce() -> i32) -> i32 {
    match catch_unwind(AssertUnwindSafe(op)) {
        Ok(status) => status,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            if !host.is_null() {
                let text = std::ffi::CString::new(format!("plugin operation panicked: {message}"))
                    .unwrap_or_default();
                // SAFETY: `host` is the non-null pointer the board passed to
                // this operation, valid for the duration of the call.
                unsafe { ((*host).report)((*host).ctx, text.as_ptr()) };
            }
            STATUS_PANICKED
        }
    }
}

/// A safe view of an [`EntryV1`] for Rust plugins.
pub struct EntryRef<'a> {
    /// The type name.
    pub type_name: &'a str,
    /// The payload bytes (empty if the payload is not bytes).
    pub data: &'a [u8],
    /// The job's key.
    pub key: Option<u64>,
}

/// Views the entries passed to an operation.
///
/// # Safety
///
/// `entries` and `count` must be the ones the board passed to the operation
/// being run, and the views must not outlive that call.
pub unsafe fn entries<'a>(entries: *const EntryV1, count: usize) -> Vec<EntryRef<'a>> {
    if entries.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: the board passes `count` valid, initialised entries.
    let raw = unsafe { std::slice::from_raw_parts(entries, count) };
    raw.iter()
        .map(|e| EntryRef {
            // SAFETY: the board passes NUL-terminated UTF-8 type names that
            // live as long as the board.
            type_name: unsafe { CStr::from_ptr(e.type_name) }
                .to_str()
                .unwrap_or(""),
            data: if e.data.is_null() {
                &[]
            } else {
                // SAFETY: `data` points to `len` bytes kept alive by the
                // entry, which the job holds for the whole call.
                unsafe { std::slice::from_raw_parts(e.data, e.len) }
            },
            key: (e.has_key == 1).then_some(e.key),
        })
        .collect()
}

/// Submits bytes through `host` (see [`HostV1::submit`]).
///
/// # Safety
///
/// `host` must be the pointer passed to the running operation.
pub unsafe fn submit(host: *const HostV1, type_name: &CStr, data: &[u8]) -> i32 {
    // SAFETY: the caller guarantees `host` is valid during this call.
    unsafe { ((*host).submit)((*host).ctx, type_name.as_ptr(), data.as_ptr(), data.len()) }
}

/// Reports an error message through `host` (see [`HostV1::report`]).
///
/// # Safety
///
/// `host` must be the pointer passed to the running operation.
pub unsafe fn report(host: *const HostV1, message: &str) {
    let text = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the caller guarantees `host` is valid during this call.
    unsafe { ((*host).report)((*host).ctx, text.as_ptr()) }
}
