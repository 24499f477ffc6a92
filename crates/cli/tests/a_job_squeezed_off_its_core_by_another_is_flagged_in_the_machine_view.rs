//! Two jobs in one `hark serve --http` share CPU 0: a user's one-rank job
//! spins there for 14 s (`tests/programs/spin_on_cpu0.c`, each rank pinned
//! to CPU 0), and a few seconds in, root's three-rank job spins there for
//! 4 s. `GET /api/machine` flags the user's job as interfered with in CPU
//! availability, in seconds inside the other job's span (as that program
//! read it on the wall clock), and the program's own CPU clock confirms
//! that it got less of the CPU in those seconds. Root reads the other job
//! by number; the user reads "another job", never its number, name or
//! programs, in the API and in their own run's digest. The root job, never
//! alone, is not flagged, and a job run alone afterwards is not either.

mod common;
mod machine;
mod served;

use common::*;
use machine::*;
use serde_json::Value;
use served::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const USER: &str = "hark-machine-a";

/// Root's view of the two jobs: the user's job (`ids.0`), slowed in CPU by
/// root's (`ids.1`) in seconds within the span root's job spun in (`hog`),
/// seconds in which the user's program itself (`own`: per second, its
/// share of a CPU) got less of the CPU than alone.
fn roots_view_flags_the_users_job(
    view: &Value,
    ids: (u64, u64),
    hog: (u64, u64),
    own: &[(u64, f64)],
) {
    let ((mine_id, roots_id), (hog_from, hog_to)) = (ids, hog);
    // Root: the user's job, slowed in CPU by job N, within N's span.
    let flags = view["interference"].as_array().unwrap();
    assert_eq!(flags.len(), 1, "{view:#}");
    let flag = &flags[0];
    assert_eq!(
        (flag["job"].as_u64(), flag["kind"].as_str()),
        (Some(mine_id), Some("cpu")),
        "{flag}"
    );
    assert_eq!(flag["by"][0]["id"].as_u64(), Some(roots_id), "{flag}");
    let overlapped = flagged_within(flag, (hog_from, hog_to));
    assert!(flag["overlapped_s"].as_u64() >= Some(2), "{flag}");
    // The program's own clock: less CPU in the flagged seconds than alone.
    let (inside, alone) = own_means(own, &overlapped, (hog_from, hog_to));
    assert!(
        inside < 0.7 * alone,
        "the program itself got {inside:.2} of a CPU in the flagged seconds and {alone:.2} alone: {own:?}"
    );
    let drawn: Vec<&Value> = view["jobs"].as_array().unwrap().iter().collect();
    assert_eq!(drawn.len(), 2, "{view:#}");
    assert!(view["nodes"].as_array().is_some_and(|n| !n.is_empty()));
    assert!(
        view["cells"][0]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_f64() > Some(0.0)),
        "no CPU wait shown: {view:#}"
    );
}

#[test]
fn a_job_squeezed_off_its_core_by_another_is_flagged_and_one_alone_is_not() {
    if !root_or_skip() || !have(OPEN_MPI.run) {
        return;
    }
    let uid = local_users(&[USER])[0];
    let dir = scratch("machine-view");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = compile(OPEN_MPI.cc, "spin_on_cpu0.c".as_ref(), &dir, &[]);
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let url = served.url();
    let job = |np: usize, ms: &str| -> Vec<String> {
        let mut cmd = launcher(OPEN_MPI, np);
        cmd.extend(["--bind-to".into(), "none".into()]);
        cmd.extend([exe.display().to_string(), ms.to_string()]);
        cmd
    };

    let victim = served.run(Some(USER), &job(1, "14000"));
    served_job_started(&served);
    std::thread::sleep(Duration::from_secs(3));
    // The kernel shares a core between sessions (autogroups) before
    // processes, and each job is a session of its own: the second job's
    // session is made heavier (root's nice -10 for it), so that it takes
    // most of the core whatever else runs there.
    let mut heavy = vec![
        "sh".to_string(),
        "-c".into(),
        "[ -w /proc/self/autogroup ] && echo -10 > /proc/self/autogroup; exec \"$@\"".into(),
        "sh".into(),
    ];
    heavy.extend(job(3, "4000"));
    let hog = served.run(None, &heavy);
    let hog = wait_within(hog, limit(), "the three-rank job");
    assert_exit(&hog, 0);
    let victim = wait_within(victim, limit(), "the one-rank job");
    assert_exit(&victim, 0);
    let jobs = served.wait_jobs("both written", |j| {
        j.len() == 2 && j.iter().all(|j| j["state"] == "finished")
    });
    let of = |owner: u32| jobs.iter().find(|j| j["owner"] == owner).unwrap().clone();
    let (mine, roots) = (of(uid), of(0));
    let (mine_id, roots_id): (u64, u64) = (
        mine["id"].as_str().unwrap().parse().unwrap(),
        roots["id"].as_str().unwrap().parse().unwrap(),
    );
    let ((hog_from, hog_to), _) = spun(&hog.stdout, "cpu");
    let ((from, to), own) = spun(&victim.stdout, "cpu");
    let query = format!("from={}&to={}&figure=cpu_wait", from - 5, to + 5);

    let view = machine(None, &url, &query);
    roots_view_flags_the_users_job(&view, (mine_id, roots_id), (hog_from, hog_to), &own);

    // The user: the same flag, by "another job", nothing of root's job.
    let theirs = machine(Some(USER), &url, &query);
    let text = theirs.to_string();
    assert_eq!(
        theirs["interference"][0]["job"].as_u64(),
        Some(mine_id),
        "{text}"
    );
    assert_eq!(
        theirs["interference"][0]["by"],
        serde_json::json!([{"label": "another job"}]),
        "{text}"
    );
    let hidden = theirs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j.get("id").is_none())
        .unwrap_or_else(|| panic!("root's job is not drawn: {text}"));
    assert_eq!(hidden["label"], "another job");
    assert!(hidden.get("programs").is_none(), "{text}");
    let roots_name = roots["job"].as_str().unwrap();
    assert!(
        !text.contains(roots_name),
        "root's job name {roots_name} in {text}"
    );
    // Their run's digest says so too, the same way.
    let d = digest(&mine["dir"]);
    assert!(d.contains("Interfered with by another job"), "{d}");
    assert!(!d.contains(&format!("job {roots_id}")), "{d}");
    assert!(!digest(&roots["dir"]).contains("Interfered"));

    // A job alone is not flagged.
    let alone = wait_within(served.run(None, &job(1, "4000")), limit(), "a job alone");
    assert_exit(&alone, 0);
    let jobs = served.wait_jobs("three written", |j| {
        j.len() == 3 && j.iter().all(|j| j["state"] == "finished")
    });
    let third = jobs
        .iter()
        .find(|j| j["id"] != mine["id"] && j["id"] != roots["id"])
        .unwrap();
    assert!(!digest(&third["dir"]).contains("Interfered"));
    let view = machine(None, &url, "span=600");
    let flagged: Vec<u64> = view["interference"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["job"].as_u64())
        .collect();
    assert_eq!(flagged, vec![mine_id], "{view:#}");
    served.stop();
}
