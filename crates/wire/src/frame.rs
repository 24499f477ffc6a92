//! Frames: the units a stream is made of.
//!
//! A stream is a [`Hello`] frame followed by any number of [`RankInfo`],
//! [`ClockSync`], definition and pack frames, closed by one [`End`] frame. Every frame is an
//! 8-byte header — kind (`u32`) and payload length (`u32`), little-endian —
//! followed by its payload. `docs/wire.md` describes each payload field by
//! field.

use crate::codec::{Reader, Writer};
use crate::control::Control;
use crate::counts::Counts;
use crate::error::ErrorKind;
use crate::forward::{Gone, Node};
use crate::{Error, Event, EVENT_SIZE};
use std::io::Read;
use zerocopy::{FromBytes, IntoBytes};

/// The first four bytes of a [`Hello`] payload.
pub const MAGIC: [u8; 4] = *b"HARK";
/// Version of the format this crate reads and writes.
pub const VERSION: u16 = 11;
/// Most frames a [`Def::Callsite`] may hold (`HARK_CALLSITE_DEPTH` is
/// capped there).
pub const MAX_CALLSITE_DEPTH: u32 = 64;
/// Size of a frame header.
pub const HEADER_SIZE: usize = 8;
/// Largest payload a reader accepts of any kind (a pack is about 1 MiB by
/// default); each kind has a tighter cap, see [`Kind::max_payload`].
pub const MAX_PAYLOAD: usize = 256 << 20;
/// Bytes before the events in a pack payload: the pack's sequence number.
pub const PACK_HEADER_SIZE: usize = 8;

/// Frame kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// [`Hello`].
    Hello = 1,
    /// [`RankInfo`].
    Rank = 2,
    /// A list of [`Def`].
    Defs = 3,
    /// A pack of [`Event`]s.
    Pack = 4,
    /// [`End`].
    End = 5,
    /// [`ClockSync`].
    Clock = 6,
    /// [`Frame::Ring`]: the stream goes on in a shared-memory ring.
    Ring = 7,
    /// [`Frame::Cpus`]: the cores the process is bound to.
    Cpus = 8,
    /// [`Control`]: a request from a service, or a probe's answer to one.
    Control = 9,
    /// [`Counts`]: a sampled-out probe's totals in place of a pack.
    Counts = 10,
    /// [`Frame::Scale`]: a refined TSC calibration for the packs after it.
    Scale = 11,
    /// [`Node`]: a forwarder's opening frame.
    Node = 12,
    /// [`Frame::Mux`]: one whole frame of one forwarded stream.
    Mux = 13,
    /// [`Gone`]: a forwarded stream ended, or is to be cut.
    Gone = 14,
    /// [`Frame::ClockPing`]: a probe asks the server for its clock, on a
    /// connection of its own (never in a stream).
    ClockPing = 15,
    /// [`Frame::ClockPong`]: the server's answer to a [`Kind::ClockPing`].
    ClockPong = 16,
}

impl Kind {
    /// The largest payload a [`FrameReader`] accepts for this kind. A
    /// `Hello` holds the command line (1 MiB, half the kernel's usual
    /// `ARG_MAX`); a rank frame and an `End` are a few dozen bytes; a
    /// definitions frame holds at most the probe's 65,536 logged definitions
    /// or one communicator of a million ranks (64 MiB). A pack is capped
    /// tighter still, by the `pack_size` of its stream's `Hello`.
    pub const fn max_payload(self) -> usize {
        match self {
            Kind::Hello => 1 << 20,
            Kind::Rank | Kind::End | Kind::Clock => 4 << 10,
            Kind::Scale => 24,
            Kind::ClockPing => 0,
            Kind::ClockPong => 16,
            Kind::Cpus => 4 + 4 * MAX_CPUS,
            Kind::Control => 4 << 10,
            Kind::Counts => 16 << 20,
            Kind::Ring => 0,
            Kind::Defs => 64 << 20,
            Kind::Pack => MAX_PAYLOAD,
            Kind::Node => 64 << 10,
            // A stream number, then the carried frame, header included.
            Kind::Mux => 8 + HEADER_SIZE + MAX_PAYLOAD,
            Kind::Gone => 64 << 10,
        }
    }

    /// The kind numbered `v` in a frame header; an error for unknown kinds.
    pub fn from_u32(v: u32) -> Result<Kind, Error> {
        Ok(match v {
            1 => Kind::Hello,
            2 => Kind::Rank,
            3 => Kind::Defs,
            4 => Kind::Pack,
            5 => Kind::End,
            6 => Kind::Clock,
            7 => Kind::Ring,
            8 => Kind::Cpus,
            9 => Kind::Control,
            10 => Kind::Counts,
            11 => Kind::Scale,
            12 => Kind::Node,
            13 => Kind::Mux,
            14 => Kind::Gone,
            15 => Kind::ClockPing,
            16 => Kind::ClockPong,
            _ => return Err(Error::malformed(format!("unknown frame kind {v}"))),
        })
    }
}

/// The clock the probe's timestamps come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The time-stamp counter. Events carry raw ticks, so that the probe's
    /// hot path does no arithmetic; [`FrameReader`] turns them into
    /// nanoseconds of the probe clock, in place, as it reads each pack.
    Tsc(TickScale),
    /// `clock_gettime(CLOCK_MONOTONIC)`: events carry nanoseconds.
    Monotonic,
}

/// The probe's calibration of the TSC against `CLOCK_MONOTONIC`:
/// `ns = ns0 + ((ticks − tsc0) × mult) >> 32`, ticks before `tsc0` taken as
/// `tsc0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickScale {
    /// The TSC at the calibration's anchor.
    pub tsc0: u64,
    /// `CLOCK_MONOTONIC` at the anchor, in nanoseconds.
    pub ns0: u64,
    /// Nanoseconds per tick, scaled by 2^32.
    pub mult: u64,
}

