//! `profile.json` is the model as JSON, and `hark report` reads it back: what
//! is written must read back to the same value.

mod common;

#[test]
fn profile_json_reads_back_to_the_same_run() {
    let run = common::two_programs();
    let dir = tempdir("roundtrip");
    hark_outputs::write_all(&run, &dir, |name| name == "json").unwrap();
    let back = hark_outputs::json::read(&dir.join("profile.json")).unwrap();
    let (a, b) = (
        hark_outputs::json::render(&back),
        hark_outputs::json::render(&run),
    );
    if let Some((k, (x, y))) = a
        .lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
    {
        panic!("line {}: read back {x:?}, written {y:?}", k + 1);
    }
    assert_eq!(a.len(), b.len());
    // Re-rendering from the file gives the same summary and report.
    assert_eq!(
        hark_outputs::summary::render(&back),
        hark_outputs::summary::render(&run)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_is_not_a_profile_is_a_clear_error() {
    let dir = tempdir("notjson");
    let path = dir.join("profile.json");
    let cases: &[(&str, &[u8], hark_outputs::ErrorKind)] = &[
        ("not json", b"hello", hark_outputs::ErrorKind::Json),
        (
            "truncated",
            b"{\"hark_version\": \"0.1",
            hark_outputs::ErrorKind::Json,
        ),
        ("wrong shape", b"[1, 2, 3]", hark_outputs::ErrorKind::Json),
    ];
    for (what, bytes, kind) in cases {
        std::fs::write(&path, bytes).unwrap();
        let err = hark_outputs::json::read(&path).expect_err(what);
        assert_eq!(err.kind(), *kind, "{what}");
        assert!(err.to_string().contains("profile.json"), "{what}: {err}");
    }
    let err = hark_outputs::json::read(&dir.join("missing.json")).unwrap_err();
    assert_eq!(err.kind(), hark_outputs::ErrorKind::Io);
    assert!(err.to_string().contains("missing.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn profiles_from_before_density_maps_still_read() {
    // Fields added to the model later default when absent.
    let mut value: serde_json::Value =
        serde_json::from_str(&hark_outputs::json::render(&common::two_programs())).unwrap();
    for p in value["programs"].as_array_mut().unwrap() {
        let p = p.as_object_mut().unwrap();
        p.remove("density");
        p.remove("diagnostics");
    }
    let dir = tempdir("old");
    let path = dir.join("profile.json");
    std::fs::write(&path, value.to_string()).unwrap();
    let run = hark_outputs::json::read(&path).unwrap();
    assert!(run.programs[0].density.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hark-outputs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
