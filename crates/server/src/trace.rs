//! The trace store: raw events kept while they pass (`hark run --trace`).
//!
//! Each stream the selection keeps anything of gets one file in the store's
//! directory, written by the stream's reader thread as its frames arrive: a
//! wire stream (`docs/wire.md`) holding the stream's `Hello`, definitions,
//! `Rank`, `Clock` and `End` frames as received and its packs with only the
//! chosen events — the raw 48-byte records, taken from the pack buffer the
//! board also holds and written without another copy when every event is
//! kept. At the end, `index.tsv` adds what the stream frames cannot say:
//! each stream's handshake offset and the job's clock reference, from which
//! [`read`] rebuilds the clock mapping the analyses used
//! ([`hark_analyses::clock::Alignment`]). The format is in `docs/trace.md`.
//!
//! The store is bounded: the frames of all streams together stop at
//! [`TraceConfig::cap_bytes`]. From the first pack that does not fit, a
//! stream's chosen events are dropped and counted; the diagnostics say
//! how many, from which ranks and from when. With `auto`, windows are
//! evicted to make room instead, and a window that no eviction can make
//! room for is cut; either way the store never holds more than the cap.

use crate::error::{Error, ErrorKind};
use hark_analyses::clock::Alignment;
use hark_engine::trace::{Filter, Selection, Trace, TraceStream, AUTO_WINDOW_SHIFT};
use hark_engine::StreamInfo;
use hark_wire::{ClockSource, ClockSync, Def, Event, Frame, FrameReader, Hello};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The store's size cap unless told otherwise: 1 GiB, about 22 million
/// events.
pub const DEFAULT_TRACE_CAP: u64 = 1 << 30;

/// The name of the store's index file.
pub const INDEX: &str = "index.tsv";

/// Where and what to keep (`ServerConfig::trace`).
#[derive(Clone, Debug)]
pub struct TraceConfig {
    /// The store's directory (created if missing).
    pub dir: PathBuf,
    /// Which events to keep.
    pub selection: Selection,
    /// Bytes of stream files, all streams together, the store may hold.
    pub cap_bytes: u64,
}

struct Writer {
    file: Option<BufWriter<File>>,
    name: String,
    filter: Filter,
    rank: i32,
    kept: u64,
    dropped: u64,
    /// When the cap first dropped this stream's events (ns after start).
    full_at: Option<u64>,
    scratch: Vec<Event>,
    /// Per frame written, the store's count of frames before it, all
    /// streams together: the order the server took them in
    /// ([`order_name`]).
    order: Vec<u64>,
    /// The program, whose wait states rank `auto`'s windows.
    program: String,
    /// `auto`: the open chunk files, by window.
    chunks: std::collections::BTreeMap<u64, BufWriter<File>>,
}

/// One `auto` window of one program: what it holds, across streams.
#[derive(Default)]
struct Window {
    /// Bytes of its chunk files.
    bytes: u64,
    /// Events per connection.
    events: HashMap<u64, u64>,
    /// Time spent in MPI calls in it, over all streams: what ranks windows
    /// while the run goes on (the wait states are known only at the end).
    mpi_ns: u64,
    /// Evicted at the cap: its files are gone, its events are dropped.
    evicted: bool,
    /// Cut at the cap (ns after the start of its first dropped event): the
    /// store was full and no other window could make room, so its later
    /// events are dropped — it keeps a prefix, with no hole in it.
    cut_at: Option<u64>,
    /// Events dropped after the cut.
    cut: u64,
}

/// The store, shared by every connection's reader thread.
pub(crate) struct Store {
    config: TraceConfig,
    used: AtomicU64,
    full: std::sync::atomic::AtomicBool,
    writers: Mutex<HashMap<u64, Arc<Mutex<Writer>>>>,
    problem: Mutex<Option<String>>,
    /// `auto`: every window, by (program, window number).
    windows: Mutex<std::collections::BTreeMap<(String, u64), Window>>,
    /// `auto`: events dropped with windows evicted at the cap.
    evicted_events: AtomicU64,
    /// Frames written so far, all streams together.
    arrivals: AtomicU64,
}

