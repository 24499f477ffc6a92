//! The few MPI calls Hark makes itself (the probe and the analyser ranks),
//! always through `PMPI_*` found by `dlsym` (so they are never recorded and
//! never reach another tool's wrappers). Each is made only with arguments MPI has just accepted from the
//! application, since an invalid handle would invoke the error handler and
//! could abort the program.

use crate::abi::Abi;
use crate::resolve::Sym;
use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

macro_rules! pmpi {
    ($name:literal, ($($a:ident),*)) => {{
        static REAL: Sym = Sym::new($name);
        let p = REAL.get();
        if p.is_null() {
            None
        } else {
            // SAFETY: the symbol is the MPI function of that name; every
            // argument is one word (see abi.rs).
            let f = unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($(pmpi!(@w $a)),*) -> c_int>(p)
            };
            // SAFETY: the callers pass valid handles and pointers to live
            // outputs of the right size.
            Some(unsafe { f($($a),*) })
        }
    }};
    (@w $a:ident) => { usize };
}

fn ptr<T>(v: &mut T) -> usize {
    v as *mut T as usize
}

/// Size in bytes of one element of `datatype` (`MPI_Type_size_x`).
#[inline]
pub fn type_size(abi: &Abi, datatype: usize) -> u64 {
    if datatype == abi.datatype_null {
        return 0;
    }
    // MPICH encodes the size of its predefined types in the handle.
    if abi.handle_size == 4 && datatype >> 30 == 1 {
        return ((datatype >> 8) & 0xff) as u64;
    }
    let mut size: i64 = 0;
    let out = ptr(&mut size);
    match pmpi!(c"PMPI_Type_size_x", (datatype, out)) {
        Some(0) => size.max(0) as u64,
        _ => 0,
    }
}

/// Whether `comm` is an inter-communicator.
pub fn is_inter(comm: usize) -> bool {
    let mut flag: c_int = 0;
    let out = ptr(&mut flag);
    pmpi!(c"PMPI_Comm_test_inter", (comm, out)) == Some(0) && flag != 0
}

/// World ranks of the local (or remote) group of `comm`, in rank order.
pub fn members(abi: &Abi, comm: usize, remote: bool) -> Option<Vec<i32>> {
    let mut group: usize = 0;
    let mut world_group: usize = 0;
    let g = ptr(&mut group);
    let wg = ptr(&mut world_group);
    let rc = if remote {
        pmpi!(c"PMPI_Comm_remote_group", (comm, g))
    } else {
        pmpi!(c"PMPI_Comm_group", (comm, g))
    };
    if rc != Some(0) {
        return None;
    }
    // MPICH groups are ints: only the low half of the word was written.
    let group = abi.handle_arg(group);
    let world = abi.comm_world;
    if pmpi!(c"PMPI_Comm_group", (world, wg)) != Some(0) {
        return None;
    }
    let world_group = abi.handle_arg(world_group);
    let mut n: c_int = 0;
    let np = ptr(&mut n);
    pmpi!(c"PMPI_Group_size", (group, np));
    let ranks: Vec<c_int> = (0..n).collect();
    let mut out = vec![abi_undefined(); n.max(0) as usize];
    let (r, o, nn) = (
        ranks.as_ptr() as usize,
        out.as_mut_ptr() as usize,
        n as usize,
    );
    pmpi!(
        c"PMPI_Group_translate_ranks",
        (group, nn, r, world_group, o)
    );
    let mut g1 = group;
    let mut g2 = world_group;
    let (p1, p2) = (ptr(&mut g1), ptr(&mut g2));
    pmpi!(c"PMPI_Group_free", (p1));
    pmpi!(c"PMPI_Group_free", (p2));
    // Ranks outside this world (spawned or connected jobs) have no world rank.
    Some(
        out.into_iter()
            .map(|r| if r < 0 { hark_wire::PEER_NONE } else { r })
            .collect(),
    )
}

fn abi_undefined() -> c_int {
    crate::abi::UNDEFINED
}

