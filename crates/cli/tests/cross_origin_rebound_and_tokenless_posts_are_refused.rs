//! `hark serve --http` acts only on requests a page of its own could send:
//! a POST from a page of another origin, one whose `Host` is a name that
//! was pointed at 127.0.0.1 (DNS rebinding), one that is not JSON, and one
//! without the viewer's CSRF token are each refused and do nothing; a
//! request with all of these right (what the page's buttons send) is
//! served. A GET with a foreign `Host` is refused too.

mod common;
mod served;

use common::*;
use served::*;
use std::io::{Read, Write};

/// The parts of a request the service checks.
#[derive(Clone, Copy)]
struct Ask<'a> {
    method: &'a str,
    host: &'a str,
    origin: Option<&'a str>,
    content_type: &'a str,
    csrf: Option<&'a str>,
}

/// Sends `ask` for `path` to `addr` (`HOST:PORT`): the status.
fn send(addr: &str, path: &str, ask: &Ask) -> u16 {
    let body = r#"{"action":"dump"}"#;
    let mut head = format!(
        "{} /{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        ask.method,
        ask.host,
        ask.content_type,
        body.len()
    );
    if let Some(o) = ask.origin {
        head.push_str(&format!("Origin: {o}\r\n"));
    }
    if let Some(t) = ask.csrf {
        head.push_str(&format!("X-Hark-Csrf: {t}\r\n"));
    }
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "{head}\r\n{body}").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn foreign_origins_hosts_types_and_missing_tokens_are_refused() {
    let dir = scratch("csrf");
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let job = served.run(None, &["sh".to_string(), "-c".into(), wait]);
    let id = served.wait_jobs("the job registered", |j| j.len() == 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let url = served.url();
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let port = addr.rsplit_once(':').unwrap().1;
    let csrf = served.csrf(None);
    let own_origin = format!("http://{addr}");
    let rebound = format!("rebound.example:{port}");
    let control = format!("api/runs/{id}/control");
    let good = Ask {
        method: "POST",
        host: addr,
        origin: Some(&own_origin),
        content_type: "application/json",
        csrf: Some(&csrf),
    };

    for (what, ask, status) in [
        (
            "a page of another origin",
            Ask {
                origin: Some("http://evil.example"),
                ..good
            },
            403,
        ),
        (
            "a sandboxed page (origin null)",
            Ask {
                origin: Some("null"),
                ..good
            },
            403,
        ),
        (
            "a rebound name",
            Ask {
                host: &rebound,
                origin: None,
                ..good
            },
            403,
        ),
        (
            "a form's text/plain",
            Ask {
                content_type: "text/plain",
                ..good
            },
            415,
        ),
        (
            "a form's urlencoded body",
            Ask {
                content_type: "application/x-www-form-urlencoded",
                ..good
            },
            415,
        ),
        ("no CSRF token", Ask { csrf: None, ..good }, 403),
        (
            "another's CSRF token",
            Ask {
                csrf: Some("0123456789abcdef0123456789abcdef"),
                ..good
            },
            403,
        ),
    ] {
        assert_eq!(send(addr, &control, &ask), status, "{what}");
    }
    assert_eq!(
        send(
            addr,
            "api/runs",
            &Ask {
                method: "GET",
                host: &rebound,
                origin: None,
                ..good
            }
        ),
        403,
        "a GET under a rebound name"
    );
    assert!(served.dumps(None).is_empty(), "a refused request acted");

    // What the page sends is served, also named as localhost.
    assert_eq!(send(addr, &control, &good), 200);
    let localhost = format!("localhost:{port}");
    let localhost_origin = format!("http://{localhost}");
    let named = Ask {
        host: &localhost,
        origin: Some(&localhost_origin),
        ..good
    };
    assert_eq!(send(addr, &control, &named), 200);
    assert_eq!(served.dumps(None).len(), 2);

    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "the job");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