impl TickScale {
    /// Nanoseconds of the probe clock at `ticks`.
    #[inline]
    pub fn ns(&self, ticks: u64) -> u64 {
        let d = ticks.saturating_sub(self.tsc0) as u128;
        self.ns0
            .wrapping_add(((d * self.mult as u128) >> 32) as u64)
    }

    /// Appends a [`Frame::Scale`] carrying this calibration to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Scale, |w| {
            w.u64(self.tsc0).u64(self.ns0).u64(self.mult);
        });
    }

    /// Takes a [`Frame::Scale`]'s calibration `new` into `ticks`, the
    /// stream's calibration so far (its `Hello`'s, or the last `Scale`'s):
    /// what both stream readers (this crate's and the shared-memory ring's)
    /// do. A refinement keeps the anchor and moves the rate by 1 % at most;
    /// anything else, or a stream not on the TSC (`ticks` is `None`), is
    /// malformed.
    pub fn apply(ticks: &mut Option<TickScale>, new: TickScale) -> Result<(), Error> {
        let Some(old) = *ticks else {
            return Err(Error::malformed(
                "a Scale frame in a stream whose Hello did not declare the TSC".to_string(),
            ));
        };
        let near = new.mult.abs_diff(old.mult) <= old.mult / 100;
        if new.tsc0 != old.tsc0 || new.ns0 != old.ns0 || !near {
            return Err(Error::malformed(format!(
                "a Scale frame ({new:?}) that does not refine the stream's calibration ({old:?}): another anchor, or a rate more than 1 % away"
            )));
        }
        *ticks = Some(new);
        Ok(())
    }

    /// Turns the start and end of `events` from ticks into nanoseconds.
    pub fn convert(&self, events: &mut [Event]) {
        for e in events {
            e.start.set(self.ns(e.start.get()));
            e.end.set(self.ns(e.end.get()));
        }
    }
}

/// The first frame of every stream: who is speaking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Program name (the executable's file name).
    pub program: String,
    /// Full command line, `argv[0]` first.
    pub argv: Vec<String>,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// World rank as the launcher announced it, or -1 if not known yet.
    pub rank: i32,
    /// World size as the launcher announced it, or -1.
    pub size: i32,
    /// Job the process belongs to (from `HARK_JOB` or the launcher).
    pub job: String,
    /// Which clock timestamps come from.
    pub clock: ClockSource,
    /// The probe clock's reading at `realtime_ns`.
    pub clock_ns: u64,
    /// `CLOCK_REALTIME` in nanoseconds since the epoch, read next to `clock_ns`.
    pub realtime_ns: u64,
    /// The probe's pack size in bytes.
    pub pack_size: u32,
    /// A proof of the run's secret (from the probe's `HARK_ADDR`,
    /// `secret@address`): `hmac-sha256:NONCE:MAC`, see [`Hello::prove`];
    /// the secret itself from a writer that does not prove it; empty when
    /// the address carried none. A server started with a secret refuses a
    /// stream whose `Hello` does not prove or carry it
    /// ([`Hello::check_secret`]).
    pub secret: String,
    /// The pid of the process this one was forked from (without `exec`),
    /// whose rank it belongs to; 0 when the process started its own image
    /// (launched, or after `exec`).
    pub parent: u32,
}

/// Which MPI library a process runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Flavour {
    /// Open MPI.
    OpenMpi = 1,
    /// MPICH and its derivatives.
    Mpich = 2,
    /// Something else.
    Unknown = 0,
}

/// Sent once MPI is initialised: the process's place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// Rank in `MPI_COMM_WORLD`.
    pub world_rank: i32,
    /// Size of `MPI_COMM_WORLD`.
    pub world_size: i32,
    /// `MPI_APPNUM`: which program of an MPMD launch this is (0 if unset).
    pub appnum: i32,
    /// The thread level MPI granted.
    pub thread_level: i32,
    /// The MPI library.
    pub flavour: Flavour,
    /// `MPI_Get_library_version`'s first line.
    pub library: String,
}

/// What a name definition names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NameKind {
    /// A user region.
    Region = 1,
    /// A user counter.
    Counter = 2,
    /// An iteration or phase mark.
    Mark = 3,
    /// An OpenMP construct (a parallel region: its outlined function's
    /// symbol and address), named by the probe's OpenMP adapter.
    Construct = 4,
    /// A function the compiler instrumented, named by `hark` from its
    /// address ([`Def::Function`]); never sent by the probe in a
    /// [`Def::Name`], but a name of its own kind in the server's tables.
    Function = 5,
}

/// A definition: gives an id in this stream its meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Def {
    /// A communicator. `members[i]` is the world rank of rank `i`; for an
    /// inter-communicator, `remote` holds the remote group likewise.
    Comm {
        /// Id used in events' `obj`.
        id: u32,
        /// World ranks of the (local) group, in communicator rank order.
        members: Vec<i32>,
        /// World ranks of the remote group; empty for intra-communicators.
        remote: Vec<i32>,
    },
    /// A file, by the path it was opened with.
    File {
        /// Id used in I/O events' `obj`.
        id: u32,
        /// The path as given to `open`/`fopen`/`MPI_File_open`.
        path: String,
    },
    /// A region, counter or mark name.
    Name {
        /// Id used in user events' `obj`.
        id: u32,
        /// What the name is of.
        kind: NameKind,
        /// The name.
        name: String,
    },
    /// A call site: the return addresses a call was made from, innermost
    /// first (one unless `HARK_CALLSITE_DEPTH` asks for more), absolute in
    /// the process's address space. Resolved in `hark`, through the
    /// process's [`Def::Object`]s.
    Callsite {
        /// Id carried in the high bits of events' `extra` ([`crate::Event::callsite`]).
        id: u32,
        /// Return addresses, the caller of the wrapped function first.
        frames: Vec<u64>,
    },
    /// An object mapped into the process (the executable, a shared
    /// library), as `dl_iterate_phdr` reports it: sent before any call site
    /// inside it.
    Object {
        /// Path of the file (`/proc/self/exe` resolved for the executable).
        path: String,
        /// The GNU build id, hex; empty when the object has none.
        build_id: String,
        /// Load bias: the object's addresses are file addresses plus this.
        bias: u64,
        /// Lowest address of its loaded segments.
        start: u64,
        /// Bytes from `start` to the end of its last loaded segment.
        size: u64,
    },
    /// A function the compiler instrumented (`__cyg_profile_func_enter`),
    /// by its entry address, absolute in the process's address space:
    /// sent before the first event that carries its id, after the
    /// [`Def::Object`]s that hold it. Named in `hark`, as call sites are.
    Function {
        /// Id used in function events' `obj`.
        id: u32,
        /// The function's entry address.
        addr: u64,
    },
}

