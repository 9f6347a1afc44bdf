//! Accepting connections: HTTP/1.1 over TLS (or plain, when configured), each
//! connection served by the router until it closes or the server stops.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves `router` on `listener` until `stop` turns true, then waits for the open
/// connections to finish their requests (watches end on `stop` too).
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "apiserver: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let builder = auto::Builder::new(TokioExecutor::new()).http1_only();
        match &acceptor {
            None => {
                let conn = builder
                    .serve_connection(TokioIo::new(tcp), service)
                    .into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "apiserver: connection ended");
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp))
                        .await
                    {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "apiserver: TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    let conn = builder
                        .serve_connection(TokioIo::new(tls), service)
                        .into_owned();
                    if let Err(e) = watcher.watch(conn).await {
                        tracing::debug!(%peer, error = %e, "apiserver: connection ended");
                    }
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}