impl Store {
    pub(crate) fn new(config: TraceConfig) -> Result<Store, Error> {
        std::fs::create_dir_all(&config.dir).map_err(|e| {
            Error::new(ErrorKind::Trace(format!(
                "cannot create the trace store {}: {e}",
                config.dir.display()
            )))
        })?;
        Ok(Store {
            config,
            used: AtomicU64::new(0),
            full: Default::default(),
            writers: Mutex::default(),
            problem: Mutex::default(),
            windows: Mutex::default(),
            evicted_events: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
        })
    }

    fn fail(&self, what: String) {
        let mut p = hark_sync::lock(&self.problem);
        p.get_or_insert(what);
    }

    /// A stream said hello: its file is opened and begins with its `Hello`
    /// (its clock given as nanoseconds: packs are stored converted).
    pub(crate) fn open(&self, conn: u64, hello: &Hello) {
        let name = format!("stream-{conn}.hkt");
        let path = self.config.dir.join(&name);
        let file = match File::create(&path) {
            Ok(f) => Some(BufWriter::with_capacity(1 << 18, f)),
            Err(e) => {
                self.fail(format!("cannot create {}: {e}", path.display()));
                None
            }
        };
        let mut w = Writer {
            file,
            name,
            filter: Filter::new(self.config.selection.clone()),
            rank: hello.rank,
            kept: 0,
            dropped: 0,
            full_at: None,
            scratch: Vec::new(),
            order: Vec::new(),
            program: hello.program.clone(),
            chunks: Default::default(),
        };
        let mut bytes = Vec::new();
        Hello {
            clock: ClockSource::Monotonic,
            secret: String::new(),
            ..hello.clone()
        }
        .encode(&mut bytes);
        self.write(&mut w, &bytes, &[]);
        hark_sync::lock(&self.writers).insert(conn, Arc::new(Mutex::new(w)));
    }

    /// Appends `head` and then `events`' bytes; counted against the cap
    /// only for packs (the few other frames are always kept).
    fn write(&self, w: &mut Writer, head: &[u8], events: &[Event]) {
        use zerocopy::IntoBytes;
        let Some(file) = &mut w.file else { return };
        w.order.push(self.arrivals.fetch_add(1, Ordering::Relaxed));
        let done = file
            .write_all(head)
            .and_then(|()| file.write_all(events.as_bytes()));
        if let Err(e) = done {
            self.fail(format!("cannot write {}: {e}", w.name));
            w.file = None;
        }
    }

