//! Fortran entry points (`mpif.h`, `use mpi`: `mpi_x_`; `use mpi_f08`:
//! `mpi_x_f08_`).
//!
//! Open MPI's Fortran layer calls `PMPI_*` directly, so the C wrappers never
//! see Fortran calls: its entry points record themselves here. Every Fortran
//! argument is passed by reference (`MPI_Fint *`, 4-byte handles), followed by
//! `ierror` and a hidden length per character argument. Before the call,
//! `MPI_STATUS(ES)_IGNORE` is replaced by our own buffer and the handles the
//! call will overwrite are converted (`MPI_Request_f2c`, ...); after it, the
//! arguments are converted to what the C prototype would have received and
//! handed to the same recorder as C calls ([`super::after`]).
//!
//! MPICH's Fortran layer calls the C `MPI_*` functions, where the C wrappers
//! record; there these entry points only forward ([`super::abi::fortran_records`]).
//!
//! Open MPI's Fortran status is the C status's bytes (`MPI_STATUS_SIZE` = 6
//! four-byte integers = `sizeof(MPI_Status)`), so statuses are read in place.

use super::abi::{self, Abi};
use super::mpi_call::f2c;
use super::plan::{Kind, Plan, Pos, NO};
use super::{at, deref_int, guarded, PLANS};
use crate::core::Guard;
use std::sync::OnceLock;

