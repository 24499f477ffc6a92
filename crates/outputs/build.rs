//! Turns on OTF2 (`cfg(hark_otf2)`) when the `otf2` feature asks for it or
//! when libotf2 is found where the linker looks (Debian's
//! `libopen-trace-format2-dev` puts `libopen-trace-format2.so` in the
//! multiarch directory), so that a plain `cargo build` writes OTF2 traces
//! wherever it can. The feature forces it (and a missing library is then a
//! link error); the probe alone never turns it off.

use std::path::PathBuf;

/// The linker's name of the library, as `-l` takes it.
const LIB: &str = "open-trace-format2";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(hark_otf2)");
    println!("cargo::rerun-if-env-changed=LIBRARY_PATH");
    let forced = std::env::var_os("CARGO_FEATURE_OTF2").is_some();
    let found = lib_dirs()
        .into_iter()
        .find(|d| d.join(format!("lib{LIB}.so")).exists());
    if let Some(dir) = &found {
        println!("cargo::rerun-if-changed={}", dir.display());
        println!("cargo::rustc-link-search=native={}", dir.display());
    }
    if forced || found.is_some() {
        println!("cargo::rustc-cfg=hark_otf2");
    }
}

/// Where the linker finds libraries by default on Linux, and the
/// directories `LIBRARY_PATH` names.
fn lib_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&v));
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        _ => "",
    };
    for base in ["/usr/lib", "/usr/local/lib", "/lib"] {
        if !multiarch.is_empty() {
            dirs.push(PathBuf::from(base).join(multiarch));
        }
        dirs.push(PathBuf::from(base));
    }
    dirs.push(PathBuf::from("/usr/lib64"));
    dirs.push(PathBuf::from("/usr/local/lib64"));
    dirs
}
