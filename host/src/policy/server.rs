//! The admission webhook server: HTTPS (rustls), one path per policy,
//! `POST /policies/<name>` with an `admission.k8s.io/v1` AdmissionReview
//! in and out. `GET /healthz` answers `ok`.
//!
//! Status codes: 200 with the review for every request the server could
//! read, whatever the policy did (a failed policy is answered by its
//! failurePolicy); 400 for a body that is not an AdmissionReview v1; 404
//! for a policy not in service (the API server then applies the webhook's
//! own failurePolicy).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::Policies;
use super::review;

/// Largest AdmissionReview accepted: an object and its old version, each
/// up to the API server's 3 MiB request limit, and some room.
pub const MAX_REVIEW_BYTES: usize = 8 << 20;
/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn admit(
    State(policies): State<Policies>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let request = match review::parse_review(&body) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!(policy = %name, error = %e, "unreadable admission review");
            return (StatusCode::BAD_REQUEST, e.to_string()).into_response();
        }
    };
    match policies.evaluate(&name, request).await {
        Some(decision) => axum::Json(decision.response.to_review()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no policy named {name} is in service"),
        )
            .into_response(),
    }
}

/// The routes of the webhook server.
pub fn router(policies: Policies) -> Router {
    Router::new()
        .route("/policies/{name}", post(admit))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(policies)
}

/// A running webhook server.
pub struct WebhookServer {
    /// The address it listens on.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl WebhookServer {
    /// Stop accepting connections.
    pub fn shutdown(self) {
        self.task.abort();
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serve `policies` over HTTPS on `addr` (port 0: any free port).
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    policies: Policies,
) -> anyhow::Result<WebhookServer> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(tls);
    let app = router(policies);
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook server: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let acceptor = acceptor.clone();
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "webhook server: TLS handshake failed");
                        return;
                    }
                    Err(_) => return,
                };
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                    tracing::debug!(%peer, error = %e, "webhook server: connection ended");
                }
            });
        }
    });
    tracing::info!(addr = %bound, "serving admission webhooks at https://{bound}/policies/<name>");
    Ok(WebhookServer { addr: bound, task })
}
