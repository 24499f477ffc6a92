//! Two users' jobs in a `hark serve` running as root. User A links their
//! `profile.json` (and `service.json`) to user B's: `GET
//! /api/runs/<A's id>/profile` does not serve B's data, before a restart or
//! after one that rebuilds the index. The run index and its `.corrupt`
//! copy are mode 0600 and another user cannot read them, yet `hark runs
//! --index RUNS` lists a user's own runs (asked of the service). A
//! zero-byte index is moved aside and rebuilt, with a line that says so:
//! `hark ctl list` and `/api/runs` still list the runs.

mod common;
mod served;

use common::*;
use served::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const USERS: [&str; 2] = ["hark-t-ann", "hark-t-bob"];
const MARK: &str = "bob-s-private-argument";

/// `curl` as `user`: the body and the status.
fn get(user: &str, url: &str) -> (String, String) {
    let out = as_user(Some(user), "curl")
        .args(["-s", "-w", "\n%{http_code}", url])
        .output_within()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (body.to_string(), code.to_string())
}

#[test]
fn a_served_users_links_and_the_services_index_give_away_nothing() {
    if !root_or_skip() {
        return;
    }
    let uids = local_users(&USERS);
    let dir = scratch("user-files");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let http = ["--http", "127.0.0.1:0"];
    let served = Served::start(&dir, &http);
    for (user, word) in [(USERS[0], "ann"), (USERS[1], MARK)] {
        let job = served.run(
            Some(user),
            &["sh".into(), "-c".into(), format!("true {word}")],
        );
        assert_exit(&wait_within(job, limit(), "a job"), 0);
    }
    let jobs = served.wait_jobs("both written", |j| {
        j.len() == 2 && j.iter().all(|j| j["state"] == "finished")
    });
    let of = |uid: u32| jobs.iter().find(|j| j["owner"] == uid).unwrap().clone();
    let (ann, bob) = (of(uids[0]), of(uids[1]));
    let ann_dir = std::path::PathBuf::from(ann["dir"].as_str().unwrap());
    let bob_dir = std::path::PathBuf::from(bob["dir"].as_str().unwrap());
    for name in ["profile.json", "service.json"] {
        let ln = as_user(Some(USERS[0]), "ln")
            .arg("-sfn")
            .arg(bob_dir.join(name))
            .arg(ann_dir.join(name))
            .output_within()
            .unwrap();
        assert_exit(&ln, 0);
    }
    let ann_id = ann["id"].as_str().unwrap();
    let profile = |served: &Served| {
        get(
            USERS[0],
            &format!("{}api/runs/{ann_id}/profile", served.url()),
        )
    };
    let (body, code) = profile(&served);
    assert!(!body.contains(MARK), "{code}: B's profile served to A");

    // The index and its damaged copy: the service's alone.
    let index = served.runs.join("index.sqlite");
    let private = |f: &std::path::Path| {
        let m = std::fs::metadata(f).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o600), "{}", f.display());
        let cat = as_user(Some(USERS[1]), "cat")
            .arg(f)
            .output_within()
            .unwrap();
        assert!(!cat.status.success(), "{} read {}", USERS[1], f.display());
    };
    private(&index);
    let runs = dir.join("runs");
    let listed = as_user(Some(USERS[0]), hark())
        .args(["runs", "--index"])
        .arg(&runs)
        .output_within()
        .unwrap();
    assert_exit(&listed, 0);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains(&format!("(uid {})", uids[0])), "{listed}");
    assert!(!listed.contains(&format!("(uid {})", uids[1])), "{listed}");
    served.stop();
    std::fs::write(&index, vec![b'x'; 4096]).unwrap();
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();
    let served = Served::start(&dir, &http);
    private(&runs.join("index.sqlite.corrupt"));
    private(&index);
    let (body, _) = profile(&served);
    assert!(
        !body.contains(MARK),
        "B's profile served to A after a rebuild"
    );
    let mine = served.jobs(Some(USERS[0]));
    assert!(
        mine.iter().all(|j| j["owner"] == uids[0]),
        "A's links made another's job A's: {mine:?}"
    );

    // A zero-byte index: moved aside, rebuilt, said.
    served.stop();
    std::fs::write(&index, "").unwrap();
    let served = Served::start(&dir, &http);
    let jobs = served.jobs(None);
    assert!(
        served.log().contains("was empty; moved it to"),
        "{}",
        served.log()
    );
    assert!(jobs.iter().any(|j| j["owner"] == uids[1]), "{jobs:?}");
    let (body, code) = get(USERS[1], &format!("{}api/runs", served.url()));
    assert_eq!(code, "200");
    assert!(body.contains(bob["id"].as_str().unwrap()), "{body}");
    private(&index);
}
