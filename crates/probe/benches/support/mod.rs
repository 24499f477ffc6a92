//! What the MPI benches share: the probe library under test and building a
//! C program of `tests/programs/mpi/` with a flavour's `mpicc`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `libhark.so` built with the bench (next to its binary).
pub fn libhark() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .iter()
        .map(|d| d.join("libhark.so"))
        .find(|p| p.exists())
        .expect("libhark.so next to the bench binary")
}

/// Compiles `tests/programs/mpi/<src>` with `mpicc.<flavour> <opt>` into
/// `dir/<stem>-<flavour>`.
pub fn build(flavour: &str, src: &str, opt: &str, dir: &Path) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/programs/mpi")
        .join(src);
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    let out = dir.join(format!("{stem}-{flavour}"));
    let st = Command::new(format!("mpicc.{flavour}"))
        .args([opt, "-o"])
        .arg(&out)
        .arg(&path)
        .status()
        .expect("mpicc");
    assert!(st.success(), "mpicc.{flavour} {src} failed");
    out
}
