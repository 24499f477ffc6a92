//! The probe clock: the time-stamp counter where it is usable,
//! `CLOCK_MONOTONIC` otherwise.
//!
//! The TSC is used only when the CPU says it ticks at a constant rate and
//! keeps ticking in deep sleep (`constant_tsc` and `nonstop_tsc` in
//! `/proc/cpuinfo`). It is calibrated once at start against
//! `CLOCK_MONOTONIC` over a few milliseconds and anchored to it. Events
//! carry the ticks as read ([`stamp`]); the calibration travels in the
//! stream's `Hello` and the server's reader turns ticks into nanoseconds
//! that agree with `CLOCK_MONOTONIC`. A 3 ms calibration is good to about
//! 10 ppm: a drift of 10 µs per second of run, far below what the analyses
//! resolve.
//!
//! A test-only skew (`HARK_TEST_CLOCK_SKEW_NS`) is folded into the
//! calibration the server applies, so the hot path reads the clock exactly
//! as without it: under the TSC it moves `ns0`; under `CLOCK_MONOTONIC` the
//! stream declares a scale of one nanosecond per tick from the skew
//! ([`MONOTONIC_SKEWED`]), and [`stamp`] still reads `CLOCK_MONOTONIC`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

use hark_wire::{ClockSource, TickScale};

const MONOTONIC: u8 = 0;
const TSC: u8 = 1;
/// `CLOCK_MONOTONIC` under a test skew: events carry its nanoseconds as
/// ticks of a scale that adds the skew.
const MONOTONIC_SKEWED: u8 = 2;

/// The clock's constants, set once by [`init`] and only read after. One
/// static rather than four: `now` finds them all through one address (in a
/// shared library, each static's address is a load of its own).
struct Calibration {
    mode: AtomicU8,
    tsc0: AtomicU64,
    ns0: AtomicU64,
    /// Nanoseconds per tick, scaled by 2^32.
    mult: AtomicU64,
    /// The test skew, in ns (two's complement), already in `ns0`.
    skew: AtomicU64,
}

static CLOCK: Calibration = Calibration {
    mode: AtomicU8::new(MONOTONIC),
    tsc0: AtomicU64::new(0),
    ns0: AtomicU64::new(0),
    mult: AtomicU64::new(0),
    skew: AtomicU64::new(0),
};

/// How long the calibration spins.
const CALIBRATION_NS: u64 = 3_000_000;

/// Nanoseconds on the probe clock, as the server will read [`stamp`]s.
pub(crate) fn now() -> u64 {
    match source() {
        ClockSource::Tsc(scale) => scale.ns(stamp()),
        ClockSource::Monotonic => stamp(),
    }
}

/// The test skew in ns (`HARK_TEST_CLOCK_SKEW_NS`, 0 normally): how much
/// later than its host's clocks this process reads.
pub(crate) fn skew() -> i64 {
    CLOCK.skew.load(Relaxed) as i64
}

/// A timestamp for an event: TSC ticks (the server turns them into
/// nanoseconds with the calibration the stream's `Hello` carries, see
/// [`source`]), or `CLOCK_MONOTONIC` nanoseconds.
#[inline(always)]
pub(crate) fn stamp() -> u64 {
    read(CLOCK.mode.load(Relaxed) == TSC)
}

#[inline(always)]
fn read(tsc: bool) -> u64 {
    if tsc {
        rdtsc()
    } else {
        monotonic()
    }
}

/// The fallback clock, out of line: its `timespec` would otherwise give
/// every wrapper and callback that reads the clock a stack frame of its own.
#[inline(never)]
fn monotonic() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds in `d` units of [`stamp`] (a difference of two stamps).
pub(crate) fn stamp_ns(d: u64) -> u64 {
    let c = &CLOCK;
    if c.mode.load(Relaxed) == MONOTONIC {
        return d;
    }
    ((d as u128 * c.mult.load(Relaxed) as u128) >> 32) as u64
}

/// The two [`stamp`]s around a call, with one check of the clock's mode.
pub(crate) struct Span {
    tsc: bool,
    start: u64,
}

impl Span {
    /// Reads the clock at the start of a call.
    #[inline(always)]
    pub(crate) fn start() -> Span {
        let tsc = CLOCK.mode.load(Relaxed) == TSC;
        Span {
            tsc,
            start: read(tsc),
        }
    }

    /// Reads the clock at the end of the call: `(start, end)`.
    #[inline(always)]
    pub(crate) fn stop(self) -> (u64, u64) {
        (self.start, read(self.tsc))
    }
}

