//! Who may use a live server, and how much of it: the connection loop under
//! [`Live::serve`](crate::Live::serve), and the checks every request passes
//! before a route sees it.
//!
//! A connection is identified once, as it is accepted ([`Access::identify`]):
//! the kernel's word on the client's socket is only trustworthy while that
//! socket is open and connected, so it is asked before anything is read, and
//! a client that cannot be named is answered 403 on every request. Then each
//! request is checked, cheapest first:
//!
//! - the path token, when the server has one (`hark run`, `hark open`):
//!   anything outside `/TOKEN/` is not found, so a user who does not hold
//!   the printed URL learns nothing;
//! - `Host`: this server's own address (`localhost`, an IP address, or the
//!   machine's name, with the listening port), so that a page whose domain
//!   was re-pointed at 127.0.0.1 (DNS rebinding) is not answered;
//! - `Origin`, when sent: this server's own, so a page of another origin
//!   gets nothing, even a request it did not mean to read;
//! - on any method but `GET` and `HEAD`: `Content-Type: application/json`
//!   and the client's CSRF token in `X-Hark-Csrf` (the page carries it;
//!   scripts read it from `GET /api/session`). A cross-origin page can send
//!   neither without a preflight this server never answers.
//!
//! Connections are bounded ([`Limits`]): in number, per user and overall,
//! and in time (a connection that sends no whole request head for
//! [`Limits::idle`] is closed), so that HTTP clients can never take the
//! descriptors the rest of the process needs.

use crate::Error;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderMap, Method, Request, Response, StatusCode, Uri};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Names the user at the other end of a connection from the client's and
/// the server's addresses: `Ok(Some(uid))`, a known user; `Ok(None)`,
/// admitted without a name (the path token then decides); `Err(why)`,
/// refused, `why` said to the client. Called once per connection, as it is
/// accepted, off the server's thread.
pub type Identify =
    Arc<dyn Fn(SocketAddr, SocketAddr) -> Result<Option<u32>, String> + Send + Sync>;

/// How many connections a live server keeps open, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections at most, all clients together; one more is closed
    /// at once with a 503.
    pub max_connections: usize,
    /// Open connections at most of one user (of the unnamed clients
    /// together, when the server names none).
    pub max_per_user: usize,
    /// A connection that has sent no whole request head this long after it
    /// opened or after its last answer is closed; a request body must also
    /// arrive within it.
    pub idle: Duration,
}

impl Default for Limits {
    /// 256 connections, 32 per user, 10 s idle: a browser opens 6 per
    /// host, `hark top` and `hark query` one each, and the page asks
    /// once a second.
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            max_per_user: 32,
            idle: Duration::from_secs(10),
        }
    }
}

/// Who may use a live server: a path token, a way to name each
/// connection's user, and [`Limits`].
#[derive(Clone)]
pub struct Access {
    token: Option<String>,
    identify: Option<Identify>,
    limits: Limits,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("identify", &self.identify.is_some())
            .field("limits", &self.limits)
            .finish()
    }
}

impl Access {
    /// Served under a random path token (`http://HOST:PORT/TOKEN/`), so
    /// that only who holds the printed URL is answered: `hark run`'s and
    /// `hark open`'s view. Fails only if the system gives no random bytes.
    pub fn private() -> std::io::Result<Access> {
        Ok(Access {
            token: Some(random_hex(16)?),
            identify: None,
            limits: Limits::default(),
        })
    }

    /// Served at the root, every connection named by `identify` (a refused
    /// one gets 403): `hark serve`'s view, whose users are told apart by
    /// the kernel.
    pub fn identified(identify: Identify) -> Access {
        Access {
            token: None,
            identify: Some(identify),
            limits: Limits::default(),
        }
    }

    /// The same, each connection also named (or refused) by `identify`.
    pub fn with_identify(mut self, identify: Identify) -> Access {
        self.identify = Some(identify);
        self
    }

    /// The same, with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Access {
        self.limits = limits;
        self
    }

    /// The path token, if the server has one.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }
}

/// Who sent a request, as the connection loop found out: put into every
/// request's extensions (`axum::Extension<Client>`) before the routes.
#[derive(Clone, Debug)]
pub struct Client {
    /// The user [`Access`]'s identify named; `None` when the server names
    /// none.
    pub uid: Option<u32>,
    /// This user's CSRF token: what `X-Hark-Csrf` must carry on a `POST`.
    pub csrf: Arc<str>,
}

/// `n` random bytes from the kernel, in hex.
fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares without stopping at the first difference, so that the time
/// taken says nothing of how much of a guess was right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// What every connection task shares.
struct Shared {
    access: Access,
    local: SocketAddr,
    /// The machine's name, an acceptable `Host` beside `localhost` and IP
    /// addresses.
    hostname: Option<String>,
    csrf: Mutex<HashMap<Option<u32>, Arc<str>>>,
    open: Mutex<Open>,
}