/// Fortran sentinels: addresses of the objects `MPI_IN_PLACE`,
/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` stand for in Fortran (Open
/// MPI's common blocks under every compiler spelling; MPICH's `mpi_f08`
/// objects, defined both in libmpichfort and libmpich).
struct Sentinels {
    in_place: Vec<usize>,
    status_ignore: Vec<usize>,
    statuses_ignore: Vec<usize>,
}

fn sentinels(abi: &Abi) -> &'static Sentinels {
    static S: OnceLock<Sentinels> = OnceLock::new();
    S.get_or_init(|| match abi.flavour {
        abi::Flavour::OpenMpi => Sentinels {
            in_place: abi::fortran_symbols("mpi_fortran_in_place").to_vec(),
            status_ignore: abi::fortran_symbols("mpi_fortran_status_ignore").to_vec(),
            statuses_ignore: abi::fortran_symbols("mpi_fortran_statuses_ignore").to_vec(),
        },
        abi::Flavour::Mpich => {
            let libs = ["libmpichfort.so.12", "libmpich.so.12"];
            Sentinels {
                in_place: abi::symbol_everywhere("MPIR_F08_MPI_IN_PLACE", &libs),
                status_ignore: abi::symbol_everywhere("MPIR_F08_MPI_STATUS_IGNORE_OBJ", &libs),
                statuses_ignore: abi::symbol_everywhere("MPIR_F08_MPI_STATUSES_IGNORE_OBJ", &libs),
            }
        }
    })
}

fn is(set: &[usize], p: usize) -> bool {
    p != 0 && set.contains(&p)
}

/// Per-call scratch of a Fortran wrapper.
pub(crate) struct Scratch {
    c: super::Scratch,
    /// Our Fortran status (6 integers; room for 8).
    status: [i32; 8],
    statuses: Vec<i32>,
}

impl Scratch {
    #[inline(always)]
    pub(crate) fn new() -> Scratch {
        Scratch {
            c: super::Scratch::new(),
            status: [0; 8],
            statuses: Vec::new(),
        }
    }
}

/// The next `mpi_x_` is missing: set `ierror` and warn.
#[cold]
#[inline(never)]
pub(crate) fn missing(i: usize, w: &[usize]) {
    let rc = super::missing(i);
    let arity = PLANS[i].arity as usize;
    if let Some(&ierr) = w.get(arity) {
        if ierr != 0 && PLANS[i].kind != Kind::Pcontrol && PLANS[i].kind != Kind::Init {
            // SAFETY: the binding's `ierror` argument.
            unsafe { (ierr as *mut i32).write_unaligned(rc) };
        }
    }
}

/// Reads an `INTEGER` argument (0 for an absent optional one).
#[inline(always)]
fn fint(p: usize) -> i32 {
    // SAFETY: Fortran passes every argument by reference.
    unsafe { deref_int(p) }
}

/// Before the real Fortran call: swap in our status buffers, convert the
/// handles the call overwrites.
pub(crate) fn before(i: usize, g: &Guard, w: &mut [usize], s: &mut Scratch) {
    crate::core::mpi_counters_entry();
    let plan = &PLANS[i];
    let Some(abi) = abi::get() else { return };
    guarded(|| before_f(abi, plan, g, w, s));
}

fn before_f(abi: &Abi, plan: &Plan, g: &Guard, w: &mut [usize], s: &mut Scratch) {
    if matches!(plan.kind, Kind::Init | Kind::Pcontrol) {
        return;
    }
    let p = &plan.pos;
    let sen = sentinels(abi);
    if let Some(st) = at(w, p.status) {
        if is(&sen.status_ignore, st) {
            w[p.status as usize] = s.status.as_mut_ptr() as usize;
        }
    }
    let n = at(w, p.request_count).map_or(0, fint).max(0) as usize;
    if let Some(st) = at(w, p.statuses) {
        if is(&sen.statuses_ignore, st) {
            s.statuses = vec![0; n * abi.status_size / 4];
            w[p.statuses as usize] = s.statuses.as_mut_ptr() as usize;
        }
    }
    if let Some(r) = at(w, p.request) {
        s.c.req = f2c::request(fint(r));
    }
    if let Some(r) = at(w, p.requests) {
        s.c.many().reqs = (0..n).map(|j| f2c::request(fint(r + 4 * j))).collect();
    }
    if let Some(h) = at(w, p.comm_freed) {
        s.c.handle = f2c::comm(fint(h));
    }
    if let Some(h) = at(w, p.win_freed) {
        s.c.handle = f2c::win(fint(h));
    }
    if let Some(h) = at(w, p.file_closed) {
        s.c.handle = f2c::file(fint(h));
    }
    if let Some(h) = at(w, p.message) {
        s.c.handle = f2c::message(fint(h));
    }
    if plan.kind == Kind::Abort {
        // `MPI_ABORT(comm, errorcode, ierror)`: the tag carries the code.
        let t = crate::core::stamp();
        let mut ev = hark_wire::Event::new(plan.op, t, t);
        ev.tag.set(w.get(1).copied().map_or(0, fint));
        super::emit(g, ev);
        super::stream::at_abort();
    }
    if plan.kind == Kind::Finalize {
        super::align::at_finalize(abi);
        super::stream::at_finalize(g, plan.op);
    }
}

/// After the real Fortran call: convert the arguments to their C form and
/// record as for C.
pub(crate) fn after(i: usize, g: &Guard, w: &[usize], t0: u64, t1: u64, s: &mut Scratch) {
    let plan = &PLANS[i];
    let Some(abi) = abi::get() else { return };
    let mut c = [0usize; 16];
    let mut outs = Outs::default();
    guarded(|| {
        let rc = to_c(abi, plan, w, &mut c, &mut outs);
        let arity = plan.arity as usize;
        super::after(i, abi, g, &c[..arity], rc, t0, t1, &mut s.c);
    });
}

/// Storage for the C forms of output arguments, pointed to from the C words.
#[derive(Default)]
struct Outs {
    new_comm: usize,
    request_out: usize,
    win_out: usize,
    file_out: usize,
    message_out: usize,
    index: i32,
    indices: Vec<i32>,
    types_send: Vec<usize>,
    types_recv: Vec<usize>,
    name: Vec<u8>,
}

/// Fills `c` with the words the C binding would have received; returns the
/// call's error code.
fn to_c(abi: &Abi, plan: &Plan, w: &[usize], c: &mut [usize; 16], o: &mut Outs) -> i32 {
    let p: &Pos = &plan.pos;
    let arity = plan.arity as usize;
    match plan.kind {
        Kind::Init => return w.last().map_or(0, |&e| fint(e)),
        Kind::Pcontrol => {
            c[p.level as usize] = fint(w[0]) as u32 as usize;
            return 0;
        }
        _ => {}
    }
    let rc = w.get(arity).map_or(0, |&e| fint(e));
    let sen = sentinels(abi);
    let ints = [
        p.send_count,
        p.recv_count,
        p.dest,
        p.source,
        p.root,
        p.tag,
        p.recv_tag,
        p.request_count,
        p.target_rank,
        p.origin_count,
        p.level,
    ];
    for pos in ints {
        if let Some(v) = at(w, pos) {
            c[pos as usize] = fint(v) as u32 as usize;
        }
    }
    for pos in [p.send_buf, p.recv_buf] {
        if let Some(b) = at(w, pos) {
            c[pos as usize] = if is(&sen.in_place, b) {
                abi.in_place
            } else {
                b
            };
        }
    }
    // Arrays of INTEGER and LOGICAL outputs are the C ones.
    for pos in [
        p.send_counts,
        p.recv_counts,
        p.flag,
        p.out_count,
        p.status,
        p.statuses,
    ] {
        if let Some(v) = at(w, pos) {
            c[pos as usize] = v;
        }
    }
    for (pos, conv) in [
        (p.comm, f2c::comm as fn(i32) -> usize),
        (p.send_type, f2c::datatype),
        (p.recv_type, f2c::datatype),
        (p.origin_type, f2c::datatype),
        (p.win, f2c::win),
        (p.file, f2c::file),
    ] {
        if let Some(v) = at(w, pos) {
            c[pos as usize] = conv(fint(v));
        }
    }
    if let Some(v) = at(w, p.offset) {
        // SAFETY: an `INTEGER(KIND=MPI_OFFSET_KIND)` argument.
        c[p.offset as usize] = unsafe { (v as *const i64).read_unaligned() } as usize;
    }
    // Outputs, read only when the call succeeded.
    if rc == 0 {
        type Conv = fn(i32) -> usize;
        let outs: [(u8, Conv, &mut usize); 5] = [
            (p.new_comm, f2c::comm, &mut o.new_comm),
            (p.request_out, f2c::request, &mut o.request_out),
            (p.win_out, f2c::win, &mut o.win_out),
            (p.file_out, f2c::file, &mut o.file_out),
            (p.message_out, f2c::message, &mut o.message_out),
        ];
        for (pos, conv, slot) in outs {
            if let Some(v) = at(w, pos) {
                *slot = conv(fint(v));
                c[pos as usize] = slot as *mut usize as usize;
            }
        }
        // Fortran indices count from 1.
        if let Some(v) = at(w, p.index) {
            let i = fint(v);
            o.index = if i > 0 { i - 1 } else { i };
            c[p.index as usize] = &mut o.index as *mut i32 as usize;
        }
        if let Some(v) = at(w, p.indices) {
            let n = at(w, p.out_count).map_or(0, fint).max(0) as usize;
            // MPICH 4.0's `mpi_f08` Waitsome/Testsome return the C indices
            // unconverted (0-based); the test of bindings.F90 shows it.
            let base = match abi.flavour {
                abi::Flavour::OpenMpi => 1,
                abi::Flavour::Mpich => 0,
            };
            o.indices = (0..n).map(|k| fint(v + 4 * k) - base).collect();
            c[p.indices as usize] = o.indices.as_ptr() as usize;
        }
    }
    // Datatype arrays (w variants): one per peer of the communicator.
    if rc == 0 && (p.send_types != NO || p.recv_types != NO) {
        let comm = c[p.comm as usize];
        let n = super::registry::comm(abi, comm).map_or(0, |c| {
            let (i, o) = super::mpi_call::neighbours(abi, comm).unwrap_or((0, 0));
            c.peers().max(i).max(o)
        });
        let conv = |v: usize| (0..n).map(|k| f2c::datatype(fint(v + 4 * k))).collect();
        if let Some(v) = at(w, p.send_types) {
            o.types_send = conv(v);
            c[p.send_types as usize] = o.types_send.as_ptr() as usize;
        }
        if let Some(v) = at(w, p.recv_types) {
            o.types_recv = conv(v);
            c[p.recv_types as usize] = o.types_recv.as_ptr() as usize;
        }
    }
    // A file name: blank-padded, its length hidden after `ierror`.
    if let Some(v) = at(w, p.file_name) {
        let len = w.get(arity + 1).copied().unwrap_or(0).min(1 << 16);
        // SAFETY: Fortran passes the character's address and length.
        let bytes = unsafe { std::slice::from_raw_parts(v as *const u8, len) };
        let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |e| e + 1);
        o.name = bytes[..end].iter().copied().filter(|&b| b != 0).collect();
        o.name.push(0);
        c[p.file_name as usize] = o.name.as_ptr() as usize;
    }
    rc
}