/// The clock [`stamp`] reads, with the TSC's calibration.
pub(crate) fn source() -> ClockSource {
    let c = &CLOCK;
    if c.mode.load(Relaxed) != MONOTONIC {
        ClockSource::Tsc(TickScale {
            tsc0: c.tsc0.load(Relaxed),
            ns0: c.ns0.load(Relaxed),
            mult: c.mult.load(Relaxed),
        })
    } else {
        ClockSource::Monotonic
    }
}

/// `clock_gettime(clock)` in nanoseconds.
#[inline(always)]
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Chooses the clock and calibrates the TSC. `wanted` is `HARK_CLOCK`
/// (`tsc`, `monotonic`, or empty for the best available); `skew_ns` is
/// `HARK_TEST_CLOCK_SKEW_NS` (0 outside tests); `host`: the host's
/// calibration file ([`host_file`]), if the host's processes share one.
pub(crate) fn init(wanted: &str, skew_ns: i64, host: Option<&Path>) {
    calibrate(wanted, host);
    if skew_ns == 0 {
        return;
    }
    let c = &CLOCK;
    if c.mode.load(Relaxed) == MONOTONIC {
        c.tsc0.store(0, Relaxed);
        c.ns0.store(0, Relaxed);
        c.mult.store(1 << 32, Relaxed);
        c.mode.store(MONOTONIC_SKEWED, Relaxed);
    }
    let ns0 = c.ns0.load(Relaxed).wrapping_add(skew_ns as u64);
    c.ns0.store(ns0, Relaxed);
    c.skew.store(skew_ns as u64, Relaxed);
}

impl Calibration {
    /// The anchor's own `CLOCK_MONOTONIC` reading, without the test skew
    /// folded into `ns0`.
    fn raw_anchor_ns(&self) -> u64 {
        self.ns0.load(Relaxed).wrapping_sub(self.skew.load(Relaxed))
    }
}

/// A TSC reading and `CLOCK_MONOTONIC` at the same moment: the clock read
/// between two TSC reads, their middle taken; of a few tries the tightest
/// bracket wins, so a preemption in the middle of one (a busy machine)
/// does not skew it.
fn pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = rdtsc();
        let ns = clock_ns(libc::CLOCK_MONOTONIC);
        let b = rdtsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + (b.wrapping_sub(a)) / 2, ns);
        }
    }
    (best.1, best.2)
}

/// Least time since the calibration's anchor for [`refine`] to take a new
/// rate: ten times the calibration's own, a tenth of its error.
const REFINE_AFTER_NS: u64 = 10 * CALIBRATION_NS;

/// Measures the TSC's rate again, from the calibration's anchor to now, and
/// uses it from now on; returns the new calibration for the server, or
/// `None` when the TSC is not in use or too little time has passed. The
/// 3 ms calibration at start is good to about a ppm: two processes' clocks
/// then drift apart by a microsecond per second, which waits between ranks
/// notice. Over the time since start (`MPI_Init` calls it) the same
/// reading error weighs ten to a thousand times less (`MPI_Init` takes
/// tens to hundreds of milliseconds). The anchor stays, so
/// a timestamp's nanoseconds move by no more than that drift.
pub(crate) fn refine() -> Option<TickScale> {
    let c = &CLOCK;
    if c.mode.load(Relaxed) != TSC {
        return None;
    }
    let (tsc0, ns0) = (c.tsc0.load(Relaxed), c.ns0.load(Relaxed));
    let raw0 = c.raw_anchor_ns();
    let (t, n) = pair();
    if t <= tsc0 || n < raw0.saturating_add(REFINE_AFTER_NS) {
        return None;
    }
    let mult = (((n - raw0) as u128) << 32) / (t - tsc0) as u128;
    let old = c.mult.load(Relaxed);
    // A rate far from the first one is a broken reading, not a refinement
    // (the server refuses more than 1 % too).
    if mult.abs_diff(old as u128) > old as u128 / 1000 {
        return None;
    }
    c.mult.store(mult as u64, Relaxed);
    Some(TickScale {
        tsc0,
        ns0,
        mult: mult as u64,
    })
}

/// Time since the anchor at which [`refine_due`] refines next; 0 before
/// the first (at one second).
static NEXT_REFINE_NS: AtomicU64 = AtomicU64::new(0);

/// Longest time between two refinements: once the rate has been measured
/// over minutes, another minute adds little.
const REFINE_EVERY_MAX_NS: u64 = 64_000_000_000;

