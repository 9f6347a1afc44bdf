//! A small backup service on a loopback port, for the `backup-job`
//! example: it keeps a count of remote backups per `NAMESPACE/NAME`, and
//! can be told to fail (500) or to hang (never answer).
//!
//! `GET /v1/backups/NS/NAME` answers `{"backups": N}`. `DELETE` of the same
//! path answers `202` the first time (the deletion is in progress), then
//! `204` (done: the count drops to 0), then `404` (nothing left). A few
//! names serve the sandbox's tests: `redirect-out` redirects to another
//! origin, `redirect-in` to `NAME` `redirected` on this one, and `big`
//! answers a 2 MiB body.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

/// How the service behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As described above.
    Ok,
    /// Every request: `500`.
    Fail,
    /// Every request: no answer, ever.
    Hang,
}

/// One request the service received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `DELETE`, ...
    pub method: String,
    /// The path.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Inner {
    mode: Option<Mode>,
    /// Deletes seen per backup.
    deletes: HashMap<String, u32>,
    seen: Vec<Seen>,
}

/// The running service; stops when dropped.
pub struct BackupService {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

/// Backups each parent has until they are deleted.
pub const BACKUPS: u64 = 3;

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    method: Method,
    headers: HeaderMap,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    let mode = {
        let mut inner = inner.lock().unwrap();
        inner.seen.push(Seen {
            method: method.to_string(),
            path: format!("/v1/backups/{ns}/{name}"),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        });
        inner.mode.unwrap_or(Mode::Ok)
    };
    match mode {
        Mode::Fail => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "backup store down").into_response();
        }
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Ok => {}
    }
    match name.as_str() {
        "redirect-out" => {
            return (
                StatusCode::FOUND,
                [(header::LOCATION, "http://127.0.0.1:9/x")],
            )
                .into_response();
        }
        "redirect-in" => {
            let to = format!("/v1/backups/{ns}/redirected");
            return (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response();
        }
        "big" => return vec![b'x'; 2 << 20].into_response(),
        _ => {}
    }
    let key = format!("{ns}/{name}");
    let mut inner = inner.lock().unwrap();
    let deletes = inner.deletes.get(&key).copied().unwrap_or(0);
    if method == Method::DELETE {
        inner.deletes.insert(key, deletes + 1);
        return match deletes {
            0 => (StatusCode::ACCEPTED, "deleting").into_response(),
            1 => StatusCode::NO_CONTENT.into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        };
    }
    let backups = if deletes >= 2 { 0 } else { BACKUPS };
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!("{{\"backups\": {backups}}}"),
    )
        .into_response()
}

impl BackupService {
    /// Start on a free loopback port.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/backups/{ns}/{name}", any(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Behave as `mode` from now on.
    pub fn set_mode(&self, mode: Mode) {
        self.inner.lock().unwrap().mode = Some(mode);
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Requests received with `method`.
    pub fn count(&self, method: &str) -> usize {
        self.seen().iter().filter(|s| s.method == method).count()
    }
}

impl Drop for BackupService {
    fn drop(&mut self) {
        self.task.abort();
    }
}