/// `(rank, size)` of `comm`.
pub fn rank_size(comm: usize) -> (i32, i32) {
    let (mut r, mut s): (c_int, c_int) = (-1, -1);
    let (rp, sp) = (ptr(&mut r), ptr(&mut s));
    pmpi!(c"PMPI_Comm_rank", (comm, rp));
    pmpi!(c"PMPI_Comm_size", (comm, sp));
    (r, s)
}

/// The `MPI_APPNUM` attribute of `MPI_COMM_WORLD`, 0 if unset.
pub fn appnum(abi: &Abi) -> i32 {
    let mut val: *const c_int = std::ptr::null();
    let mut flag: c_int = 0;
    let (world, key) = (abi.comm_world, abi.appnum_key as usize);
    let (vp, fp) = (ptr(&mut val), ptr(&mut flag));
    if pmpi!(c"PMPI_Comm_get_attr", (world, key, vp, fp)) == Some(0) && flag != 0 && !val.is_null()
    {
        // SAFETY: MPI returns a pointer to the attribute's int value.
        unsafe { *val }
    } else {
        0
    }
}

/// The thread level MPI granted.
pub fn thread_level() -> i32 {
    let mut level: c_int = 0;
    let lp = ptr(&mut level);
    pmpi!(c"PMPI_Query_thread", (lp));
    level
}

/// The first line of `MPI_Get_library_version`.
pub fn library_version() -> String {
    let mut buf = vec![0u8; 8192];
    let mut len: c_int = 0;
    let (bp, lp) = (buf.as_mut_ptr() as usize, ptr(&mut len));
    if pmpi!(c"PMPI_Get_library_version", (bp, lp)) != Some(0) {
        return String::new();
    }
    buf.truncate(len.clamp(0, 8192) as usize);
    let s = String::from_utf8_lossy(&buf);
    s.lines()
        .next()
        .unwrap_or("")
        .trim_end_matches('\0')
        .trim()
        .to_string()
}

/// `(in, out)` neighbour counts of a communicator with a topology; `None`
/// without one (neighbourhood collectives then fail in MPI itself).
pub fn neighbours(abi: &Abi, comm: usize) -> Option<(usize, usize)> {
    let mut topo: c_int = 0;
    let tp = ptr(&mut topo);
    if pmpi!(c"PMPI_Topo_test", (comm, tp)) != Some(0) {
        return None;
    }
    if topo == abi.topo_cart {
        let mut nd: c_int = 0;
        let np = ptr(&mut nd);
        pmpi!(c"PMPI_Cartdim_get", (comm, np));
        let n = 2 * nd.max(0) as usize;
        Some((n, n))
    } else if topo == abi.topo_graph {
        let (rank, _) = rank_size(comm);
        let mut n: c_int = 0;
        let np = ptr(&mut n);
        let r = rank as usize;
        pmpi!(c"PMPI_Graph_neighbors_count", (comm, r, np));
        Some((n.max(0) as usize, n.max(0) as usize))
    } else if topo == 3 {
        let (mut i, mut o, mut w): (c_int, c_int, c_int) = (0, 0, 0);
        let (ip, op, wp) = (ptr(&mut i), ptr(&mut o), ptr(&mut w));
        pmpi!(c"PMPI_Dist_graph_neighbors_count", (comm, ip, op, wp));
        Some((i.max(0) as usize, o.max(0) as usize))
    } else {
        None
    }
}

/// Converts Fortran handles to C ones (only used with Open MPI, whose
/// Fortran layer the probe wraps itself).
pub mod f2c {
    use super::*;

    macro_rules! f2c {
        ($fn:ident, $name:literal, $int_handles:literal) => {
            /// The C handle of a Fortran one (0 if MPI lacks the converter).
            /// MPICH's handles are the same integers in both languages (its
            /// converters are macros, not functions).
            pub fn $fn(f: i32) -> usize {
                if $int_handles && crate::abi::get().is_some_and(|a| a.handle_size == 4) {
                    return f as u32 as usize;
                }
                static REAL: Sym = Sym::new($name);
                let p = REAL.get();
                if p.is_null() {
                    return 0;
                }
                // SAFETY: `MPI_X_f2c(MPI_Fint) -> MPI_X`; a handle is one word.
                let conv = unsafe {
                    std::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int) -> usize>(p)
                };
                // SAFETY: the converters accept any value and return the
                // null handle for invalid ones.
                unsafe { conv(f) }
            }
        };
    }

    f2c!(comm, c"PMPI_Comm_f2c", true);
    f2c!(datatype, c"PMPI_Type_f2c", true);
    f2c!(request, c"PMPI_Request_f2c", true);
    f2c!(win, c"PMPI_Win_f2c", true);
    // MPICH's MPI_File is a pointer: its converter is a real function.
    f2c!(file, c"PMPI_File_f2c", false);
    f2c!(message, c"PMPI_Message_f2c", true);
}

