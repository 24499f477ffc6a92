//! Each chapter of `report.html` opens with the program's efficiencies and
//! the job digest, and its "Why" section shows the efficiency bars, the
//! wait-state tree (with shares of rank time), who made whom wait and the
//! efficiencies over time. Update the snapshots with `UPDATE_EXPECT=1`
//! after checking that the change is wanted.

mod common;

use expect_test::expect;
use hark_model::{Efficiency, Finding, Run};
use hark_outputs::html::{self, Options};

fn page(run: &Run) -> String {
    html::render(run, &Options { graphviz: false })
}

/// The part of `page` from `from` to the next `to` after it.
fn between<'a>(page: &'a str, from: &str, to: &str) -> &'a str {
    let start = page.find(from).unwrap_or_else(|| panic!("no {from:?}"));
    let rest = &page[start..];
    let end = rest[from.len()..]
        .find(to)
        .unwrap_or_else(|| panic!("no {to:?} after {from:?}"));
    &rest[..from.len() + end]
}

/// The wait-state tree as text: one line per row, indented by depth, its
/// texts separated by `|` and its bar's width.
fn tree_text(why: &str) -> String {
    let tree = between(why, "<ul class=\"tree\">", "</ul>\n");
    let mut out = Vec::new();
    let mut pieces = tree.split("<span class=\"trow");
    let mut before = pieces.next().unwrap().to_string();
    for piece in pieces {
        let depth = before.matches("<ul").count() - before.matches("</ul>").count();
        let bar = piece
            .split_once("width:")
            .and_then(|(_, w)| w.split_once('"'))
            .map(|(w, _)| format!(" [bar {w}]"))
            .unwrap_or_default();
        // After the rest of the row's own tag, text and tags alternate.
        let body = &piece[piece.find('>').unwrap() + 1..];
        let texts: Vec<&str> = body
            .split(['<', '>'])
            .enumerate()
            .filter(|(k, t)| k % 2 == 0 && !t.trim().is_empty())
            .map(|(_, t)| t)
            .collect();
        out.push(format!(
            "{}{}{bar}",
            "  ".repeat(depth - 1),
            texts.join(" | ")
        ));
        before.push_str("<span class=\"trow");
        before.push_str(piece);
    }
    out.join("\n")
}

