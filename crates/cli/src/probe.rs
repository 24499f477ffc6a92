//! Finding the probe, `libhark.so`, to preload into the measured program.
//!
//! One library serves Open MPI, MPICH and programs without MPI alike: the
//! probe finds out at run time which MPI (if any) the process uses. So
//! "picking the probe that matches" is finding the one that belongs to this
//! `hark`, in this order:
//!
//! 1. `--probe PATH` or the `HARK_PROBE` environment variable;
//! 2. next to the `hark` executable (how `cargo build` lays out
//!    `target/<profile>/`, and a plain install into one directory);
//! 3. `../lib/hark/libhark.so` relative to the executable (an install into
//!    `<prefix>/bin` and `<prefix>/lib/hark`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The probe's file name.
pub const FILE_NAME: &str = "libhark.so";

/// The probe to preload: `explicit` if given, else found next to `exe`.
pub fn locate(explicit: Option<&Path>, exe: &Path) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.is_file() {
            bail!(
                "the probe {} given by --probe or HARK_PROBE does not exist",
                p.display()
            );
        }
        return absolute(p);
    }
    let candidates = candidates(exe);
    for c in &candidates {
        if c.is_file() {
            return absolute(c);
        }
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    bail!(
        "cannot find the probe {FILE_NAME} (looked at {}).\n\
         Build it with `cargo build -p hark-probe` (add `--release` for a release `hark`), \
         or name it with --probe PATH or HARK_PROBE=PATH",
        looked.join(", ")
    )
}

fn candidates(exe: &Path) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    vec![
        dir.join(FILE_NAME),
        dir.join("..").join("lib").join("hark").join(FILE_NAME),
    ]
}

/// `LD_PRELOAD` needs an absolute path: the measured program may change
/// directory, and launchers start processes elsewhere.
fn absolute(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).with_context(|| format!("cannot resolve {}", p.display()))
}

/// One disabled event of each software counter kind the probes will open
/// (`counters`, else `HARK_COUNTERS`, else the default list), held for as
/// long as the value lives (`hark_os::hold_software_events`): opening the
/// first event of a kind on a node costs milliseconds of CPU, tens of them
/// when every CPU is busy (`BENCHMARKS.md`, "Opening the counters"). Held by
/// `hark run` on its node and by each node's forwarder on the others.
pub fn hold_counter_kinds(counters: Option<&str>) -> hark_os::HeldEvents {
    use hark_wire::counters::{parse_list, EVENTS, TYPE_SOFTWARE};
    let list = (counters.map(str::to_string))
        .or_else(|| std::env::var(hark_settings::COUNTERS.name).ok())
        .unwrap_or_else(|| hark_settings::COUNTERS.default_text());
    let configs: Vec<u64> = (parse_list(&list).0.iter())
        .filter_map(|&n| EVENTS.get(n as usize))
        .filter(|e| e.kind == TYPE_SOFTWARE)
        .map(|e| e.config)
        .collect();
    hark_os::hold_software_events(&configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_found_next_to_the_executable_then_in_lib_hark() {
        let root = std::env::temp_dir().join(format!("hark-probe-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let bin = root.join("bin");
        let lib = root.join("lib").join("hark");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        let exe = bin.join("hark");

        let err = locate(None, &exe).unwrap_err().to_string();
        assert!(err.contains("cargo build -p hark-probe"), "{err}");

        std::fs::write(lib.join(FILE_NAME), b"").unwrap();
        assert!(locate(None, &exe).unwrap().ends_with("lib/hark/libhark.so"));

        std::fs::write(bin.join(FILE_NAME), b"").unwrap();
        assert!(locate(None, &exe).unwrap().ends_with("bin/libhark.so"));

        let err = locate(Some(&root.join("nope.so")), &exe)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope.so"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