    /// A clock alignment of connection `conn`, once the server applied it,
    /// stored as applied: the offset applied as the estimate, and a round
    /// trip of 0, so that reading the store back maps the stream exactly as
    /// the run did (a host's shared offset is known only to the server).
    pub(crate) fn clock(&self, conn: u64, info: &StreamInfo, sync: ClockSync) {
        let applied = info.clock().applied_ns(&sync);
        let stored = ClockSync {
            reference_ns: sync.local_ns.saturating_add_signed(applied),
            round_trip_ns: 0,
            relay_bound_ns: 0,
            ..sync
        };
        self.frame(conn, info, &Frame::Clock(stored));
        // The measurement as it came, beside the stream: what a replay of
        // the store gives the server to align with again (`hark replay`).
        let mut raw = Vec::new();
        sync.encode(&mut raw);
        let path = self.config.dir.join(measured_name(conn));
        let done = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&raw));
        if let Err(e) = done {
            self.fail(format!("cannot write {}: {e}", path.display()));
        }
    }

    /// One frame of connection `conn`, in stream order.
    pub(crate) fn frame(&self, conn: u64, info: &StreamInfo, frame: &Frame<'_>) {
        let Some(w) = self
            .writers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&conn)
            .cloned()
        else {
            return;
        };
        let mut w = hark_sync::lock(&w);
        let mut head = Vec::new();
        match frame {
            Frame::Pack { seq, events } => self.pack(&mut w, info, *seq, events),
            Frame::Defs(defs) => {
                w.filter.define(defs);
                Def::encode_all(defs, &mut head);
                self.write(&mut w, &head, &[]);
            }
            Frame::Rank(r) => {
                w.rank = r.world_rank;
                r.encode(&mut head);
                self.write(&mut w, &head, &[]);
            }
            Frame::Clock(c) => {
                c.encode(&mut head);
                self.write(&mut w, &head, &[]);
            }
            Frame::End(e) => {
                e.encode(&mut head);
                self.write(&mut w, &head, &[]);
            }
            // Packs are stored converted: a refined calibration is spent.
            Frame::Hello(_)
            | Frame::Ring
            | Frame::Cpus(_)
            | Frame::Control(_)
            | Frame::Counts(_)
            | Frame::Scale(_)
            | Frame::ClockPing
            | Frame::ClockPong(_) => {}
            // A forwarder's frames never reach a stream's sink.
            Frame::Node(_) | Frame::Mux { .. } | Frame::Gone(_) => {}
        }
    }

    fn pack(&self, w: &mut Writer, info: &StreamInfo, seq: u64, events: &[Event]) {
        let origin = info.origin_ns();
        // One mapping for the whole pack, as the analyses do: asking the
        // stream for each event would take its lock each time.
        let mapping = info.clock().mapping();
        let all = self.config.selection.is_all();
        let mut scratch = std::mem::take(&mut w.scratch);
        scratch.clear();
        if !all {
            let rank = w.rank;
            for e in events {
                let start = mapping.common(e.start.get()).saturating_sub(origin);
                let end = mapping.common(e.end.get()).saturating_sub(origin);
                if w.filter.keep(e, rank, start, end) {
                    scratch.push(*e);
                }
            }
        }
        let chosen: &[Event] = if all { events } else { &scratch };
        if self.config.selection.auto.is_some() {
            self.windowed(w, info, seq, chosen);
        } else if !chosen.is_empty() {
            let bytes = (hark_wire::HEADER_SIZE
                + hark_wire::PACK_HEADER_SIZE
                + std::mem::size_of_val(chosen)) as u64;
            let fits = !self.full.load(Ordering::Relaxed)
                && self
                    .used
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                        (u + bytes <= self.config.cap_bytes).then_some(u + bytes)
                    })
                    .is_ok();
            if fits {
                let mut head = [0u8; hark_wire::HEADER_SIZE + hark_wire::PACK_HEADER_SIZE];
                hark_wire::write_pack_header(&mut head, seq, chosen.len());
                self.write(w, &head, chosen);
                // A write that failed (a full disk) closed the file.
                if w.file.is_some() {
                    w.kept += chosen.len() as u64;
                } else {
                    w.dropped += chosen.len() as u64;
                }
            } else {
                // The store is a prefix of the run: once full, it stays full.
                self.full.store(true, Ordering::Relaxed);
                w.dropped += chosen.len() as u64;
                if w.full_at.is_none() {
                    w.full_at = Some(mapping.common(chosen[0].start.get()).saturating_sub(origin));
                }
            }
        }
        w.scratch = scratch;
    }

    /// `auto`: appends `events` to their windows' chunk files. A run of
    /// events first makes room: while it does not fit under the cap, the
    /// window with the least MPI time is evicted (never the newest: it is
    /// still being filled, and its MPI time is not yet comparable). When
    /// nothing else can go, the window is cut: what fits is written, the
    /// rest and all its later events are dropped. The store never holds
    /// more than its cap.
    fn windowed(&self, w: &mut Writer, info: &StreamInfo, seq: u64, events: &[Event]) {
        const HEAD: usize = hark_wire::HEADER_SIZE + hark_wire::PACK_HEADER_SIZE;
        let conn = info.conn();
        let origin = info.origin_ns();
        let mapping = info.clock().mapping();
        let since_start = |e: &Event| mapping.common(e.start.get()).saturating_sub(origin);
        let window_of = |e: &Event| since_start(e) >> AUTO_WINDOW_SHIFT;
        let mut windows = hark_sync::lock(&self.windows);
        let mut rest = events;
        while let Some(first) = rest.first() {
            let k = window_of(first);
            let n = rest.iter().take_while(|e| window_of(e) == k).count();
            let (run, next) = rest.split_at(n);
            rest = next;
            let key = (w.program.clone(), k);
            let need = (HEAD + std::mem::size_of_val(run)) as u64;
            windows.entry(key.clone()).or_default();
            // `used` changes only under the `windows` lock in `auto`.
            while self.used.load(Ordering::Relaxed) + need > self.config.cap_bytes {
                let newest = windows.keys().map(|(_, k)| *k).max().unwrap_or(0);
                let Some(victim) = windows
                    .iter()
                    .filter(|((_, j), v)| !v.evicted && *j != newest && v.bytes > 0)
                    .min_by_key(|(_, v)| v.mpi_ns)
                    .map(|(key, _)| key.clone())
                else {
                    break;
                };
                let win = windows.get_mut(&victim).expect("found above");
                self.evict(victim.1, win);
            }
            let win = windows.get_mut(&key).expect("entered above");
            if win.evicted {
                w.dropped += n as u64;
                self.evicted_events.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            let room = self
                .config
                .cap_bytes
                .saturating_sub(self.used.load(Ordering::Relaxed));
            let fits = if win.cut_at.is_some() {
                0
            } else {
                (room.saturating_sub(HEAD as u64) / hark_wire::EVENT_SIZE as u64).min(n as u64)
                    as usize
            };
            if fits < n {
                win.cut_at.get_or_insert(since_start(&run[fits]));
                win.cut += (n - fits) as u64;
                w.dropped += (n - fits) as u64;
            }
            if fits == 0 {
                continue;
            }
            let run = &run[..fits];
            let mut head = [0u8; HEAD];
            hark_wire::write_pack_header(&mut head, seq, run.len());
            if let Err(e) = self.chunk(w, conn, k).and_then(|f| {
                use zerocopy::IntoBytes;
                f.write_all(&head)?;
                f.write_all(run.as_bytes())
            }) {
                self.fail(format!("cannot write a chunk of {}: {e}", w.name));
                w.dropped += fits as u64;
                continue;
            }
            let bytes = (HEAD + std::mem::size_of_val(run)) as u64;
            win.bytes += bytes;
            *win.events.entry(conn).or_default() += fits as u64;
            win.mpi_ns += run
                .iter()
                .filter(|e| matches!(hark_wire::op::kind(e.op()), hark_wire::op::OpKind::Mpi(_)))
                .map(|e| e.end.get().saturating_sub(e.start.get()))
                .sum::<u64>();
            self.used.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The chunk file of connection `conn`'s window `k`, opened (for
    /// appending) if needed; files of windows two behind are closed.
    fn chunk<'w>(
        &self,
        w: &'w mut Writer,
        conn: u64,
        k: u64,
    ) -> std::io::Result<&'w mut BufWriter<File>> {
        let old: Vec<u64> = w.chunks.keys().copied().filter(|&j| j + 2 <= k).collect();
        for j in old {
            if let Some(mut f) = w.chunks.remove(&j) {
                f.flush()?;
            }
        }
        match w.chunks.entry(k) {
            std::collections::btree_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::btree_map::Entry::Vacant(e) => {
                let path = self.config.dir.join(chunk_name(conn, k));
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                Ok(e.insert(BufWriter::with_capacity(1 << 16, f)))
            }
        }
    }

    /// Drops window `k`: its chunk files are deleted (a writer
    /// that still has one open notices at its next write: the window is
    /// marked evicted first, and it drops instead of writing).
    fn evict(&self, k: u64, win: &mut Window) {
        win.evicted = true;
        for &conn in win.events.keys() {
            let _ = std::fs::remove_file(self.config.dir.join(chunk_name(conn, k)));
        }
        let events: u64 = win.events.values().sum();
        self.evicted_events.fetch_add(events, Ordering::Relaxed);
        self.used.fetch_sub(win.bytes, Ordering::Relaxed);
        win.bytes = 0;
    }

    /// `auto` at the end: keeps the windows holding the most wait-state
    /// time per program (as the analyses found it), deletes the others.
    /// Returns (per connection: events kept, events dropped) and a line for
    /// the diagnostics.
    fn choose_windows(
        &self,
        programs: &[hark_model::Program],
    ) -> (HashMap<u64, (u64, u64)>, String) {
        let keep_n = self.config.selection.auto.unwrap_or(0);
        let mut windows = hark_sync::lock(&self.windows);
        // Wait-state time per (program, window).
        let mut wait: HashMap<(String, u64), u64> = HashMap::new();
        for p in programs {
            let ts = &p.timeslices;
            if ts.slice_ns == 0 {
                continue;
            }
            for pattern in p.waits.values() {
                for (i, cell) in pattern.slices.iter().enumerate() {
                    // A slice spread evenly over the windows it covers.
                    let from = i as u64 * ts.slice_ns;
                    let to = from + ts.slice_ns;
                    let (a, b) = (from >> AUTO_WINDOW_SHIFT, (to - 1) >> AUTO_WINDOW_SHIFT);
                    let share = cell.time_ns / (b - a + 1);
                    for k in a..=b {
                        *wait.entry((p.name.clone(), k)).or_default() += share;
                    }
                }
            }
        }
        let mut ranked: Vec<((String, u64), u64)> = windows
            .iter()
            .filter(|(_, v)| !v.evicted)
            .map(|(key, _)| (key.clone(), wait.get(key).copied().unwrap_or(0)))
            .filter(|(_, w)| *w > 0)
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut kept_per_program: HashMap<String, usize> = HashMap::new();
        let mut chosen = Vec::new();
        for (key, w) in ranked {
            let n = kept_per_program.entry(key.0.clone()).or_default();
            if *n < keep_n {
                *n += 1;
                chosen.push((key, w));
            }
        }
        let mut counts: HashMap<u64, (u64, u64)> = HashMap::new();
        let keys: Vec<(String, u64)> = windows.keys().cloned().collect();
        let mut dropped_at_end = 0u64;
        for key in keys {
            let win = windows.get_mut(&key).expect("listed above");
            let kept = chosen.iter().any(|(k, _)| *k == key);
            for (&conn, &n) in &win.events {
                let c = counts.entry(conn).or_default();
                if kept {
                    c.0 += n;
                } else {
                    c.1 += n;
                }
            }
            if !kept && !win.evicted {
                dropped_at_end += win.events.values().sum::<u64>();
                self.evict(key.1, win);
            }
        }
        let evicted = self.evicted_events.load(Ordering::Relaxed) - dropped_at_end;
        let span = |k: u64| {
            format!(
                "{:.3}-{:.3} s",
                (k << AUTO_WINDOW_SHIFT) as f64 / 1e9,
                ((k + 1) << AUTO_WINDOW_SHIFT) as f64 / 1e9
            )
        };
        let list: Vec<String> = chosen
            .iter()
            .map(|((p, k), w)| {
                let cut = match windows.get(&(p.clone(), *k)).and_then(|v| v.cut_at) {
                    Some(at) => format!(", cut at the cap at {:.3} s", at as f64 / 1e9),
                    None => String::new(),
                };
                format!("{p} {} ({:.3} s waiting{cut})", span(*k), *w as f64 / 1e9)
            })
            .collect();
        // Every window cut at the cap, kept or not: the events dropped
        // after each cut are counted here and nowhere else.
        let cuts: Vec<String> = windows
            .iter()
            .filter_map(|((p, k), v)| {
                let at = v.cut_at?;
                Some(format!(
                    "{p} {} at {:.3} s ({} events)",
                    span(*k),
                    at as f64 / 1e9,
                    v.cut
                ))
            })
            .collect();
        let cut_events: u64 = windows.values().map(|v| v.cut).sum();
        let line = format!(
            "trace store (auto): kept {} window(s) with the most wait-state time: {}; dropped {dropped_at_end} events of the other windows at the end, {evicted} of windows evicted at the cap of {} bytes during the run and {cut_events} of window(s) cut at the cap, with no other window left to evict{}",
            chosen.len(),
            if list.is_empty() { "none had any".to_string() } else { list.join(", ") },
            self.config.cap_bytes,
            if cuts.is_empty() { String::new() } else { format!(": {}", cuts.join(", ")) },
        );
        (counts, line)
    }

    /// Flushes every stream file and writes the index; returns what the
    /// diagnostics should say about the store.
    pub(crate) fn close(
        &self,
        infos: &HashMap<u64, Arc<StreamInfo>>,
        programs: &[hark_model::Program],
    ) -> Vec<String> {
        let writers = std::mem::take(&mut *hark_sync::lock(&self.writers));
        let mut ids: Vec<u64> = writers.keys().copied().collect();
        ids.sort_unstable();
        let mut index =
            String::from("file\tworld_rank\thandshake_ns\treference_ns\tkept\tdropped\n");
        let (mut kept, mut dropped) = (0u64, 0u64);
        let mut full_ranks = Vec::new();
        let mut full_at: Option<u64> = None;
        for id in &ids {
            let mut w = hark_sync::lock(&writers[id]);
            for (_, mut f) in std::mem::take(&mut w.chunks) {
                if let Err(e) = f.flush() {
                    self.fail(format!("cannot write a chunk of {}: {e}", w.name));
                }
            }
        }
        let auto = self
            .config
            .selection
            .auto
            .map(|_| self.choose_windows(programs));
        let mut out = Vec::new();
        for id in ids {
            let mut w = hark_sync::lock(&writers[&id]);
            if let Some((counts, _)) = &auto {
                // Events that came for a window already evicted never
                // reached one: they are the writer's own count.
                let (kept, dropped) = counts.get(&id).copied().unwrap_or((0, 0));
                w.kept = kept;
                w.dropped += dropped;
            }
            if let Some(mut f) = w.file.take() {
                if let Err(e) = f.flush() {
                    self.fail(format!("cannot write {}: {e}", w.name));
                }
            }
            let order: Vec<u8> = w.order.iter().flat_map(|n| n.to_le_bytes()).collect();
            let path = self.config.dir.join(order_name(&w.name));
            if let Err(e) = std::fs::write(&path, order) {
                self.fail(format!("cannot write {}: {e}", path.display()));
            }
            let Some(info) = infos.get(&id) else { continue };
            let clock = info.clock();
            let rank = info.world_rank();
            index.push_str(&format!(
                "{}\t{rank}\t{}\t{}\t{}\t{}\n",
                w.name,
                clock.handshake_ns(),
                clock
                    .reference_ns()
                    .map_or_else(|| "-".to_string(), |r| r.to_string()),
                w.kept,
                w.dropped
            ));
            kept += w.kept;
            dropped += w.dropped;
            if w.dropped > 0 {
                full_ranks.push(rank);
                full_at = full_at.min(w.full_at).or(full_at).or(w.full_at);
            }
        }
        if let Err(e) = std::fs::write(self.config.dir.join(INDEX), index) {
            self.fail(format!("cannot write the trace index: {e}"));
        }
        let used = self.used.load(Ordering::Relaxed);
        if let Some((_, line)) = auto {
            out.push(line);
        } else if dropped > 0 {
            full_ranks.sort_unstable();
            out.push(format!(
                "trace store: the cap of {} bytes was reached {:.3} s into the run; {dropped} chosen events of world rank(s) {full_ranks:?} after it were dropped ({kept} kept, {used} bytes)",
                self.config.cap_bytes,
                full_at.unwrap_or(0) as f64 / 1e9,
            ));
        } else {
            out.push(format!(
                "trace store: {kept} events kept ({used} bytes of packs; cap {} bytes), none dropped",
                self.config.cap_bytes
            ));
        }
        if let Some(p) = self
            .problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            out.push(format!("trace store incomplete: {p}"));
        }
        out
    }
}

