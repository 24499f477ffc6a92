//! `hark run -- mpirun -np 2 ./ocean : -np 2 ./atmos` measures both programs
//! into one report, a chapter each, with each program's own ranks.

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;
mod common;

use common::*;

#[test]
fn two_programs_of_an_mpmd_launch_get_a_chapter_each() {
    let mpi = OPEN_MPI;
    if !have(mpi.cc) || !have(mpi.run) {
        eprintln!("skipped: Open MPI is not installed");
        return;
    }
    let dir = scratch("mpmd");
    let ring = compile(mpi.cc, "ring.c".as_ref(), &dir, &[]);
    for name in ["ocean", "atmos"] {
        std::fs::copy(&ring, dir.join(name)).unwrap();
    }
    let mut command = launcher(mpi, 2);
    command.extend([
        "./ocean".into(),
        "30".into(),
        ":".into(),
        "-np".into(),
        "2".into(),
    ]);
    command.extend(["./atmos".into(), "20".into()]);

    let bare = bare_run(&dir, &command);
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    let sorted = |b: &[u8]| {
        let mut l: Vec<String> = String::from_utf8_lossy(b)
            .lines()
            .map(str::to_string)
            .collect();
        l.sort();
        l
    };
    // The two programs print concurrently: compare the lines, not their order.
    assert_eq!(
        sorted(&out.stdout),
        sorted(&bare.stdout),
        "the programs' output changed"
    );

    let profile = profile(&run_dir);
    let programs = profile["programs"].as_array().unwrap();
    let mut seen: Vec<(String, u64, Vec<u64>)> = programs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["ranks"].as_u64().unwrap(),
                per_rank(&profile, k, "MPI_Isend", "calls"),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("atmos".into(), 2, vec![20, 20]),
            ("ocean".into(), 2, vec![30, 30])
        ]
    );
    assert_eq!(lost(&profile), 0);
    let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
    assert!(html.contains(". ocean</h2>") && html.contains(". atmos</h2>"));
    assert!(
        run_dir.join("topology/ocean.dot").exists() && run_dir.join("topology/atmos.dot").exists()
    );

    // The real report, opened in a browser: its script runs to the end and
    // nothing is logged (no errors, no blocked fetches).
    match chromium::chromium() {
        None => eprintln!("skipped the browser check: no chromium (apt install chromium)"),
        Some(browser) => {
            let v = chromium::visit(
                browser,
                &run_dir.join("report.html"),
                &dir,
                &["--dump-dom".into()],
            );
            assert!(v.console.is_empty(), "the report logged: {:#?}", v.console);
            assert!(
                v.dom.contains("data-ready=\"1\""),
                "the report's script did not finish"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
