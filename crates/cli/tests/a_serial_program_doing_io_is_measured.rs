//! A program without MPI (`tests/programs/serial/io.c`) doing file I/O with
//! known totals: `hark run -- ./io` measures its reads and writes per file.

mod common;

use common::*;
use std::path::Path;

#[test]
fn a_serial_program_doing_io_is_measured() {
    if !have("cc") {
        eprintln!("skipped: no C compiler");
        return;
    }
    let dir = scratch("serial");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/serial/io.c");
    let exe = compile("cc", &src, &dir, &[]);
    let command = vec![exe.display().to_string()];
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "serial io: wrote 45960 bytes, read 45960 bytes\n"
    );

    let profile = profile(&run_dir);
    let p = &profile["programs"][0];
    assert_eq!(p["ranks"].as_u64(), Some(1));
    let file = |suffix: &str| {
        p["io"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} in {:#}", p["io"]["files"]))
            .clone()
    };
    let ops = |f: &serde_json::Value, op: &str| {
        let t = &f["ops"][op];
        (
            t["calls"].as_u64().unwrap_or(0),
            t["bytes"].as_u64().unwrap_or(0),
        )
    };
    let bin = file("data.bin");
    assert_eq!(bin["write_bytes"][0].as_u64(), Some(40960));
    assert_eq!(bin["read_bytes"][0].as_u64(), Some(40960));
    assert_eq!(ops(&bin, "write"), (10, 40960));
    assert_eq!(
        ops(&bin, "read"),
        (6, 40960),
        "5 full reads and one at end of file"
    );
    let txt = file("data.txt");
    assert_eq!(txt["write_bytes"][0].as_u64(), Some(5000));
    assert_eq!(txt["read_bytes"][0].as_u64(), Some(5000));
    assert_eq!(ops(&txt, "fwrite"), (5, 5000));
    assert_eq!(ops(&txt, "fread"), (5, 5000));
    assert_eq!(lost(&profile), 0);
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    assert!(summary.contains("no MPI"), "{summary}");
    assert!(summary.contains("data.bin"), "{summary}");
    // One program: its own "Events:" line, and no second copy as the run's.
    assert_eq!(summary.matches(" lost").count(), 1, "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}