#[test]
fn each_chapter_opens_with_its_efficiencies_and_digest() {
    let page = page(&common::two_programs());
    let head = between(&page, "<h2>1. ocean</h2>", "<nav class=\"toc\">");
    let text: Vec<&str> = head
        .split(['<', '>'])
        .enumerate()
        .filter(|(k, t)| k % 2 == 0 && !t.trim().is_empty())
        .map(|(_, t)| t.trim())
        .collect();
    expect![[r#"
        1. ocean
        Efficiency
        Parallel
        Load balance
        Communication
        Serialisation
        Transfer
        Runtime
        whole program
        77.3 %
        97.9 %
        78.9 %
        91.7 %
        86.1 %
        2.440 s
        region
        timestep
        78.9 %
        96.2 %
        82.1 %
        91.8 %
        89.5 %
        1.900 s
        medium
        Late Sender in MPI_Waitall
        350.00 ms · 3.6 % of rank time
        Late Sender in MPI_Waitall costs 3.6 % of rank time; ranks 0 and 3 wait longest, for neighbours still in region
        timestep/solve
        : look at the balance of
        timestep/solve
        .
        low
        Wait at N×N in MPI_Allreduce
        195.00 ms · 2.0 % of rank time
        Wait at N×N in MPI_Allreduce costs 2.0 % of rank time; rank 0 arrives last in 76 % of the instances, after region
        timestep/solve
        : look at the balance of
        timestep/solve
        .
        low
        Load imbalance
        160.00 ms · 1.6 % of rank time
        Load balance is 97.9 %: rank 1 computes 1.925 s, the mean rank 1.885 s."#]]
    .assert_eq(&text.join("\n"));
    // Efficiencies are graded by colour, findings by severity.
    assert!(head.contains("<td class=\"n fair\">77.3 %</td>"));
    assert!(head.contains("<td class=\"n good\">97.9 %</td>"));
    assert!(head.contains("<li class=\"sev-medium\">"));
    assert!(head.contains("<code>timestep/solve</code>"));

    let atmos = between(&page, "<h2>2. atmos</h2>", "<nav class=\"toc\">");
    assert!(atmos.contains("Late Sender in MPI_Recv"));
}

#[test]
fn a_finding_links_to_the_call_site_it_names() {
    let page = page(&common::two_programs());
    let atmos = between(&page, "<h2>2. atmos</h2>", "<nav class=\"toc\">");
    // The finding names `atmos.f90:120`; the call-site table of the second
    // chapter has it as its first row.
    assert!(
        atmos.contains("<a href=\"#p1-site-0\"><code>atmos.f90:120</code></a>"),
        "{atmos}"
    );
    let row = between(&page, "<tr id=\"p1-site-0\">", "</tr>");
    assert!(row.contains(">atmos.f90:120<"), "{row}");
    assert!(row.contains(">MPI_Recv<"), "{row}");
    // Each anchor is on the page once.
    for i in 0..3 {
        assert_eq!(page.matches(&format!("id=\"p1-site-{i}\"")).count(), 1);
    }
}

#[test]
fn the_why_section_is_in_the_table_of_contents_and_holds_every_picture() {
    let page = page(&common::two_programs());
    for k in 0..2 {
        let toc = between(
            &page,
            &format!("<section class=\"chapter\" id=\"p{k}\">"),
            "</nav>",
        );
        assert!(
            toc.contains(&format!(
                "<a href=\"#p{k}-overview\">Overview</a><a href=\"#p{k}-why\">Why</a>"
            )),
            "{toc}"
        );
    }
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    for picture in [
        "<svg class=\"effbars\"",
        "<ul class=\"tree\">",
        "aria-label=\"ocean: waiting per rank and pattern\"",
        "aria-label=\"ocean: who made whom wait\"",
        "aria-label=\"ocean: efficiencies per slice\"",
    ] {
        assert!(why.contains(picture), "{picture}");
    }
    // Bars in the colour of their grade, from 0 to 100 % of 360 px.
    assert!(why.contains("width=\"278.11\" height=\"16\" class=\"fair\"><title>parallel: 77.3 %"));
    // The matrix names its axes, and rank 3 waited 120 ms for rank 0.
    assert!(why.contains("late rank →") && why.contains("waiting rank →"));
    assert!(why.contains("<title>0 → 3: 120.00 ms</title>"));
    // Rank 0 waited 182 ms, 7.5 % of its wall time, and was late 1,900 times.
    assert!(why.contains(
        "<td class=\"n\" data-v=\"0\">0</td><td class=\"n\" data-v=\"182000000\">182.00 ms</td><td class=\"n\" data-v=\"0.07459016393442623\">7.5 %</td><td class=\"n\" data-v=\"290000000\">290.00 ms</td><td class=\"n\" data-v=\"1900\">1,900</td>"
    ));
    // The last slice is empty: it is cut, and each of the five panels
    // draws its slices and their moving average.
    assert_eq!(why.matches("<path d=\"M").count(), 10);
    assert!(why.contains("47 slices of 50.00 ms"));
}

#[test]
fn the_wait_state_tree_gives_every_row_its_share_of_rank_time() {
    // Ranks' wall times add up to 9.742 s: 350 ms is 3.6 % of it.
    let page = page(&common::two_programs());
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    expect![[r#"
        Late Sender | 3.6 % | 350.00 ms | 940 instances [bar 100.0%]
          In MPI function
            MPI_Waitall | 3.6 % | 350.00 ms | 940 instances [bar 100.0%]
          At call path (waiting rank)
            timestep/halo | 3.6 % | 350.00 ms | 940 instances [bar 100.0%]
          After call path (late rank)
            timestep/solve | 3.6 % | 350.00 ms | 940 instances [bar 100.0%]
        Wait at N×N | 2.0 % | 195.00 ms | 2,500 instances [bar 55.7%]
          In MPI function
            MPI_Allreduce | 2.0 % | 195.00 ms | 2,500 instances [bar 55.7%]
          At call path (waiting rank)
            timestep/solve | 2.0 % | 195.00 ms | 2,500 instances [bar 55.7%]
          After call path (late rank)
            timestep/solve | 2.0 % | 195.00 ms | 2,500 instances [bar 55.7%]
        Wait at Barrier | 0.2 % | 16.00 ms | 8 instances [bar 4.6%]
          In MPI function
            MPI_Barrier | 0.2 % | 16.00 ms | 8 instances [bar 4.6%]
          At call path (waiting rank)"#]]
    .assert_eq(
        &tree_text(why)
            .lines()
            .take(18)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert!(why
        .contains("Ranks waited 577.00 ms in all, 5.9 % of rank time (9.742 s summed over ranks)"));
    assert!(why.contains("No waiting in: Late Sender / Wrong Order, Early Reduce."));
}

#[test]
fn a_pattern_split_over_functions_lists_each_with_its_own_share() {
    let mut run = common::two_programs();
    let w = run.programs[0].waits.get_mut("late_sender").unwrap();
    let all = w.by_function.remove("MPI_Waitall").unwrap();
    let part = |time_ns, instances| hark_model::WaitCell { time_ns, instances };
    w.by_function
        .insert("MPI_Wait".into(), part(all.time_ns / 5, 188));
    w.by_function
        .insert("MPI_Recv".into(), part(all.time_ns - all.time_ns / 5, 752));
    let page = page(&run);
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    expect![[r#"
        Late Sender | 3.6 % | 350.00 ms | 940 instances [bar 100.0%]
          In MPI function
            MPI_Recv | 2.9 % | 280.00 ms | 752 instances [bar 80.0%]
            MPI_Wait | 0.7 % | 70.00 ms | 188 instances [bar 20.0%]"#]]
    .assert_eq(
        &tree_text(why)
            .lines()
            .take(4)
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

#[test]
fn a_gap_in_the_slices_breaks_the_lines_over_time() {
    let mut run = common::two_programs();
    run.programs[0].efficiency_slices[10] = Efficiency::default();
    let page = page(&run);
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    // The slices' paths, not their moving averages.
    let paths: Vec<&str> = why
        .split("<path d=\"")
        .skip(1)
        .filter(|p| p[..p.find('>').unwrap()].contains(" raw\""))
        .collect();
    assert_eq!(paths.len(), 5);
    for d in paths {
        let d = &d[..d.find('"').unwrap()];
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(d.matches('L').count(), 9 + 35, "{d}");
    }
}

#[test]
fn a_program_without_mpi_has_no_verdict_and_no_why() {
    let mut run = common::two_programs();
    let p = &mut run.programs[1];
    p.efficiency = None;
    p.digest.clear();
    p.waits.clear();
    p.wait_causes = Default::default();
    let page = page(&run);
    let atmos = &page[page.find("<h2>2. atmos</h2>").unwrap()..];
    assert!(atmos.starts_with("<h2>2. atmos</h2>\n<nav class=\"toc\">"));
    let why = between(atmos, "<h3 id=\"p1-why\">Why</h3>", "<h3 id=\"p1-openmp\">");
    assert!(why.contains(
        "No efficiencies or wait states were computed for this program (they need MPI or OpenMP)."
    ));
    assert!(!why.contains("<svg"));
    let omp = between(
        atmos,
        "<h3 id=\"p1-openmp\">OpenMP</h3>",
        "<h3 id=\"p1-mpi\">",
    );
    assert!(omp.contains("No OpenMP"), "{omp}");
}

#[test]
fn an_openmp_program_shows_each_thread_its_regions_and_the_hybrid_tree() {
    use hark_model::{OmpEfficiency, OmpRegion, ThreadTimes};
    let mut run = common::two_programs();
    let p = &mut run.programs[0];
    let thread = |n: i32, useful: u64, barrier: u64, idle: u64| ThreadTimes {
        omp_thread: n,
        useful_ns: useful,
        omp_barrier_ns: barrier,
        omp_idle_ns: idle,
        mpi_ns: 100,
        ..ThreadTimes::default()
    };
    p.threads = (0..p.ranks)
        .map(|_| vec![thread(0, 900, 0, 0), thread(1, 500, 300, 100)])
        .collect();
    let omp = OmpEfficiency {
        parallel: 0.5,
        load_balance: 0.7,
        scheduling: 0.9,
        serialisation: 0.75,
    };
    p.openmp.efficiency = Some(omp);
    let e = p.efficiency.as_mut().unwrap();
    e.openmp = Some(omp);
    e.mpi_load_balance_in = Some(0.95);
    e.mpi_load_balance_out = Some(0.85);
    p.openmp.regions = vec![OmpRegion {
        name: "solve._omp_fn.<3>".into(),
        kind: "parallel".into(),
        calls: 12,
        threads: 2,
        time_ns: 5000,
        ..OmpRegion::default()
    }];
    let ranks = p.ranks;
    let page = page(&run);
    let omp_html = between(
        &page,
        "<h3 id=\"p0-openmp\">OpenMP</h3>",
        "<h3 id=\"p0-mpi\">",
    );
    for r in 0..ranks {
        for t in 0..2 {
            assert!(
                omp_html.contains(&format!("data-rank=\"{r}\" data-thread=\"{t}\"")),
                "rank {r} thread {t}: {omp_html}"
            );
        }
    }
    // Thread 1's bar has its barrier and idle parts; thread 0's none.
    assert_eq!(
        omp_html.matches("class=\"t-barrier\"><title>").count(),
        ranks
    );
    assert_eq!(omp_html.matches("class=\"t-idle\"><title>").count(), ranks);
    assert!(omp_html.contains("<td class=\"path\">solve._omp_fn.&lt;3&gt;</td>"));
    // The verdict's hybrid table and the Why bars carry the tree.
    assert!(page.contains("<th>MPI load balance within nodes</th>"));
    assert!(page.contains("<td class=\"n fair\">70.0 %</td>"));
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-openmp\">");
    for name in [
        "within nodes",
        "across nodes",
        "OpenMP parallel",
        "OpenMP serialisation",
    ] {
        assert!(why.contains(&format!(">{name}</text>")), "{name}");
    }
}

#[test]
fn names_in_waits_regions_and_findings_are_escaped() {
    let evil = "<script>alert('x')</script>&\"";
    let mut run = common::two_programs();
    let p = &mut run.programs[0];
    let mut w = p.waits["late_sender"].clone();
    let cell = w.by_function["MPI_Waitall"];
    w.by_function.insert(evil.into(), cell);
    w.by_callpath.insert(evil.into(), cell);
    w.cause_callpaths.insert(evil.into(), cell);
    p.waits.insert(evil.into(), w);
    let e = p.efficiency.unwrap();
    p.efficiency_by_region.insert(evil.into(), e);
    p.digest.push(Finding {
        severity: evil.into(),
        title: evil.into(),
        detail: format!("{evil} in `{evil}`"),
        time_ns: 1,
    });
    let page = page(&run);
    assert!(!page.contains("<script>alert"), "raw markup leaked");
    assert!(!page.contains("alert('x')"), "raw quote leaked");
    assert_eq!(page.matches("<script").count(), 1);
    let escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;";
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    // The unknown pattern keeps its key, and its rows their names.
    assert!(why.contains(&format!("<span class=\"tname\">{escaped}</span>")));
    assert!(page.contains(&format!("region <code>{escaped}</code>")));
    assert!(page.contains(&format!(
        "<li class=\"sev-other\"><span class=\"sev\">{escaped}</span>"
    )));
    assert!(page.contains(&format!("{escaped} in <code>{escaped}</code>")));
}

#[test]
fn a_ragged_or_hand_edited_model_still_renders() {
    let mut run = common::two_programs();
    let p = &mut run.programs[0];
    // Per-rank vectors shorter than the ranks, a ragged matrix, numbers
    // that are not numbers, slices without a slice width.
    p.waits.get_mut("late_sender").unwrap().time_ns.truncate(1);
    p.waits.get_mut("wait_nxn").unwrap().instances.clear();
    p.wait_causes.time_ns[1].clear();
    p.wait_causes.time_ns.truncate(3);
    p.wait_causes.late_instances.clear();
    let mut e = p.efficiency.unwrap();
    e.parallel = f64::NAN;
    e.transfer = f64::INFINITY;
    p.efficiency = Some(e);
    p.timeslices.slice_ns = 0;
    let page = page(&run);
    let head = between(&page, "<h2>1. ocean</h2>", "<nav class=\"toc\">");
    assert!(head.contains("<td class=\"n unknown\">-</td>"));
    let why = between(&page, "<h3 id=\"p0-why\">Why</h3>", "<h3 id=\"p0-mpi\">");
    assert!(why.contains("<title>parallel: -</title>"));
    // Without a slice width there is no time axis, so no chart over time.
    assert!(!why.contains("efficiencies per slice"));
    // The rows the matrix has are drawn; the missing ones are empty.
    assert!(why.contains("<title>0 → 3: 120.00 ms</title>"));
    assert!(!why.contains("<title>3 → 0:"));
}
