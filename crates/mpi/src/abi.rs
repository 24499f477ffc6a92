//! The two MPI ABIs Hark speaks, told apart at run time.
//!
//! One `libhark.so` serves programs built with Open MPI and with MPICH. The
//! wrappers see every argument as a machine word (`usize`): on x86-64 SysV and
//! aarch64 every MPI argument — `int`, pointer, handle, `MPI_Aint`,
//! `MPI_Offset`, `MPI_Count` — travels in one integer register or one 8-byte
//! stack slot, so forwarding the words forwards the call. What differs between
//! the libraries is what the words mean, and that is all in this file:
//!
//! | what                    | Open MPI                         | MPICH                  |
//! |-------------------------|----------------------------------|------------------------|
//! | handles                 | pointers (8 bytes)               | `int` (4 bytes)        |
//! | `MPI_File`              | pointer                          | pointer                |
//! | predefined handles      | addresses of `ompi_mpi_*` symbols| integer constants      |
//! | `MPI_Status`            | 24 bytes: source, tag, error, cancelled, `size_t` count | 20 bytes: count_lo, count_hi_and_cancelled, source, tag, error |
//! | `MPI_ANY_SOURCE`        | -1                               | -2                     |
//! | `MPI_PROC_NULL`         | -2                               | -1                     |
//! | `MPI_ROOT`              | -4                               | -3                     |
//! | `MPI_IN_PLACE`          | `(void *)1`                      | `(void *)-1`           |
//! | `MPI_STATUS(ES)_IGNORE` | `NULL`                           | `(void *)1`            |
//!
//! Both libraries keep the received byte count in the status (Open MPI's
//! `_ucount`, MPICH's `count_lo` plus the high bits), so the probe reads it
//! without calling `MPI_Get_count`. The tests at the end of this file compile
//! a C program with each library's `mpicc` that prints these facts and check
//! them against the tables here.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// `MPI_ANY_TAG`, the same in both.
pub const ANY_TAG: i32 = -1;
/// `MPI_UNDEFINED`, the same in both.
pub const UNDEFINED: i32 = -32766;

/// Which library, as far as the ABI goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Open MPI 4.x and 5.x.
    OpenMpi,
    /// MPICH 3.x/4.x and its ABI-compatible derivatives.
    Mpich,
}

/// Constants and layouts of one flavour.
#[derive(Debug)]
pub struct Abi {
    /// Which library this is.
    pub flavour: Flavour,
    /// Bytes of a handle stored in memory (`MPI_Comm`, `MPI_Request`, ...).
    pub handle_size: usize,
    /// Bytes of one `MPI_Status`.
    pub status_size: usize,
    /// Offset of `MPI_SOURCE` in a status.
    pub status_source: usize,
    /// Offset of `MPI_TAG` in a status.
    pub status_tag: usize,
    /// `MPI_ANY_SOURCE`.
    pub any_source: i32,
    /// `MPI_PROC_NULL`.
    pub proc_null: i32,
    /// `MPI_ROOT`.
    pub root: i32,
    /// `MPI_IN_PLACE`, as a word.
    pub in_place: usize,
    /// `MPI_STATUS_IGNORE`, as a word.
    pub status_ignore: usize,
    /// `MPI_STATUSES_IGNORE`, as a word.
    pub statuses_ignore: usize,
    /// `MPI_COMM_WORLD`.
    pub comm_world: usize,
    /// `MPI_COMM_SELF`.
    pub comm_self: usize,
    /// `MPI_COMM_NULL`.
    pub comm_null: usize,
    /// `MPI_REQUEST_NULL`.
    pub request_null: usize,
    /// `MPI_DATATYPE_NULL`.
    pub datatype_null: usize,
    /// `MPI_BYTE`.
    pub datatype_byte: usize,
    /// `MPI_MESSAGE_NULL`.
    pub message_null: usize,
    /// `MPI_MESSAGE_NO_PROC`.
    pub message_no_proc: usize,
    /// `MPI_WIN_NULL` (no caller yet; the ABI test checks it).
    pub win_null: usize,
    /// `MPI_FILE_NULL` (no caller yet; the ABI test checks it).
    pub file_null: usize,
    /// The `MPI_APPNUM` attribute key.
    pub appnum_key: i32,
    /// `MPI_CART` as `MPI_Topo_test` reports it.
    pub topo_cart: i32,
    /// `MPI_GRAPH` as `MPI_Topo_test` reports it.
    pub topo_graph: i32,
    /// `MPI_ERR_OTHER`, returned when the real function is missing.
    pub err_other: i32,
}

