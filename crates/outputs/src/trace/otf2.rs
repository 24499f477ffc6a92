//! An OTF2 archive, written through Debian's libotf2 (3.x) when Hark is
//! built with it: found by the build script (`build.rs`), or forced by the
//! `otf2` feature; without it, [`write_otf2`] says so and names the fix.
//!
//! The archive (`trace.otf2/traces.otf2`, with `traces.def` and
//! `traces/*.evt`) holds: the system tree (machine, hosts), a location
//! group per rank and a location per thread; the strings, regions (MPI
//! functions with their roles, I/O calls, user regions) and, for MPI, the
//! `COMM_LOCATIONS` group and one group and communicator per distinct
//! member list; per location, `Enter`/`Leave` for every slice, `MpiSend`
//! and `MpiRecv` for every matched message (in the slice of the call that
//! completed it, the partner as a rank of the communicator), and
//! `MpiCollectiveBegin`/`End` around each collective. Timestamps are the
//! aligned clock in ns; the clock properties give the trace's start.
//! I/O calls are regions with the `FILE_IO` role: OTF2's I/O records
//! (`IoOperationBegin`, ...) need handles Hark does not record.
//!
//! Performance counters (per thread location) and node sensors (a metric
//! location per node) are `Metric` events, one metric class per figure;
//! `docs/trace.md` says which and in which mode.
//!
//! A call whose source location is known ([`Sources`]) carries it on its
//! `Enter` as the attribute `source`, of type `SOURCE_CODE_LOCATION`: one
//! `SourceCodeLocation` definition (file, line) per distinct place.

mod metrics;

use super::{collective_class, SliceKind, Source, Sources, Timeline};
use crate::Error;
use hark_engine::trace::Trace;
use metrics::Metrics;
use std::path::{Path, PathBuf};

/// Whether this build writes OTF2 (libotf2 was found at build time, or
/// the `otf2` feature forced it).
pub const OTF2_AVAILABLE: bool = cfg!(hark_otf2);

/// Why a build cannot write OTF2, and the fix.
pub const OTF2_MISSING: &str = "this hark was built where libotf2 was not found: install it \
(Debian, Ubuntu: apt-get install libopen-trace-format2-dev; elsewhere put the directory of \
libopen-trace-format2.so in LIBRARY_PATH) and build hark again";

/// The archive directory [`write_otf2`] creates in its directory.
pub const OTF2_DIR: &str = "trace.otf2";

/// Writes `trace` as the OTF2 archive `dir/trace.otf2/traces.otf2` (any
/// earlier archive there is replaced), calls with their `sources`; returns
/// the anchor file's path.
pub fn write_otf2(trace: &Trace, sources: &Sources, dir: &Path) -> Result<PathBuf, Error> {
    let archive = dir.join(OTF2_DIR);
    if !OTF2_AVAILABLE {
        return Err(Error::trace(&archive, OTF2_MISSING.into()));
    }
    if archive.exists() {
        std::fs::remove_dir_all(&archive).map_err(|e| Error::io(&archive, e))?;
    }
    let timeline = Timeline::of(trace);
    let plan = Plan::of(trace, &timeline, sources);
    imp::write(trace, &timeline, &plan, sources, &archive)?;
    Ok(archive.join("traces.otf2"))
}

/// Global definitions, decided before anything is written.
struct Plan {
    strings: Vec<String>,
    /// Region per distinct (kind, name): (string, role, paradigm).
    regions: Vec<(u32, u8, u8)>,
    region_of: std::collections::HashMap<(SliceKind, std::borrow::Cow<'static, str>), u32>,
    /// World size: locations are defined for every world rank.
    world: usize,
    /// Distinct communicators by member list.
    comms: Vec<Vec<i32>>,
    /// Source code locations: (file's string, line), at their id.
    sources: Vec<(u32, u32)>,
    /// The id of each source code location.
    #[cfg_attr(not(hark_otf2), allow(dead_code))]
    source_of: std::collections::HashMap<Source, u32>,
    /// The string naming the attribute calls carry it in.
    #[cfg_attr(not(hark_otf2), allow(dead_code))]
    source_attribute: u32,
    /// Counters and node sensors as metrics.
    #[cfg_attr(not(hark_otf2), allow(dead_code))]
    metrics: Metrics,
}

const ROLE_FUNCTION: u8 = 1;
const ROLE_CODE: u8 = 4;
const ROLE_BARRIER: u8 = 15;
const ROLE_COLL_ONE2ALL: u8 = 23;
const ROLE_COLL_ALL2ONE: u8 = 24;
const ROLE_COLL_ALL2ALL: u8 = 25;
const ROLE_FILE_IO: u8 = 27;
const ROLE_POINT2POINT: u8 = 28;
const PARADIGM_UNKNOWN: u8 = 0;
const PARADIGM_USER: u8 = 1;
const PARADIGM_MPI: u8 = 4;

fn role(kind: SliceKind, name: &str) -> (u8, u8) {
    match kind {
        SliceKind::Region => (ROLE_CODE, PARADIGM_USER),
        SliceKind::Io(_) => (ROLE_FILE_IO, PARADIGM_UNKNOWN),
        SliceKind::Mpi(f) => {
            let r = if name == "MPI_Barrier" || name == "MPI_Ibarrier" {
                ROLE_BARRIER
            } else if collective_class(f) {
                match collective_op(name).unwrap_or(0) {
                    1 | 4 | 5 => ROLE_COLL_ONE2ALL,
                    2 | 3 | 12 => ROLE_COLL_ALL2ONE,
                    _ => ROLE_COLL_ALL2ALL,
                }
            } else if name.contains("send")
                || name.contains("recv")
                || name.contains("Send")
                || name.contains("Recv")
            {
                ROLE_POINT2POINT
            } else {
                ROLE_FUNCTION
            };
            (r, PARADIGM_MPI)
        }
    }
}

/// OTF2's `OTF2_CollectiveOp` of an MPI collective.
fn collective_op(name: &str) -> Option<u8> {
    let base = name.strip_prefix("MPI_I").map_or(name, |rest| {
        // MPI_Ibcast -> Bcast; leave MPI_Init and the like alone.
        if rest.starts_with(char::is_lowercase) {
            rest
        } else {
            name
        }
    });
    let base = base.trim_start_matches("MPI_").to_ascii_lowercase();
    Some(match base.as_str() {
        "barrier" => 0,
        "bcast" => 1,
        "gather" => 2,
        "gatherv" => 3,
        "scatter" => 4,
        "scatterv" => 5,
        "allgather" => 6,
        "allgatherv" => 7,
        "alltoall" => 8,
        "alltoallv" => 9,
        "alltoallw" => 10,
        "allreduce" => 11,
        "reduce" => 12,
        "reduce_scatter" => 13,
        "scan" => 14,
        "exscan" => 15,
        "reduce_scatter_block" => 16,
        _ => return None,
    })
}

impl Plan {
    fn of(trace: &Trace, timeline: &Timeline, sources: &Sources) -> Plan {
        let mut p = Plan {
            strings: vec![String::new()],
            regions: Vec::new(),
            region_of: Default::default(),
            world: 0,
            comms: Vec::new(),
            sources: Vec::new(),
            source_of: Default::default(),
            source_attribute: 0,
            metrics: Metrics::default(),
        };
        let distinct = sources.distinct();
        if !distinct.is_empty() {
            p.source_attribute = p.string("source");
        }
        for src in distinct {
            let file = p.string(&src.file);
            p.source_of.insert(src.clone(), p.sources.len() as u32);
            p.sources.push((file, src.line));
        }
        for lane in &timeline.lanes {
            for s in &lane.slices {
                let key = (s.kind, s.name.clone());
                if !p.region_of.contains_key(&key) {
                    let name = p.string(&s.name);
                    let (r, par) = role(s.kind, &s.name);
                    p.region_of.insert(key, p.regions.len() as u32);
                    p.regions.push((name, r, par));
                }
            }
        }
        for s in &trace.streams {
            p.world = p.world.max((s.world_rank + 1).max(0) as usize);
            for d in &s.defs {
                if let hark_wire::Def::Comm { members, .. } = d {
                    for &m in members {
                        p.world = p.world.max((m + 1).max(0) as usize);
                    }
                    if !members.is_empty() && !p.comms.contains(members) {
                        p.comms.push(members.clone());
                    }
                }
            }
        }
        p.metrics = p.metrics_of(trace);
        p
    }

