//! The operator's HTTP endpoints for the platform: `/livez` (the process
//! and the plugin runtime's thread are alive), `/readyz` (the initial
//! bindings are processed and their caches synced; the body names this
//! replica's role) and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::controller::{Metrics, Readiness};
use crate::runtime::Runtime;

#[derive(Clone)]
struct Probes {
    metrics: Arc<Metrics>,
    runtime: Runtime,
    readiness: Arc<Readiness>,
}

async fn livez(State(p): State<Probes>) -> impl IntoResponse {
    if p.runtime.is_alive() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "plugin runtime thread stopped",
        )
    }
}

async fn readyz(State(p): State<Probes>) -> impl IntoResponse {
    let (ready, why) = p.readiness.report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, why)
}

async fn metrics_text(State(p): State<Probes>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        p.metrics.render(),
    )
}

/// The router of the endpoints.
pub fn router(metrics: Arc<Metrics>, runtime: Runtime, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(Probes {
            metrics,
            runtime,
            readiness,
        })
}

/// Serve the endpoints on `addr` until the task is dropped; returns the
/// bound address (useful with port 0).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    runtime: Runtime,
    readiness: Arc<Readiness>,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(metrics, runtime, readiness);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "health server stopped");
        }
    });
    tracing::info!(addr = %bound, "serving /livez, /readyz and /metrics");
    Ok((bound, task))
}