/// [`refine`], when the time since the anchor has doubled since the last
/// time (1 s, 2 s, 4 s, ..., then every 64 s): the shipping thread asks at
/// each of its ticks, so that a long run's clocks stay together online,
/// not only from `MPI_Init`'s measurement.
pub(crate) fn refine_due() -> Option<TickScale> {
    let c = &CLOCK;
    if c.mode.load(Relaxed) != TSC {
        return None;
    }
    let age = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(c.raw_anchor_ns());
    let next = NEXT_REFINE_NS.load(Relaxed).max(1_000_000_000);
    if age < next {
        return None;
    }
    NEXT_REFINE_NS.store(age.saturating_add(age.min(REFINE_EVERY_MAX_NS)), Relaxed);
    refine()
}

fn calibrate(wanted: &str, host: Option<&Path>) {
    if wanted == "monotonic" || !cfg!(target_arch = "x86_64") || !tsc_is_usable() {
        CLOCK.mode.store(MONOTONIC, Relaxed);
        return;
    }
    if let Some(cal) = host.and_then(adoptable) {
        set(cal);
        return;
    }
    let (t0, n0) = pair();
    let (mut t1, mut n1) = pair();
    while n1 - n0 < CALIBRATION_NS {
        (t1, n1) = pair();
    }
    if t1 <= t0 {
        CLOCK.mode.store(MONOTONIC, Relaxed);
        return;
    }
    let mult = (((n1 - n0) as u128) << 32) / (t1 - t0) as u128;
    let own = TickScale {
        tsc0: t0,
        ns0: n0,
        mult: mult as u64,
    };
    set(own);
    // Published for the host's later processes; of two that calibrated at
    // once, the one whose file stayed is adopted by both.
    if let Some(path) = host {
        publish(path, &own);
        if let Some(cal) = adoptable(path) {
            set(cal);
        }
    }
}

/// Uses `cal` for the TSC.
fn set(cal: TickScale) {
    CLOCK.tsc0.store(cal.tsc0, Relaxed);
    CLOCK.ns0.store(cal.ns0, Relaxed);
    CLOCK.mult.store(cal.mult, Relaxed);
    CLOCK.mode.store(TSC, Relaxed);
}

/// Where the processes of this host (its `/dev/shm`), user and boot share
/// one TSC calibration: each process calibrating its own (good to some µs
/// and 10 ppm) made two ranks of one host read two clocks, which one
/// offset per host cannot correct (`docs/analyses.md`, "Known limits of
/// the shared offset"). One small file per user and boot, in memory.
pub(crate) fn host_file() -> Option<PathBuf> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot = boot.trim();
    if boot.is_empty() || !boot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return None;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    Some(PathBuf::from(format!("/dev/shm/hark-tsc-{uid}-{boot}")))
}

/// The published file's first bytes (then `tsc0`, `ns0`, `mult`, little
/// endian).
const MAGIC: &[u8; 8] = b"HARKTSC1";

/// How far a published calibration may be from `CLOCK_MONOTONIC` now and
/// still be adopted: what matters is that the host's processes convert
/// alike (the ping-pong measures the offset to hark's clock), but one far
/// off is another clock (a time namespace sharing `/dev/shm`) or a stale
/// rate, and is calibrated anew.
const ADOPT_WITHIN_NS: u64 = 100_000;

/// The calibration published at `path`, if it is this user's, well formed,
/// and agrees with `CLOCK_MONOTONIC` now to within [`ADOPT_WITHIN_NS`].
fn adoptable(path: &Path) -> Option<TickScale> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let mut file = std::fs::File::open(path).ok()?;
    // SAFETY: getuid has no preconditions.
    if file.metadata().ok()?.uid() != unsafe { libc::getuid() } {
        return None;
    }
    let mut bytes = [0u8; 32];
    file.read_exact(&mut bytes).ok()?;
    if &bytes[..8] != MAGIC {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
    let cal = TickScale {
        tsc0: word(1),
        ns0: word(2),
        mult: word(3),
    };
    let (t, n) = pair();
    let plausible = t > cal.tsc0 && cal.mult > 0 && cal.ns(t).abs_diff(n) <= ADOPT_WITHIN_NS;
    plausible.then_some(cal)
}

