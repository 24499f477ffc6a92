//! A user whose job streams into a `hark serve` running as root swaps, as
//! fast as a loop can, every entry of their run directory (`topology`, its
//! `.dot` files, `profile.json`, ...) for a symlink to a root-owned 0600
//! file while the service writes the directory and gives it to them. The
//! file stays root's, mode and content unchanged: the service hands the
//! directory over by descriptor, never following a link, the directory
//! itself last. A job of 300 programs (a `.dot` file each) makes the hand
//! over long enough for a chown by path to lose the race.

mod common;
mod served;

use common::*;
use served::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};

const USER: &str = "hark-t-ann";
const PROGRAMS: usize = 300;
/// Swapping loops at once.
const LOOPS: usize = 4;

#[test]
fn a_user_swapping_links_in_their_run_directory_never_gets_roots_file() {
    if !root_or_skip() {
        return;
    }
    let uid = local_users(&[USER])[0];
    let dir = scratch("chown-race");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "root's alone\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();

    // Programs p1..p300: copies of `true`, a chapter and a `.dot` each.
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let truth = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v true"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let truth = if truth.trim().starts_with('/') {
        truth.trim().to_string()
    } else {
        "/bin/true".into()
    };
    // Links named like every `.dot` file, all to the secret, in a
    // directory of the user's.
    let decoys = dir.join("decoys");
    std::fs::create_dir(&decoys).unwrap();
    for i in 1..=PROGRAMS {
        std::fs::copy(&truth, bin.join(format!("p{i}"))).unwrap();
        std::os::unix::fs::symlink(&secret, decoys.join(format!("p{i}.dot"))).unwrap();
    }
    std::os::unix::fs::symlink(&secret, decoys.join("sh.dot")).unwrap();
    std::os::unix::fs::chown(&decoys, Some(uid), None).unwrap();
    let swap = compile("cc", std::path::Path::new("swap_links.c"), &dir, &[]);

    let served = Served::start(&dir, &[]);
    let name_file = dir.join("run-dir-name");
    let stop = dir.join("stop");
    // Loops on every core, so that one runs when the service hands over.
    let attackers: Vec<_> = (0..LOOPS)
        .map(|_| {
            as_user(Some(USER), &swap)
                .args([&name_file, &secret, &decoys, &stop])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let job = served.run(
        Some(USER),
        &[
            "sh".into(),
            "-c".into(),
            format!("for i in $(seq {PROGRAMS}); do {}/p$i; done", bin.display()),
        ],
    );
    // The run directory's name, told to the user's loop as soon as it
    // appears (as a user who guessed it would know it).
    let deadline = Instant::now() + limit();
    let run_dir = loop {
        let found = std::fs::read_dir(&served.runs).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("hark-")
            })
        });
        if let Some(d) = found {
            break d;
        }
        assert!(Instant::now() < deadline, "no run directory appeared");
        std::thread::sleep(Duration::from_micros(200));
    };
    let told = dir.join("run-dir-name.new");
    std::fs::write(&told, format!("{}\n", run_dir.display())).unwrap();
    std::fs::set_permissions(&told, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&told, &name_file).unwrap();

    let out = wait_within(job, limit(), "the user's job");
    assert_exit(&out, 0);
    served.wait_jobs("the job written", |j| {
        j.len() == 1 && j[0]["state"] != "running"
    });
    // The loop goes on a little after the hand-over, as a user's would.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&stop, "").unwrap();
    for attacker in attackers {
        let swapped = wait_within(attacker, limit(), "the swapping loop");
        eprintln!(
            "a loop of the user's: {} {}",
            String::from_utf8_lossy(&swapped.stdout).trim(),
            String::from_utf8_lossy(&swapped.stderr).trim()
        );
    }

    let dots = std::fs::read_dir(
        dir.join("runs")
            .join(run_dir.file_name().unwrap())
            .join(".topology-old"),
    )
    .or_else(|_| std::fs::read_dir(run_dir.join("topology")))
    .map_or(0, |d| d.count());
    eprintln!("{dots} .dot files handed over");
    let meta = std::fs::symlink_metadata(&secret).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o7777),
        (0, 0o600),
        "the root file was given away; service log:\n{}",
        served.log()
    );
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's alone\n");
    let given = std::fs::symlink_metadata(&run_dir).unwrap();
    assert_eq!(
        (given.uid(), given.mode() & 0o777),
        (uid, 0o700),
        "the run directory is the user's, closed to others"
    );
}
