//! The live page of `hark run` on an OpenMP program while it runs, in
//! Debian's headless Chromium: `tests/programs/omp_imbalance.c` (gcc,
//! libgomp, 3 threads, no MPI) runs for some seconds, and while the header
//! still says "running" the page must draw a bar for each of its three
//! threads (as the server's `threads` so far has them) and the OpenMP
//! efficiencies beside the bars of the efficiency tree. Skips, saying so,
//! without Chromium.

#[path = "common/cdp.rs"]
mod cdp;
mod common;
#[path = "common/live.rs"]
mod live;

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;

use serde_json::Value;

#[test]
fn the_live_page_draws_each_thread_and_the_openmp_efficiencies_while_the_job_runs() {
    let Some(browser) = chromium::chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    let dir = common::scratch("live-omp");
    let exe = common::compile("gcc", "omp_imbalance.c".as_ref(), &dir, &["-fopenmp"]);
    // Rounds of about 3.5 units of 300 ms: some 8 s in all.
    let argv = [exe.display().to_string(), "300".into(), "7".into()];
    let job = live::start_argv(&dir, &argv, &[], &[("OMP_NUM_THREADS", "3")]);
    let mut b = cdp::Browser::launch(browser, &dir, 1280, 1600);
    b.navigate(&job.url);
    // The master's first OpenMP event (its first barrier) can reach the
    // server after its team's: until then the page draws it as a thread
    // without a number in the team (`data-thread` -1), as it should.
    b.wait_until(
        "[...document.querySelectorAll('#omp g.thread')].map((g) => g.dataset.thread).sort().join() === '0,1,2' \
         && document.querySelector(\"#eff rect[data-name='OpenMP parallel']\") !== null",
        60,
    );
    let seen: Value = serde_json::from_str(
        b.eval(
            "JSON.stringify({ state: document.getElementById('state').textContent, \
               threads: [...document.querySelectorAll('#omp g.thread')].map((g) => g.dataset.thread).sort(), \
               parts: document.querySelectorAll('#omp g.thread rect').length, \
               omp: [...document.querySelectorAll('#eff rect')].map((r) => r.dataset.name).filter((n) => n.startsWith('OpenMP')), \
               hidden: document.getElementById('ompsec').hidden })",
        )
        .as_str()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(seen["state"], "running", "the job ended first: {seen}");
    assert_eq!(
        seen["threads"],
        serde_json::json!(["0", "1", "2"]),
        "{seen}"
    );
    assert_eq!(seen["hidden"], false, "{seen}");
    // Each thread has useful time at least, and some wait at barriers.
    assert!(seen["parts"].as_u64().unwrap() > 3, "{seen}");
    assert_eq!(
        seen["omp"],
        serde_json::json!([
            "OpenMP parallel",
            "OpenMP load balance",
            "OpenMP scheduling",
            "OpenMP serialisation"
        ]),
        "{seen}"
    );
    drop(b);
    assert_eq!(job.wait(), 0);
}