/// Why a stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EndReason {
    /// `MPI_Finalize` returned.
    Finalize = 1,
    /// The process exited (`exit`, return from `main`).
    Exit = 2,
    /// `MPI_Abort` was called.
    Abort = 3,
    /// A signal whose default action ends the process (SIGTERM, SIGINT,
    /// SIGSEGV, SIGBUS, SIGFPE, SIGABRT) arrived; the probe's handler sent
    /// what the process had recorded before the signal took its course.
    Signal = 4,
}

/// The last frame: the probe's own totals, for reconciliation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    /// Events recorded into buffers.
    pub events_written: u64,
    /// Events lost because no buffer was free (lossy mode) or the server was gone.
    pub events_dropped: u64,
    /// Packs the shipper wrote to the stream.
    pub packs_sent: u64,
    /// Why the stream ended.
    pub reason: EndReason,
}

/// When a clock alignment was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ClockPhase {
    /// At the end of `MPI_Init` / `MPI_Init_thread`.
    Init = 1,
    /// At the start of `MPI_Finalize`.
    Finalize = 2,
}

/// Largest offset between two probe clocks a reader accepts, in ns
/// (2^62 ns, about 146 years: probe clocks count from their host's boot).
pub const MAX_CLOCK_OFFSET_NS: u64 = 1 << 62;
/// Largest round trip a reader accepts, in ns: the best of several rounds
/// taking longer than a minute is not a measurement.
pub const MAX_ROUND_TRIP_NS: u64 = 60_000_000_000;

/// Whose clock a [`ClockSync`] was measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ClockReference {
    /// The server's clock, the common timeline itself (`CLOCK_REALTIME`,
    /// ns since the epoch): a ping-pong over a connection of the probe's
    /// own ([`Kind::ClockPing`]). Needs no other process.
    Server = 1,
    /// World rank 0's probe clock, by a ping-pong over MPI: streams over
    /// MPI (`hark run --analysers`), where every rank carries the probe.
    /// World rank 0 itself sends one with `local_ns == reference_ns` and a
    /// round trip of 0.
    WorldRank0 = 2,
}

/// The answer to a clock ping: the reference clock (`hark`'s
/// `CLOCK_REALTIME`, ns since the epoch) when the answer was written, as
/// the answering process reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pong {
    /// The reference clock, in ns.
    pub reference_ns: u64,
    /// How far `reference_ns` may be from the reference's own reading:
    /// 0 when `hark` answers; a node's forwarder answers with its clock
    /// aligned to `hark`'s, and gives that alignment's bound (its half
    /// round trip to `hark` and the drift allowed since).
    pub bound_ns: u64,
}

/// One alignment of this process's probe clock with a reference clock
/// ([`ClockReference`]) by a ping-pong (see `docs/wire.md`): of several
/// rounds, the one with the smallest round trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSync {
    /// At `MPI_Init` or at `MPI_Finalize`.
    pub phase: ClockPhase,
    /// This process's probe clock, in ns, halfway between sending the
    /// request and receiving the answer of the best round.
    pub local_ns: u64,
    /// The reference clock, in ns, when it answered that round.
    pub reference_ns: u64,
    /// The best round's round trip on this process's clock, in ns.
    pub round_trip_ns: u64,
    /// Whose clock `reference_ns` reads.
    pub reference: ClockReference,
    /// The answering clock's own bound on its distance from the reference
    /// ([`Pong::bound_ns`] of the best round): 0 when the reference itself
    /// answered, a forwarder's alignment with `hark` when it answered.
    pub relay_bound_ns: u64,
}

impl ClockSync {
    /// What to add to this process's probe clock to get the reference's:
    /// `reference_ns − local_ns` (Cristian's estimate, wrong by at most
    /// half the round trip).
    pub fn offset_ns(&self) -> i64 {
        self.reference_ns as i64 - self.local_ns as i64
    }