/// Connections open now, all together and per user.
#[derive(Default)]
struct Open {
    all: usize,
    per_user: HashMap<Option<u32>, usize>,
}

/// One open connection's place in [`Open`], given back when dropped.
struct Slot {
    shared: Arc<Shared>,
    user: Option<Option<u32>>,
}

impl Slot {
    fn take(shared: &Arc<Shared>) -> Option<Slot> {
        let mut open = shared.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.all >= shared.access.limits.max_connections {
            return None;
        }
        open.all += 1;
        Some(Slot {
            shared: shared.clone(),
            user: None,
        })
    }

    /// Counts the connection as `uid`'s; `false` if they have too many.
    fn admit(&mut self, uid: Option<u32>) -> bool {
        let mut open = self.shared.open.lock().unwrap_or_else(|e| e.into_inner());
        let mine = open.per_user.entry(uid).or_default();
        if *mine >= self.shared.access.limits.max_per_user {
            return false;
        }
        *mine += 1;
        self.user = Some(uid);
        true
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.shared.open.lock().unwrap_or_else(|e| e.into_inner());
        open.all -= 1;
        if let Some(uid) = self.user {
            if let Some(n) = open.per_user.get_mut(&uid) {
                *n -= 1;
                if *n == 0 {
                    open.per_user.remove(&uid);
                }
            }
        }
    }
}

/// Accepts and serves connections on `listener` until `stop` fires, then
/// lets every connection finish the request it is answering and waits for
/// them.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    access: Access,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), Error> {
    let local = listener.local_addr().map_err(|source| Error {
        addr: "?".into(),
        source,
    })?;
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty());
    let shared = Arc::new(Shared {
        access,
        local,
        hostname,
        csrf: Mutex::default(),
        open: Mutex::default(),
    });
    let (drain, draining) = tokio::sync::watch::channel(false);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors, most often: wait for some to be
                    // given back rather than spin.
                    eprintln!("hark: the live view cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(slot) = Slot::take(&shared) else {
            turn_away(
                stream,
                "too many HTTP connections are open; try again later",
            );
            continue;
        };
        tokio::spawn(connection(
            shared.clone(),
            app.clone(),
            stream,
            peer,
            slot,
            draining.clone(),
        ));
    }
    drop(listener);
    drop(draining);
    let _ = drain.send(true);
    drain.closed().await;
    Ok(())
}