    fn string(&mut self, s: &str) -> u32 {
        if let Some(i) = self.strings.iter().position(|x| x == s) {
            return i as u32;
        }
        self.strings.push(s.to_string());
        self.strings.len() as u32 - 1
    }

    #[cfg_attr(not(hark_otf2), allow(dead_code))]
    fn comm(&self, members: &[i32]) -> Option<u32> {
        self.comms
            .iter()
            .position(|c| c == members)
            .map(|i| i as u32)
    }
}

/// A location id: the stream's world rank (or a number past the world
/// for processes without one), times 2^16, plus the thread.
fn location(plan: &Plan, trace: &Trace, stream: usize, thread: u16) -> u64 {
    let s = &trace.streams[stream];
    let group = if s.world_rank >= 0 {
        s.world_rank as u64
    } else {
        (plan.world + stream) as u64
    };
    group << 16 | thread as u64
}

#[cfg(not(hark_otf2))]
mod imp {
    use super::*;
    pub(super) fn write(
        _: &Trace,
        _: &Timeline,
        _: &Plan,
        _: &Sources,
        archive: &Path,
    ) -> Result<(), Error> {
        Err(Error::trace(archive, "built without OTF2".into()))
    }
}

#[cfg(hark_otf2)]
mod imp {
    //! The FFI: the few libotf2 functions the writer calls, declared by
    //! hand from `/usr/include/otf2/*.h` (OTF2 3.0).
    #![allow(unsafe_code)]
    use super::super::received;
    use super::*;
    use std::collections::HashMap;
    use std::ffi::{c_char, c_void, CString};

    type Archive = c_void;
    type EvtWriter = c_void;
    type GlobalDefWriter = c_void;
    type DefWriter = c_void;
    type AttributeList = c_void;
    type Code = i32;

    /// `OTF2_TYPE_SOURCE_CODE_LOCATION`.
    const TYPE_SOURCE_CODE_LOCATION: u8 = 20;
    /// The one attribute's id.
    const SOURCE_ATTRIBUTE: u32 = 0;

    #[repr(C)]
    struct FlushCallbacks {
        pre: extern "C" fn(*mut c_void, u8, u64, *mut c_void, bool) -> u8,
        post: Option<extern "C" fn(*mut c_void, u8, u64) -> u64>,
    }