    /// How far [`ClockSync::offset_ns`] may be from the truth: half the
    /// round trip, plus the answering clock's own bound
    /// ([`ClockSync::relay_bound_ns`]).
    pub fn uncertainty_ns(&self) -> u64 {
        (self.round_trip_ns / 2).saturating_add(self.relay_bound_ns)
    }

    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Clock, |w| {
            w.u8(self.phase as u8)
                .u64(self.local_ns)
                .u64(self.reference_ns)
                .u64(self.round_trip_ns)
                .u8(self.reference as u8)
                .u64(self.relay_bound_ns);
        })
    }

    fn decode(r: &mut Reader) -> Result<ClockSync, Error> {
        let phase = match r.u8("phase")? {
            1 => ClockPhase::Init,
            2 => ClockPhase::Finalize,
            p => return Err(Error::malformed(format!("clock: unknown phase {p}"))),
        };
        let sync = ClockSync {
            phase,
            local_ns: r.u64("local_ns")?,
            reference_ns: r.u64("reference_ns")?,
            round_trip_ns: r.u64("round_trip_ns")?,
            reference: match r.u8("reference")? {
                1 => ClockReference::Server,
                2 => ClockReference::WorldRank0,
                x => return Err(Error::malformed(format!("clock: unknown reference {x}"))),
            },
            relay_bound_ns: r.u64("relay_bound_ns")?,
        };
        if sync.local_ns > i64::MAX as u64 || sync.reference_ns > i64::MAX as u64 {
            return Err(Error::malformed(format!(
                "clock: a reading above 2^63 ns (local {}, reference {}); the probe clock counts from boot",
                sync.local_ns, sync.reference_ns
            )));
        }
        if sync.offset_ns().unsigned_abs() > MAX_CLOCK_OFFSET_NS {
            return Err(Error::malformed(format!(
                "clock: offset {} ns to the reference is beyond the {MAX_CLOCK_OFFSET_NS}-ns limit",
                sync.offset_ns()
            )));
        }
        if sync.round_trip_ns > MAX_ROUND_TRIP_NS || sync.relay_bound_ns > MAX_ROUND_TRIP_NS {
            return Err(Error::malformed(format!(
                "clock: round trip {} ns or relay bound {} ns is beyond the {MAX_ROUND_TRIP_NS}-ns limit",
                sync.round_trip_ns, sync.relay_bound_ns
            )));
        }
        Ok(sync)
    }
}

/// One decoded frame; packs borrow their events from the read buffer.
#[derive(Debug)]
pub enum Frame<'a> {
    /// See [`Hello`].
    Hello(Hello),
    /// See [`RankInfo`].
    Rank(RankInfo),
    /// Definitions.
    Defs(Vec<Def>),
    /// A pack of events.
    Pack {
        /// Sequence number of the pack within its stream, from 0.
        seq: u64,
        /// The events, viewed in place.
        events: &'a [Event],
    },
    /// See [`End`].
    End(End),
    /// See [`ClockSync`].
    Clock(ClockSync),
    /// The rest of the stream (every frame after this one) travels through
    /// a shared-memory ring, whose descriptor came with this frame's bytes
    /// (`SCM_RIGHTS` on a Unix socket). Empty payload. See `docs/wire.md`,
    /// "Shared-memory ring".
    Ring,
    /// The cores (CPU numbers, ascending) the process was bound to when it
    /// connected, as `sched_getaffinity` gave them on its own host. Sent
    /// right after the `Hello` by probes that can read it; says nothing
    /// about other hosts' cores.
    Cpus(Vec<u32>),
    /// See [`Control`]: in a probe's stream, its answer to a service's
    /// request (a dump's flush is complete).
    Control(Control),
    /// See [`Counts`]: a sampled-out probe's exact totals for the events
    /// of one pack it did not send.
    Counts(Counts),
    /// A probe's request for the server's clock: the first and every frame
    /// of a connection of its own, never of a stream (`docs/wire.md`,
    /// "Clock alignment"). Empty payload.
    ClockPing,
    /// The answer to a [`Frame::ClockPing`], written back at once: see
    /// [`Pong`].
    ClockPong(Pong),
    /// A TSC calibration over a longer time than the one in the `Hello`
    /// (same anchor, a better `mult`): [`FrameReader`] turns the ticks of
    /// the packs after it into nanoseconds with it. Only in streams whose
    /// `Hello` declared the TSC.
    Scale(TickScale),
    /// See [`Node`]: the first frame of a forwarder's connection.
    Node(Node),
    /// One whole frame (header and payload, not decoded: packs keep their
    /// ticks) of the forwarded stream numbered `stream`.
    Mux {
        /// The stream's number on its forwarder's connection.
        stream: u64,
        /// The carried frame's bytes.
        frame: &'a [u8],
    },
    /// See [`Gone`].
    Gone(Gone),
}

/// Most CPU numbers a [`Frame::Cpus`] carries (the kernel's largest
/// `CONFIG_NR_CPUS`).
pub const MAX_CPUS: usize = 8192;

pub(crate) fn frame(out: &mut Vec<u8>, kind: Kind, body: impl FnOnce(&mut Writer)) {
    let at = out.len();
    out.extend_from_slice(&[0; HEADER_SIZE]);
    body(&mut Writer(out));
    let len = (out.len() - at - HEADER_SIZE) as u32;
    out[at..at + 4].copy_from_slice(&(kind as u32).to_le_bytes());
    out[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
}

impl Hello {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Hello, |w| {
            w.0.extend_from_slice(&MAGIC);
            w.u16(VERSION)
                .str(&self.program)
                .u32(self.argv.len() as u32);
            for a in &self.argv {
                w.str(a);
            }
            w.str(&self.host)
                .u32(self.pid)
                .i32(self.rank)
                .i32(self.size)
                .str(&self.job);
            match self.clock {
                ClockSource::Tsc(t) => w.u8(1).u64(t.tsc0).u64(t.ns0).u64(t.mult),
                ClockSource::Monotonic => w.u8(2),
            };
            w.u64(self.clock_ns)
                .u64(self.realtime_ns)
                .u32(self.pack_size)
                .str(&self.secret)
                .u32(self.parent);
        })
    }

    fn decode(r: &mut Reader) -> Result<Hello, Error> {
        let magic = [
            r.u8("magic")?,
            r.u8("magic")?,
            r.u8("magic")?,
            r.u8("magic")?,
        ];
        if magic != MAGIC {
            return Err(Error::malformed(format!(
                "stream does not start with the Hark magic (found {magic:?}); is something other than a Hark probe connecting?"
            )));
        }
        let version = r.u16("version")?;
        if version != VERSION {
            return Err(ErrorKind::Version { found: version }.into());
        }
        let program = r.str("program")?;
        let argc = r.u32("argc")? as usize;
        if argc > r.rest().len() / 4 {
            return Err(Error::malformed("hello: argc larger than the frame"));
        }
        let argv = (0..argc).map(|_| r.str("argv")).collect::<Result<_, _>>()?;
        Ok(Hello {
            program,
            argv,
            host: r.str("host")?,
            pid: r.u32("pid")?,
            rank: r.i32("rank")?,
            size: r.i32("size")?,
            job: r.str("job")?,
            clock: match r.u8("clock")? {
                1 => ClockSource::Tsc(TickScale {
                    tsc0: r.u64("tsc0")?,
                    ns0: r.u64("ns0")?,
                    mult: r.u64("mult")?,
                }),
                2 => ClockSource::Monotonic,
                c => return Err(Error::malformed(format!("hello: unknown clock source {c}"))),
            },
            clock_ns: r.u64("clock_ns")?,
            realtime_ns: r.u64("realtime_ns")?,
            pack_size: r.u32("pack_size")?,
            secret: r.str("secret")?,
            parent: r.u32("parent")?,
        })
    }
}

