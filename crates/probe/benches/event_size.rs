//! Would a compact event pay? The 48-byte record against a 32-byte one with
//! a delta-coded start and a 32-bit duration, measured where the size can
//! matter once packs travel through shared memory without a copy: the
//! recording thread's stores, and the reader's one pass over the bytes.
//!
//! `cargo bench -p hark-probe --bench event_size` prints medians of 15
//! alternated rounds; the numbers go in `BENCHMARKS.md` ("Other measures"). Both encoders write into a pool of 8 pre-faulted 1 MiB
//! buffers used in turn, as the probe's threads do, and a second thread
//! reads each full buffer (sums a field of every record) as the server's
//! unpacking does, so that the buffers' cache lines move between cores as
//! they do in a real run.

use std::hint::black_box;
use std::sync::mpsc;
use std::time::Instant;

const BUF: usize = 1 << 20;
const POOL: usize = 8;
const EVENTS: usize = 20_000_000;

#[derive(Clone, Copy)]
struct Input {
    start: u64,
    end: u64,
    bytes: u64,
    extra: u64,
    op: u16,
    obj: u32,
    peer: i32,
    tag: i32,
}

fn input(i: u64, t: u64) -> Input {
    Input {
        start: t,
        end: t + 37,
        bytes: 8,
        extra: u64::MAX,
        op: 0x10,
        obj: 1,
        peer: (i % 2) as i32,
        tag: 3,
    }
}

/// Today's record: every field stored as is.
#[inline(always)]
unsafe fn put48(p: *mut u8, e: &Input) {
    // SAFETY: the caller gives 48 writable bytes.
    unsafe {
        (p as *mut u64).write_unaligned(e.start);
        (p.add(8) as *mut u64).write_unaligned(e.end);
        (p.add(16) as *mut u64).write_unaligned(e.bytes);
        (p.add(24) as *mut u64).write_unaligned(e.extra);
        (p.add(32) as *mut u16).write_unaligned(e.op);
        (p.add(34) as *mut u16).write_unaligned(0);
        (p.add(36) as *mut u32).write_unaligned(e.obj);
        (p.add(40) as *mut i32).write_unaligned(e.peer);
        (p.add(44) as *mut i32).write_unaligned(e.tag);
    }
}

/// A 32-byte record: start as a delta from the thread's previous start,
/// duration instead of end (both 32 bits; a longer one would need an escape
/// record, not modelled here, which favours the compact form), and no
/// `extra` (requests and offsets would need another escape).
#[inline(always)]
unsafe fn put32(p: *mut u8, e: &Input, prev: &mut u64) {
    let d = e.start.wrapping_sub(*prev) as u32;
    *prev = e.start;
    // SAFETY: the caller gives 32 writable bytes.
    unsafe {
        (p as *mut u32).write_unaligned(d);
        (p.add(4) as *mut u32).write_unaligned((e.end - e.start) as u32);
        (p.add(8) as *mut u64).write_unaligned(e.bytes);
        (p.add(16) as *mut u16).write_unaligned(e.op);
        (p.add(18) as *mut u16).write_unaligned(0);
        (p.add(20) as *mut u32).write_unaligned(e.obj);
        (p.add(24) as *mut i32).write_unaligned(e.peer);
        (p.add(28) as *mut i32).write_unaligned(e.tag);
    }
}

/// ns per event on the writing thread, for records of `size` bytes.
fn run(size: usize) -> f64 {
    let pool: Vec<usize> = (0..POOL)
        .map(|_| Box::leak(vec![1u8; BUF].into_boxed_slice()).as_mut_ptr() as usize)
        .collect();
    let (full, fulls) = mpsc::sync_channel::<usize>(POOL);
    let (free, frees) = mpsc::sync_channel::<usize>(POOL);
    for &b in &pool {
        free.send(b).unwrap();
    }
    let reader = std::thread::spawn(move || {
        let mut sum = 0u64;
        for b in fulls {
            let p = b as *const u8;
            for i in 0..BUF / size {
                // SAFETY: in bounds of a live buffer the writer handed over.
                sum = sum
                    .wrapping_add(unsafe { (p.add(i * size + 8) as *const u64).read_unaligned() });
            }
            if free.send(b).is_err() {
                break;
            }
        }
        sum
    });
    let per = BUF / size;
    let mut prev = 0u64;
    let t0 = Instant::now();
    let mut i = 0u64;
    while (i as usize) < EVENTS {
        let b = frees.recv().unwrap() as *mut u8;
        for k in 0..per {
            let e = input(i, i * 50);
            // SAFETY: `k < per` records of `size` bytes fit in the buffer.
            unsafe {
                if size == 48 {
                    put48(b.add(k * 48), &e)
                } else {
                    put32(b.add(k * 32), &e, &mut prev)
                }
            };
            i += 1;
        }
        full.send(b as usize).unwrap();
    }
    let ns = t0.elapsed().as_nanos() as f64 / i as f64;
    drop(full);
    black_box(reader.join().unwrap());
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        a.push(run(48));
        b.push(run(32));
    }
    let (ma, mb) = (median(a.clone()), median(b.clone()));
    println!("48-byte records: {ma:.2} ns/event (median of 15; {a:.2?})");
    println!("32-byte records: {mb:.2} ns/event (median of 15; {b:.2?})");
    println!("saved by the compact form: {:.2} ns/event", ma - mb);
}
