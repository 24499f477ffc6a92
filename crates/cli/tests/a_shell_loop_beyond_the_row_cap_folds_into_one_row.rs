//! A shell loop of short processes with
//! `hark run --rows 5` gives the program five rows of its own and one row of
//! the other processes, whose counts are exact (every byte each `dd`
//! wrote), named as such in the summary and in `profile.json`.

mod common;

use common::*;

#[test]
fn a_shell_loop_beyond_the_row_cap_folds_into_one_row() {
    let dir = scratch("rows");
    let command = vec![
        "bash".to_string(),
        "-c".to_string(),
        "for i in $(seq 30); do dd if=/dev/zero of=f$i bs=1000 count=1 status=none; done"
            .to_string(),
    ];
    let (out, run_dir) = hark_run(&dir, &["--rows", "5"], &command);
    assert_exit(&out, 0);

    let profile = profile(&run_dir);
    let dd = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "dd")
        .expect("a chapter for dd")
        .clone();
    assert_eq!(dd["ranks"].as_u64(), Some(6), "five rows and the others");
    let folded: Vec<u64> = dd["rank_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["folded"].as_u64().unwrap())
        .collect();
    assert_eq!(folded, [0, 0, 0, 0, 0, 25]);
    let written = |row: usize| -> u64 {
        dd["io"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                let name = f["path"].as_str().unwrap_or("").rsplit('/').next().unwrap();
                name.len() > 1
                    && name.starts_with('f')
                    && name[1..].bytes().all(|b| b.is_ascii_digit())
            })
            .map(|f| f["write_bytes"][row].as_u64().unwrap())
            .sum()
    };
    for row in 0..5 {
        assert_eq!(written(row), 1000, "row {row}: one dd");
    }
    assert_eq!(written(5), 25_000, "every byte of the 25 others");
    assert_eq!(lost(&profile), 0);

    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("dd — 30 processes (25 of them folded into one row"),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