/// MPICH's predefined handles are compile-time constants.
pub const MPICH: Abi = Abi {
    flavour: Flavour::Mpich,
    handle_size: 4,
    status_size: 20,
    status_source: 8,
    status_tag: 12,
    any_source: -2,
    proc_null: -1,
    root: -3,
    in_place: usize::MAX, // (void *)-1
    status_ignore: 1,
    statuses_ignore: 1,
    comm_world: 0x4400_0000,
    comm_self: 0x4400_0001,
    comm_null: 0x0400_0000,
    request_null: 0x2c00_0000,
    datatype_null: 0x0c00_0000,
    datatype_byte: 0x4c00_010d,
    message_null: 0x2c00_0000,
    message_no_proc: 0x6c00_0000,
    win_null: 0x2000_0000,
    file_null: 0,
    appnum_key: 0x6440_000d,
    topo_cart: 2,
    topo_graph: 1,
    err_other: 15,
};

/// Open MPI's layout; its predefined handles are filled in from `dlsym`.
const OPEN_MPI_LAYOUT: Abi = Abi {
    flavour: Flavour::OpenMpi,
    handle_size: 8,
    status_size: 24,
    status_source: 0,
    status_tag: 4,
    any_source: -1,
    proc_null: -2,
    root: -4,
    in_place: 1,
    status_ignore: 0,
    statuses_ignore: 0,
    comm_world: 0,
    comm_self: 0,
    comm_null: 0,
    request_null: 0,
    datatype_null: 0,
    datatype_byte: 0,
    message_null: 0,
    message_no_proc: 0,
    win_null: 0,
    file_null: 0,
    appnum_key: 4,
    topo_cart: 1,
    topo_graph: 2,
    err_other: 16,
};

impl Abi {
    /// The handle stored at `p` (an `MPI_Comm *`, an element of an
    /// `MPI_Request[]`, ...).
    ///
    /// # Safety
    /// `p` must point to a readable handle of this flavour.
    #[inline(always)]
    pub unsafe fn read_handle(&self, p: usize) -> usize {
        // SAFETY: the caller promises `p` points to a handle; unaligned reads
        // because Fortran arrays need not be 8-aligned.
        unsafe {
            if self.handle_size == 8 {
                (p as *const usize).read_unaligned()
            } else {
                (p as *const u32).read_unaligned() as usize
            }
        }
    }

    /// A handle passed by value: Open MPI's is the whole word, MPICH's the low
    /// 32 bits (the upper half of an `int` argument is unspecified).
    #[inline(always)]
    pub fn handle_arg(&self, w: usize) -> usize {
        if self.handle_size == 8 {
            w
        } else {
            w as u32 as usize
        }
    }

    /// `MPI_SOURCE`, `MPI_TAG` and the byte count of the status at `p`.
    ///
    /// # Safety
    /// `p` must point to a status of this flavour written by MPI.
    #[inline]
    pub unsafe fn read_status(&self, p: usize) -> (i32, i32, u64) {
        // SAFETY: the caller promises a whole status at `p`.
        unsafe {
            let src = ((p + self.status_source) as *const i32).read_unaligned();
            let tag = ((p + self.status_tag) as *const i32).read_unaligned();
            let bytes = match self.flavour {
                Flavour::OpenMpi => ((p + 16) as *const u64).read_unaligned(),
                Flavour::Mpich => {
                    let lo = (p as *const u32).read_unaligned() as u64;
                    let hi = ((p + 4) as *const u32).read_unaligned() as u64;
                    lo | ((hi >> 1) << 32)
                }
            };
            (src, tag, bytes)
        }
    }

    /// Whether the status at `p` says the request was cancelled.
    ///
    /// # Safety
    /// As for [`Abi::read_status`].
    #[inline]
    pub unsafe fn status_cancelled(&self, p: usize) -> bool {
        // SAFETY: the caller promises a whole status at `p`.
        unsafe {
            match self.flavour {
                Flavour::OpenMpi => ((p + 12) as *const i32).read_unaligned() != 0,
                Flavour::Mpich => ((p + 4) as *const u32).read_unaligned() & 1 != 0,
            }
        }
    }

    /// Whether a buffer argument is `MPI_IN_PLACE`.
    #[inline]
    pub fn is_in_place(&self, buf: usize) -> bool {
        buf == self.in_place
    }
}

static ABI: OnceLock<Abi> = OnceLock::new();
// 0: not yet detected, 1: Open MPI, 2: MPICH, 3: no MPI in the process.
static FLAVOUR: AtomicU8 = AtomicU8::new(0);

/// Addresses of a symbol under every Fortran spelling a compiler might use.
pub fn fortran_symbols(base: &str) -> [usize; 4] {
    let upper = base.to_ascii_uppercase();
    [
        sym(&format!("{base}\0")),
        sym(&format!("{base}_\0")),
        sym(&format!("{base}__\0")),
        sym(&format!("{upper}\0")),
    ]
}