impl RankInfo {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::Rank, |w| {
            w.i32(self.world_rank).i32(self.world_size).i32(self.appnum);
            w.i32(self.thread_level)
                .u8(self.flavour as u8)
                .str(&self.library);
        })
    }

    fn decode(r: &mut Reader) -> Result<RankInfo, Error> {
        Ok(RankInfo {
            world_rank: r.i32("world_rank")?,
            world_size: r.i32("world_size")?,
            appnum: r.i32("appnum")?,
            thread_level: r.i32("thread_level")?,
            flavour: match r.u8("flavour")? {
                1 => Flavour::OpenMpi,
                2 => Flavour::Mpich,
                _ => Flavour::Unknown,
            },
            library: r.str("library")?,
        })
    }
}

impl Def {
    /// Appends a frame holding `defs` to `out`.
    pub fn encode_all(defs: &[Def], out: &mut Vec<u8>) {
        frame(out, Kind::Defs, |w| {
            for d in defs {
                match d {
                    Def::Comm {
                        id,
                        members,
                        remote,
                    } => {
                        w.u8(1).u32(*id).i32s(members).i32s(remote);
                    }
                    Def::File { id, path } => {
                        w.u8(2).u32(*id).str(path);
                    }
                    Def::Name { id, kind, name } => {
                        w.u8(3).u32(*id).u8(*kind as u8).str(name);
                    }
                    Def::Callsite { id, frames } => {
                        w.u8(4).u32(*id).u32(frames.len() as u32);
                        for f in frames {
                            w.u64(*f);
                        }
                    }
                    Def::Object {
                        path,
                        build_id,
                        bias,
                        start,
                        size,
                    } => {
                        w.u8(5)
                            .str(path)
                            .str(build_id)
                            .u64(*bias)
                            .u64(*start)
                            .u64(*size);
                    }
                    Def::Function { id, addr } => {
                        w.u8(6).u32(*id).u64(*addr);
                    }
                }
            }
        })
    }

    fn decode_all(r: &mut Reader) -> Result<Vec<Def>, Error> {
        let mut defs = Vec::new();
        while !r.is_empty() {
            defs.push(match r.u8("definition kind")? {
                1 => Def::Comm {
                    id: r.u32("comm id")?,
                    members: r.i32s("members")?,
                    remote: r.i32s("remote")?,
                },
                2 => Def::File {
                    id: r.u32("file id")?,
                    path: r.str("path")?,
                },
                3 => {
                    let id = r.u32("name id")?;
                    let kind = match r.u8("name kind")? {
                        1 => NameKind::Region,
                        2 => NameKind::Counter,
                        3 => NameKind::Mark,
                        4 => NameKind::Construct,
                        5 => NameKind::Function,
                        k => {
                            return Err(Error::malformed(format!(
                                "definition: unknown name kind {k}"
                            )))
                        }
                    };
                    Def::Name {
                        id,
                        kind,
                        name: r.str("name")?,
                    }
                }
                4 => {
                    let id = r.u32("call site id")?;
                    let n = r.u32("call site depth")?;
                    if n > MAX_CALLSITE_DEPTH {
                        return Err(Error::malformed(format!(
                            "call site {id}: {n} frames, more than {MAX_CALLSITE_DEPTH}"
                        )));
                    }
                    let frames = (0..n)
                        .map(|_| r.u64("call site frame"))
                        .collect::<Result<_, _>>()?;
                    Def::Callsite { id, frames }
                }
                5 => Def::Object {
                    path: r.str("object path")?,
                    build_id: r.str("object build id")?,
                    bias: r.u64("object bias")?,
                    start: r.u64("object start")?,
                    size: r.u64("object size")?,
                },
                6 => Def::Function {
                    id: r.u32("function id")?,
                    addr: r.u64("function address")?,
                },
                k => return Err(Error::malformed(format!("unknown definition kind {k}"))),
            });
        }
        Ok(defs)
    }
}

impl End {
    /// Appends this frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        frame(out, Kind::End, |w| {
            w.u64(self.events_written)
                .u64(self.events_dropped)
                .u64(self.packs_sent);
            w.u8(self.reason as u8);
        })
    }

    fn decode(r: &mut Reader) -> Result<End, Error> {
        Ok(End {
            events_written: r.u64("events_written")?,
            events_dropped: r.u64("events_dropped")?,
            packs_sent: r.u64("packs_sent")?,
            reason: match r.u8("reason")? {
                1 => EndReason::Finalize,
                2 => EndReason::Exit,
                3 => EndReason::Abort,
                4 => EndReason::Signal,
                c => return Err(Error::malformed(format!("end: unknown reason {c}"))),
            },
        })
    }
}

