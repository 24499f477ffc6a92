//! `hark run` puts a fresh secret in front of the address it gives the
//! probes (`HARK_ADDR=<32 hex digits>@unix:...`), and the run is measured
//! through it: the server refuses streams without it.

mod common;

use common::*;

fn addr_seen_by_the_program(dir: &std::path::Path) -> String {
    let command = [
        "/bin/sh".to_string(),
        "-c".into(),
        "printf '%s\\n' \"$HARK_ADDR\"".into(),
    ];
    let (out, run_dir) = hark_run(dir, &[], &command);
    assert_exit(&out, 0);
    // The shell itself was measured, through the secret.
    assert_eq!(profile(&run_dir)["programs"][0]["name"], "sh");
    std::fs::remove_dir_all(run_dir).unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn each_run_has_its_own_secret_in_hark_addr() {
    let dir = scratch("secret");
    let first = addr_seen_by_the_program(&dir);
    let second = addr_seen_by_the_program(&dir);
    for addr in [&first, &second] {
        let (secret, rest) = addr.split_once('@').unwrap_or_else(|| panic!("{addr}"));
        assert_eq!(secret.len(), 32, "{addr}");
        assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{addr}");
        assert!(rest.starts_with("unix:"), "{addr}");
    }
    assert_ne!(first.split('@').next(), second.split('@').next());
    std::fs::remove_dir_all(&dir).unwrap();
}