/// A private duplicate of `comm` (`MPI_Comm_dup`, collective), `None` if
/// the call failed.
pub fn comm_dup(abi: &Abi, comm: usize) -> Option<usize> {
    let mut out: usize = 0;
    let op = ptr(&mut out);
    (pmpi!(c"PMPI_Comm_dup", (comm, op)) == Some(0)).then(|| abi.handle_arg(out))
}

/// Makes errors on `comm` return to the caller instead of ending the job
/// (`MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)`). Only for Hark's own
/// communicators, never the program's: a failed stream or clock call is
/// then one the probe or the analyser handles (`docs/analysers.md`, "When a
/// rank dies"). True if the handler was set.
pub fn errors_return(abi: &Abi, comm: usize) -> bool {
    // MPICH's MPI_ERRORS_RETURN is a constant; Open MPI's the address of a
    // predefined object, found in the global scope first (`find_data`: a
    // program that names MPI_ERRORS_RETURN holds the live copy of it).
    let handler = match abi.flavour {
        crate::abi::Flavour::Mpich => 0x5400_0001,
        crate::abi::Flavour::OpenMpi => {
            crate::resolve::find_data(c"ompi_mpi_errors_return") as usize
        }
    };
    handler != 0 && pmpi!(c"PMPI_Comm_set_errhandler", (comm, handler)) == Some(0)
}

/// Frees a communicator from [`comm_dup`].
pub fn comm_free(comm: usize) {
    let mut c = comm;
    let cp = ptr(&mut c);
    pmpi!(c"PMPI_Comm_free", (cp));
}

/// Sends `buf` as `MPI_BYTE`s to `dest`; true on success.
pub fn send_bytes(abi: &Abi, buf: &[u8], dest: i32, tag: i32, comm: usize) -> bool {
    let (b, n, t) = (buf.as_ptr() as usize, buf.len(), abi.datatype_byte);
    let (d, g) = (dest as usize, tag as usize);
    pmpi!(c"PMPI_Send", (b, n, t, d, g, comm)) == Some(0)
}

/// Receives exactly `buf.len()` `MPI_BYTE`s from `source` into `buf`; true
/// on success.
pub fn recv_bytes(abi: &Abi, buf: &mut [u8], source: i32, tag: i32, comm: usize) -> bool {
    let (b, n, t) = (buf.as_mut_ptr() as usize, buf.len(), abi.datatype_byte);
    let (s, g, st) = (source as usize, tag as usize, abi.status_ignore);
    pmpi!(c"PMPI_Recv", (b, n, t, s, g, comm, st)) == Some(0)
}

/// Whether MPI is initialised (`MPI_Initialized`).
pub fn initialized() -> bool {
    let mut flag: c_int = 0;
    let fp = ptr(&mut flag);
    pmpi!(c"PMPI_Initialized", (fp)) == Some(0) && flag != 0
}

/// `MPI_Comm_split(comm, colour, key)` (collective), `None` if the call
/// failed.
pub fn comm_split(abi: &Abi, comm: usize, colour: i32, key: i32) -> Option<usize> {
    let mut out: usize = 0;
    let op = ptr(&mut out);
    let (c, k) = (colour as usize, key as usize);
    (pmpi!(c"PMPI_Comm_split", (comm, c, k, op)) == Some(0)).then(|| abi.handle_arg(out))
}

/// Names a communicator (`MPI_Comm_set_name`).
pub fn comm_set_name(comm: usize, name: &std::ffi::CStr) {
    let n = name.as_ptr() as usize;
    pmpi!(c"PMPI_Comm_set_name", (comm, n));
}