/// Publishes `cal` at `path` whole (written aside, then renamed), readable
/// by this user only; a failure leaves the host's processes calibrating
/// their own, as before.
fn publish(path: &Path, cal: &TickScale) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let aside = path.with_extension(format!("{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&aside)
        .and_then(|mut f| {
            let mut bytes = Vec::with_capacity(32);
            bytes.extend_from_slice(MAGIC);
            for w in [cal.tsc0, cal.ns0, cal.mult] {
                bytes.extend_from_slice(&w.to_le_bytes());
            }
            f.write_all(&bytes)
        });
    if written.is_err() || std::fs::rename(&aside, path).is_err() {
        let _ = std::fs::remove_file(&aside);
    }
}

fn tsc_is_usable() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock is one static: tests that calibrate it take turns.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The probe clock and `CLOCK_MONOTONIC` read together: the probe's
    /// reading brackets the other, and a bracket the thread was preempted
    /// in (a loaded machine: a millisecond is 2 % of the test's sleep) is
    /// read again.
    fn together() -> (u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..1000 {
            let before = now();
            let mono = clock_ns(libc::CLOCK_MONOTONIC);
            let after = now();
            let width = after.saturating_sub(before);
            if width < best.0 {
                best = (width, before + width / 2, mono);
            }
            if width < 20_000 {
                break;
            }
        }
        (best.1, best.2)
    }

    #[test]
    fn the_calibrated_clock_follows_clock_monotonic() {
        let _one = hark_sync::lock(&SERIAL);
        init("", 0, None);
        let a = together();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = together();
        let probe = (b.0 - a.0) as f64;
        let mono = (b.1 - a.1) as f64;
        assert!((probe / mono - 1.0).abs() < 0.01, "{probe} vs {mono}");
        // Anchored at start: the two clocks agree to within a millisecond.
        assert!((b.0 as i64 - b.1 as i64).abs() < 1_000_000);
    }

    #[test]
    fn a_refined_rate_keeps_the_anchor_and_follows_clock_monotonic_closer() {
        let _one = hark_sync::lock(&SERIAL);
        init("", 0, None);
        let Some(first) = (match source() {
            ClockSource::Tsc(t) => Some(t),
            ClockSource::Monotonic => None,
        }) else {
            eprintln!("skipped: no usable TSC here");
            return;
        };
        // Too soon after the calibration: nothing to refine.
        if clock_ns(libc::CLOCK_MONOTONIC) < first.ns0 + REFINE_AFTER_NS / 2 {
            assert_eq!(refine(), None);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        let refined = refine().expect("refined after 200 ms");
        assert_eq!((refined.tsc0, refined.ns0), (first.tsc0, first.ns0));
        assert!(refined.mult.abs_diff(first.mult) <= first.mult / 1000);
        // In use from now on, and on CLOCK_MONOTONIC to within what reading
        // the two clocks costs.
        assert_eq!(source(), ClockSource::Tsc(refined));
        let (t, n) = pair();
        let off = refined.ns(t) as i64 - n as i64;
        assert!(off.abs() < 20_000, "{off} ns off CLOCK_MONOTONIC");
    }

    #[test]
    fn the_rate_is_refined_as_the_process_ages_and_not_more_often() {
        let _one = hark_sync::lock(&SERIAL);
        init("", 0, None);
        if !matches!(source(), ClockSource::Tsc(_)) {
            eprintln!("skipped: no usable TSC here");
            return;
        }
        NEXT_REFINE_NS.store(0, Relaxed);
        assert_eq!(refine_due(), None, "due a second after the calibration");
        std::thread::sleep(std::time::Duration::from_millis(1_050));
        assert!(refine_due().is_some());
        // Next when the age has doubled.
        assert_eq!(refine_due(), None);
        assert!(NEXT_REFINE_NS.load(Relaxed) >= 2_000_000_000);
    }

    #[test]
    fn a_later_process_of_the_host_adopts_the_first_ones_calibration() {
        let _one = hark_sync::lock(&SERIAL);
        let dir = std::env::temp_dir().join(format!("hark-tsc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("host");
        init("", 0, Some(&file));
        let ClockSource::Tsc(first) = source() else {
            eprintln!("skipped: no usable TSC here");
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        };
        assert_eq!(adoptable(&file), Some(first), "published");
        // Another process: its own calibration would differ (other
        // moments, other rate); it converts with the first one's.
        std::thread::sleep(std::time::Duration::from_millis(5));
        init("", 0, Some(&file));
        assert_eq!(source(), ClockSource::Tsc(first));
        // One far from CLOCK_MONOTONIC (another clock, a stale rate) is
        // calibrated anew, and the new one published.
        publish(
            &file,
            &TickScale {
                ns0: first.ns0 + 10 * ADOPT_WITHIN_NS,
                ..first
            },
        );
        init("", 0, Some(&file));
        let ClockSource::Tsc(anew) = source() else {
            panic!("the TSC was usable")
        };
        assert_ne!(anew.ns0, first.ns0 + 10 * ADOPT_WITHIN_NS);
        assert_eq!(adoptable(&file), Some(anew));
        // Garbage is not adopted.
        std::fs::write(&file, b"HARKTSC1 short").unwrap();
        assert_eq!(adoptable(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
