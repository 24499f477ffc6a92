//! The machine page of `hark serve --http` (`/machine`) in Debian's
//! headless Chromium, over the DevTools protocol: after two jobs ran
//! (`tests/programs/spin_on_cpu0.c`, one rank each, at the same time), the
//! page draws this node's row of seconds, coloured where the jobs ran, and
//! the two jobs as bars under it, named by their programs; choosing another
//! figure redraws it; and the page logs no error or warning. Skips, saying
//! so, without Chromium or Open MPI.

#[path = "common/cdp.rs"]
mod cdp;
mod common;
mod served;

#[path = "../../outputs/tests/common/chromium.rs"]
mod chromium;

use common::*;

#[test]
fn the_machine_page_draws_the_node_and_both_jobs() {
    let Some(browser) = chromium::chromium() else {
        eprintln!("skipped: no chromium on PATH (apt install chromium)");
        return;
    };
    if !have(OPEN_MPI.run) {
        eprintln!("skipped: no {}", OPEN_MPI.run);
        return;
    }
    let dir = scratch("machine-page");
    let exe = compile(OPEN_MPI.cc, "spin_on_cpu0.c".as_ref(), &dir, &[]);
    let served = served::Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let job = |ms: &str| {
        let mut cmd = launcher(OPEN_MPI, 1);
        cmd.extend(["--bind-to".into(), "none".into()]);
        cmd.extend([exe.display().to_string(), ms.to_string()]);
        served.run(None, &cmd)
    };
    let (a, b) = (job("3000"), job("2000"));
    assert_exit(&wait_within(a, limit(), "the first job"), 0);
    assert_exit(&wait_within(b, limit(), "the second job"), 0);
    served.wait_jobs("both written", |j| {
        j.len() == 2 && j.iter().all(|j| j["state"] == "finished")
    });

    let mut b = cdp::Browser::launch(browser, &dir, 1400, 900);
    b.navigate(&format!("{}machine", served.url()));
    b.wait_until(
        "Number(document.body.dataset.updates) >= 1 && document.querySelectorAll('#heat rect.job').length === 2",
        60,
    );
    let coloured = "[...document.querySelectorAll('#heat rect.cell')].filter(r => r.getAttribute('fill') !== '#f0f0f0').length";
    let cpus = b.eval(coloured).as_u64().unwrap();
    assert!(cpus >= 2, "{cpus} coloured seconds");
    let titles = b.eval(
        "[...document.querySelectorAll('#heat rect.job title')].map(t => t.textContent).join('|')",
    );
    assert_eq!(
        titles.as_str().unwrap().matches("spin_on_cpu0").count(),
        2,
        "{titles}"
    );
    let row = b.eval("document.querySelector('#heat text').textContent");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(row.as_str(), Some(host.trim()));

    let now = b
        .eval("Number(document.body.dataset.updates)")
        .as_u64()
        .unwrap();
    b.eval("const f = document.getElementById('figure'); f.value = 'cpu_wait'; f.dispatchEvent(new Event('change'))");
    b.wait_until(
        &format!("Number(document.body.dataset.updates) > {now}"),
        30,
    );
    assert!(b.eval(coloured).as_u64() >= Some(2));
    assert!(b.problems.is_empty(), "the page logged: {:#?}", b.problems);

    // A bad question is answered 400 with what to give.
    for (query, says) in [
        ("from=soon", "is not a number"),
        ("figure=heat", "give one of cpus"),
        ("from=10&to=5000", "at most 3600 s"),
    ] {
        let out = std::process::Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}"])
            .arg(format!("{}api/machine?{query}", served.url()))
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            text.ends_with("\n400") && text.contains(says),
            "{query}: {text}"
        );
    }
    served.stop();
}
