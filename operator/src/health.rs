//! The operator's HTTP endpoints for the platform, on two ports as
//! controller-runtime has them: health probes, `/livez` (the process and the
//! plugin runtime's thread are alive) and `/readyz` (the initial bindings are
//! processed and their caches synced; the body names this replica's role);
//! and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::controller::{Metrics, Readiness};
use gantry_sandbox::runtime::Runtime;

#[derive(Clone)]
struct Probes {
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

async fn metrics_text(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// `/livez` and `/readyz`.
pub fn health_router(runtime: Runtime, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(Probes { runtime, readiness })
}

/// `/metrics`.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(metrics)
}

/// Serve `router` on `addr` until the task is dropped; returns the bound
/// address (useful with port 0).
pub async fn serve(
    addr: SocketAddr,
    router: Router,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "health or metrics server stopped");
        }
    });
    Ok((bound, task))
}
