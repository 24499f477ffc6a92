//! A setting the probe cannot use is not silently replaced: one line on
//! stderr names the setting, the bad value, the valid range and the value
//! used, and the probe runs with that value. `HARK_SEND_TIMEOUT_MS=0` is
//! refused (it would mean "wait forever"). The run's secret travels from
//! `HARK_ADDR` into the Hello.

mod common;

use common::{compile, Probed};

fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("hark: ")).collect()
}

#[test]
fn each_bad_value_costs_one_warning_naming_it_and_the_value_used() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    for (var, value, pack_size, warning) in [
        ("HARK_PACK_SIZE", "abc", 1 << 20, "hark: HARK_PACK_SIZE=\"abc\" is not valid (expected 4K to 64M); using 1M"),
        ("HARK_PACK_SIZE", "10G", 1 << 20, "hark: HARK_PACK_SIZE=\"10G\" is not valid (expected 4K to 64M); using 1M"),
        ("HARK_PACK_SIZE", "-5", 1 << 20, "hark: HARK_PACK_SIZE=\"-5\" is not valid (expected 4K to 64M); using 1M"),
        ("HARK_PACK_SIZE", "1", 4 << 10, "hark: HARK_PACK_SIZE=\"1\" is not valid (expected 4K to 64M); using 4K"),
        ("HARK_BUFFERS", "0", 1 << 20, "hark: HARK_BUFFERS=\"0\" is not valid (expected 2 to 4096); using 8"),
        ("HARK_BUFFERS", "-1", 1 << 20, "hark: HARK_BUFFERS=\"-1\" is not valid (expected 2 to 4096); using 8"),
        ("HARK_BUFFERS", "abc", 1 << 20, "hark: HARK_BUFFERS=\"abc\" is not valid (expected 2 to 4096); using 8"),
        ("HARK_SEND_TIMEOUT_MS", "0", 1 << 20, "hark: HARK_SEND_TIMEOUT_MS=\"0\" is not valid (expected 1 ms to 3600000 ms); using 60000 ms"),
    ] {
        let p = Probed::new("settings").env(var, value);
        let run = p.run(&exe, &["data.bin"]);
        assert!(run.status.success(), "{var}={value}: {}", run.stderr);
        assert_eq!(warnings(&run.stderr), [warning], "{var}={value}");
        let s = run.only_stream();
        assert!(s.is_clean(), "{var}={value}");
        assert_eq!(s.hello.pack_size, pack_size, "{var}={value}");
    }
}

#[test]
fn good_values_cost_no_warning() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let p = Probed::new("settings-ok")
        .env("HARK_PACK_SIZE", "64K")
        .env("HARK_BUFFERS", "16")
        .env("HARK_SEND_TIMEOUT_MS", "5000");
    let run = p.run(&exe, &["data.bin"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(warnings(&run.stderr), Vec::<&str>::new());
    assert_eq!(run.only_stream().hello.pack_size, 64 << 10);
}

#[test]
fn the_secret_before_the_address_reaches_the_hello() {
    let exe = compile("tests/programs/posix_io.c", &["cc"], &[]);
    let mut p = Probed::new("secret");
    let addr = p.env.iter_mut().find(|(k, _)| k == "HARK_ADDR").unwrap();
    addr.1 = format!("c0ffee42@{}", addr.1);
    let run = p.run(&exe, &["data.bin"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(warnings(&run.stderr), Vec::<&str>::new());
    let s = run.only_stream();
    assert!(s.is_clean());
    // The Hello proves the secret, never carries it.
    assert!(!s.hello.secret.contains("c0ffee42"), "{}", s.hello.secret);
    assert!(
        matches!(
            s.hello.check_secret("c0ffee42"),
            hark_wire::Credential::Proof(_)
        ),
        "{}",
        s.hello.secret
    );
}
