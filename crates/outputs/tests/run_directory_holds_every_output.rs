//! `write_all` leaves a run directory with every output in it, and each
//! program gets its own topology file even when two share a name.

mod common;

#[test]
fn every_registered_output_writes_its_files() {
    let run = common::two_programs();
    let dir = std::env::temp_dir().join(format!("hark-outputs-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    hark_outputs::write_all(&run, &dir, |_| true).unwrap();
    for file in [
        "summary.txt",
        "profile.json",
        "report.html",
        "topology/ocean.dot",
        "topology/atmos.dot",
    ] {
        let meta = std::fs::metadata(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(meta.len() > 0, "{file} is empty");
    }
    let names: Vec<&str> = hark_outputs::OUTPUTS.iter().map(|o| o.name()).collect();
    assert_eq!(names, ["summary", "json", "dot", "html"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_filter_keeps_outputs_out() {
    let run = common::two_programs();
    let dir = std::env::temp_dir().join(format!("hark-outputs-some-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    hark_outputs::write_all(&run, &dir, |name| name != "json").unwrap();
    assert!(dir.join("summary.txt").exists());
    assert!(!dir.join("profile.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn programs_sharing_a_name_get_distinct_topology_files() {
    let mut run = common::two_programs();
    run.programs[1].name = "ocean".into();
    run.programs.push(run.programs[0].clone());
    run.programs[2].name = "../../etc/x y".into();
    assert_eq!(
        hark_outputs::dot::file_names(&run),
        ["ocean.dot", "ocean-2.dot", "program.._.._etc_x_y.dot"]
    );
}

#[test]
fn an_unwritable_directory_is_an_error_naming_it() {
    let run = common::two_programs();
    let err = hark_outputs::write_all(&run, std::path::Path::new("/proc/hark/run"), |_| true)
        .unwrap_err();
    assert_eq!(err.kind(), hark_outputs::ErrorKind::Io);
    assert!(err.to_string().contains("/proc/hark/run"), "{err}");
}

#[test]
fn topology_dot_lists_every_pair_with_its_traffic() {
    let run = common::two_programs();
    let dot = hark_outputs::dot::render(&run.programs[1]);
    expect_test::expect![[r##"
        // Point-to-point topology of "atmos", written by Hark.
        // Edge i -> j: messages and bytes rank i sent to rank j.
        digraph "atmos" {
          graph [layout=circo, label="atmos: point-to-point traffic", labelloc=t, fontname="Helvetica", bgcolor="transparent"];
          node [shape=circle, style=filled, fillcolor="#dbe8f6", color="#2f5d8a", fontname="Helvetica"];
          edge [color="#2f5d8a", fontname="Helvetica", fontsize=9, arrowsize=0.6];
          r0 [label="0", tooltip="rank 0 on node02"];
          r1 [label="1", tooltip="rank 1 on node02"];
          r0 -> r1 [label="500 msgs\n31.2 MiB", penwidth=6.00, messages=500, bytes=32768000];
          r1 -> r0 [label="500 msgs\n31.2 MiB", penwidth=6.00, messages=500, bytes=32768000];
        }
    "##]].assert_eq(&dot);
}

#[test]
fn a_profile_claiming_more_ranks_than_it_holds_renders_at_once() {
    // A hand-edited profile.json: the outputs go by the data present.
    let mut run = common::two_programs();
    run.programs[0].ranks = 1_000_000_000_000;
    let t0 = std::time::Instant::now();
    let dir = std::env::temp_dir().join(format!("hark-outputs-huge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    hark_outputs::write_all(&run, &dir, |_| true).unwrap();
    let dot = std::fs::read_to_string(dir.join("topology/ocean.dot")).unwrap();
    assert_eq!(
        dot.matches(" [label=\"").count(),
        4 + 8,
        "4 ranks and 8 edges"
    );
    assert!(t0.elapsed().as_secs() < 60);
    std::fs::remove_dir_all(&dir).unwrap();
}
