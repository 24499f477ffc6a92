//! `hark serve` across a network: its certificate (`--tls-cert`,
//! `--tls-key`), its users' tokens (`--tokens`), and the control requests
//! that come on its TCP listener (`docs/api.md`, "Control over TCP").
//!
//! On a Unix socket the kernel names who connected; across a network only
//! a secret can. A user's token, proved in a stream's `Hello` (an HMAC under
//! a fresh nonce, so it never crosses the wire) makes the stream that
//! user's; carried in a control request, inside TLS, it makes the request
//! theirs. A request over plaintext TCP is refused: there the token would
//! cross in clear.

use crate::serve_files::service_uid;
use anyhow::{bail, Context, Result};
use hark_server::{OnRequest, Service, UserToken, Viewer};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// The service's TLS configuration, when it has a certificate.
pub fn tls_config(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<Arc<hark_tls::rustls::ServerConfig>>> {
    match (cert, key) {
        (Some(c), Some(k)) => Ok(Some(
            hark_tls::server_config(c, k).map_err(|e| anyhow::anyhow!("{e}"))?,
        )),
        (None, None) => Ok(None),
        _ => bail!("TLS needs both the certificate and its key: --tls-cert FILE --tls-key FILE"),
    }
}

/// Reads a tokens file: one `TOKEN USER` per line (`#` starts a comment),
/// each user a local account. The file must be the service's own (root's
/// for a machine-wide service) and readable by nobody else: whoever can
/// read it can act as every user in it.
pub fn read_tokens(path: &Path) -> Result<Vec<UserToken>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot read the tokens file {}", path.display()))?;
    let me = service_uid();
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        bail!(
            "the tokens file {} must be a regular file owned by uid {me} (the service's user) and readable by it alone: chown {me} {0} && chmod 600 {0}",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the tokens file {}", path.display()))?;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let mut users: Vec<UserToken> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{}, line {}", path.display(), n + 1);
        let mut words = line.split_whitespace();
        let (Some(token), Some(name), None) = (words.next(), words.next(), words.next()) else {
            bail!("{}: expected `TOKEN USER`", at());
        };
        if token.len() < 16 || token.contains('@') || token.contains(':') {
            bail!(
                "{}: a token must be at least 16 characters, with no `@` or `:`",
                at()
            );
        }
        let Some(uid) = uid_of(&passwd, name) else {
            bail!("{}: no user {name:?} in /etc/passwd", at());
        };
        if users.iter().any(|u| u.token == token) {
            bail!("{}: this token is given twice", at());
        }
        users.push(UserToken {
            token: token.to_string(),
            uid,
            name: name.to_string(),
        });
    }
    if users.is_empty() {
        bail!(
            "the tokens file {} holds no `TOKEN USER` line",
            path.display()
        );
    }
    Ok(users)
}

fn uid_of(passwd: &str, name: &str) -> Option<u32> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[0] == name)
            .then(|| f[2].parse().ok())
            .flatten()
    })
}

/// What answers the control requests of the TCP listener: the request's
/// `token` names the user (as `SO_PEERCRED` does on the control socket),
/// and the request is then answered as on the control socket.
pub fn answerer(service: Weak<Service>, admin_gid: Option<u32>, index: PathBuf) -> Arc<OnRequest> {
    Arc::new(move |line: &str, secure: bool| {
        let answer = match service.upgrade() {
            Some(s) => answer(&s, admin_gid, &index, line, secure),
            None => json!({"ok": false, "error": "the service is stopping"}),
        };
        answer.to_string()
    })
}

const NO_TOKEN: &str = "this request carries no user's token of this service (its --tokens file): give yours with --token-file FILE";

fn answer(
    service: &Service,
    admin_gid: Option<u32>,
    index: &Path,
    line: &str,
    secure: bool,
) -> Value {
    let fail = |e: &str| json!({"ok": false, "error": e});
    if !secure {
        return fail("control requests over TCP need TLS, so that the token is not sent in clear: this service has no certificate (hark serve --tls-cert, --tls-key); on its host, use its control socket");
    }
    let req: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return fail(&format!("the request is not JSON: {e}")),
    };
    let token = req["token"].as_str().unwrap_or("");
    let user = service.user_of_token(token);
    if req["op"] == "hello" {
        // What `hark run --server` asks first: whom the service takes
        // it for (the site token runs jobs that belong to no user).
        return match user {
            Some(u) => json!({"ok": true, "user": u.name, "uid": u.uid}),
            None if service.is_site_token(token) => json!({"ok": true, "user": null}),
            None => fail(NO_TOKEN),
        };
    }
    let Some(user) = user else {
        return fail(NO_TOKEN);
    };
    let uid = user.uid;
    let admin = uid == 0 || admin_gid.is_some_and(|g| crate::serve::user_in_group(uid, g));
    let viewer = Viewer { uid, admin };
    if crate::serve_index::is_runs_request(line) {
        crate::serve_index::answer_runs(index, &viewer, line)
    } else {
        crate::serve::handle(service, &viewer, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_tokens_file_names_local_users_and_must_be_private() {
        let dir = std::env::temp_dir().join(format!("hark-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("tokens");
        std::fs::write(&f, "# token user\n0123456789abcdef-root root\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_tokens(&f).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let users = read_tokens(&f).unwrap();
        assert_eq!((users[0].uid, users[0].name.as_str()), (0, "root"));
        assert!(!format!("{users:?}").contains("0123456789abcdef"));
        for (bad, says) in [
            ("short root\n", "at least 16"),
            ("0123456789abcdef-x nobody-here-at-all\n", "no user"),
            (
                "0123456789abcdef-x root\n0123456789abcdef-x root\n",
                "twice",
            ),
            ("0123456789abcdef-x\n", "TOKEN USER"),
            ("# nothing\n", "holds no"),
        ] {
            std::fs::write(&f, bad).unwrap();
            let e = read_tokens(&f).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