/// The Fortran handle of a C communicator. MPICH's are the same integers
/// (its `MPI_Comm_c2f` is a macro); Open MPI's come from `PMPI_Comm_c2f`.
pub fn comm_c2f(abi: &Abi, comm: usize) -> Option<i32> {
    if abi.handle_size == 4 {
        return Some(comm as u32 as i32);
    }
    static REAL: Sym = Sym::new(c"PMPI_Comm_c2f");
    let p = REAL.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: `MPI_Comm_c2f(MPI_Comm) -> MPI_Fint`; a handle is one word.
    let conv =
        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(usize) -> c_int>(p) };
    // SAFETY: `comm` is a valid communicator MPI just created or predefined.
    Some(unsafe { conv(comm) })
}

/// Starts a synchronous-mode send of `buf` as `MPI_BYTE`s
/// (`MPI_Issend`): it completes only once the receiver has matched it.
/// Returns the request, `None` if the call failed. `buf` must stay alive
/// and unchanged until the request completes.
pub fn issend_bytes(abi: &Abi, buf: &[u8], dest: i32, tag: i32, comm: usize) -> Option<usize> {
    let mut req: usize = 0;
    let (b, n, t) = (buf.as_ptr() as usize, buf.len(), abi.datatype_byte);
    let (d, g, r) = (dest as usize, tag as usize, ptr(&mut req));
    (pmpi!(c"PMPI_Issend", (b, n, t, d, g, comm, r)) == Some(0)).then(|| abi.handle_arg(req))
}

/// Starts a receive of up to `len` `MPI_BYTE`s at `buf` from `source` into
/// the request handle at `req` (`MPI_Irecv`); false if the call failed.
///
/// # Safety
/// `buf` must be writable for `len` bytes and `req` writable for one
/// handle, both until the request completes.
pub unsafe fn irecv_bytes(
    abi: &Abi,
    buf: *mut u8,
    len: usize,
    source: i32,
    tag: i32,
    comm: usize,
    req: *mut u8,
) -> bool {
    let (b, t, s, g) = (
        buf as usize,
        abi.datatype_byte,
        source as usize,
        tag as usize,
    );
    let r = req as usize;
    pmpi!(c"PMPI_Irecv", (b, len, t, s, g, comm, r)) == Some(0)
}

/// Whether the request `req` has completed (`MPI_Test`, which frees it
/// then); `None` if the call failed.
pub fn test(abi: &Abi, req: usize) -> Option<bool> {
    let mut r = req;
    let mut flag: c_int = 0;
    let (rp, fp, st) = (ptr(&mut r), ptr(&mut flag), abi.status_ignore);
    (pmpi!(c"PMPI_Test", (rp, fp, st)) == Some(0)).then_some(flag != 0)
}

