//! A local user who POSTs to `hark serve --http` and closes the socket at
//! once must never be taken for another user. The kernel's table keeps a
//! closed client's row for a while (`FIN_WAIT`, `TIME_WAIT`) with uid 0:
//! read then, it made the client root, and root's job was dumped. Here a
//! non-root user tries a few hundred times, from several shells at once
//! (the service's one HTTP thread kept busy), to dump root's running job:
//! no dump is made, and the user still sees nothing of root's.

mod common;
mod served;

use common::*;
use served::*;

const USER: &str = "hark-t-eve";
/// Shells sending at once, and the requests each sends.
const SHELLS: usize = 4;
const TRIES: usize = 100;

#[test]
fn posts_from_closed_sockets_never_dump_roots_job() {
    if !root_or_skip() {
        return;
    }
    ensure_user(USER);
    let dir = scratch("closed-post");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let served = Served::start(&dir, &["--http", "127.0.0.1:0"]);
    let stop = dir.join("stop");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", stop.display());
    let job = served.run(None, &["sh".to_string(), "-c".into(), wait]);
    let jobs = served.wait_jobs("root's job registered", |j| j.len() == 1);
    let id = jobs[0]["id"].as_str().unwrap().to_string();

    let url = served.url();
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    let (host, port) = hostport.rsplit_once(':').unwrap();
    // The user's own token: all a user can have. A write that fails (a
    // connection turned away past the user's cap) is ignored, as an
    // attacker would, and kills no shell (SIGPIPE ignored).
    let csrf = served.csrf(Some(USER));
    let body = r#"{"action":"dump"}"#;
    let script = format!(
        "trap '' PIPE; for i in $(seq 1 {TRIES}); do \
           exec 3<>/dev/tcp/{host}/{port} || continue; \
           printf 'POST /api/runs/{id}/control HTTP/1.1\\r\\nHost: {hostport}\\r\\n\
Content-Type: application/json\\r\\nX-Hark-Csrf: {csrf}\\r\\nContent-Length: {}\\r\\n\\r\\n%s' '{body}' >&3 2>/dev/null; \
           exec 3>&-; \
         done; exit 0",
        body.len()
    );
    let shells: Vec<_> = (0..SHELLS)
        .map(|_| {
            as_user(Some(USER), "bash")
                .args(["-c", &script])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for shell in shells {
        let out = wait_within(shell, limit(), "the closing clients");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Whatever was accepted is answered by now.
    std::thread::sleep(std::time::Duration::from_secs(2));

    let dumps = served.dumps(None);
    assert!(
        dumps.is_empty(),
        "{USER} dumped root's job from a closed socket: {dumps:?}"
    );
    let (code, answer) = served.post(Some(USER), &format!("api/runs/{id}/control"), body, &[]);
    assert_eq!(code, "403", "{USER}'s open request: {answer}");
    let runs = as_user(Some(USER), "curl")
        .args(["-s", &format!("{url}api/runs")])
        .output_within()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&runs.stdout), "[]");
    // Root's own request, for contrast, is served.
    let (code, answer) = served.post(None, &format!("api/runs/{id}/control"), body, &[]);
    assert_eq!(code, "200", "{answer}");
    assert_eq!(served.dumps(None).len(), 1);

    std::fs::write(&stop, "").unwrap();
    let out = wait_within(job, limit(), "root's job");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