/// Answers 503 without reading the request, as far as the socket's buffer
/// takes it at once, and closes.
fn turn_away(stream: tokio::net::TcpStream, why: &str) {
    let body = format!("{{\"ok\":false,\"error\":\"{why}\"}}");
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// One connection: named, counted, then served until it closes, idles
/// past the limit, or the server stops.
async fn connection(
    shared: Arc<Shared>,
    app: Router,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    mut slot: Slot,
    mut draining: tokio::sync::watch::Receiver<bool>,
) {
    let who = match shared.access.identify.clone() {
        None => Ok(None),
        Some(identify) => {
            let local = shared.local;
            tokio::task::spawn_blocking(move || identify(peer, local))
                .await
                .unwrap_or_else(|e| Err(format!("naming the client failed: {e}")))
        }
    };
    let client = match who {
        Ok(uid) => {
            if !slot.admit(uid) {
                turn_away(
                    stream,
                    "this user has too many HTTP connections open; close some",
                );
                return;
            }
            match shared.csrf_of(uid) {
                Ok(csrf) => Ok(Client { uid, csrf }),
                Err(e) => Err(format!("cannot make a CSRF token: {e}")),
            }
        }
        Err(why) => Err(why),
    };
    let refused = client.is_err();
    let service = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let checked = match &client {
                Ok(client) => shared.check(req, client, peer),
                Err(why) => Err(answer(StatusCode::FORBIDDEN, why)),
            };
            let mut app = app.clone();
            async move {
                match checked {
                    Ok(req) => tower_service::Service::call(&mut app, req).await,
                    Err(refusal) => Ok::<_, Infallible>(*refusal),
                }
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.access.limits.idle)
        .keep_alive(!refused);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = draining.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    drop(slot);
}

/// The answer that refuses a request (boxed: a result's error is moved
/// around more often than it is made).
type Refusal = Box<Response<Body>>;

/// A refusal, in the API's error form.
fn answer(code: StatusCode, why: &str) -> Refusal {
    let body = serde_json::json!({ "ok": false, "error": why }).to_string();
    Box::new(
        Response::builder()
            .status(code)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-store")
            .body(Body::from(body))
            .unwrap_or_default(),
    )
}

impl Shared {
    fn csrf_of(&self, uid: Option<u32>) -> std::io::Result<Arc<str>> {
        let mut tokens = self.csrf.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = tokens.get(&uid) {
            return Ok(t.clone());
        }
        let t: Arc<str> = random_hex(16)?.into();
        tokens.insert(uid, t.clone());
        Ok(t)
    }

    /// The request as the routes see it (path token taken off, client
    /// named), or the answer that refuses it.
    fn check(
        &self,
        req: Request<Incoming>,
        client: &Client,
        peer: SocketAddr,
    ) -> Result<Request<Body>, Refusal> {
        let mut req = req.map(Body::new);
        if let Some(token) = &self.access.token {
            *req.uri_mut() = self.under_token(req.uri(), token)?;
        }
        let headers = req.headers();
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.own(h)) {
            return Err(answer(
                StatusCode::FORBIDDEN,
                &format!(
                    "the Host header ({}) does not name this server ({}); ask for {} itself",
                    host.unwrap_or("none"),
                    self.local,
                    self.local
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let own = origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix("http://"))
                .is_some_and(|o| self.own(o));
            if !own {
                return Err(answer(
                    StatusCode::FORBIDDEN,
                    "a request from a page of another origin is refused",
                ));
            }
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            unsafe_method_allowed(headers, &client.csrf)?;
        }
        req.extensions_mut().insert(client.clone());
        req.extensions_mut().insert(ConnectInfo(peer));
        Ok(req)
    }

    /// `uri` without the leading `/TOKEN`, or a refusal: 404 for any other
    /// path (nothing is said of what is there), a redirect for `/TOKEN`
    /// without its slash (the page's addresses are relative to it).
    fn under_token(&self, uri: &Uri, token: &str) -> Result<Uri, Refusal> {
        let path = uri.path();
        let rest = path.strip_prefix('/').and_then(|p| {
            p.get(..token.len())
                .filter(|t| same(t, token))
                .map(|_| &p[token.len()..])
        });
        match rest {
            Some("") => Err(Box::new(
                Response::builder()
                    .status(StatusCode::PERMANENT_REDIRECT)
                    .header(header::LOCATION, format!("/{token}/"))
                    .body(Body::empty())
                    .unwrap_or_default(),
            )),
            Some(rest) if rest.starts_with('/') => {
                let rest = match uri.query() {
                    Some(q) => format!("{rest}?{q}"),
                    None => rest.to_string(),
                };
                rest.parse()
                    .map_err(|_| answer(StatusCode::BAD_REQUEST, "malformed path"))
            }
            _ => Err(answer(
                StatusCode::NOT_FOUND,
                "not found: use the whole address hark printed, http://HOST:PORT/TOKEN/",
            )),
        }
    }

    /// Whether `host` (`NAME:PORT`, as `Host` or an origin carries it)
    /// is this server: its port, and `localhost`, an IP address, or the
    /// machine's name. A name anyone else chose (DNS rebinding) is not.
    fn own(&self, host: &str) -> bool {
        let (name, port) = match host.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((ip, rest)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => (ip, rest),
                _ => return false,
            },
            None => match host.rsplit_once(':') {
                Some((name, port)) => (name, &host[name.len()..][..port.len() + 1]),
                None => (host, ""),
            },
        };
        let port_ok = match port.strip_prefix(':') {
            Some(p) => p.parse::<u16>().ok() == Some(self.local.port()),
            None => port.is_empty() && self.local.port() == 80,
        };
        let name = name.to_ascii_lowercase();
        port_ok
            && (name == "localhost"
                || name.parse::<IpAddr>().is_ok()
                || self.hostname.as_deref() == Some(name.as_str()))
    }
}

/// A `POST` (or any method that acts) must say it sends JSON and carry the
/// client's CSRF token.
fn unsafe_method_allowed(headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(answer(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as Content-Type: application/json",
        ));
    }
    let token = headers.get("x-hark-csrf").and_then(|t| t.to_str().ok());
    if !token.is_some_and(|t| same(t, csrf)) {
        return Err(answer(
            StatusCode::FORBIDDEN,
            "missing or wrong X-Hark-Csrf header: send the `csrf` of GET /api/session",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(port: u16) -> Shared {
        Shared {
            access: Access::identified(Arc::new(|_, _| Ok(None))),
            local: SocketAddr::from(([127, 0, 0, 1], port)),
            hostname: Some("node7".into()),
            csrf: Mutex::default(),
            open: Mutex::default(),
        }
    }

    #[test]
    fn only_this_servers_own_names_are_its_host() {
        let s = shared(8123);
        for (host, own) in [
            ("127.0.0.1:8123", true),
            ("localhost:8123", true),
            ("LOCALHOST:8123", true),
            ("[::1]:8123", true),
            ("10.1.2.3:8123", true),
            ("node7:8123", true),
            ("127.0.0.1:8124", false),
            ("127.0.0.1", false),
            ("evil.example:8123", false),
            ("localhost.evil.example:8123", false),
            ("[::1]", false),
            ("[evil]:8123", false),
            ("", false),
        ] {
            assert_eq!(s.own(host), own, "{host}");
        }
    }
}
