//! Scratch directories of a test binary, removed when it exits after every
//! test passed; a failing run keeps them for a look. Shared by the crates'
//! integration tests (`#[path]`), so that a passing suite leaves nothing in
//! the temporary directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static PANICKED: AtomicBool = AtomicBool::new(false);

/// Removes `dir` and what is in it when this test binary exits, unless a
/// test panicked.
pub fn remove_at_exit(dir: &Path) {
    static HOOKS: Once = Once::new();
    HOOKS.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::Relaxed);
            previous(info);
        }));
        // SAFETY: `remove` is a function of the binary, alive until exit.
        unsafe { libc::atexit(remove) };
    });
    DIRS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

extern "C" fn remove() {
    if PANICKED.load(Ordering::Relaxed) {
        return;
    }
    let dirs = std::mem::take(&mut *DIRS.lock().unwrap_or_else(|e| e.into_inner()));
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
