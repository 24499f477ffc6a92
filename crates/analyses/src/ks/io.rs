//! I/O per file and per rank: operations, bytes and time of POSIX, STDIO and
//! MPI-IO calls.
//!
//! Files are named by the path they were opened with, unified across ranks.
//! A call on a descriptor the probe never saw opened (standard streams,
//! descriptors inherited or opened before the probe started) is filed under
//! `<stdin>`, `<stdout>`, `<stderr>` or `<fd N>`.

use crate::analysis::{Analysis, Finish, Input, RankState, Sensitivity, Spec};
use crate::fx::FxHashMap;
use crate::sat::Sat;
use crate::stream::StreamCx;
use crate::unify::IdMap;
use crate::unify::UNDEFINED;
use hark_model::{FileIo, Program, Totals};
use hark_wire::mpi::{Class, FUNCTIONS};
use hark_wire::op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// See the module documentation.
pub struct IoProfile;

static SPEC: Spec = Spec {
    name: "io-profile",
    description:
        "Operations, bytes and time of POSIX, STDIO and MPI-IO calls per file and per rank.",
    sensitivities: &[
        Sensitivity::Defs,
        Sensitivity::Events,
        Sensitivity::ProgramEnd,
    ],
    fills: &["io"],
};

/// A file: a global file id, or a descriptor never seen opened.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum File {
    Id(u32),
    Fd(i32),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
    Other,
}

pub(crate) fn direction(code: u16) -> Dir {
    match op::kind(code) {
        op::OpKind::Io(_) => match code {
            op::io::READ
            | op::io::PREAD
            | op::io::READV
            | op::io::FREAD
            | op::io::FGETS
            | op::io::FSCANF => Dir::Read,
            // A flush's bytes are output no call counted that it wrote
            // out (the probe's `adapters/pending.rs`).
            op::io::WRITE
            | op::io::PWRITE
            | op::io::WRITEV
            | op::io::FWRITE
            | op::io::FPRINTF
            | op::io::FPUTS
            | op::io::FFLUSH => Dir::Write,
            _ => Dir::Other,
        },
        op::OpKind::Mpi(i) => match FUNCTIONS[i].class {
            Class::FileRead => Dir::Read,
            Class::FileWrite => Dir::Write,
            _ => Dir::Other,
        },
        _ => Dir::Other,
    }
}

/// Is `code` an I/O call: POSIX, STDIO, or an MPI-IO function?
#[inline]
pub(crate) fn is_io(code: u16) -> bool {
    match op::kind(code) {
        op::OpKind::Io(_) => true,
        op::OpKind::Mpi(i) => matches!(
            FUNCTIONS[i].class,
            Class::FileMeta | Class::FileRead | Class::FileWrite
        ),
        _ => false,
    }
}

/// Per rank: totals per file and operation.
#[derive(Default, Serialize, Deserialize)]
pub struct Rank {
    cells: FxHashMap<(File, u16), Totals>,
}

impl RankState for Rank {
    fn fold(&mut self, cx: &StreamCx<'_>, input: &Input<'_>) {
        // A sampled-out rank's exact totals, per op and file.
        for c in input.counts.map_or(&[][..], |c| &c.cells[..]) {
            if !is_io(c.op) || c.calls == 0 {
                continue;
            }
            let file = file_of(cx, c.obj, c.peer);
            let t = self.cells.entry((file, c.op)).or_default();
            t.calls += c.calls;
            t.bytes.sat(c.bytes);
            t.time_ns.sat(c.time_ns);
        }
        let events = input.events;
        for ev in events {
            let code = ev.op();
            if !is_io(code) {
                continue;
            }
            let file = file_of(cx, ev.obj.get(), ev.peer.get());
            let t = self.cells.entry((file, code)).or_default();
            t.calls += 1;
            t.bytes.sat(ev.bytes.get());
            t.time_ns.sat(ev.duration());
        }
    }
    fn remap(&mut self, ids: &IdMap) {
        self.cells = std::mem::take(&mut self.cells)
            .into_iter()
            .map(|((f, op), t)| ((f.remap(ids), op), t))
            .collect();
    }
    fn absorbs(&self, _: &Rank) -> bool {
        true
    }
    fn absorb(&mut self, o: &Rank) {
        for (k, t) in &o.cells {
            add(self.cells.entry(*k).or_default(), t);
        }
    }
}

impl File {
    pub(crate) fn remap(self, ids: &IdMap) -> File {
        match self {
            File::Id(id) => File::Id(ids.file(id)),
            fd => fd,
        }
    }
}

/// The file of an I/O event: its global file id, or its descriptor.
pub(crate) fn file_of(cx: &StreamCx<'_>, local: u32, fd: i32) -> File {
    let global = if local == 0 {
        UNDEFINED
    } else {
        cx.file(local)
    };
    if global == UNDEFINED {
        File::Fd(fd)
    } else {
        File::Id(global)
    }
}

pub(crate) fn file_name(file: File, cx: &Finish<'_>) -> String {
    match file {
        File::Id(id) => cx
            .unifier
            .file(id)
            .map_or_else(|| format!("<file {id}>"), str::to_string),
        File::Fd(0) => "<stdin>".into(),
        File::Fd(1) => "<stdout>".into(),
        File::Fd(2) => "<stderr>".into(),
        File::Fd(fd) => format!("<fd {fd}>"),
    }
}

impl Analysis for IoProfile {
    type Rank = Rank;
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn new_rank(&self) -> Rank {
        Rank::default()
    }
    fn finish(&self, cx: &Finish<'_>, ranks: &[&Rank], out: &mut Program) {
        let n = cx.len();
        let mut files: BTreeMap<String, FileIo> = BTreeMap::new();
        out.io.per_rank = vec![BTreeMap::new(); n];
        for (r, rank) in ranks.iter().copied().enumerate() {
            for (&(file, code), t) in &rank.cells {
                let path = file_name(file, cx);
                let f = files.entry(path.clone()).or_insert_with(|| FileIo {
                    path,
                    read_bytes: vec![0; n],
                    write_bytes: vec![0; n],
                    calls: vec![0; n],
                    ..FileIo::default()
                });
                let name = op::name(code);
                let total = f.ops.entry(name.to_string()).or_default();
                add(total, t);
                f.calls[r] += t.calls;
                match direction(code) {
                    Dir::Read => f.read_bytes[r].sat(t.bytes),
                    Dir::Write => f.write_bytes[r].sat(t.bytes),
                    Dir::Other => {}
                }
                add(out.io.per_rank[r].entry(name.to_string()).or_default(), t);
            }
        }
        out.io.files = files.into_values().collect();
    }
}

fn add(into: &mut Totals, t: &Totals) {
    into.calls += t.calls;
    into.bytes.sat(t.bytes);
    into.time_ns.sat(t.time_ns);
}
