//! A process told to go through its node's forwarder (`HARK_FORWARD`,
//! `docs/cluster.md`) that cannot start one says so in one line and
//! streams to the server itself; one that has no `HARK_BIN`, or finds the
//! server's own socket on its node in `auto`, does so silently.

mod common;

use common::{compile, Probed};

#[test]
fn without_a_forwarder_the_stream_goes_straight_to_the_server() {
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    let cases = [
        // (HARK_FORWARD, HARK_BIN, a line on stderr)
        ("always", Some("/nonexistent/hark"), true),
        ("always", None, false),
        // The server's socket is on this node: no forwarder is tried.
        ("auto", Some("/nonexistent/hark"), false),
        ("never", Some("/nonexistent/hark"), false),
    ];
    for (mode, bin, warns) in cases {
        let mut p = Probed::new(&format!("forward-{mode}-{}", bin.is_some()))
            .env("HARK_FORWARD", mode)
            .env("HARK_CONNECT_TIMEOUT_MS", "2000");
        if let Some(b) = bin {
            p = p.env("HARK_BIN", b);
        }
        let run = p.run(&exe, &["out.dat", "1000", "0"]);
        assert!(run.status.success(), "{}", run.stderr);
        let s = run.only_stream();
        assert!(s.is_clean(), "{mode}: {:?}", s.closed);
        assert!(
            s.shm,
            "{mode}: the stream did not reach the server's own ring"
        );
        let lines: Vec<&str> = run.stderr.lines().collect();
        if warns {
            assert_eq!(lines.len(), 1, "{mode}: {lines:?}");
            assert!(
                lines[0].contains("cannot use this node's forwarder")
                    && lines[0].contains("connecting to hark directly"),
                "{}",
                lines[0]
            );
        } else {
            assert!(lines.is_empty(), "{mode}, {bin:?}: {lines:?}");
        }
        let _ = std::fs::remove_dir_all(&p.dir);
    }
}