/// Writes the header of a pack frame holding `events` events with sequence
/// number `seq` into `out[..HEADER_SIZE + PACK_HEADER_SIZE]`.
///
/// The probe builds packs in place: it reserves this many bytes at the front
/// of a buffer, appends events behind them, and fills the header when the
/// buffer is shipped.
pub fn write_pack_header(out: &mut [u8], seq: u64, events: usize) {
    let len = (PACK_HEADER_SIZE + events * EVENT_SIZE) as u32;
    out[0..4].copy_from_slice(&(Kind::Pack as u32).to_le_bytes());
    out[4..8].copy_from_slice(&len.to_le_bytes());
    out[8..16].copy_from_slice(&seq.to_le_bytes());
}

/// Appends a pack frame holding `events` to `out`.
pub fn encode_pack(seq: u64, events: &[Event], out: &mut Vec<u8>) {
    use zerocopy::IntoBytes;
    let at = out.len();
    out.resize(at + HEADER_SIZE + PACK_HEADER_SIZE, 0);
    write_pack_header(&mut out[at..], seq, events.len());
    out.extend_from_slice(events.as_bytes());
}

impl<'a> Frame<'a> {
    /// Decodes a payload of the given kind.
    pub fn decode(kind: Kind, payload: &'a [u8]) -> Result<Frame<'a>, Error> {
        let mut r = Reader::new(payload, "frame");
        let frame = match kind {
            Kind::Hello => Frame::Hello(Hello::decode(&mut r)?),
            Kind::Rank => Frame::Rank(RankInfo::decode(&mut r)?),
            Kind::Defs => return Ok(Frame::Defs(Def::decode_all(&mut r)?)),
            Kind::End => Frame::End(End::decode(&mut r)?),
            Kind::Clock => Frame::Clock(ClockSync::decode(&mut r)?),
            Kind::Ring => Frame::Ring,
            Kind::Cpus => Frame::Cpus(decode_cpus(&mut r)?),
            Kind::Control => Frame::Control(Control::decode(&mut r)?),
            Kind::Counts => Frame::Counts(Counts::decode(&mut r)?),
            Kind::ClockPing => Frame::ClockPing,
            Kind::ClockPong => Frame::ClockPong(Pong {
                reference_ns: r.u64("reference_ns")?,
                bound_ns: r.u64("bound_ns")?,
            }),
            Kind::Scale => Frame::Scale(TickScale {
                tsc0: r.u64("tsc0")?,
                ns0: r.u64("ns0")?,
                mult: r.u64("mult")?,
            }),
            Kind::Node => Frame::Node(Node::decode(&mut r)?),
            Kind::Gone => Frame::Gone(Gone::decode(&mut r)?),
            Kind::Mux => {
                let stream = r.u64("stream")?;
                return Ok(Frame::Mux {
                    stream,
                    frame: r.rest(),
                });
            }
            Kind::Pack => {
                let seq = r.u64("pack sequence")?;
                return Ok(Frame::Pack {
                    seq,
                    events: Event::slice_from(r.rest())?,
                });
            }
        };
        if !r.is_empty() {
            return Err(Error::malformed(format!(
                "{kind:?} frame has {} bytes after its last field",
                r.rest().len()
            )));
        }
        Ok(frame)
    }
}

impl Frame<'_> {
    /// Appends this frame to `out` as it would be read back (a pack's
    /// events as they are now: a reader that converted ticks sends
    /// nanoseconds).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Hello(h) => h.encode(out),
            Frame::Rank(r) => r.encode(out),
            Frame::Defs(d) => Def::encode_all(d, out),
            Frame::Pack { seq, events } => encode_pack(*seq, events, out),
            Frame::End(e) => e.encode(out),
            Frame::Clock(c) => c.encode(out),
            Frame::Ring => encode_ring(out),
            Frame::Cpus(c) => encode_cpus(c, out),
            Frame::Control(c) => c.encode(out),
            Frame::Counts(c) => c.encode(out),
            Frame::Scale(t) => t.encode(out),
            Frame::Node(n) => n.encode(out),
            Frame::Mux { stream, frame } => crate::forward::encode_mux(*stream, frame, out),
            Frame::Gone(g) => g.encode(out),
            Frame::ClockPing => encode_clock_ping(out),
            Frame::ClockPong(p) => encode_clock_pong(*p, out),
        }
    }
}

/// Appends a [`Frame::ClockPing`].
pub fn encode_clock_ping(out: &mut Vec<u8>) {
    frame(out, Kind::ClockPing, |_| {});
}

/// Appends a [`Frame::ClockPong`].
pub fn encode_clock_pong(pong: Pong, out: &mut Vec<u8>) {
    frame(out, Kind::ClockPong, |w| {
        w.u64(pong.reference_ns).u64(pong.bound_ns);
    });
}

/// Appends a [`Frame::Ring`] (to be sent with the ring's descriptor).
pub fn encode_ring(out: &mut Vec<u8>) {
    frame(out, Kind::Ring, |_| {});
}

/// Appends a [`Frame::Cpus`] naming `cpus`.
pub fn encode_cpus(cpus: &[u32], out: &mut Vec<u8>) {
    let cpus = &cpus[..cpus.len().min(MAX_CPUS)];
    frame(out, Kind::Cpus, |w| {
        w.u32(cpus.len() as u32);
        for &c in cpus {
            w.u32(c);
        }
    });
}

fn decode_cpus(r: &mut Reader) -> Result<Vec<u32>, Error> {
    let n = r.u32("cpu count")? as usize;
    if n > MAX_CPUS || n > r.rest().len() / 4 {
        return Err(Error::malformed(format!(
            "cpus: {n} CPU numbers claimed, more than the frame holds"
        )));
    }
    let cpus = (0..n)
        .map(|_| r.u32("cpu"))
        .collect::<Result<Vec<u32>, _>>()?;
    if cpus.windows(2).any(|w| w[0] >= w[1]) || cpus.iter().any(|&c| c as usize >= MAX_CPUS) {
        return Err(Error::malformed(
            "cpus: CPU numbers not ascending, or above the largest kernel's",
        ));
    }
    Ok(cpus)
}

