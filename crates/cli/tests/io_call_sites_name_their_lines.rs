//! I/O call sites: a C program built with `-g` (`tests/programs/io_sites.c`)
//! writes from two `write` and two `fwrite` lines and one `fprintf` line,
//! known bytes from each.
//! `programs[0].callsites` attributes each line its calls and bytes
//! exactly; glibc's `fwrite` reaching `write` inside adds no `write` site,
//! and no site lies outside the program's executable (never in the C
//! library or the probe). The run keeps a trace: its OTF2 and Perfetto
//! exports, read back by OTF2's and Perfetto's own readers
//! (`tests/programs/read_sources.py`), give each call the file and line of
//! its call site in the profile.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;

const SOURCE: &str = "io_sites.c";

/// The line marked `marker` in the test program.
fn line_of(marker: &str) -> u64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(SOURCE);
    let text = std::fs::read_to_string(&path).unwrap();
    let i = text
        .lines()
        .position(|l| l.contains(&format!("/* {marker} */")))
        .unwrap_or_else(|| panic!("no {marker} in {SOURCE}"));
    i as u64 + 1
}

#[test]
fn io_call_sites_name_their_lines() {
    if !have("cc") {
        eprintln!("skipped: no C compiler");
        return;
    }
    let dir = scratch("io-sites");
    let exe = compile("cc", Path::new(SOURCE), &dir, &["-g"]);
    let command = vec![exe.display().to_string(), dir.display().to_string()];
    let (out, run_dir) = hark_run(&dir, &["--trace"], &command);
    assert_exit(&out, 0);
    // What the program wrote, measured by the file system.
    let size = |name: &str| std::fs::metadata(dir.join(name)).unwrap().len();
    assert_eq!(size("sites.bin"), 3 * 1000 + 5 * 4096);
    assert_eq!(size("sites.txt"), 7 * 300 + 2 * 500 + 4 * 7);

    let p = profile(&run_dir);
    let sites = p["programs"][0]["callsites"].as_array().unwrap().clone();
    let what = format!("{sites:#?}");
    // The compiler may unroll a loop into several calls on one line, each
    // its own call site: sites are summed by (function, file, line).
    let mut lines: BTreeMap<(String, String, u64), (u64, u64)> = BTreeMap::new();
    for s in &sites {
        let key = (
            s["function"].as_str().unwrap().to_string(),
            s["file"].as_str().unwrap_or("").to_string(),
            s["line"].as_u64().unwrap_or(0),
        );
        let e = lines.entry(key).or_default();
        e.0 += s["calls"].as_u64().unwrap();
        e.1 += s["bytes"].as_u64().unwrap();
        assert!(s["time_ns"].as_u64().unwrap() > 0, "{what}");
    }
    let of = |function: &str| -> Vec<(u64, (u64, u64))> {
        lines
            .iter()
            .filter(|((f, _, _), _)| f == function)
            .map(|((_, _, line), &t)| (*line, t))
            .collect()
    };
    for (function, want) in [
        ("write", [("WRITE_A", 3, 3000), ("WRITE_B", 5, 5 * 4096)]),
        (
            "fwrite",
            [("FWRITE_A", 7, 7 * 300), ("FWRITE_B", 2, 2 * 500)],
        ),
    ] {
        let mut expected: Vec<(u64, (u64, u64))> = want
            .iter()
            .map(|&(marker, calls, bytes)| (line_of(marker), (calls, bytes)))
            .collect();
        expected.sort();
        assert_eq!(of(function), expected, "{function} by line: {what}");
    }
    // Through the variadic entry point: 4 lines of 7 bytes.
    assert_eq!(of("fprintf"), [(line_of("FPRINTF"), (4, 4 * 7))], "{what}");
    for function in ["open", "close", "fopen", "fclose"] {
        assert_eq!(of(function).len(), 1, "one {function} line: {what}");
    }
    for (function, file, line) in lines.keys() {
        assert!(
            file.ends_with(SOURCE) && *line > 0,
            "{function} has a line of {SOURCE}: {what}"
        );
    }
    let exe_name = exe.file_name().unwrap().to_str().unwrap();
    for s in &sites {
        assert!(
            s["object"].as_str().unwrap().ends_with(exe_name),
            "every site is in the program: {what}"
        );
    }

    let mut traces = vec![run_dir.join("trace.perfetto-trace")];
    if hark_outputs::trace::OTF2_AVAILABLE {
        traces.push(run_dir.join("trace.otf2/traces.otf2"));
    }
    for trace in traces {
        let read = read_with("read_sources.py", &trace);
        let calls = read["sources"].as_array().unwrap();
        let how = format!("{}: {calls:?}", trace.display());
        // Every call read back with the file and line of its call site in
        // the profile: as many per line as the profile counts there.
        let mut read_back: BTreeMap<(String, String, u64), (u64, u64)> = BTreeMap::new();
        for c in calls {
            let key = (
                c[0].as_str().unwrap().to_string(),
                c[1].as_str().unwrap().to_string(),
                c[2].as_u64().unwrap(),
            );
            read_back.entry(key).or_default().0 += 1;
        }
        let counted: BTreeMap<_, _> = lines.iter().map(|(k, t)| (k.clone(), t.0)).collect();
        let read_back: BTreeMap<_, _> = read_back.into_iter().map(|(k, t)| (k, t.0)).collect();
        assert_eq!(read_back, counted, "{how}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