fn sym(name: &str) -> usize {
    let Ok(c) = CStr::from_bytes_with_nul(name.as_bytes()) else {
        return 0;
    };
    // Data objects: see `find_data` for why the global scope comes first.
    crate::resolve::find_data(c) as usize
}

/// The ABI of the MPI library in this process, detected on first use: Open MPI
/// exports its predefined objects (`ompi_mpi_comm_world`), MPICH does not.
/// `None` while no MPI library is loaded.
#[inline(always)]
pub fn get() -> Option<&'static Abi> {
    match ABI.get() {
        Some(a) => Some(a),
        None => detect(),
    }
}

// Runs on the first MPI call of the process (and again until MPI is found).
#[cold]
#[inline(never)]
fn detect() -> Option<&'static Abi> {
    let world = sym("ompi_mpi_comm_world\0");
    let abi = if world != 0 {
        Abi {
            comm_world: world,
            comm_self: sym("ompi_mpi_comm_self\0"),
            comm_null: sym("ompi_mpi_comm_null\0"),
            request_null: sym("ompi_request_null\0"),
            datatype_null: sym("ompi_mpi_datatype_null\0"),
            datatype_byte: sym("ompi_mpi_byte\0"),
            message_null: sym("ompi_message_null\0"),
            message_no_proc: sym("ompi_message_no_proc\0"),
            win_null: sym("ompi_mpi_win_null\0"),
            file_null: sym("ompi_mpi_file_null\0"),
            ..OPEN_MPI_LAYOUT
        }
    } else if sym("PMPI_Init\0") != 0 {
        MPICH
    } else {
        FLAVOUR.store(3, Ordering::Relaxed);
        return None;
    };
    let abi = ABI.get_or_init(|| abi);
    FLAVOUR.store(
        match abi.flavour {
            Flavour::OpenMpi => 1,
            Flavour::Mpich => 2,
        },
        Ordering::Relaxed,
    );
    Some(abi)
}

/// Whether a Fortran entry point must record itself. Open MPI's Fortran
/// layers call `PMPI_*` directly, so our C wrappers never see those calls.
/// MPICH's `mpif.h`/`use mpi` layer calls the C `MPI_*` functions, where the
/// C wrapper records them; its `use mpi_f08` layer calls `PMPI_*` for the
/// functions without choice buffers (those are the `mpi_x_f08_` symbols; the
/// ones with buffers, `mpi_x_f08ts_`, call `MPI_x` and are not wrapped).
#[inline(always)]
pub fn fortran_records(f08: bool) -> bool {
    match FLAVOUR.load(Ordering::Relaxed) {
        1 => true,
        2 => f08,
        0 => match get().map(|a| a.flavour) {
            Some(Flavour::OpenMpi) => true,
            Some(Flavour::Mpich) => f08,
            None => false,
        },
        _ => false,
    }
}