/// A pack frame's payload taken from a [`FrameReader`] with its buffer
/// ([`FrameReader::take_pack`]): its events are kept without a copy.
#[derive(Debug, Default)]
pub struct PackBytes {
    buf: Vec<u8>,
    len: usize,
}

impl PackBytes {
    /// A copy of `events` as pack `seq`, laid out as a reader leaves a
    /// pack, in `buf` (whose bytes it replaces): so that buffers of copied
    /// packs and of packs taken from a reader serve either.
    pub fn copy_of(seq: u64, events: &[Event], mut buf: Vec<u8>) -> PackBytes {
        buf.clear();
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(events.as_bytes());
        let len = buf.len();
        PackBytes { buf, len }
    }

    /// The pack as a frame (borrowing its events).
    pub fn frame(&self) -> Frame<'_> {
        Frame::Pack {
            seq: self.seq(),
            events: self.events(),
        }
    }

    /// The pack's sequence number within its stream.
    pub fn seq(&self) -> u64 {
        (self.buf.get(..PACK_HEADER_SIZE))
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// The pack's events (converted to nanoseconds as the reader converts
    /// them); none if the bytes are not a pack's.
    pub fn events(&self) -> &[Event] {
        (self.buf.get(PACK_HEADER_SIZE..self.len))
            .and_then(|b| Event::slice_from(b).ok())
            .unwrap_or(&[])
    }

    /// The buffer, whose front holds the frame's payload (and whose length
    /// may be larger).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads frames one by one from a byte stream, reusing one buffer. Packs
/// of a stream whose `Hello` says [`ClockSource::Tsc`] come out with their
/// timestamps in nanoseconds (converted in the buffer, not copied).
///
/// A frame whose header claims more than its kind's cap
/// ([`Kind::max_payload`]; for a pack, the `pack_size` its `Hello`
/// declared) is an error before a byte of it is read, and the buffer grows
/// only with the bytes that actually arrive: a header that claims much and
/// sends little costs the reader little.
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Payload bytes of the last frame read, at the front of `buf`.
    len: usize,
    offset: u64,
    ticks: Option<TickScale>,
    // The pack payload cap of this stream: `pack_size` from its Hello.
    max_pack: Option<usize>,
    // False: packs keep their ticks (a forwarder passes them on as read).
    convert: bool,
}

impl<R: Read> FrameReader<R> {
    /// A reader over `inner`.
    pub fn new(inner: R) -> Self {
        FrameReader {
            inner,
            buf: Vec::new(),
            len: 0,
            offset: 0,
            ticks: None,
            max_pack: None,
            convert: true,
        }
    }

    /// This reader, leaving the ticks of a TSC stream's packs as they came
    /// instead of turning them into nanoseconds: for a forwarder, whose
    /// server converts them with the stream's `Hello` as it would a
    /// direct stream's.
    pub fn keep_ticks(mut self) -> Self {
        self.convert = false;
        self
    }

    /// Bytes consumed so far (for error messages).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the frames to come into `buf` instead of its own buffer, if
    /// `buf` is the longer: a buffer that held a pack before keeps its
    /// length, so a stream's first pack is read without zeroing (and
    /// page-faulting) a buffer of its own as it grows. Between frames: the
    /// last frame read is gone.
    pub fn use_buffer(&mut self, buf: Vec<u8>) {
        if buf.len() > self.buf.len() {
            self.buf = buf;
            self.len = 0;
        }
    }

    /// The buffer holding the last frame read, a pack (its events stay as
    /// [`next_frame`](FrameReader::next_frame) gave them), with `spare` in
    /// its place for the frames to come: a sink that keeps packs keeps them
    /// without a copy. `spare` is best a buffer that held a pack before (its
    /// length is kept: the reader zeroes only what it grows by).
    pub fn take_pack(&mut self, spare: Vec<u8>) -> PackBytes {
        let buf = std::mem::replace(&mut self.buf, spare);
        PackBytes {
            buf,
            len: std::mem::take(&mut self.len),
        }
    }

    /// The payload of the last frame read, to change in place (a
    /// forwarded pack's ticks, converted by its server).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }

    /// The next frame, or `None` at a clean end of stream (between frames).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, Error> {
        let mut header = [0u8; HEADER_SIZE];
        match read_full(&mut self.inner, &mut header)? {
            0 => return Ok(None),
            HEADER_SIZE => {}
            _ => return Err(ErrorKind::Truncated.into()),
        }
        let kind = Kind::from_u32(u32::from_le_bytes(header[0..4].try_into().unwrap()))
            .map_err(|e| at(e, self.offset))?;
        let len = u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize;
        let (max, which) = match (kind, self.max_pack) {
            (Kind::Pack, Some(max)) => (max, "the pack size its stream's Hello declared"),
            _ => (kind.max_payload(), "the cap for its kind"),
        };
        if len > max {
            return Err(at(
                Error::malformed(format!(
                    "{kind:?} frame claims {len} bytes, above its limit of {max} bytes ({which})"
                )),
                self.offset,
            ));
        }
        // Grow with what arrives, not with what the header claims: room
        // for at most twice what came so far. The buffer keeps its length
        // between frames, so its bytes are zeroed once, not before every
        // read (`read_to_end` into a cleared vector zeroes its spare room
        // each time: a megabyte per pack).
        let mut got = 0;
        while got < len {
            let room = len.min(self.buf.len().max(2 * got).max(1 << 16));
            if self.buf.len() < room {
                self.buf.resize(room, 0);
            }
            let n = read_full(&mut self.inner, &mut self.buf[got..room])?;
            got += n;
            if got < room {
                return Err(ErrorKind::Truncated.into());
            }
        }
        let start = self.offset;
        self.offset += (HEADER_SIZE + len) as u64;
        self.len = len;
        let payload = &mut self.buf[..len];
        if let (Kind::Pack, Some(scale), true) = (kind, self.ticks, self.convert) {
            if let Some(events) = payload
                .get_mut(PACK_HEADER_SIZE..)
                .and_then(|b| <[Event]>::mut_from_bytes(b).ok())
            {
                scale.convert(events);
            }
        }
        let frame = Frame::decode(kind, &self.buf[..len]).map_err(|e| at(e, start))?;
        if let Frame::Scale(new) = &frame {
            TickScale::apply(&mut self.ticks, *new).map_err(|e| at(e, start))?;
        }
        if let Frame::Hello(h) = &frame {
            self.ticks = match h.clock {
                ClockSource::Tsc(t) => Some(t),
                ClockSource::Monotonic => None,
            };
            self.max_pack = Some((h.pack_size as usize).min(Kind::Pack.max_payload()));
        }
        Ok(Some(frame))
    }
}

