//! A cheap clock for the time spent in operations, and a cheap hasher for
//! the board's small integer keys.
//!
//! Timing every job with `Instant::now()` cost two `clock_gettime` calls,
//! about 30 % of a job dispatch here. On x86-64 the time-stamp counter is
//! read instead (a few nanoseconds; invariant on current processors) and
//! converted to nanoseconds only when statistics are read, by comparing the
//! counter and the monotonic clock since the first board was made.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<(Instant, u64)> = OnceLock::new();

/// Starts the clock's reference (at the first board).
pub(crate) fn start() {
    EPOCH.get_or_init(|| (Instant::now(), raw()));
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn raw() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor and has no
    // preconditions; it only reads a counter.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn raw() -> u64 {
    EPOCH
        .get()
        .map_or(0, |(t, _)| t.elapsed().as_nanos() as u64)
}

/// Now, in clock ticks.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    raw()
}

/// Converts a number of ticks into nanoseconds.
pub(crate) fn to_nanos(ticks: u64) -> u64 {
    if cfg!(not(target_arch = "x86_64")) {
        return ticks;
    }
    let Some((t0, c0)) = EPOCH.get() else {
        return ticks;
    };
    let nanos = t0.elapsed().as_nanos() as f64;
    let cycles = raw().saturating_sub(*c0) as f64;
    if cycles <= 0.0 || nanos <= 0.0 {
        return ticks;
    }
    (ticks as f64 * nanos / cycles) as u64
}

/// FxHash-style hashing for level ids and keys: the keys are small
/// integers we make ourselves, so flooding is no concern, and SipHash cost
/// about 5 % of a job dispatch.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type IdHash = BuildHasherDefault<IdHasher>;
