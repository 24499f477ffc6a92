//! `hark run -- python3 -c 'print(1)'` where `python3` is a shim, as under
//! pyenv: a bash script started through `env` that runs `basename`,
//! `dirname`, `readlink` and `uname` before it `exec`s the real Python.
//! Every one of those processes loads the probe; the summary counts one
//! program (Python) and the shim's processes on one "other processes"
//! line, the run directory is named after Python, not `env`, and no
//! process without MPI is called a rank.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_pyenv_like_shim_folds_into_other_processes_and_python_names_the_run() {
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(python) = python else {
        eprintln!("skipped: no /usr/bin/python3");
        return;
    };
    let dir = scratch("shim");
    let shims = dir.join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let shim = shims.join("python3");
    std::fs::write(
        &shim,
        format!(
            "#!/usr/bin/env bash\n\
             set -e\n\
             program=\"$(basename \"$0\")\"\n\
             root=\"$(dirname \"$(readlink -f \"$0\")\")\"\n\
             [ -n \"$(uname -s)\" ]\n\
             exec {python} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", shims.display(), std::env::var("PATH").unwrap());
    let index = dir.join("runs.sqlite");
    let (out, run_dir) = hark_run_env(
        &dir,
        &[],
        &["python3".into(), "-c".into(), "print(1)".into()],
        &[("PATH", &path), ("HARK_INDEX", index.to_str().unwrap())],
    );
    assert_exit(&out, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    let summary = std::fs::read_to_string(run_dir.join("summary.txt")).unwrap();
    let profile = profile(&run_dir);
    let names: Vec<&str> = profile["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    // Every process was measured and is kept in profile.json.
    for helper in ["env", "bash", "basename", "readlink", "uname"] {
        assert!(names.contains(&helper), "{helper} measured: {names:?}");
    }
    let python_name = names
        .iter()
        .find(|n| n.starts_with("python3"))
        .unwrap_or_else(|| panic!("python measured: {names:?}"));

    let first = summary.lines().next().unwrap();
    assert!(first.contains(": 1 program, 1 process, and "), "{summary}");
    assert!(first.contains("short-lived processes of"), "{summary}");
    assert!(
        !summary.contains("rank"),
        "no process here has a rank:\n{summary}"
    );
    assert!(
        summary.contains(&format!("== {python_name} — 1 process")),
        "{summary}"
    );
    assert!(!summary.contains("== env"), "{summary}");
    assert!(summary.contains("== Other processes"), "{summary}");

    // `hark run` without -o names the directory after the program meant.
    let (out, _) = {
        let mut cmd = std::process::Command::new(hark());
        cmd.current_dir(&dir)
            .args(["run", "-q", "--", "python3", "-c", "print(2)"])
            .env("PATH", &path)
            .env("HARK_INDEX", &index);
        (cmd.output_within().unwrap(), ())
    };
    assert_exit(&out, 0);
    let made: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("hark-"))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(
        made[0].starts_with(&format!("hark-{python_name}-")),
        "{made:?}"
    );
}
