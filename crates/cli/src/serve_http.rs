//! `hark serve --http HOST:PORT`: the control route of the HTTP API,
//! `POST /api/runs/{id}/control` (`docs/api.md`, "HTTP").
//!
//! Who asks is found as on the Unix sockets, from the kernel: the route
//! listens on localhost only, and a localhost connection's client socket is
//! a line of `/proc/net/tcp` (or `tcp6`) whose `uid` column is its owner's.
//! A request whose owner cannot be found is refused.

use crate::serve::command_of;
use anyhow::{bail, Context, Result};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use hark_server::{Service, Viewer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;

/// The running route: stop it with [`Http::stop`] before the service ends.
pub struct Http {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Where it listens.
    pub addr: SocketAddr,
}

struct Ctx {
    service: Arc<Service>,
    local: SocketAddr,
    admin_gid: Option<u32>,
}

/// Binds `addr` (localhost only) and serves the control route on a thread
/// of its own.
pub fn start(addr: &str, service: Arc<Service>, admin_gid: Option<u32>) -> Result<Http> {
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("cannot bind the HTTP address {addr}"))?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        bail!("--http {addr} is not localhost: the HTTP API tells users apart only on localhost");
    }
    listener.set_nonblocking(true)?;
    let ctx = Arc::new(Ctx {
        service,
        local,
        admin_gid,
    });
    let app = Router::new()
        .route("/api/runs/{id}/control", post(control))
        .with_state(ctx);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the HTTP runtime")?;
    let thread = std::thread::Builder::new()
        .name("hark-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let _ = axum::serve(l, app.into_make_service_with_connect_info::<SocketAddr>())
                    .with_graceful_shutdown(async {
                        let _ = rx.await;
                    })
                    .await;
            })
        })
        .context("cannot start the HTTP thread")?;
    Ok(Http {
        stop: Some(tx),
        thread: Some(thread),
        addr: local,
    })
}

impl Http {
    /// Stops serving and waits for requests under way.
    pub fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn control(
    State(ctx): State<Arc<Ctx>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    body: String,
) -> (StatusCode, Json<Value>) {
    let fail = |code: StatusCode, e: String| (code, Json(json!({"ok": false, "error": e})));
    let Some(uid) = uid_of_local_client(peer, ctx.local) else {
        return fail(
            StatusCode::FORBIDDEN,
            "cannot tell which user connected (only localhost clients are served)".into(),
        );
    };
    let admin = uid == 0
        || ctx
            .admin_gid
            .is_some_and(|g| crate::serve::user_in_group(uid, g));
    let req: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => {
            return fail(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        }
    };
    let cmd = match command_of(&req) {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let service = ctx.service.clone();
    let viewer = Viewer { uid, admin };
    let done = tokio::task::spawn_blocking(move || service.control(&viewer, &id, cmd)).await;
    match done {
        Ok(Ok(dir)) => (
            StatusCode::OK,
            Json(json!({"ok": true, "dir": dir.map(|d| d.display().to_string())})),
        ),
        Ok(Err(e)) => {
            let code = match e.kind() {
                hark_server::ErrorKind::NoSuchJob(_) => StatusCode::NOT_FOUND,
                hark_server::ErrorKind::NotYours(_) => StatusCode::FORBIDDEN,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            };
            fail(code, e.to_string())
        }
        Err(e) => fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The uid owning the client end of a localhost TCP connection from
/// `peer` to `local`, from `/proc/net/tcp` or `/proc/net/tcp6`.
pub fn uid_of_local_client(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    if !peer.ip().is_loopback() {
        return None;
    }
    let (file, want_local, want_remote) = match (peer, local) {
        (SocketAddr::V4(p), SocketAddr::V4(l)) => (
            "/proc/net/tcp",
            hex4(p.ip().octets(), p.port()),
            hex4(l.ip().octets(), l.port()),
        ),
        (SocketAddr::V6(p), SocketAddr::V6(l)) => (
            "/proc/net/tcp6",
            hex6(p.ip().octets(), p.port()),
            hex6(l.ip().octets(), l.port()),
        ),
        _ => return None,
    };
    let table = std::fs::read_to_string(file).ok()?;
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1] == want_local && f[2] == want_remote)
            .then(|| f[7].parse().ok())
            .flatten()
    })
}

/// An IPv4 address and port as `/proc/net/tcp` writes them: the address
/// as one host-order 32-bit word in hex, the port in hex.
fn hex4(octets: [u8; 4], port: u16) -> String {
    format!("{:08X}:{port:04X}", u32::from_ne_bytes(octets))
}

fn hex6(octets: [u8; 16], port: u16) -> String {
    let words: String = octets
        .chunks(4)
        .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    format!("{words}:{port:04X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_localhost_clients_owner_is_read_from_the_kernels_table() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = server.local_addr().unwrap();
        let client = std::net::TcpStream::connect(local).unwrap();
        let (_, peer) = server.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        assert_eq!(uid_of_local_client(peer, local), Some(me));
        let elsewhere: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(uid_of_local_client(elsewhere, local), None);
    }
}
