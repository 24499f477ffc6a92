//! Tools that join or make namespaces (`nsenter -m`, `unshare -U`, and a
//! program calling `setns` and `unshare` itself) need a process of one
//! thread, which the probe's own threads would deny them: under Hark they
//! exit as they do without it, and are measured.

mod common;

use common::*;
use std::path::Path;

/// Runs `command` bare; if it fails there (not root, or no namespaces in
/// this container), says so and returns false.
fn runs_bare(dir: &Path, command: &[String]) -> bool {
    let out = bare_run(dir, command);
    if !out.status.success() {
        eprintln!(
            "skipped: `{}` fails without Hark here (needs root and namespaces): {}",
            command.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    out.status.success()
}

/// The program named `name` in a run's profile.
fn program<'a>(profile: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no program {name} in {profile:#}"))
}

/// Bytes written to the file whose path ends with `suffix`, per rank.
fn written(p: &serde_json::Value, suffix: &str) -> u64 {
    p["io"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix} in {:#}", p["io"]["files"]))["write_bytes"][0]
        .as_u64()
        .unwrap()
}

#[test]
fn a_program_calling_setns_and_unshare_runs_and_is_measured() {
    if !have("cc") {
        eprintln!("skipped: no C compiler");
        return;
    }
    let dir = scratch("namespaces");
    let exe = compile("cc", Path::new("enters_namespaces.c"), &dir, &[]);
    let command = vec![exe.display().to_string()];
    if !runs_bare(&dir, &command) {
        return;
    }
    let (out, run_dir) = hark_run(&dir, &[], &command);
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    let profile = profile(&run_dir);
    let p = program(&profile, "enters_namespaces-cc");
    assert_eq!(p["ranks"].as_u64(), Some(1));
    // Recorded between the calls and after the last.
    assert_eq!(written(p, "between.txt"), 32);
    assert_eq!(written(p, "<stdout>"), 3);
    assert_eq!(lost(&profile), 0);
}

#[test]
fn nsenter_and_unshare_run_and_are_measured() {
    let dir = scratch("nsenter");
    let me = std::process::id().to_string();
    for command in [
        vec!["nsenter", "-m", "-t", &me, "--", "true"],
        vec!["unshare", "-U", "true"],
    ] {
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        if !have(&command[0]) || !runs_bare(&dir, &command) {
            continue;
        }
        let (out, run_dir) = hark_run(&dir, &[], &command);
        assert_exit(&out, 0);
        let profile = profile(&run_dir);
        // The tool itself, and the program it runs after.
        program(&profile, &command[0]);
        program(&profile, "true");
        assert_eq!(lost(&profile), 0);
        std::fs::remove_dir_all(&run_dir).unwrap();
    }
}
