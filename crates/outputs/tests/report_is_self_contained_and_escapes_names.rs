//! `report.html` must work offline and must not let anything the measured
//! program named (executables, paths, hosts, regions) become markup.

mod common;

use hark_outputs::html::{self, Options};

/// Every `src=`, `href=` and CSS `url(` target in the page.
fn references(page: &str) -> Vec<String> {
    let mut refs = Vec::new();
    for pat in ["src=\"", "href=\"", "src='", "href='", "url("] {
        let mut rest = page;
        while let Some(at) = rest.find(pat) {
            rest = &rest[at + pat.len()..];
            let end = rest.find(['"', '\'', ')']).unwrap_or(rest.len());
            refs.push(rest[..end].to_string());
        }
    }
    refs
}

fn assert_self_contained(page: &str) {
    for r in references(page) {
        assert!(
            r.starts_with('#'),
            "the report refers to {r:?}: only in-page anchors are allowed"
        );
    }
    assert!(!page.contains("<link"), "no external stylesheets");
    assert!(!page.contains("@import"), "no imported stylesheets");
}

#[test]
fn the_report_fetches_nothing_with_or_without_graphviz() {
    let run = common::two_programs();
    for graphviz in [true, false] {
        let page = html::render(&run, &Options { graphviz });
        assert_self_contained(&page);
    }
}

#[test]
fn the_report_has_a_chapter_per_program_with_its_sections() {
    let run = common::two_programs();
    let page = html::render(&run, &Options { graphviz: false });
    for (k, name) in ["ocean", "atmos"].iter().enumerate() {
        assert!(page.contains(&format!("<h2>{}. {name}</h2>", k + 1)));
        for section in [
            "overview",
            "mpi",
            "p2p",
            "topology",
            "density",
            "collectives",
            "time",
            "io",
            "regions",
            "ranks",
            "diagnostics",
        ] {
            assert!(
                page.contains(&format!("id=\"p{k}-{section}\"")),
                "{name}: {section}"
            );
        }
    }
    // The pictures: heatmaps, the graph Hark draws, charts over time, density grids.
    for class in [
        "class=\"heatmap\"",
        "class=\"graph\"",
        "class=\"chart\"",
        "class=\"grid\"",
        "class=\"density\"",
    ] {
        assert!(page.contains(class), "{class}");
    }
    assert!(page.contains("<table class=\"sortable\">"));
    assert!(page.contains("MPI_Waitall"));
    assert!(page.contains("/scratch/run42/ocean_0001.nc"));
    assert!(page.contains("cg_iterations"));
}

#[test]
fn with_graphviz_installed_the_topology_is_laid_out_by_dot() {
    if std::process::Command::new("dot")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipped: Graphviz's `dot` is not installed (apt install graphviz)");
        return;
    }
    let page = html::render(&common::two_programs(), &Options { graphviz: true });
    assert!(page.contains("<figure class=\"graphviz\"><svg"));
    assert!(!page.contains("<?xml"), "the XML prolog must be stripped");
    assert!(
        !page.contains("<!DOCTYPE svg"),
        "the SVG doctype must be stripped"
    );
}

#[test]
fn names_from_the_measured_program_are_escaped_everywhere() {
    let evil = "<script>alert('x')</script>&\"";
    let mut run = common::two_programs();
    run.hark_version = evil.into();
    let p = &mut run.programs[0];
    p.name = evil.into();
    p.command = vec![evil.into()];
    p.rank_info[0].host = evil.into();
    p.io.files[0].path = evil.into();
    let region = p.regions.paths.values().next().unwrap().clone();
    p.regions.paths.insert(evil.into(), region);
    let f = p.mpi.values().next().unwrap().clone();
    p.mpi.insert(evil.into(), f);
    let c = p.regions.counters.values().next().unwrap().clone();
    p.regions.counters.insert(evil.into(), c);
    p.diagnostics.push(evil.into());
    let d = p.density.values().next().unwrap().clone();
    p.density.insert(evil.into(), d);
    let m = p.timeslices.metrics.values().next().unwrap().clone();
    p.timeslices.metrics.insert(evil.into(), m);
    for graphviz in [false, true] {
        let page = html::render(&run, &Options { graphviz });
        assert!(!page.contains("<script>alert"), "raw markup leaked");
        assert!(!page.contains("alert('x')"), "raw quote leaked");
        // One script element only: the page's own.
        assert_eq!(page.matches("<script").count(), 1);
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
        assert_self_contained(&page);
    }
}

#[test]
fn large_jobs_are_drawn_without_one_cell_per_pair() {
    // 512 ranks talking to their ring neighbours: the page stays small.
    let mut run = common::two_programs();
    run.programs.truncate(1);
    let p = &mut run.programs[0];
    let n = 512;
    p.ranks = n;
    let mut m = vec![vec![0u64; n]; n];
    for (i, row) in m.iter_mut().enumerate() {
        row[(i + 1) % n] = 10;
        row[(i + n - 1) % n] = 10;
    }
    p.p2p.messages = m.clone();
    p.p2p.bytes = m.clone();
    p.p2p.time_ns = m;
    p.rank_info = (0..n).map(|_| p.rank_info[0].clone()).collect();
    p.rank_wall_ns = vec![1_000_000; n];
    p.mpi_time_ns = vec![10_000; n];
    let page = html::render(&run, &Options { graphviz: false });
    assert!(page.len() < 8 << 20, "report of {} bytes", page.len());
    assert!(page.contains("128–131"), "ranks are grouped in blocks of 4");
}
