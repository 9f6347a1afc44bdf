//! The webhook server: HTTPS (rustls, see [`super::tls`]) for the routes
//! of admission policies (`policy::server`) and converters
//! (`conversion::server`), with `GET /healthz`. A client gets
//! [`HANDSHAKE_TIMEOUT`] to finish the TLS handshake; bodies are capped at
//! [`MAX_REVIEW_BYTES`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// Largest review accepted: an AdmissionReview's object and its old
/// version, each up to the API server's 3 MiB request limit, and some room.
pub const MAX_REVIEW_BYTES: usize = 8 << 20;
/// How long a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The webhook server's routes, `routes` with `GET /healthz` (answers
/// `ok`) and the body limit.
fn app(routes: Router) -> Router {
    routes
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
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

/// Serve `routes` over HTTPS on `addr` (port 0: any free port).
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    routes: Router,
) -> anyhow::Result<WebhookServer> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(tls);
    let app = app(routes);
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
    tracing::info!(addr = %bound, "serving webhooks at https://{bound}/policies/<name> and /convert/<crd>");
    Ok(WebhookServer { addr: bound, task })
}
