//! Each kind of bad client of `hark serve` — garbage, a truncated stream,
//! a trickled handshake, a flood of connections, a claim on a rank already
//! streaming — is cut off with a logged reason, while a good job streams at
//! the same time; the good job's run is exactly what it would have been.

mod service;

use service::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const N: u64 = 1000;

/// Opens the good job's two ranks and sends half of it, runs `bad`, sends
/// the rest, and checks the good job's run.
fn good_job_around(
    name: &str,
    tweak: impl FnOnce(&mut hark_server::ServiceConfig),
    bad: impl FnOnce(&Setup),
) -> Setup {
    let setup = start(name, false, tweak);
    let mut ranks: Vec<_> = (0..2)
        .map(|r| {
            let mut s = connect(&setup.path);
            s.write_all(&hello("good", r, 2, 500 + r as u32)).unwrap();
            s
        })
        .collect();
    // Both ranks registered before the bad client comes.
    let deadline = Instant::now() + Duration::from_secs(10);
    while setup.service.job(&ROOT, "good").map_or(0, |j| j.streams) < 2 {
        assert!(Instant::now() < deadline, "the good job never registered");
        std::thread::sleep(Duration::from_millis(10));
    }
    bad(&setup);
    for (r, s) in ranks.iter_mut().enumerate() {
        s.write_all(&work(r as i32, 2, N)).unwrap();
        s.write_all(&end(N)).unwrap();
    }
    drop(ranks);
    let good = run_of(&setup, "good");
    assert_eq!(
        (good.analysed, good.received, good.partial),
        (2 * N, 2 * N, 0),
        "{good:?}"
    );
    setup
}

/// Waits until the server closes `s` (a read sees the end or an error).
fn closed_by_server(s: &mut std::os::unix::net::UnixStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return true,
            Ok(_) => continue,
        }
    }
}

fn logged(setup: &Setup, what: &str) -> bool {
    setup.log.lock().unwrap().iter().any(|l| l.contains(what))
}

#[test]
fn garbage_is_cut_off_with_its_reason() {
    let setup = good_job_around(
        "garbage",
        |_| {},
        |setup| {
            let mut s = connect(&setup.path);
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            assert!(closed_by_server(&mut s));
        },
    );
    assert!(
        logged(&setup, "Closed connection 2"),
        "{:?}",
        setup.log.lock().unwrap()
    );
}

#[test]
fn a_truncated_stream_is_its_own_partial_job() {
    let setup = good_job_around(
        "truncated",
        |_| {},
        |setup| {
            let mut s = connect(&setup.path);
            let mut bytes = hello("truncated", 0, 1, 77);
            let w = work(0, 1, 100);
            bytes.extend(&w[..w.len() - 40]);
            s.write_all(&bytes).unwrap();
        },
    );
    let bad = run_of(&setup, "truncated");
    assert_eq!(bad.partial, 1, "{bad:?}");
    assert!(
        logged(&setup, "Closed connection 2"),
        "{:?}",
        setup.log.lock().unwrap()
    );
}

#[test]
fn a_trickled_handshake_is_cut_at_its_deadline() {
    let setup = good_job_around(
        "trickle",
        |c| c.hello_timeout = Duration::from_millis(300),
        |setup| {
            let mut s = connect(&setup.path);
            let h = hello("trickle", 0, 1, 78);
            for b in &h[..6] {
                s.write_all(&[*b]).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(closed_by_server(&mut s));
        },
    );
    assert!(
        logged(&setup, "no complete Hello within"),
        "{:?}",
        setup.log.lock().unwrap()
    );
    assert!(setup.service.job(&ROOT, "trickle").is_err());
}

#[test]
fn a_flood_of_connections_is_cut_at_the_users_limit() {
    let setup = good_job_around(
        "flood",
        |c| {
            c.max_connections_per_user = 10;
            c.hello_timeout = Duration::from_millis(500);
        },
        |setup| {
            let mut flood: Vec<_> = (0..40).map(|_| connect(&setup.path)).collect();
            // The good job holds 2: 8 more are accepted, the rest cut at once,
            // and the 8 at their handshake's deadline.
            for s in &mut flood {
                assert!(closed_by_server(s));
            }
        },
    );
    // 32 cut at accept; the 8 others at their handshake's deadline.
    assert_eq!(setup.service.stats().cut, 32, "{:?}", setup.service.stats());
    assert!(
        logged(&setup, "the limit per user"),
        "{:?}",
        setup.log.lock().unwrap()
    );
    assert!(
        logged(&setup, "no complete Hello within"),
        "{:?}",
        setup.log.lock().unwrap()
    );
}

#[test]
fn a_stream_claiming_a_rank_already_streaming_is_cut() {
    let setup = good_job_around(
        "impostor",
        |_| {},
        |setup| {
            let mut s = connect(&setup.path);
            let mut bytes = hello("good", 0, 2, 999);
            bytes.extend(work(0, 2, 5000));
            let _ = s.write_all(&bytes);
            assert!(closed_by_server(&mut s));
        },
    );
    assert!(
        logged(&setup, "world rank 0 is already streaming"),
        "{:?}",
        setup.log.lock().unwrap()
    );
}

#[test]
fn a_job_over_the_limit_is_refused_and_the_others_go_on() {
    let setup = good_job_around(
        "limit",
        |c| c.max_jobs = 1,
        |setup| {
            let mut s = connect(&setup.path);
            s.write_all(&hello("second", 0, 1, 80)).unwrap();
            assert!(closed_by_server(&mut s));
        },
    );
    assert!(
        logged(&setup, "its limit (--max-jobs)"),
        "{:?}",
        setup.log.lock().unwrap()
    );
    assert_eq!(setup.service.stats().refused_jobs, 1);
}

#[test]
fn over_tcp_only_streams_proving_the_site_token_once_get_in_and_only_admins_see_them() {
    let token = "0123456789abcdef0123";
    let setup = start("tcp", false, |c| {
        c.listen = "tcp:127.0.0.1:0".into();
        c.token = Some(token.into());
    });
    let addr = setup
        .service
        .addr()
        .strip_prefix("tcp:")
        .unwrap()
        .to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let bytes_of = tcp_stream;
    let send = |bytes: &[u8]| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(bytes);
        s
    };
    // Cut, with at most one word first: a Refused control frame that
    // says why (the probe then says so).
    let cut = |mut s: std::net::TcpStream| {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        if !got.is_empty() {
            let (c, used) = hark_wire::Control::take(&got).unwrap().unwrap();
            assert_eq!(c.action, hark_wire::Action::Refused);
            assert_eq!(used, got.len(), "only the refusal came back");
        }
    };
    let good = bytes_of(Ok(token), "site", now);
    for (bytes, why) in [
        (bytes_of(Err(""), "no-token", now), "without the site token"),
        (
            bytes_of(Ok("not-the-token-at-all"), "wrong-token", now),
            "without the site token",
        ),
        (
            bytes_of(Err(token), "in-clear", now),
            "with the site token in clear",
        ),
        (
            bytes_of(Ok(token), "too-old", now - 3_600_000_000_000),
            "beyond the 300 s a handshake may be old",
        ),
    ] {
        cut(send(&bytes));
        assert!(logged(&setup, why), "{why}");
    }
    drop(send(&good));
    let site = run_of(&setup, "site");
    assert_eq!((site.analysed, site.partial), (N, 0));
    // The same bytes again: a replay.
    cut(send(&good));
    assert!(logged(&setup, "already accepted (a replayed stream)"));
    let listed = setup.service.jobs(&ROOT);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].owner, None);
    let user = hark_server::Viewer {
        uid: 1000,
        admin: false,
    };
    assert!(setup.service.jobs(&user).is_empty());
}