/// Addresses of `name` in every loaded library that defines it (a Fortran
/// sentinel object can be defined both in the Fortran library and in the C
/// one), plus the global one.
pub fn symbol_everywhere(name: &str, libs: &[&str]) -> Vec<usize> {
    let mut out = vec![sym(&format!("{name}\0"))];
    let Ok(cname) = std::ffi::CString::new(name) else {
        return out;
    };
    for lib in libs {
        let Ok(clib) = std::ffi::CString::new(*lib) else {
            continue;
        };
        // SAFETY: NUL-terminated names; RTLD_NOLOAD only looks at libraries
        // already loaded and never runs constructors.
        let h = unsafe { libc::dlopen(clib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: `h` is a live handle from dlopen.
        out.push(unsafe { libc::dlsym(h, cname.as_ptr()) } as usize);
        // SAFETY: balances the dlopen above (the library stays loaded).
        unsafe { libc::dlclose(h) };
    }
    out.retain(|&a| a != 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpich_status_count_joins_both_halves() {
        // count_lo, count_hi_and_cancelled (cancelled in bit 0), source, tag, error.
        let st: [u32; 5] = [7, (1 << 1) | 1, 3, 42, 0];
        // SAFETY: `st` is a whole MPICH status.
        let (src, tag, bytes) = unsafe { MPICH.read_status(st.as_ptr() as usize) };
        assert_eq!((src, tag, bytes), (3, 42, (1 << 32) | 7));
        // SAFETY: as above.
        assert!(unsafe { MPICH.status_cancelled(st.as_ptr() as usize) });
    }

    #[test]
    fn open_mpi_status_has_a_full_width_count() {
        let mut st = [0u8; 24];
        st[0..4].copy_from_slice(&5i32.to_ne_bytes());
        st[4..8].copy_from_slice(&9i32.to_ne_bytes());
        st[16..24].copy_from_slice(&(3u64 << 33).to_ne_bytes());
        // SAFETY: `st` is a whole Open MPI status.
        let got = unsafe { OPEN_MPI_LAYOUT.read_status(st.as_ptr() as usize) };
        assert_eq!(got, (5, 9, 3 << 33));
    }

    #[test]
    fn mpich_handles_passed_by_value_ignore_the_upper_half() {
        assert_eq!(MPICH.handle_arg(0xdead_beef_4400_0000), 0x4400_0000);
        assert_eq!(OPEN_MPI_LAYOUT.handle_arg(0x7f00_1234), 0x7f00_1234);
    }

    /// Compiles `tests/programs/mpi/abi_facts.c` with `mpicc.<flavour>`, runs
    /// it as a singleton and returns its `key value` lines.
    fn facts(flavour: &str) -> std::collections::HashMap<String, String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let src = root.join("tests/programs/mpi/abi_facts.c");
        let dir = std::env::temp_dir().join(format!("hark-abi-{flavour}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(format!("abi_facts-{flavour}"));
        let cc = std::process::Command::new(format!("mpicc.{flavour}"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg("-ldl")
            .output()
            .expect("run mpicc");
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = std::process::Command::new(&exe)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("run abi_facts");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Checks the layout and constants of `abi` against what the compiler
    /// wrapper of that library says.
    fn check(abi: &Abi, f: &std::collections::HashMap<String, String>) {
        let n = |k: &str| -> i64 { f[k].parse().unwrap_or_else(|_| panic!("{k}: {}", f[k])) };
        let u = |k: &str| -> usize { f[k].parse().unwrap_or_else(|_| panic!("{k}: {}", f[k])) };
        assert_eq!(u("handle_size"), abi.handle_size);
        assert_eq!(u("file_size"), 8, "MPI_File is a pointer in both");
        assert_eq!(u("status_size"), abi.status_size);
        assert_eq!(u("status_source"), abi.status_source);
        assert_eq!(u("status_tag"), abi.status_tag);
        assert_eq!(n("any_source"), abi.any_source as i64);
        assert_eq!(n("proc_null"), abi.proc_null as i64);
        assert_eq!(n("root"), abi.root as i64);
        assert_eq!(n("any_tag"), ANY_TAG as i64);
        assert_eq!(n("undefined"), UNDEFINED as i64);
        assert_eq!(u("in_place"), abi.in_place);
        assert_eq!(u("status_ignore"), abi.status_ignore);
        assert_eq!(u("statuses_ignore"), abi.statuses_ignore);
        assert_eq!(n("appnum_key"), abi.appnum_key as i64);
        assert_eq!(n("topo_cart"), abi.topo_cart as i64);
        assert_eq!(n("topo_graph"), abi.topo_graph as i64);
        assert_eq!(n("err_other"), abi.err_other as i64);
        assert_eq!(n("cart_topo"), abi.topo_cart as i64);
        let raw: Vec<u8> = f["status_raw"]
            .split(' ')
            .map(|b| b.parse().unwrap())
            .collect();
        // SAFETY: `raw` holds a whole status of this flavour.
        let (src, tag, bytes) = unsafe { abi.read_status(raw.as_ptr() as usize) };
        assert_eq!((src, tag, bytes), (0, 42, u("status_count") as u64));
    }

    #[test]
    fn open_mpi_tables_match_what_mpicc_compiles() {
        let f = facts("openmpi");
        check(&OPEN_MPI_LAYOUT, &f);
        assert_eq!(
            f["ompi_symbols_match"], "1",
            "predefined handles are the ompi_* symbols"
        );
    }

    #[test]
    fn mpich_tables_match_what_mpicc_compiles() {
        let f = facts("mpich");
        check(&MPICH, &f);
        for (k, v) in [
            ("comm_world", MPICH.comm_world),
            ("comm_self", MPICH.comm_self),
            ("comm_null", MPICH.comm_null),
            ("request_null", MPICH.request_null),
            ("datatype_null", MPICH.datatype_null),
            ("message_null", MPICH.message_null),
            ("message_no_proc", MPICH.message_no_proc),
            ("win_null", MPICH.win_null),
            ("file_null", MPICH.file_null),
        ] {
            assert_eq!(f[k].parse::<usize>().unwrap(), v, "{k}");
        }
        // Predefined datatypes carry their size in bits 8..16.
        let int: usize = f["int_handle"].parse().unwrap();
        assert_eq!((int >> 8) & 0xff, 4);
        assert_eq!(int >> 30, 1, "MPI_INT is a builtin handle");
    }
}