/// Waits, at most `timeout`, for one byte from `from` on `tag` of `comm`:
/// a receive polled with sleeps (100 µs, doubling up to 5 ms), not spun,
/// since the ranks waiting so leave their cores to others meanwhile.
/// False only when the time ran out (the receive is then cancelled); true
/// when the byte came, or when MPI refused the receive or the test (there
/// is nothing to wait for then).
pub fn wait_for_byte(abi: &Abi, comm: usize, from: i32, tag: i32, timeout: Duration) -> bool {
    let mut byte = [0u8; 1];
    let mut slot: usize = 0;
    // SAFETY: `byte` and `slot` live until the request completed or was
    // cancelled below.
    let posted = unsafe {
        irecv_bytes(
            abi,
            byte.as_mut_ptr(),
            1,
            from,
            tag,
            comm,
            (&mut slot as *mut usize).cast(),
        )
    };
    if !posted {
        return true;
    }
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(100);
    loop {
        match test(abi, abi.handle_arg(slot)) {
            Some(true) | None => return true,
            Some(false) if Instant::now() >= deadline => {
                // SAFETY: the live receive request posted above.
                unsafe { cancel(abi, (&mut slot as *mut usize).cast()) };
                return false;
            }
            Some(false) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// `MPI_Waitany` over the `n` request handles at `reqs`: the index of the
/// one that completed, with its status written to `status` (a buffer of
/// `abi.status_size` bytes); `None` if the call failed or every request is
/// null.
///
/// # Safety
/// `reqs` must hold `n` handles of the flavour's size, `status` one status.
pub unsafe fn waitany(_abi: &Abi, n: usize, reqs: *mut u8, status: *mut u8) -> Option<usize> {
    let mut index: c_int = -1;
    let (r, ip, st) = (reqs as usize, ptr(&mut index), status as usize);
    (pmpi!(c"PMPI_Waitany", (n, r, ip, st)) == Some(0) && index >= 0).then_some(index as usize)
}

/// `MPI_Testany` over the `n` request handles at `reqs`: the index of the
/// one that completed (its status in `status`), `Some(None)` if none did,
/// `None` if the call failed.
///
/// # Safety
/// As for [`waitany`].
pub unsafe fn testany(n: usize, reqs: *mut u8, status: *mut u8) -> Option<Option<usize>> {
    let mut index: c_int = -1;
    let mut flag: c_int = 0;
    let (r, ip, fp, st) = (
        reqs as usize,
        ptr(&mut index),
        ptr(&mut flag),
        status as usize,
    );
    if pmpi!(c"PMPI_Testany", (n, r, ip, fp, st)) != Some(0) {
        return None;
    }
    Some((flag != 0 && index >= 0).then_some(index as usize))
}

/// Cancels the request at `req` and waits for it (`MPI_Cancel`, then
/// `MPI_Wait`), leaving the null request there.
///
/// # Safety
/// `req` must point to a live request handle of the flavour's size.
pub unsafe fn cancel(abi: &Abi, req: *mut u8) {
    let r = req as usize;
    pmpi!(c"PMPI_Cancel", (r));
    let st = abi.status_ignore;
    pmpi!(c"PMPI_Wait", (r, st));
}

/// `MPI_Init(NULL, NULL)`; true on success.
pub fn init() -> bool {
    let (a, b) = (0usize, 0usize);
    pmpi!(c"PMPI_Init", (a, b)) == Some(0)
}

/// `MPI_Finalize`.
pub fn finalize() {
    pmpi!(c"PMPI_Finalize", ());
}

/// Every process's node and program, in world-rank order: one
/// `MPI_Allgather` of 8 bytes per rank on `comm` (collective; the stream
/// communicator, right after its duplicate, on writers and analysers
/// alike: `docs/analysers.md` step 2). The node is the host name's
/// [`hark_wire::partition::node_id`], or the `HARK_TEST_NODES` override of
/// a build with the `test-hooks` feature. `None` if the call failed.
pub fn gather_places(
    abi: &Abi,
    comm: usize,
    rank: i32,
    size: i32,
) -> Option<Vec<hark_wire::partition::Place>> {
    #[cfg(feature = "test-hooks")]
    use hark_wire::partition::test_node;
    use hark_wire::partition::{node_id, Place};
    // Nodes are emulated only by an MPI layer built for Hark's tests.
    #[cfg(feature = "test-hooks")]
    let test = test_node(
        std::env::var(hark_settings::TEST_NODES.name)
            .ok()
            .as_deref(),
        rank.max(0) as u32,
    );
    #[cfg(not(feature = "test-hooks"))]
    let test = {
        let _ = rank;
        None
    };
    let node = test.unwrap_or_else(|| {
        let mut host = [0u8; 256];
        // SAFETY: the buffer is writable for its length.
        let ok = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0;
        let len = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        node_id(if ok { &host[..len] } else { b"" })
    });
    let mine = Place {
        node,
        program: appnum(abi).max(0) as u32,
    }
    .to_bytes();
    let mut all = vec![0u8; 8 * size.max(0) as usize];
    let (s, r, t, n) = (
        mine.as_ptr() as usize,
        all.as_mut_ptr() as usize,
        abi.datatype_byte,
        8usize,
    );
    (pmpi!(c"PMPI_Allgather", (s, n, t, r, n, t, comm)) == Some(0))
        .then(|| Place::all_from_bytes(&all))
        .flatten()
}
