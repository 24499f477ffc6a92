//! A plain build (no `otf2` feature, as the README's `cargo build` line
//! is) writes OTF2 wherever libotf2 is installed: the build script finds
//! it. The compiler's own search (`cc -print-file-name`) says whether it is.

use std::process::Command;

/// Whether the C compiler finds libotf2's link library.
fn compiler_finds_libotf2() -> Option<bool> {
    let out = Command::new("cc")
        .arg("-print-file-name=libopen-trace-format2.so")
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Without the library, cc prints the bare name back.
    Some(path.contains('/') && std::path::Path::new(&path).exists())
}

#[test]
fn otf2_is_on_exactly_where_libotf2_is_found() {
    let Some(found) = compiler_finds_libotf2() else {
        eprintln!("skipped: no C compiler to ask where libotf2 is");
        return;
    };
    // The feature forces it on, whatever is found.
    let expected = found || cfg!(feature = "otf2");
    assert_eq!(
        hark_outputs::trace::OTF2_AVAILABLE,
        expected,
        "libotf2 found by cc: {found}"
    );
}

#[test]
fn a_build_without_otf2_names_the_package_to_install() {
    let why = hark_outputs::trace::OTF2_MISSING.to_string();
    assert!(why.contains("libopen-trace-format2-dev"), "{why}");
    assert!(why.contains("build hark again"), "{why}");
}
