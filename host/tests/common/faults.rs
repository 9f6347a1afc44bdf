//! A fault-injecting HTTP proxy in front of an API server: it answers a
//! fraction of writes with 409 Conflict or a 5xx (some before forwarding
//! them, some after, so that a write can succeed while its client sees an
//! error), and cuts watch streams after a random while. Faults can be turned
//! off, and the upstream may go away and come back on the same address.
//! Clients speak plain HTTP to it, without credentials; it speaks HTTPS to
//! the API server with its bearer token (embedded) or an admin client
//! certificate (real).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Where the proxy forwards to, and with which credentials: the clients
/// send none.
pub struct Upstream {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The CA (PEM) that signed the server's certificate.
    pub ca_pem: String,
    /// A client certificate and key file (the real backend's admin).
    pub identity: Option<(PathBuf, PathBuf)>,
    /// A bearer token (the embedded backend's).
    pub token: Option<String>,
}

/// What the proxy does, changeable while it runs.
#[derive(Debug, Default)]
pub struct Faults {
    /// Inject at all.
    pub enabled: AtomicBool,
    /// Writes answered 409 without being forwarded, per mille.
    pub conflict_permille: AtomicU64,
    /// Writes answered 500/503, per mille: half before forwarding, half
    /// after (the write happened; the client sees an error).
    pub error_permille: AtomicU64,
    /// Watch streams are cut after a random time up to this, ms (0: never).
    pub watch_cut_max_ms: AtomicU64,
    /// Faults injected so far.
    pub injected: AtomicU64,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    authorization: Option<axum::http::HeaderValue>,
    client: Client<HttpsConnector<HttpConnector>, Body>,
    faults: Arc<Faults>,
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    (
        axum::http::StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn roll(permille: u64) -> bool {
    permille > 0 && fastrand::u64(0..1000) < permille
}

async fn forward(State(proxy): State<Proxy>, request: Request) -> Response {
    let faults = &proxy.faults;
    let on = faults.enabled.load(Ordering::Relaxed);
    let write = !matches!(request.method().as_str(), "GET" | "HEAD" | "OPTIONS");
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let mut error_after = false;
    if on && write {
        if roll(faults.conflict_permille.load(Ordering::Relaxed)) {
            faults.injected.fetch_add(1, Ordering::Relaxed);
            return status(
                409,
                "Conflict",
                "injected conflict: the object has been modified; please apply your changes to the latest version and try again",
            );
        }
        if roll(faults.error_permille.load(Ordering::Relaxed)) {
            faults.injected.fetch_add(1, Ordering::Relaxed);
            if fastrand::bool() {
                return status(
                    503,
                    "ServiceUnavailable",
                    "injected: the server is currently unable to handle the request",
                );
            }
            error_after = true;
        }
    }
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = match format!("{}{path}", proxy.upstream).parse() {
        Ok(uri) => uri,
        Err(_) => return status(400, "BadRequest", "bad URI"),
    };
    parts.headers.remove("host");
    if let Some(value) = &proxy.authorization {
        parts.headers.insert("authorization", value.clone());
    }
    let response = match proxy
        .client
        .request(axum::http::Request::from_parts(parts, body))
        .await
    {
        Ok(response) => response,
        Err(e) => return status(503, "ServiceUnavailable", &format!("upstream: {e}")),
    };
    if error_after {
        // The write is done; drop its answer.
        let _ = response.into_body().collect().await;
        return status(
            500,
            "InternalError",
            "injected: an error on the server after the write",
        );
    }
    let cut_max = faults.watch_cut_max_ms.load(Ordering::Relaxed);
    let (parts, body) = response.into_parts();
    if on && watch && cut_max > 0 {
        faults.injected.fetch_add(1, Ordering::Relaxed);
        let cut = tokio::time::sleep(Duration::from_millis(fastrand::u64(50..=cut_max)));
        let stream = body.into_data_stream().take_until(cut);
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    Response::from_parts(parts, Body::new(body))
}

/// Start the proxy on a free loopback port in front of `upstream`;
/// returns its address.
pub async fn start(upstream: Upstream, faults: Arc<Faults>) -> SocketAddr {
    let proxy = Proxy {
        client: Client::builder(TokioExecutor::new()).build(
            gantry_test_support::https_connector(
                Some(&upstream.ca_pem),
                upstream
                    .identity
                    .as_ref()
                    .map(|(cert, key)| (cert.as_path(), key.as_path())),
            )
            .expect("TLS to the API server"),
        ),
        authorization: upstream
            .token
            .as_ref()
            .map(|t| format!("Bearer {t}").parse().unwrap()),
        upstream: upstream.url,
        faults,
    };
    let app = axum::Router::new().fallback(forward).with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