/// Reads a trace store back (the directory [`TraceConfig::dir`] named):
/// every stream, its definitions, its kept events and its clock mapping.
pub fn read(dir: &Path) -> Result<Trace, Error> {
    let bad = |what: String| Error::new(ErrorKind::Trace(what));
    let index_path = dir.join(INDEX);
    let index = std::fs::read_to_string(&index_path).map_err(|e| {
        bad(format!(
            "cannot read {}: {e} (is {} a trace store written by `hark run --trace`?)",
            index_path.display(),
            dir.display()
        ))
    })?;
    let mut streams = Vec::new();
    for (n, line) in index.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let field = |i: usize| -> Result<&str, Error> {
            f.get(i).copied().ok_or_else(|| {
                bad(format!(
                    "{} line {}: {} fields, expected 6",
                    index_path.display(),
                    n + 1,
                    f.len()
                ))
            })
        };
        let num = |i: usize| -> Result<i64, Error> {
            field(i)?.parse::<i64>().map_err(|e| {
                bad(format!(
                    "{} line {}: field {}: {e}",
                    index_path.display(),
                    n + 1,
                    i + 1
                ))
            })
        };
        let name = field(0)?;
        if name.contains('/') {
            return Err(bad(format!(
                "{}: bad file name {name:?}",
                index_path.display()
            )));
        }
        let mut clock = Alignment::new(num(2)?);
        if field(3)? != "-" {
            clock.set_reference(num(3)?);
        }
        let dropped = num(5)? as u64;
        let path = dir.join(name);
        let file =
            File::open(&path).map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
        let mut reader = FrameReader::new(std::io::BufReader::with_capacity(1 << 20, file));
        let mut s = TraceStream {
            world_rank: num(1)? as i32,
            program: String::new(),
            host: String::new(),
            pid: 0,
            mapping: clock.mapping(),
            defs: Vec::new(),
            events: Vec::new(),
            dropped,
        };
        loop {
            let frame = reader
                .next_frame()
                .map_err(|e| bad(format!("{}: {e}", path.display())))?;
            match frame {
                None => break,
                Some(Frame::Hello(h)) => {
                    s.program = h.program;
                    s.host = h.host;
                    s.pid = h.pid;
                }
                Some(Frame::Defs(d)) => s.defs.extend(d),
                Some(Frame::Pack { events, .. }) => s.events.extend_from_slice(events),
                Some(Frame::Clock(c)) => clock.measured(c),
                Some(_) => {}
            }
        }
        // `auto`'s chunk files of this stream, in window order.
        let stem = name.trim_end_matches(".hkt");
        let mut chunks: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .map_err(|e| bad(format!("cannot list {}: {e}", dir.display())))?
            .filter_map(|d| {
                let d = d.ok()?;
                let file = d.file_name().into_string().ok()?;
                let k = file
                    .strip_prefix(stem)?
                    .strip_prefix(".w")?
                    .strip_suffix(".hkt")?;
                Some((k.parse().ok()?, d.path()))
            })
            .collect();
        chunks.sort();
        for (_, path) in chunks {
            let bytes = std::fs::read(&path)
                .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + hark_wire::HEADER_SIZE).min(bytes.len());
                let head = &bytes[at..end];
                if head.len() < hark_wire::HEADER_SIZE {
                    return Err(bad(format!("{}: truncated at byte {at}", path.display())));
                }
                let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
                let body = bytes
                    .get(at + hark_wire::HEADER_SIZE..at + hark_wire::HEADER_SIZE + len)
                    .ok_or_else(|| bad(format!("{}: truncated at byte {at}", path.display())))?;
                let frame = hark_wire::Frame::decode(hark_wire::Kind::Pack, body)
                    .map_err(|e| bad(format!("{}: {e}", path.display())))?;
                if let Frame::Pack { events, .. } = frame {
                    s.events.extend_from_slice(events);
                }
                at += hark_wire::HEADER_SIZE + len;
            }
        }
        s.mapping = clock.mapping();
        streams.push(s);
    }
    streams.sort_by_key(|s| (s.world_rank, s.pid));
    Ok(Trace { streams })
}

/// The file of connection `conn`'s clock measurements as they came
/// (`Clock` frames; the stream file holds them as applied).
pub fn measured_name(conn: u64) -> String {
    format!("stream-{conn}.clocks")
}

/// The file of the order in which the server took the frames of stream
/// file `stream` (`stream-<conn>.hkt`): per frame, its `Hello` first, a
/// `u64` (little-endian) counting the frames of every stream the store
/// wrote before it.
pub fn order_name(stream: &str) -> String {
    format!("{}.order", stream.trim_end_matches(".hkt"))
}

/// The chunk file of connection `conn`'s `auto` window `k`.
fn chunk_name(conn: u64, k: u64) -> String {
    format!("stream-{conn}.w{k}.hkt")
}
