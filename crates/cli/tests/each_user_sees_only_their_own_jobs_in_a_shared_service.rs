//! Two users stream a job each into one `hark serve` (as root, machine-wide).
//! The kernel's word on each connection (`SO_PEERCRED`) makes each job its
//! user's: each sees and controls only their own, a third user sees nothing
//! and is refused control of both, root (the admin) sees both, and each run
//! directory belongs to its user alone. The same holds on the service's live
//! view (`--http`): `GET /api/runs` lists a user's own job only, another's
//! profile is not found, and `hark runs --index RUNS` lists a user's own runs.
//! A member of the service's `--admin-group` sees both jobs, in the service
//! and in `hark runs` alike.

mod common;
mod served;

use common::*;
use served::*;
use std::os::unix::fs::MetadataExt;

const USERS: [&str; 3] = ["hark-t-ann", "hark-t-bob", "hark-t-eve"];
/// A member of the admin group, and the group.
const ADMIN: &str = "hark-t-adm";
const ADMINS: &str = "hark-t-admins";

/// Runs `create` unless `exists` succeeds.
fn ensure(exists: &[&str], create: &[&str]) {
    let run = |argv: &[&str]| {
        std::process::Command::new(argv[0])
            .args(&argv[1..])
            .output_within()
            .unwrap()
    };
    if !run(exists).status.success() {
        let out = run(create);
        assert!(
            out.status.success(),
            "{create:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Creates the test's users and admin group (once; they stay for later
/// runs) and returns the users' uids.
fn users() -> Vec<u32> {
    let user = ["useradd", "--no-create-home", "--shell", "/bin/sh"];
    ensure(&["getent", "group", ADMINS], &["groupadd", ADMINS]);
    ensure(
        &["id", ADMIN],
        &[&user[..], &["-G", ADMINS, ADMIN]].concat(),
    );
    USERS
        .iter()
        .map(|u| {
            ensure(&["id", u], &[&user[..], &[u]].concat());
            let id = std::process::Command::new("id")
                .arg("-u")
                .arg(u)
                .output_within()
                .unwrap();
            String::from_utf8_lossy(&id.stdout).trim().parse().unwrap()
        })
        .collect()
}

#[test]
fn two_users_see_only_their_own_job_and_a_third_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: creating users and switching to them needs root");
        return;
    }
    let uids = users();
    let dir = scratch("users");
    // Other users must reach the socket's directory.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let served = Served::start(&dir, &["--http", "127.0.0.1:0", "--admin-group", ADMINS]);
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let cmd = vec!["sh".to_string(), "-c".into(), wait];
    let ann = served.run(Some(USERS[0]), &cmd);
    let bob = served.run(Some(USERS[1]), &cmd);
    let jobs = served.wait_jobs("both jobs registered", |j| j.len() == 2);
    let id_of = |uid: u32| -> String {
        jobs.iter()
            .find(|j| j["owner"] == uid)
            .unwrap_or_else(|| panic!("no job of uid {uid}: {jobs:?}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (ann_job, bob_job) = (id_of(uids[0]), id_of(uids[1]));

    each_controls_only_their_own_job(&served, &uids, &ann_job, &bob_job);
    http_control_is_the_owners_alone(&served, &ann_job);
    the_live_view_shows_each_their_own_job(&served, &ann_job, &bob_job);

    std::fs::write(&stop, "").unwrap();
    for child in [ann, bob] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    each_run_directory_is_its_users_alone(&served, &uids);
}

/// Over the control socket: ann and bob see and control their own job
/// only, eve sees none and controls neither, root and the admin group see
/// both.
fn each_controls_only_their_own_job(served: &Served, uids: &[u32], ann_job: &str, bob_job: &str) {
    for (user, uid, mine, theirs) in [
        (USERS[0], uids[0], ann_job, bob_job),
        (USERS[1], uids[1], bob_job, ann_job),
    ] {
        let seen = served.jobs(Some(user));
        assert_eq!(seen.len(), 1, "{user} sees {seen:?}");
        assert_eq!(
            (seen[0]["id"].as_str(), seen[0]["owner"].as_u64()),
            (Some(mine), Some(uid as u64))
        );
        served.ask(Some(user), &[mine, "show"]);
        let refused = served.ctl(Some(user), &[theirs, "pause"]);
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("belongs to another user"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
    assert!(served.jobs(Some(USERS[2])).is_empty());
    for job in [ann_job, bob_job] {
        for action in ["show", "pause", "dump"] {
            let out = served.ctl(Some(USERS[2]), &[job, action]);
            assert!(
                !out.status.success(),
                "{} could {action} job {job}",
                USERS[2]
            );
            assert!(String::from_utf8_lossy(&out.stderr).contains("belongs to another user"));
        }
    }
    assert_eq!(served.jobs(None).len(), 2, "root sees every job");
    assert_eq!(
        served.jobs(Some(ADMIN)).len(),
        2,
        "the admin group sees every job"
    );
}

/// The same over HTTP: the kernel's table names the localhost client.
fn http_control_is_the_owners_alone(served: &Served, ann_job: &str) {
    let url = served
        .log()
        .lines()
        .find_map(|l| l.split("POST ").nth(1).map(|u| u.replace("/ID/", "/{}/")))
        .expect("hark serve printed its HTTP control URL");
    let post = |user: &str, job: &str, action: &str| -> String {
        let path = url.replace("{}", job).replace(&served.url(), "");
        let body = format!("{{\"action\": \"{action}\"}}");
        served.post(Some(user), &path, &body, &[]).0
    };
    assert_eq!(post(USERS[2], ann_job, "pause"), "403");
    assert_eq!(post(USERS[1], ann_job, "pause"), "403");
    assert_eq!(post(USERS[0], ann_job, "pause"), "200");
    assert_eq!(post(USERS[0], ann_job, "resume"), "200");
    assert_eq!(post(USERS[0], "no-such-job", "pause"), "404");
}

/// The live view's API, as each user: only their own job.
fn the_live_view_shows_each_their_own_job(served: &Served, ann_job: &str, bob_job: &str) {
    let get = |user: &str, path: &str| get_as(user, served, path);
    for (user, mine, theirs) in [(USERS[0], ann_job, bob_job), (USERS[1], bob_job, ann_job)] {
        let (body, code) = get(user, "api/runs");
        assert_eq!(code, "200", "{body}");
        let runs: serde_json::Value = serde_json::from_str(&body).unwrap();
        let ids: Vec<&str> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [mine], "{user}: {body}");
        assert_eq!(get(user, &format!("api/runs/{mine}/profile")).1, "200");
        assert_eq!(get(user, &format!("api/runs/{theirs}/profile")).1, "404");
        assert_eq!(get(user, &format!("api/runs/{theirs}/timeline")).1, "404");
    }
    assert_eq!(get(USERS[2], "api/runs").0, "[]");
    let (page, code) = get(USERS[2], "");
    assert!(code == "200" && page.contains("<html"), "{code}");
}

/// `GET path` of the live view as `user`: the body and the status code.
fn get_as(user: &str, served: &Served, path: &str) -> (String, String) {
    let out = std::process::Command::new("runuser")
        .args(["-u", user, "--", "curl", "-s", "-w", "\n%{http_code}"])
        .arg(format!("{}{path}", served.url()))
        .output_within()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (body.to_string(), code.to_string())
}

/// Once both jobs folded: each run directory belongs to its user alone,
/// who still sees only their own job, and `hark runs` lists each user's own
/// runs and both to the admin group.
fn each_run_directory_is_its_users_alone(served: &Served, uids: &[u32]) {
    let jobs = served.wait_jobs("both folded", |j| {
        j.iter().all(|j| j["state"] == "finished")
    });
    for (uid, user) in uids.iter().zip(USERS).take(2) {
        let j = jobs.iter().find(|j| j["owner"] == *uid).unwrap();
        let d = std::path::PathBuf::from(j["dir"].as_str().unwrap());
        let meta = std::fs::metadata(&d).unwrap();
        assert_eq!(
            (meta.uid(), meta.mode() & 0o777),
            (*uid, 0o700),
            "{}",
            d.display()
        );
        assert_eq!(
            std::fs::metadata(d.join("profile.json")).unwrap().uid(),
            *uid
        );
        assert_eq!(
            served.jobs(Some(user)).len(),
            1,
            "{user} still sees only their own"
        );
        let listed = runs_as(user, served);
        assert_eq!(listed.matches("(uid ").count(), 1, "{user}: {listed}");
        assert!(listed.contains(&format!("(uid {uid})")), "{listed}");
    }
    // `hark runs` treats the service's admin group as the service does.
    let listed = runs_as(ADMIN, served);
    for uid in &uids[..2] {
        assert!(
            listed.contains(&format!("(uid {uid})")),
            "{ADMIN}: {listed}"
        );
    }
    assert!(!listed.contains("(deleted)"), "{ADMIN}: {listed}");
}

/// What `hark runs --index RUNS` lists for `user`.
fn runs_as(user: &str, served: &Served) -> String {
    let out = std::process::Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(hark())
        .args(["runs", "--index"])
        .arg(&served.runs)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}
