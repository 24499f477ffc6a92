//! Hark's one policy for poisoned locks: take the data and go on.
//!
//! A lock is poisoned when a thread panicked while holding it. Hark never
//! lets that second-hand failure spread: [`lock`], [`read`] and [`write()`]
//! take the guard out of the poison (`PoisonError::into_inner`) and return
//! it as if nothing had happened. The panic itself is where it is reported:
//! the analysis side catches a knowledge source's panic and names it in the
//! run's diagnostics, and the probe must never break the program, so a
//! panic in one of its threads must not become a panic in every thread
//! that records an event next. Hark's locks guard counters, queues and
//! tables that stay usable after an interrupted update (at worst one
//! batch's counts are partial, which the panic's report already says);
//! `lock().unwrap()`, which would turn one failure into a cascade of them
//! and, in the probe, into an abort of the measured program, is not used.
//!
//! ```
//! use std::sync::Mutex;
//!
//! let m = Mutex::new(1);
//! let _ = std::panic::catch_unwind(|| {
//!     let _g = m.lock().unwrap();
//!     panic!("a thread panics while holding the lock");
//! });
//! assert!(m.is_poisoned());
//! *hark_sync::lock(&m) += 1;
//! assert_eq!(*hark_sync::lock(&m), 2);
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};
use std::time::{Duration, Instant};

/// Locks `m`, poisoned or not.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Locks `m`, poisoned or not, if it comes free within `wait` (tried once
/// for a zero `wait`); `None` if it does not. For a thread that must not
/// block for long on a lock another may hold: the probe's shipper, or its
/// last reading as a stream ends.
pub fn lock_within<T: ?Sized>(m: &Mutex<T>, wait: Duration) -> Option<MutexGuard<'_, T>> {
    let until = Instant::now() + wait;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() >= until => return None,
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_micros(100)),
        }
    }
}

/// Locks `l` for reading, poisoned or not.
pub fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// Locks `l` for writing, poisoned or not.
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let m = Mutex::new(vec![1]);
        let l = RwLock::new(5);
        let _ = std::panic::catch_unwind(|| {
            let _m = m.lock().unwrap();
            let _l = l.write().unwrap();
            panic!("poison both");
        });
        assert!(m.is_poisoned() && l.is_poisoned());
        lock(&m).push(2);
        assert_eq!(*lock(&m), [1, 2]);
        *write(&l) += 1;
        assert_eq!(*read(&l), 6);
        assert_eq!(*lock_within(&m, Duration::ZERO).unwrap(), [1, 2]);
    }

    #[test]
    fn lock_within_waits_as_long_as_it_is_told() {
        let m = &Mutex::new(0);
        let taken = &std::sync::Barrier::new(2);
        let (release, released) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let held = m.lock().unwrap();
                taken.wait();
                released.recv().unwrap();
                std::thread::sleep(Duration::from_millis(10));
                drop(held);
            });
            taken.wait();
            assert!(lock_within(m, Duration::ZERO).is_none());
            let t = Instant::now();
            assert!(lock_within(m, Duration::from_millis(20)).is_none());
            assert!(t.elapsed() >= Duration::from_millis(20));
            // Freed 10 ms after this, well within the wait.
            release.send(()).unwrap();
            assert!(lock_within(m, Duration::from_secs(60)).is_some());
        });
    }
}