fn at(e: Error, offset: u64) -> Error {
    match e.kind() {
        ErrorKind::Malformed(what) => Error::malformed(format!("at byte {offset}: {what}")),
        _ => e,
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, Error> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ErrorKind::Io(e).into()),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_grows_with_what_arrives_and_is_reused_between_frames() {
        // A header that claims 64 MiB of definitions and sends 100 bytes:
        // an error, having held little.
        let mut lie = Vec::new();
        lie.extend_from_slice(&(Kind::Defs as u32).to_le_bytes());
        lie.extend_from_slice(&(64u32 << 20).to_le_bytes());
        lie.extend_from_slice(&[0u8; 100]);
        let mut r = FrameReader::new(&lie[..]);
        assert!(r.next_frame().is_err());
        assert!(r.buf.len() <= 1 << 16, "{} bytes held", r.buf.len());
        // A large pack, then a small one, then a large one again: each
        // reads its own bytes out of the one buffer, which stays as large
        // as the largest.
        let event = |n: u64| Event::new(crate::op::REGION_BEGIN, n, n + 1);
        let big: Vec<Event> = (0..20_000).map(event).collect();
        let mut bytes = Vec::new();
        encode_pack(0, &big, &mut bytes);
        encode_pack(1, &[event(7)], &mut bytes);
        encode_pack(2, &big[..19_999], &mut bytes);
        let mut r = FrameReader::new(&bytes[..]);
        let mut seen = Vec::new();
        while let Some(frame) = r.next_frame().unwrap() {
            let Frame::Pack { seq, events } = frame else {
                panic!("not a pack")
            };
            seen.push((seq, events.len(), events.last().map(|e| e.start.get())));
        }
        assert_eq!(
            seen,
            [
                (0, 20_000, Some(19_999)),
                (1, 1, Some(7)),
                (2, 19_999, Some(19_998))
            ]
        );
        assert_eq!(r.buf.len(), PACK_HEADER_SIZE + 20_000 * EVENT_SIZE);
    }

    #[test]
    fn a_buffer_given_before_the_first_pack_reads_it_without_growing() {
        let event = |n: u64| Event::new(crate::op::REGION_BEGIN, n, n + 1);
        let big: Vec<Event> = (0..3_000).map(event).collect();
        let mut bytes = Vec::new();
        encode_pack(1, &big, &mut bytes);
        let mut r = FrameReader::new(&bytes[..]);
        // Shorter than the reader's own: kept out.
        r.use_buffer(Vec::new());
        let given = vec![0xffu8; 1 << 20];
        let at = given.as_ptr();
        r.use_buffer(given);
        assert!(r.next_frame().unwrap().is_some());
        let pack = r.take_pack(Vec::new());
        assert_eq!(pack.events(), &big[..]);
        let buf = pack.into_buffer();
        assert_eq!(
            (buf.as_ptr(), buf.len()),
            (at, 1 << 20),
            "read into the buffer given"
        );
    }

    #[test]
    fn a_pack_taken_with_its_buffer_keeps_its_events_and_the_spare_reads_the_next() {
        let event = |n: u64| Event::new(crate::op::REGION_BEGIN, n, n + 1);
        let big: Vec<Event> = (0..3_000).map(event).collect();
        let mut bytes = Vec::new();
        encode_pack(4, &big, &mut bytes);
        encode_pack(5, &big[..2], &mut bytes);
        encode_pack(6, &big[..1_000], &mut bytes);
        let mut r = FrameReader::new(&bytes[..]);
        let mut taken = Vec::new();
        // Spares taken from the back: the second pack is read into a new
        // buffer, the third into a larger one that held other bytes (as a
        // pool's), and the first pack's buffer is given back behind them.
        let mut spares = vec![vec![0xffu8; 1 << 20], Vec::new()];
        while let Some(frame) = r.next_frame().unwrap() {
            assert!(matches!(frame, Frame::Pack { .. }));
            let pack = r.take_pack(spares.pop().unwrap_or_default());
            taken.push((pack.seq(), pack.events().to_vec()));
            if pack.seq() == 4 {
                spares.insert(0, pack.into_buffer());
            }
        }
        let want = [(4, &big[..]), (5, &big[..2]), (6, &big[..1_000])];
        assert_eq!(taken.len(), 3);
        for ((seq, events), (s, e)) in taken.iter().zip(want) {
            assert_eq!((*seq, &events[..]), (s, e));
        }
        // A copy, into a buffer a pack was read into, reads as the pack.
        let copy = PackBytes::copy_of(7, &big[..5], r.take_pack(Vec::new()).into_buffer());
        assert_eq!((copy.seq(), copy.events()), (7, &big[..5]));
        let Frame::Pack { seq, events } = copy.frame() else {
            panic!("not a pack")
        };
        assert_eq!((seq, events), (7, &big[..5]));
        // Not a pack: no events.
        let mut defs = Vec::new();
        Def::encode_all(&[], &mut defs);
        let mut r = FrameReader::new(&defs[..]);
        assert!(r.next_frame().unwrap().is_some());
        assert_eq!(r.take_pack(Vec::new()).events(), &[]);
    }
}