/// A whole TCP stream of job `job`: a Hello proving `secret` (`Ok`), or
/// with the field as it is (`Err`), work, and its end.
fn tcp_stream(secret: Result<&str, &str>, job: &str, realtime_ns: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut hello = hark_wire::Hello {
        program: "app".into(),
        argv: vec!["./app".into()],
        host: "node0".into(),
        pid: 42,
        rank: 0,
        size: 1,
        job: job.into(),
        clock: hark_wire::ClockSource::Monotonic,
        clock_ns: 1_000,
        realtime_ns,
        pack_size: 1 << 20,
        secret: String::new(),
        parent: 0,
    };
    match secret {
        Ok(s) => {
            // One nonce per job: the same job's bytes again are a replay.
            let mut nonce = *b"nonce-of-a-job-1";
            for (n, b) in nonce.iter_mut().zip(job.bytes()) {
                *n ^= b;
            }
            hello.prove(s, nonce)
        }
        Err(field) => hello.secret = field.into(),
    }
    hello.encode(&mut bytes);
    bytes.extend(work(0, 1, N));
    bytes.extend(end(N));
    bytes
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Over TCP with per-user tokens: a stream proving a user's token is that
/// user's job, seen by them and not by another user; the site token's is
/// nobody's; a stream proving neither is told why and cut.
#[test]
fn over_tcp_a_users_token_makes_the_job_theirs() {
    let setup = start("tcp-users", false, |c| {
        c.listen = "tcp:127.0.0.1:0".into();
        c.token = Some("0123456789abcdef-site".into());
        c.users = vec![hark_server::UserToken {
            token: "0123456789abcdef-ann".into(),
            uid: 1000,
            name: "ann".into(),
        }];
    });
    let addr = setup
        .service
        .addr()
        .strip_prefix("tcp:")
        .unwrap()
        .to_string();
    let send = |bytes: &[u8]| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(bytes).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        back
    };
    send(&tcp_stream(Ok("0123456789abcdef-ann"), "anns", now_ns()));
    send(&tcp_stream(Ok("0123456789abcdef-site"), "sites", now_ns()));
    let back = send(&tcp_stream(Ok("0123456789abcdef-bob"), "bobs", now_ns()));
    let (c, _) = hark_wire::Control::take(&back).unwrap().unwrap();
    assert_eq!(
        (c.action, c.seq),
        (hark_wire::Action::Refused, hark_wire::REFUSED_TOKEN)
    );
    assert!(logged(&setup, "without the site token or a user's token"));
    let anns = run_of(&setup, "anns");
    assert_eq!((anns.analysed, anns.partial), (N, 0));
    let ann = hark_server::Viewer {
        uid: 1000,
        admin: false,
    };
    let other = hark_server::Viewer {
        uid: 1001,
        admin: false,
    };
    let theirs: Vec<Option<u32>> = setup.service.jobs(&ann).iter().map(|j| j.owner).collect();
    assert_eq!(theirs, [Some(1000)]);
    assert!(setup.service.jobs(&other).is_empty());
    let owners: Vec<(String, Option<u32>)> = setup
        .service
        .jobs(&ROOT)
        .into_iter()
        .map(|j| (j.job, j.owner))
        .collect();
    assert!(owners.contains(&("sites".into(), None)), "{owners:?}");
    assert_eq!(
        setup
            .service
            .user_of_token("0123456789abcdef-ann")
            .map(|u| u.uid),
        Some(1000)
    );
    assert!(setup
        .service
        .user_of_token("0123456789abcdef-site")
        .is_none());
    assert!(setup.service.is_site_token("0123456789abcdef-site"));
}
