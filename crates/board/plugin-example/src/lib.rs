//! An example knowledge-source plugin for `hark-board`, and the plugin
//! tutorial.
//!
//! A plugin is a `cdylib` exporting one function, `hark_board_plugin_v1`,
//! that returns a static descriptor: the ABI version, a name and a table of
//! knowledge sources (see `hark_board::abi`). This one offers two:
//!
//! - `example.sum`, sensitive to `example.numbers` (little-endian `u64`s):
//!   submits their sum as `example.sum` (8 bytes, little-endian), with the
//!   job's key. Serial by key, to show the flag.
//! - `example.explode`, sensitive to `example.bomb`: panics, to show that a
//!   panicking operation is contained (the board counts it and goes on).
//!
//! Rules every plugin operation follows:
//!
//! - **Threading**: it may run on several worker threads at once; shared
//!   state needs its own synchronisation (these two have none).
//! - **Errors**: report with `abi::report` and return `STATUS_ERROR`; never
//!   print. The board counts errors per knowledge source.
//! - **Panics**: the whole body is inside `abi::guard`, so a panic becomes
//!   `STATUS_PANICKED` instead of unwinding into C (which would abort).
//! - **Names**: types and knowledge sources are named `<plugin>.<thing>`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_void};

use hark_board::abi::{self, EntryV1, HostV1, KsV1, PluginV1};

#[cfg(not(feature = "wrong-abi-version"))]
const VERSION: u32 = abi::ABI_VERSION;
#[cfg(feature = "wrong-abi-version")]
const VERSION: u32 = 99;

/// Sums the `u64`s of each `example.numbers` entry.
unsafe extern "C" fn sum(
    host: *const HostV1,
    entries: *const EntryV1,
    count: usize,
    _user: *const c_void,
) -> i32 {
    // SAFETY: `host` is the running call's host.
    unsafe { abi::guard(host, || sum_body(host, entries, count)) }
}

/// # Safety
///
/// The arguments are the running call's own.
unsafe fn sum_body(host: *const HostV1, entries: *const EntryV1, count: usize) -> i32 {
    {
        // SAFETY: the board's own arguments for this call.
        let entries = unsafe { abi::entries(entries, count) };
        let Some(numbers) = entries.first() else {
            return abi::STATUS_ERROR;
        };
        if numbers.data.len() % 8 != 0 {
            // SAFETY: `host` is the running call's host.
            unsafe { abi::report(host, "example.numbers is not a whole number of u64s") };
            return abi::STATUS_ERROR;
        }
        let total: u64 = numbers
            .data
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .sum();
        // SAFETY: `host` is the running call's host.
        unsafe { abi::submit(host, c"example.sum", &total.to_le_bytes()) }
    }
}

/// Always panics: the test of containment.
unsafe extern "C" fn explode(
    host: *const HostV1,
    _entries: *const EntryV1,
    _count: usize,
    _user: *const c_void,
) -> i32 {
    // SAFETY: `host` is the running call's host.
    unsafe { abi::guard(host, || panic!("example.explode was asked to explode")) }
}

struct Names([*const c_char; 1]);
// SAFETY: pointers to static C string literals, never written.
unsafe impl Sync for Names {}

static NUMBERS: Names = Names([c"example.numbers".as_ptr()]);
static BOMB: Names = Names([c"example.bomb".as_ptr()]);

static KNOWLEDGE_SOURCES: [KsV1; 2] = [
    KsV1 {
        name: c"example.sum".as_ptr(),
        sensitivities: NUMBERS.0.as_ptr(),
        sensitivity_count: 1,
        flags: abi::FLAG_SERIAL_BY_KEY,
        op: sum,
        user: std::ptr::null(),
    },
    KsV1 {
        name: c"example.explode".as_ptr(),
        sensitivities: BOMB.0.as_ptr(),
        sensitivity_count: 1,
        flags: 0,
        op: explode,
        user: std::ptr::null(),
    },
];

static PLUGIN: PluginV1 = PluginV1 {
    abi_version: VERSION,
    name: c"example".as_ptr(),
    knowledge_sources: KNOWLEDGE_SOURCES.as_ptr(),
    knowledge_source_count: KNOWLEDGE_SOURCES.len(),
};

/// The plugin's entry point: the board calls it once after loading.
#[no_mangle]
pub extern "C" fn hark_board_plugin_v1() -> *const PluginV1 {
    &PLUGIN
}
