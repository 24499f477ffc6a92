//! `hark report` refuses a `profile.json` claiming `ranks = 10^12`, or with
//! per-rank arrays longer than `ranks`, with a clear error naming it,
//! instead of indexing, allocating and drawing from it.

mod common;

use common::*;
use std::process::Command;

/// A name, an edit of a good profile, and what the error must say.
type Edit = (&'static str, fn(&mut serde_json::Value), &'static str);

#[test]
fn impossible_rank_counts_and_overlong_per_rank_arrays_are_refused() {
    let dir = scratch("report-check");
    let (out, run_dir) = hark_run(&dir, &["-q"], &["true".to_string()]);
    assert_exit(&out, 0);
    let good = profile(&run_dir);
    let edits: [Edit; 3] = [
        (
            "huge",
            |p| p["programs"][0]["ranks"] = serde_json::json!(1_000_000_000_000u64),
            "claims 1000000000000 ranks",
        ),
        (
            "long",
            |p| p["programs"][0]["mpi_time_ns"] = serde_json::json!([1, 2, 3]),
            "mpi_time_ns has 3 per-rank values for 1 ranks",
        ),
        (
            "short",
            |p| p["programs"][0]["rank_info"] = serde_json::json!([]),
            "has 1 ranks but describes 0",
        ),
    ];
    for (name, edit, expect) in edits {
        let mut bad = good.clone();
        edit(&mut bad);
        let case = dir.join(name);
        std::fs::create_dir_all(&case).unwrap();
        let path = case.join("profile.json");
        std::fs::write(&path, serde_json::to_string(&bad).unwrap()).unwrap();
        let out = Command::new(hark())
            .args(["report", "-q"])
            .arg(&case)
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {text}");
        assert!(
            text.contains("is not a consistent Hark profile"),
            "{name}: {text}"
        );
        assert!(text.contains(expect), "{name}: {text}");
        assert!(text.contains(&path.display().to_string()), "{name}: {text}");
        assert!(!case.join("report.html").exists(), "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
