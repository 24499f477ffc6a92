//! `HARK_ADDR=tls:host:port`: the probe streams through TLS, encrypting on
//! its shipping thread only, and every event arrives, packs of every size;
//! a plaintext probe facing a TLS server, and one holding another CA, each
//! say why in one line and their program runs on unmeasured.

mod common;

use common::*;
use hark_wire::op::io;

fn assert_exact(s: &Stream) {
    let end = s.end.as_ref().unwrap_or_else(|| {
        panic!(
            "the stream ended without its totals: closed {:?}, {} events, {} packs",
            s.closed,
            s.events.len(),
            s.packs.len()
        )
    });
    assert_eq!(
        end.events_written,
        s.events.len() as u64 + end.events_dropped
    );
    assert_eq!(end.packs_sent, s.packs.len() as u64);
    assert_eq!(end.events_dropped, 0);
}

#[test]
fn every_event_arrives_through_tls_in_small_and_large_packs() {
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    for pack in ["4K", "1M"] {
        let p = Probed::tls("tls-packs")
            .env("HARK_PACK_SIZE", pack)
            .env("HARK_LOSSLESS", "1");
        let run = p.run(&exe, &["out.dat", "30000", "0"]);
        assert!(run.status.success(), "{}", run.stderr);
        assert!(run.stderr.is_empty(), "{}", run.stderr);
        let s = run.only_stream();
        assert!(!s.shm);
        assert_exact(s);
        assert_eq!(count_on(s, io::WRITE, "out.dat"), 30000, "packs of {pack}");
        let _ = std::fs::remove_dir_all(&p.dir);
    }
}

#[test]
fn a_plaintext_probe_or_another_ca_is_refused_in_one_line_and_the_program_runs() {
    let exe = compile("tests/programs/spin_io.c", &["cc"], &[]);
    // Plaintext to the TLS server: told so by the server's alert. The
    // program runs long enough for the shipper to read it.
    let p = Probed::tls("tls-plain");
    let addr = p.collector.addr().replacen("tls:", "tcp:", 1);
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        &format!("{} out.dat 100 0 && sleep 0.5", exe.display()),
    ])
    .current_dir(&p.dir);
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    cmd.env("HARK_ADDR", &addr);
    let out = output_within(cmd, std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("takes TLS only and refused this plaintext stream"),
        "{err}"
    );
    assert!(p.collector.streams().is_empty());
    let _ = std::fs::remove_dir_all(&p.dir);

    // Another CA: the handshake fails, one line, the program runs.
    let p = Probed::tls("tls-other-ca");
    let other = p.dir.join("other-ca.pem").display().to_string();
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["out.dat", "100", "0"]).current_dir(&p.dir);
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    cmd.env("HARK_TLS_CA", &other);
    let out = output_within(cmd, std::time::Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("not one the CA (HARK_TLS_CA) vouches for"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&p.dir);
}
