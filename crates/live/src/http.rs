//! The routes: the page and the JSON API (`docs/api.md`).

use crate::interval::{self, Interval};
use crate::{Catalog, Client, Runs};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use std::collections::HashMap;
use std::sync::Arc;

/// The page, its script and style inline: nothing comes from the network.
const PAGE: &str = include_str!("page.html");

/// Bins of a timeline when the query does not say.
const DEFAULT_BINS: usize = 256;

/// Where the page carries the client's CSRF token: replaced as it is served.
const CSRF_SLOT: &str = "__HARK_CSRF__";

/// The live service over `runs`: `GET /` (the page), `GET /api/session`,
/// `GET /api/runs`, `GET /api/runs/{id}/profile`,
/// `GET /api/runs/{id}/timeline`. A server
/// that owns more routes (control, say) merges it into its own router.
pub fn router(runs: Arc<Runs>) -> Router {
    router_over(runs)
}

/// The same routes over any [`Catalog`]: each handler asks the catalog
/// with the request's `C::Viewer` extension, if a layer put one there.
pub fn router_over<C: Catalog>(catalog: Arc<C>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/session", get(session))
        .route("/api/runs", get(list::<C>))
        .route("/api/runs/{id}/profile", get(profile::<C>))
        .route("/api/runs/{id}/timeline", get(timeline::<C>))
        .with_state(catalog)
}

/// Who asks, if the server said (see [`Catalog::Viewer`]).
type Asker<C> = Option<Extension<<C as Catalog>::Viewer>>;

/// The page, with the client's CSRF token for its buttons.
async fn page(client: Option<Extension<Client>>) -> Response {
    let csrf = client.as_ref().map_or("", |c| &c.csrf);
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE.replace(CSRF_SLOT, csrf),
    )
        .into_response()
}

/// Who the server takes the client for, and the CSRF token a `POST` of
/// theirs must carry (`X-Hark-Csrf`).
async fn session(client: Option<Extension<Client>>) -> Response {
    let (uid, csrf) = client.map_or((None, None), |c| (c.uid, Some(c.csrf.to_string())));
    let body = serde_json::json!({ "uid": uid, "csrf": csrf }).to_string();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

async fn list<C: Catalog>(State(runs): State<Arc<C>>, who: Asker<C>) -> Response {
    blocking(move || Ok(serde_json::to_vec(&runs.list(who.as_ref().map(|w| &w.0))))).await
}

async fn profile<C: Catalog>(
    State(runs): State<Arc<C>>,
    who: Asker<C>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    blocking(move || {
        let iv = interval_of(&q)?;
        let run = runs
            .model(who.as_ref().map(|w| &w.0), &id)
            .ok_or_else(|| no_run(&id))?;
        Ok(if iv == Interval::default() {
            serde_json::to_vec(&*run)
        } else {
            serde_json::to_vec(&interval::profile(&run, iv))
        })
    })
    .await
}

async fn timeline<C: Catalog>(
    State(runs): State<Arc<C>>,
    who: Asker<C>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    blocking(move || {
        let iv = interval_of(&q)?;
        let bins = match q.get("bins") {
            None => DEFAULT_BINS,
            Some(v) => number("bins", v, "a whole number of bins")? as usize,
        };
        let run = runs
            .model(who.as_ref().map(|w| &w.0), &id)
            .ok_or_else(|| no_run(&id))?;
        Ok(serde_json::to_vec(&interval::timeline(&run, iv, bins)))
    })
    .await
}

/// `from_ns` and `to_ns` of a query string.
fn interval_of(q: &HashMap<String, String>) -> Result<Interval, (StatusCode, String)> {
    let get = |k: &str| {
        q.get(k)
            .map(|v| number(k, v, "a whole number of nanoseconds (0 or more)"))
            .transpose()
    };
    Interval {
        from_ns: get("from_ns")?,
        to_ns: get("to_ns")?,
    }
    .checked()
    .map_err(|e| (StatusCode::BAD_REQUEST, e))
}

/// `v`, the value of `key`, as a whole number; or a 400 saying it must be
/// `what`.
fn number(key: &str, v: &str, what: &str) -> Result<u64, (StatusCode, String)> {
    v.trim().parse().map_err(|_| {
        (
            StatusCode::BAD_REQUEST,
            format!("`{key}={v}` is not {what}"),
        )
    })
}

fn no_run(id: &str) -> (StatusCode, String) {
    (
        StatusCode::NOT_FOUND,
        format!("no run `{id}`: GET /api/runs lists the runs"),
    )
}

/// Runs `f` (a snapshot, then serialising: milliseconds of CPU) off the
/// runtime's one thread, and answers with its JSON or its error.
async fn blocking(
    f: impl FnOnce() -> Result<serde_json::Result<Vec<u8>>, (StatusCode, String)> + Send + 'static,
) -> Response {
    let json = [
        (header::CONTENT_TYPE, "application/json"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    let answer = match tokio::task::spawn_blocking(f).await {
        Ok(Ok(Ok(body))) => return (json, body).into_response(),
        Ok(Ok(Err(e))) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialise: {e}"),
        ),
        Ok(Err(e)) => e,
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the query failed: {e}"),
        ),
    };
    let body = serde_json::json!({ "error": answer.1 }).to_string();
    (answer.0, json, body).into_response()
}
