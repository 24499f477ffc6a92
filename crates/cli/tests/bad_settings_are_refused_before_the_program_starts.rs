//! `hark run` refuses a bad option or a bad `HARK_*` value in the
//! environment before the command starts, naming the value, the setting and
//! its valid values (the table of settings, `hark_settings`): the probe
//! could only warn in every process and fall back to a default.

mod common;

use common::*;
use std::process::Command;

/// Options, one environment variable, and what the error must say.
type Case<'a> = (&'a [&'a str], Option<(&'a str, &'a str)>, &'a [&'a str]);

#[test]
fn bad_values_are_refused_with_the_setting_and_its_range() {
    probe();
    let dir = scratch("settings");
    let marker = dir.join("ran");
    let cases: &[Case] = &[
        (
            &["--buffers", "0"],
            None,
            &["--buffers", "`0`", "2 to 4096"],
        ),
        (
            &["--pack-size", "17592186044417M"],
            None,
            &["--pack-size", "17592186044417M", "from 4K to 64M"],
        ),
        (
            &[],
            Some(("HARK_PACK_SIZE", "abc")),
            &["`abc` is not a valid HARK_PACK_SIZE", "in the environment"],
        ),
        (
            &[],
            Some(("HARK_PACK_SIZE", "10G")),
            &["HARK_PACK_SIZE", "64M"],
        ),
        (
            &[],
            Some(("HARK_BUFFERS", "-1")),
            &["HARK_BUFFERS", "2 to 4096"],
        ),
        (
            &[],
            Some(("HARK_SEND_TIMEOUT_MS", "0")),
            &["`0` is not a valid HARK_SEND_TIMEOUT_MS", "from 1 to"],
        ),
        (
            &[],
            Some(("HARK_CLOCK_SYNC", "2")),
            &[
                "`2` is not a valid HARK_CLOCK_SYNC",
                "1, yes, true or on; 0, no, false or off",
            ],
        ),
        (
            &[],
            Some(("HARK_SHM", "7")),
            &["`7` is not a valid HARK_SHM", "or auto"],
        ),
        (
            &[],
            Some(("HARK_EXCHANGE", "x")),
            &["`x` is not a valid HARK_EXCHANGE", "0, no, false or off"],
        ),
        (
            &[],
            Some(("HARK_MPI_MAP", "bogus")),
            &[
                "`bogus` is not a valid HARK_MPI_MAP",
                "same-node, round-robin, blocks",
            ],
        ),
    ];
    for (args, env, expect) in cases {
        let mut cmd = Command::new(hark());
        cmd.current_dir(&dir).arg("run").args(*args);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["--", "touch"])
            .arg(&marker)
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {text}");
        for e in *expect {
            assert!(text.contains(e), "{args:?} {env:?}: no `{e}` in {text}");
        }
        assert!(!marker.exists(), "{args:?} {env:?}: the command ran");
    }
    // Zero where it has a meaning is accepted.
    let out = Command::new(hark())
        .current_dir(&dir)
        .env("HARK_FLUSH_MS", "0")
        .args(["run", "-q", "-o", "run", "--", "touch"])
        .arg(&marker)
        .output_within()
        .unwrap();
    assert_exit(&out, 0);
    assert!(marker.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_serve_flags_are_refused_with_their_range_and_never_panic() {
    let dir = scratch("serve-flags");
    for (flag, value, range) in [
        ("--linger", "1e20", "a number of seconds from 0 to 86400"),
        ("--linger", "nan", "a number of seconds from 0 to 86400"),
        ("--linger", "-1", "a number of seconds from 0 to 86400"),
        ("--linger", "inf", "a number of seconds from 0 to 86400"),
        (
            "--hello-timeout",
            "nan",
            "a number of seconds from 0.1 to 3600",
        ),
        (
            "--hello-timeout",
            "0",
            "a number of seconds from 0.1 to 3600",
        ),
        ("--max-jobs", "0", "a whole number from 1 to 4294967295"),
        ("--max-streams", "0", "a whole number from 1 to 4294967295"),
        (
            "--max-connections",
            "0",
            "a whole number from 1 to 4294967295",
        ),
        (
            "--max-connections-per-user",
            "0",
            "a whole number from 1 to 4294967295",
        ),
        ("--job-buffer-mb", "0", "a whole number from 1 to 1048576"),
        (
            "--total-buffer-mb",
            "17592186044416",
            "a whole number from 1 to 1048576",
        ),
    ] {
        let out = Command::new(hark())
            .current_dir(&dir)
            .args(["serve", "--listen", "unix:serve.sock", "--runs", "runs"])
            .arg(format!("{flag}={value}"))
            .output_within()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {text}");
        assert!(!text.contains("panicked"), "{flag} {value}: {text}");
        for e in [flag, value, range] {
            assert!(text.contains(e), "{flag} {value}: no `{e}` in {text}");
        }
        assert!(
            !dir.join("serve.sock").exists(),
            "{flag} {value}: it served"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