    #[link(name = "open-trace-format2")]
    extern "C" {
        fn OTF2_Archive_Open(
            path: *const c_char,
            name: *const c_char,
            mode: u8,
            chunk_events: u64,
            chunk_defs: u64,
            substrate: u8,
            compression: u8,
        ) -> *mut Archive;
        fn OTF2_Archive_SetFlushCallbacks(
            a: *mut Archive,
            cb: *const FlushCallbacks,
            data: *mut c_void,
        ) -> Code;
        fn OTF2_Archive_SetSerialCollectiveCallbacks(a: *mut Archive) -> Code;
        fn OTF2_Archive_SetCreator(a: *mut Archive, creator: *const c_char) -> Code;
        fn OTF2_Archive_OpenEvtFiles(a: *mut Archive) -> Code;
        fn OTF2_Archive_CloseEvtFiles(a: *mut Archive) -> Code;
        fn OTF2_Archive_GetEvtWriter(a: *mut Archive, location: u64) -> *mut EvtWriter;
        fn OTF2_Archive_CloseEvtWriter(a: *mut Archive, w: *mut EvtWriter) -> Code;
        fn OTF2_Archive_OpenDefFiles(a: *mut Archive) -> Code;
        fn OTF2_Archive_CloseDefFiles(a: *mut Archive) -> Code;
        fn OTF2_Archive_GetDefWriter(a: *mut Archive, location: u64) -> *mut DefWriter;
        fn OTF2_Archive_CloseDefWriter(a: *mut Archive, w: *mut DefWriter) -> Code;
        fn OTF2_Archive_GetGlobalDefWriter(a: *mut Archive) -> *mut GlobalDefWriter;
        fn OTF2_Archive_Close(a: *mut Archive) -> Code;
        fn OTF2_GlobalDefWriter_WriteClockProperties(
            w: *mut GlobalDefWriter,
            resolution: u64,
            offset: u64,
            length: u64,
            realtime: u64,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteString(
            w: *mut GlobalDefWriter,
            id: u32,
            s: *const c_char,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteRegion(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            canonical: u32,
            description: u32,
            role: u8,
            paradigm: u8,
            flags: u32,
            file: u32,
            begin: u32,
            end: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteSystemTreeNode(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            class: u32,
            parent: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteLocationGroup(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            kind: u8,
            parent: u32,
            creator: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteLocation(
            w: *mut GlobalDefWriter,
            id: u64,
            name: u32,
            kind: u8,
            events: u64,
            group: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteGroup(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            kind: u8,
            paradigm: u8,
            flags: u32,
            n: u32,
            members: *const u64,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteComm(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            group: u32,
            parent: u32,
            flags: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteAttribute(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            description: u32,
            kind: u8,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteSourceCodeLocation(
            w: *mut GlobalDefWriter,
            id: u32,
            file: u32,
            line: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteMetricMember(
            w: *mut GlobalDefWriter,
            id: u32,
            name: u32,
            description: u32,
            kind: u8,
            mode: u8,
            value_type: u8,
            base: u8,
            exponent: i64,
            unit: u32,
        ) -> Code;
        fn OTF2_GlobalDefWriter_WriteMetricClass(
            w: *mut GlobalDefWriter,
            id: u32,
            n: u8,
            members: *const u32,
            occurrence: u8,
            recorder: u8,
        ) -> Code;
        fn OTF2_EvtWriter_Metric(
            w: *mut EvtWriter,
            a: *mut c_void,
            t: u64,
            metric: u32,
            n: u8,
            types: *const u8,
            values: *const u64,
        ) -> Code;
        fn OTF2_AttributeList_New() -> *mut AttributeList;
        fn OTF2_AttributeList_Delete(list: *mut AttributeList) -> Code;
        fn OTF2_AttributeList_AddSourceCodeLocationRef(
            list: *mut AttributeList,
            attribute: u32,
            location: u32,
        ) -> Code;
        fn OTF2_EvtWriter_Enter(w: *mut EvtWriter, a: *mut c_void, t: u64, region: u32) -> Code;
        fn OTF2_EvtWriter_Leave(w: *mut EvtWriter, a: *mut c_void, t: u64, region: u32) -> Code;
        fn OTF2_EvtWriter_MpiSend(
            w: *mut EvtWriter,
            a: *mut c_void,
            t: u64,
            receiver: u32,
            comm: u32,
            tag: u32,
            len: u64,
        ) -> Code;
        fn OTF2_EvtWriter_MpiRecv(
            w: *mut EvtWriter,
            a: *mut c_void,
            t: u64,
            sender: u32,
            comm: u32,
            tag: u32,
            len: u64,
        ) -> Code;
        fn OTF2_EvtWriter_MpiCollectiveBegin(w: *mut EvtWriter, a: *mut c_void, t: u64) -> Code;
        fn OTF2_EvtWriter_MpiCollectiveEnd(
            w: *mut EvtWriter,
            a: *mut c_void,
            t: u64,
            op: u8,
            comm: u32,
            root: u32,
            sent: u64,
            received: u64,
        ) -> Code;
        fn OTF2_Error_GetDescription(code: Code) -> *const c_char;
    }

    type LocationGroup = (u32, u32, Vec<(u64, u32)>);

    const UNDEFINED_U32: u32 = u32::MAX;
    const FILEMODE_WRITE: u8 = 0;
    const SUBSTRATE_POSIX: u8 = 1;
    const COMPRESSION_NONE: u8 = 1;
    const FLUSH: u8 = 1;
    const LOCATION_GROUP_PROCESS: u8 = 1;
    const LOCATION_CPU_THREAD: u8 = 1;
    const LOCATION_GROUP_UNKNOWN: u8 = 0;
    const LOCATION_METRIC: u8 = 3;
    const TYPE_UINT64: u8 = 4;
    const TYPE_DOUBLE: u8 = 10;
    const METRIC_TYPE_OTHER: u8 = 0;
    const BASE_DECIMAL: u8 = 1;
    const METRIC_SYNCHRONOUS: u8 = 1;
    const RECORDER_KIND_UNKNOWN: u8 = 0;
    const RECORDER_KIND_CPU: u8 = 2;
    const GROUP_COMM_LOCATIONS: u8 = 4;
    const GROUP_COMM_GROUP: u8 = 5;

    extern "C" fn pre_flush(_: *mut c_void, _: u8, _: u64, _: *mut c_void, _: bool) -> u8 {
        FLUSH
    }

    /// The archive, closed on drop whatever happened.
    struct Open(*mut Archive);
    impl Drop for Open {
        fn drop(&mut self) {
            // SAFETY: the pointer came from OTF2_Archive_Open and is closed
            // once, here.
            unsafe { OTF2_Archive_Close(self.0) };
        }
    }

    fn cstr(s: &str) -> CString {
        CString::new(s.replace('\0', " ")).unwrap_or_default()
    }

    /// A libotf2 status as a result: an error naming the step that failed,
    /// libotf2's reason and the archive.
    fn check(archive: &Path, what: &str, code: Code) -> Result<(), Error> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: libotf2 returns a static string for every code.
        let why = unsafe {
            let d = OTF2_Error_GetDescription(code);
            if d.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(d).to_string_lossy().into_owned()
            }
        };
        Err(Error::trace(
            archive,
            format!("libotf2: {what} failed: {why} (code {code})"),
        ))
    }

    pub(super) fn write(
        trace: &Trace,
        timeline: &Timeline,
        plan: &Plan,
        sources: &Sources,
        archive: &Path,
    ) -> Result<(), Error> {
        // Declared before the archive, so that it outlives it: libotf2 keeps
        // a pointer to it.
        let callbacks = FlushCallbacks {
            pre: pre_flush,
            post: None,
        };
        let open = open_archive(archive, &callbacks)?;
        let written = write_events(&open, trace, timeline, plan, sources, archive)?;
        let names = Names::of(trace, timeline, plan);
        // SAFETY: `open.0` is a live archive whose event files are closed.
        unsafe {
            let g = OTF2_Archive_GetGlobalDefWriter(open.0);
            if g.is_null() {
                return Err(Error::trace(
                    archive,
                    "libotf2 gave no definition writer".into(),
                ));
            }
            write_global_definitions(g, plan, &names, &written, archive)?;
            write_local_definitions(&open, &names.groups, archive)?;
        }
        drop(open);
        Ok(())
    }

    /// Creates the archive and opens its event files.
    fn open_archive(archive: &Path, callbacks: &FlushCallbacks) -> Result<Open, Error> {
        let path = cstr(&archive.to_string_lossy());
        let name = cstr("traces");
        // SAFETY: valid C strings; the result is checked for null.
        let a = unsafe {
            OTF2_Archive_Open(
                path.as_ptr(),
                name.as_ptr(),
                FILEMODE_WRITE,
                1 << 20,
                4 << 20,
                SUBSTRATE_POSIX,
                COMPRESSION_NONE,
            )
        };
        if a.is_null() {
            return Err(Error::trace(
                archive,
                "libotf2 could not create the archive".into(),
            ));
        }
        let open = Open(a);
        let creator = cstr(&format!("Hark {}", env!("CARGO_PKG_VERSION")));
        // SAFETY: `open.0` is a live archive; every pointer passed is valid
        // for the call, and `callbacks` outlives the archive (the caller's).
        unsafe {
            check(
                archive,
                "setting the flush callbacks",
                OTF2_Archive_SetFlushCallbacks(open.0, callbacks, std::ptr::null_mut()),
            )?;
            check(
                archive,
                "setting the collective callbacks",
                OTF2_Archive_SetSerialCollectiveCallbacks(open.0),
            )?;
            OTF2_Archive_SetCreator(open.0, creator.as_ptr());
            check(
                archive,
                "opening the event files",
                OTF2_Archive_OpenEvtFiles(open.0),
            )?;
        }
        Ok(open)
    }

    /// What the event files hold: the number of events per location, and
    /// the first and last time stamp of the trace.
    struct Written {
        counts: HashMap<u64, u64>,
        first: u64,
        last: u64,
    }

    /// Per stream: local communicator id -> (members, global communicator).
    type Comms<'t> = HashMap<u32, (&'t [i32], Option<u32>)>;

    /// Writes every lane's events, an empty event file for every rank
    /// without a lane, and closes the event files.
    fn write_events(
        open: &Open,
        trace: &Trace,
        timeline: &Timeline,
        plan: &Plan,
        sources: &Sources,
        archive: &Path,
    ) -> Result<Written, Error> {
        let mut written = Written {
            counts: HashMap::new(),
            first: u64::MAX,
            last: 0,
        };
        // Looked up once per communicator id rather than per event.
        let comms: Vec<Comms> = trace
            .streams
            .iter()
            .map(|s| {
                s.comms()
                    .into_iter()
                    .map(|(id, members)| (id, (members, plan.comm(members))))
                    .collect()
            })
            .collect();
        // Region ids of MPI and I/O calls by kind (their name follows from
        // it); user regions by name.
        let mut call_regions: HashMap<SliceKind, u32> = Default::default();
        let mut sides: Vec<Side> = Vec::new();
        // One attribute list for every Enter with a source: libotf2 empties
        // it when it writes the event.
        // SAFETY: no argument; the result is checked for null.
        let attrs = Attrs(unsafe { OTF2_AttributeList_New() });
        if attrs.0.is_null() {
            return Err(Error::trace(
                archive,
                "libotf2 gave no attribute list".into(),
            ));
        }
        for (li, lane) in timeline.lanes.iter().enumerate() {
            let regions = lane_regions(lane, plan, &mut call_regions);
            let loc = location(plan, trace, lane.stream, lane.thread);
            let mut out = LaneWriter::open(open, loc, archive, attrs.0, plan)?;
            let w = out.w;
            let lane_at = LaneAt {
                timeline,
                li,
                lane,
                stream: &trace.streams[lane.stream],
                comms: &comms[lane.stream],
                regions: &regions,
                sources,
                plan,
            };
            // SAFETY: `w` is the writer just got, closed only below.
            unsafe {
                out.steps(&lane_at, &mut sides, &mut written)?;
                out.metrics_until(u64::MAX, &mut written)?;
            }
            written.counts.insert(loc, out.n);
            // SAFETY: `w` came from this archive and is closed once.
            unsafe {
                check(
                    archive,
                    "closing an event writer",
                    OTF2_Archive_CloseEvtWriter(open.0, w),
                )?
            };
        }
        // Metrics of locations without slices: threads that only counted,
        // nodes' sensors.
        for &loc in plan.metrics.points.keys() {
            if written.counts.contains_key(&loc) {
                continue;
            }
            let mut out = LaneWriter::open(open, loc, archive, attrs.0, plan)?;
            let w = out.w;
            // SAFETY: `w` is the writer just got, closed right after.
            unsafe {
                out.metrics_until(u64::MAX, &mut written)?;
                check(
                    archive,
                    "closing an event writer",
                    OTF2_Archive_CloseEvtWriter(open.0, w),
                )?;
            }
            written.counts.insert(loc, out.n);
        }
        // Every rank has a location in COMM_LOCATIONS, and every location an
        // event file, if only an empty one.
        for r in 0..plan.world as u64 {
            if !written.counts.contains_key(&(r << 16)) {
                // SAFETY: `open.0` is a live archive with open event files.
                unsafe {
                    let w = OTF2_Archive_GetEvtWriter(open.0, r << 16);
                    if !w.is_null() {
                        OTF2_Archive_CloseEvtWriter(open.0, w);
                    }
                }
            }
        }
        // SAFETY: `open.0` is a live archive with open event files.
        unsafe {
            check(
                archive,
                "closing the event files",
                OTF2_Archive_CloseEvtFiles(open.0),
            )?
        };
        if written.first == u64::MAX {
            written.first = trace.first_ns();
            written.last = written.first;
        }
        Ok(written)
    }

    /// The region id of each of the lane's slices.
    fn lane_regions(
        lane: &super::super::Lane,
        plan: &Plan,
        call_regions: &mut HashMap<SliceKind, u32>,
    ) -> Vec<u32> {
        lane.slices
            .iter()
            .map(|sl| match sl.kind {
                SliceKind::Region => plan.region_of[&(sl.kind, sl.name.clone())],
                kind => *call_regions
                    .entry(kind)
                    .or_insert_with(|| plan.region_of[&(kind, sl.name.clone())]),
            })
            .collect()
    }

    /// An attribute list, deleted when dropped.
    struct Attrs(*mut AttributeList);

    impl Drop for Attrs {
        fn drop(&mut self) {
            // SAFETY: a list from OTF2_AttributeList_New, deleted once.
            unsafe { OTF2_AttributeList_Delete(self.0) };
        }
    }

    /// A message side a call completed: (time, event index, message).
    type Side = (u64, usize, hark_engine::trace::Msg);

    /// One lane and what its events are written with.
    struct LaneAt<'a> {
        timeline: &'a Timeline,
        li: usize,
        lane: &'a super::super::Lane,
        stream: &'a hark_engine::trace::TraceStream,
        comms: &'a Comms<'a>,
        regions: &'a [u32],
        sources: &'a Sources,
        plan: &'a Plan,
    }

    impl LaneAt<'_> {
        fn comm_of(&self, local: u32) -> Option<(&[i32], Option<u32>)> {
            self.comms.get(&local).copied()
        }

        /// The source code location id of where event `e` was called.
        fn source_of(&self, e: &hark_wire::Event) -> Option<u32> {
            let src = self.sources.of_event(self.lane.stream, e)?;
            self.plan.source_of.get(src).copied()
        }
    }

    /// A location's event writer, the events written to it and the time of
    /// the last.
    struct LaneWriter<'a> {
        w: *mut EvtWriter,
        archive: &'a Path,
        n: u64,
        last_ts: u64,
        /// The attribute list an Enter with a source is written with.
        attrs: *mut AttributeList,
        /// The location's metric points not written yet, in time order.
        points: &'a [super::metrics::Point],
        metrics: &'a [super::metrics::Metric],
    }

    impl<'a> LaneWriter<'a> {
        /// The event writer of location `loc`, with the location's metric
        /// points to write.
        fn open(
            open: &Open,
            loc: u64,
            archive: &'a Path,
            attrs: *mut AttributeList,
            plan: &'a Plan,
        ) -> Result<LaneWriter<'a>, Error> {
            // SAFETY: `open.0` is a live archive with open event files.
            let w = unsafe { OTF2_Archive_GetEvtWriter(open.0, loc) };
            if w.is_null() {
                return Err(Error::trace(
                    archive,
                    format!("libotf2 gave no writer for location {loc}"),
                ));
            }
            Ok(LaneWriter {
                w,
                archive,
                n: 0,
                last_ts: 0,
                attrs,
                points: plan.metrics.points.get(&loc).map_or(&[][..], Vec::as_slice),
                metrics: &plan.metrics.defs,
            })
        }

        /// Writes the lane's steps: an enter or a leave each, with the
        /// messages and collectives around them.
        ///
        /// # Safety
        /// `self.w` is a live event writer.
        unsafe fn steps(
            &mut self,
            at: &LaneAt,
            sides: &mut Vec<Side>,
            written: &mut Written,
        ) -> Result<(), Error> {
            for &(ts, enter, k) in &at.lane.steps {
                // SAFETY: per the caller.
                unsafe { self.metrics_until(ts, written)? };
                written.first = written.first.min(ts);
                written.last = written.last.max(ts);
                let slice = &at.lane.slices[k];
                let region = at.regions[k];
                let e = &at.stream.events[slice.event];
                let is_coll = matches!(slice.kind, SliceKind::Mpi(f) if collective_class(f));
                let (comm_members, comm) = match is_coll.then(|| at.comm_of(e.obj.get())).flatten()
                {
                    Some((members, comm)) => (Some(members), comm),
                    None => (None, None),
                };
                // SAFETY: per the caller.
                unsafe {
                    if enter {
                        let source = match slice.kind {
                            SliceKind::Region => None,
                            _ => at.source_of(e),
                        };
                        self.enter(ts, region, source, is_coll && comm.is_some())?;
                    } else {
                        self.messages(at, k, ts, sides)?;
                        if let (true, Some(c), Some(members)) = (is_coll, comm, comm_members) {
                            self.collective_end(slice.kind, e, ts, c, members)?;
                        }
                        self.write("Leave", OTF2_EvtWriter_Leave(self.w, null(), ts, region))?;
                    }
                }
                self.last_ts = self.last_ts.max(ts);
            }
            Ok(())
        }

        /// The metric points up to `ts`.
        ///
        /// # Safety
        /// `self.w` is a live event writer.
        unsafe fn metrics_until(&mut self, ts: u64, written: &mut Written) -> Result<(), Error> {
            let n = self.points.partition_point(|p| p.0 <= ts);
            let (now, later) = self.points.split_at(n);
            self.points = later;
            for &(t, id, value) in now {
                // Kept in time order on the location.
                let t = t.max(self.last_ts);
                written.first = written.first.min(t);
                written.last = written.last.max(t);
                let kind = if self.metrics[id as usize].double {
                    TYPE_DOUBLE
                } else {
                    TYPE_UINT64
                };
                // SAFETY: per the caller; the arrays live across the call.
                let code =
                    unsafe { OTF2_EvtWriter_Metric(self.w, null(), t, id, 1, &kind, &value) };
                self.write("Metric", code)?;
                self.last_ts = t;
            }
            Ok(())
        }

        /// Counts a written event, or says why it was not written.
        fn write(&mut self, what: &str, code: Code) -> Result<(), Error> {
            check(self.archive, what, code)?;
            self.n += 1;
            Ok(())
        }

        /// `Enter`, and `MpiCollectiveBegin` for a collective on a known
        /// communicator.
        ///
        /// # Safety
        /// `self.w` is a live event writer.
        unsafe fn enter(
            &mut self,
            ts: u64,
            region: u32,
            source: Option<u32>,
            coll: bool,
        ) -> Result<(), Error> {
            // SAFETY: per the caller; `self.attrs` is a live list.
            unsafe {
                let attrs = match source {
                    Some(loc) => {
                        check(
                            self.archive,
                            "adding a source code location",
                            OTF2_AttributeList_AddSourceCodeLocationRef(
                                self.attrs,
                                SOURCE_ATTRIBUTE,
                                loc,
                            ),
                        )?;
                        self.attrs
                    }
                    None => null(),
                };
                self.write("Enter", OTF2_EvtWriter_Enter(self.w, attrs, ts, region))?;
                if coll {
                    self.write(
                        "MpiCollectiveBegin",
                        OTF2_EvtWriter_MpiCollectiveBegin(self.w, null(), ts),
                    )?;
                }
            }
            Ok(())
        }

        /// Every message slice `k` completed, at the time of the record that
        /// completed it (kept in time order on the location).
        ///
        /// # Safety
        /// `self.w` is a live event writer.
        unsafe fn messages(
            &mut self,
            at: &LaneAt,
            k: usize,
            ts: u64,
            sides: &mut Vec<Side>,
        ) -> Result<(), Error> {
            let s = at.stream;
            sides.clear();
            sides.extend(
                at.timeline
                    .sides(at.li, k)
                    .map(|(i, m)| (s.mapping.common(s.events[i].start.get()), i, m)),
            );
            sides.sort_by_key(|x| x.0);
            for &(t, i, m) in sides.iter() {
                let t = t.min(ts).max(self.last_ts);
                let me = &s.events[i];
                let (members, comm) = at.comm_of(me.obj.get()).unwrap_or((&[], None));
                let peer = members.iter().position(|&x| x == m.peer);
                let (Some(peer), Some(c)) = (peer, comm) else {
                    continue;
                };
                let tag = me.tag.get() as u32;
                // SAFETY: per the caller.
                let code = unsafe {
                    if m.send {
                        OTF2_EvtWriter_MpiSend(self.w, null(), t, peer as u32, c, tag, m.bytes)
                    } else {
                        OTF2_EvtWriter_MpiRecv(self.w, null(), t, peer as u32, c, tag, m.bytes)
                    }
                };
                self.write(if m.send { "MpiSend" } else { "MpiRecv" }, code)?;
                self.last_ts = t;
            }
            Ok(())
        }

        /// `MpiCollectiveEnd` of collective event `e` on communicator `c`
        /// (its `members` in world ranks), the root as a rank of it.
        ///
        /// # Safety
        /// `self.w` is a live event writer.
        unsafe fn collective_end(
            &mut self,
            kind: SliceKind,
            e: &hark_wire::Event,
            ts: u64,
            c: u32,
            members: &[i32],
        ) -> Result<(), Error> {
            let name = match kind {
                SliceKind::Mpi(f) => hark_wire::mpi::FUNCTIONS[f].name,
                _ => "",
            };
            let root = match e.peer.get() {
                p if p >= 0 => members
                    .iter()
                    .position(|&x| x == p)
                    .map_or(UNDEFINED_U32, |r| r as u32),
                _ => UNDEFINED_U32,
            };
            // SAFETY: per the caller.
            let code = unsafe {
                OTF2_EvtWriter_MpiCollectiveEnd(
                    self.w,
                    null(),
                    ts,
                    collective_op(name).unwrap_or(0),
                    c,
                    root,
                    e.bytes.get(),
                    received(e),
                )
            };
            self.write("MpiCollectiveEnd", code)
        }
    }

    /// No attribute list.
    fn null() -> *mut c_void {
        std::ptr::null_mut()
    }

    /// The id of string `s` in `strings`, added if it is new.
    fn intern(strings: &mut Vec<String>, s: &str) -> u32 {
        if let Some(i) = strings.iter().position(|x| x == s) {
            return i as u32;
        }
        strings.push(s.to_string());
        strings.len() as u32 - 1
    }

    /// The names the global definitions use beyond the plan's, and the
    /// location groups they define; the strings are the plan's followed by
    /// these, in the order they are made here.
    struct Names {
        strings: Vec<String>,
        machine: u32,
        node: u32,
        /// Per distinct host, in sorted order: its name.
        host_names: Vec<u32>,
        /// Every world rank, and every stream without one.
        groups: Vec<LocationGroup>,
        group_names: Vec<u32>,
        comm_names: Vec<u32>,
        all_ranks: u32,
        /// The location groups of nodes' sensors.
        nodes: Vec<u32>,
    }

    impl Names {
        fn of(trace: &Trace, timeline: &Timeline, plan: &Plan) -> Names {
            let mut strings = plan.strings.clone();
            let machine = intern(&mut strings, "machine");
            let node = intern(&mut strings, "node");
            let mut hosts: Vec<String> = trace.streams.iter().map(|s| s.host.clone()).collect();
            hosts.sort();
            hosts.dedup();
            let host_names: Vec<u32> = hosts.iter().map(|h| intern(&mut strings, h)).collect();
            let groups = location_groups(trace, timeline, plan, &hosts, &mut strings);
            let group_names: Vec<u32> = groups
                .iter()
                .map(|(g, host, _)| {
                    if (*g as usize) < plan.world {
                        intern(&mut strings, &format!("rank {g}"))
                    } else if plan.metrics.nodes.iter().any(|n| n.1 == *g) {
                        intern(&mut strings, &format!("node {}", hosts[*host as usize]))
                    } else {
                        intern(&mut strings, &format!("process {g}"))
                    }
                })
                .collect();
            let comm_names: Vec<u32> = plan
                .comms
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    if m.len() == plan.world && m.iter().enumerate().all(|(k, &r)| r == k as i32) {
                        intern(&mut strings, "MPI_COMM_WORLD")
                    } else {
                        intern(
                            &mut strings,
                            &format!("communicator {i} ({} ranks)", m.len()),
                        )
                    }
                })
                .collect();
            let all_ranks = intern(&mut strings, "all ranks");
            Names {
                nodes: plan.metrics.nodes.iter().map(|n| n.1).collect(),
                strings,
                machine,
                node,
                host_names,
                groups,
                group_names,
                comm_names,
                all_ranks,
            }
        }
    }

    /// A location group per world rank (with its thread 0 even if it has
    /// no lane), then one per stream without a world rank, each with its
    /// host (an index into `hosts`) and its locations' names.
    fn location_groups(
        trace: &Trace,
        timeline: &Timeline,
        plan: &Plan,
        hosts: &[String],
        strings: &mut Vec<String>,
    ) -> Vec<LocationGroup> {
        let mut groups: Vec<LocationGroup> = Vec::new();
        for r in 0..plan.world {
            let streams: Vec<usize> = (0..trace.streams.len())
                .filter(|&i| trace.streams[i].world_rank == r as i32)
                .collect();
            let host = streams
                .first()
                .and_then(|&i| hosts.iter().position(|h| *h == trace.streams[i].host))
                .unwrap_or(0) as u32;
            let mut locs: Vec<(u64, u32)> = timeline
                .lanes
                .iter()
                .filter(|l| trace.streams[l.stream].world_rank == r as i32)
                .map(|l| {
                    let loc = location(plan, trace, l.stream, l.thread);
                    (
                        loc,
                        intern(strings, &format!("rank {r} thread {}", l.thread)),
                    )
                })
                .collect();
            if !locs.iter().any(|(l, _)| *l == (r as u64) << 16) {
                let name = intern(strings, &format!("rank {r} thread 0"));
                locs.insert(0, ((r as u64) << 16, name));
            }
            groups.push((r as u32, host, locs));
        }
        for (i, s) in trace
            .streams
            .iter()
            .enumerate()
            .filter(|(_, s)| s.world_rank < 0)
        {
            let host = hosts.iter().position(|h| *h == s.host).unwrap_or(0) as u32;
            let locs = timeline
                .lanes
                .iter()
                .filter(|l| l.stream == i)
                .map(|l| {
                    (
                        location(plan, trace, i, l.thread),
                        intern(
                            strings,
                            &format!("{} pid {} thread {}", s.program, s.pid, l.thread),
                        ),
                    )
                })
                .collect();
            groups.push(((plan.world + i) as u32, host, locs));
        }
        // Threads with counter readings but no slice.
        for &loc in plan.metrics.points.keys() {
            let (g, t) = (loc >> 16, loc & 0xffff);
            let Some((_, _, locs)) = groups.iter_mut().find(|x| x.0 as u64 == g) else {
                continue;
            };
            if !locs.iter().any(|(l, _)| *l == loc) {
                let name = if (g as usize) < plan.world {
                    format!("rank {g} thread {t}")
                } else {
                    format!("process {g} thread {t}")
                };
                locs.push((loc, intern(strings, &name)));
            }
        }
        for &(h, g) in &plan.metrics.nodes {
            let name = intern(strings, &format!("node {} sensors", hosts[h]));
            groups.push((g, h as u32, vec![((g as u64) << 16, name)]));
        }
        groups
    }

    /// The clock, strings, regions, system tree, locations and
    /// communicators.
    ///
    /// # Safety
    /// `g` is the archive's live global definition writer.
    unsafe fn write_global_definitions(
        g: *mut GlobalDefWriter,
        plan: &Plan,
        names: &Names,
        written: &Written,
        archive: &Path,
    ) -> Result<(), Error> {
        let cstrings: Vec<CString> = names.strings.iter().map(|s| cstr(s)).collect();
        let (first, last) = (written.first, written.last);
        // SAFETY: every call in this block: per the caller; every pointer passed is valid
        // for the call.
        unsafe {
            check(
                archive,
                "ClockProperties",
                OTF2_GlobalDefWriter_WriteClockProperties(
                    g,
                    1_000_000_000,
                    first,
                    last - first + 1,
                    first,
                ),
            )?;
            for (i, s) in cstrings.iter().enumerate() {
                check(
                    archive,
                    "String",
                    OTF2_GlobalDefWriter_WriteString(g, i as u32, s.as_ptr()),
                )?;
            }
            if !plan.sources.is_empty() {
                check(
                    archive,
                    "Attribute",
                    OTF2_GlobalDefWriter_WriteAttribute(
                        g,
                        SOURCE_ATTRIBUTE,
                        plan.source_attribute,
                        plan.source_attribute,
                        TYPE_SOURCE_CODE_LOCATION,
                    ),
                )?;
            }
            for (i, &(file, line)) in plan.sources.iter().enumerate() {
                check(
                    archive,
                    "SourceCodeLocation",
                    OTF2_GlobalDefWriter_WriteSourceCodeLocation(g, i as u32, file, line),
                )?;
            }
            for (i, &(name, role, paradigm)) in plan.regions.iter().enumerate() {
                check(
                    archive,
                    "Region",
                    OTF2_GlobalDefWriter_WriteRegion(
                        g, i as u32, name, name, 0, role, paradigm, 0, 0, 0, 0,
                    ),
                )?;
            }
            write_metrics(g, plan, archive)?;
            write_system_tree(g, names, written, archive)?;
            if !plan.comms.is_empty() {
                write_communicators(g, plan, names, archive)?;
            }
        }
        Ok(())
    }

    /// A metric member and a metric class of it alone per metric.
    ///
    /// # Safety
    /// `g` is the archive's live global definition writer.
    unsafe fn write_metrics(
        g: *mut GlobalDefWriter,
        plan: &Plan,
        archive: &Path,
    ) -> Result<(), Error> {
        for (i, m) in plan.metrics.defs.iter().enumerate() {
            let i = i as u32;
            let value_type = if m.double { TYPE_DOUBLE } else { TYPE_UINT64 };
            // Counters are read on the thread's location; sensors on the
            // node's.
            let recorder = if m.counter {
                RECORDER_KIND_CPU
            } else {
                RECORDER_KIND_UNKNOWN
            };
            // SAFETY: every call in this block: per the caller; `member`
            // lives across its call.
            unsafe {
                check(
                    archive,
                    "MetricMember",
                    OTF2_GlobalDefWriter_WriteMetricMember(
                        g,
                        i,
                        m.name,
                        m.name,
                        METRIC_TYPE_OTHER,
                        m.mode,
                        value_type,
                        BASE_DECIMAL,
                        0,
                        m.unit,
                    ),
                )?;
                let member = [i];
                check(
                    archive,
                    "MetricClass",
                    OTF2_GlobalDefWriter_WriteMetricClass(
                        g,
                        i,
                        1,
                        member.as_ptr(),
                        METRIC_SYNCHRONOUS,
                        recorder,
                    ),
                )?;
            }
        }
        Ok(())
    }

    /// The machine, its hosts, a location group per process and a
    /// location per thread.
    ///
    /// # Safety
    /// `g` is the archive's live global definition writer.
    unsafe fn write_system_tree(
        g: *mut GlobalDefWriter,
        names: &Names,
        written: &Written,
        archive: &Path,
    ) -> Result<(), Error> {
        let (machine, node) = (names.machine, names.node);
        // SAFETY: every call in this block: per the caller.
        unsafe {
            check(
                archive,
                "SystemTreeNode",
                OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, machine, machine, UNDEFINED_U32),
            )?;
            for (i, &h) in names.host_names.iter().enumerate() {
                check(
                    archive,
                    "SystemTreeNode",
                    OTF2_GlobalDefWriter_WriteSystemTreeNode(g, i as u32 + 1, h, node, 0),
                )?;
            }
            for ((gid, host, locs), &name) in names.groups.iter().zip(&names.group_names) {
                // A node's sensors: a group of no process, with one metric
                // location.
                let node = names.nodes.contains(gid);
                let (group_kind, loc_kind) = if node {
                    (LOCATION_GROUP_UNKNOWN, LOCATION_METRIC)
                } else {
                    (LOCATION_GROUP_PROCESS, LOCATION_CPU_THREAD)
                };
                check(
                    archive,
                    "LocationGroup",
                    OTF2_GlobalDefWriter_WriteLocationGroup(
                        g,
                        *gid,
                        name,
                        group_kind,
                        host + 1,
                        UNDEFINED_U32,
                    ),
                )?;
                for &(loc, lname) in locs {
                    check(
                        archive,
                        "Location",
                        OTF2_GlobalDefWriter_WriteLocation(
                            g,
                            loc,
                            lname,
                            loc_kind,
                            written.counts.get(&loc).copied().unwrap_or(0),
                            *gid,
                        ),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// `COMM_LOCATIONS` (member i is world rank i's first thread), then a
    /// group and a communicator per distinct member list.
    ///
    /// # Safety
    /// `g` is the archive's live global definition writer.
    unsafe fn write_communicators(
        g: *mut GlobalDefWriter,
        plan: &Plan,
        names: &Names,
        archive: &Path,
    ) -> Result<(), Error> {
        let members: Vec<u64> = (0..plan.world as u64).map(|r| r << 16).collect();
        // SAFETY: every call in this block: per the caller; the member arrays live
        // across their calls.
        unsafe {
            check(
                archive,
                "Group",
                OTF2_GlobalDefWriter_WriteGroup(
                    g,
                    0,
                    names.all_ranks,
                    GROUP_COMM_LOCATIONS,
                    PARADIGM_MPI,
                    0,
                    members.len() as u32,
                    members.as_ptr(),
                ),
            )?;
            for (i, (m, &name)) in plan.comms.iter().zip(&names.comm_names).enumerate() {
                let ranks: Vec<u64> = m.iter().map(|&r| r.max(0) as u64).collect();
                check(
                    archive,
                    "Group",
                    OTF2_GlobalDefWriter_WriteGroup(
                        g,
                        i as u32 + 1,
                        name,
                        GROUP_COMM_GROUP,
                        PARADIGM_MPI,
                        0,
                        ranks.len() as u32,
                        ranks.as_ptr(),
                    ),
                )?;
                check(
                    archive,
                    "Comm",
                    OTF2_GlobalDefWriter_WriteComm(
                        g,
                        i as u32,
                        name,
                        i as u32 + 1,
                        UNDEFINED_U32,
                        0,
                    ),
                )?;
            }
        }
        Ok(())
    }

    /// Empty local definitions, one per location, which readers expect to
    /// find.
    ///
    /// # Safety
    /// `open.0` is a live archive whose global definitions are written.
    unsafe fn write_local_definitions(
        open: &Open,
        groups: &[LocationGroup],
        archive: &Path,
    ) -> Result<(), Error> {
        // SAFETY: every call in this block: per the caller.
        unsafe {
            check(
                archive,
                "opening the definition files",
                OTF2_Archive_OpenDefFiles(open.0),
            )?;
            for (_, _, locs) in groups {
                for &(loc, _) in locs {
                    let d = OTF2_Archive_GetDefWriter(open.0, loc);
                    if !d.is_null() {
                        OTF2_Archive_CloseDefWriter(open.0, d);
                    }
                }
            }
            check(
                archive,
                "closing the definition files",
                OTF2_Archive_CloseDefFiles(open.0),
            )
        }
    }
}
