//! The operator's HTTP endpoints for the platform: `/livez` (the process
//! and the plugin runtime's thread are alive), `/readyz` (the initial
//! bindings are processed) and `/metrics` (Prometheus text format).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::controller::Metrics;
use crate::runtime::Runtime;

#[derive(Clone)]
struct Probes {
    metrics: Arc<Metrics>,
    runtime: Runtime,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BindingLabel {
    binding: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    binding: String,
    kind: String,
}

/// Render the operator's counters in the Prometheus text format.
pub fn render_metrics(metrics: &Metrics) -> String {
    let mut registry = Registry::with_prefix("gantry");
    let counter = |registry: &mut Registry, name: &str, help: &str| {
        let family = Family::<BindingLabel, Counter>::default();
        registry.register(name, help, family.clone());
        family
    };
    let reconciles = counter(&mut registry, "reconciles", "Reconciles finished");
    let errors = counter(&mut registry, "reconcile_errors", "Reconciles that failed");
    let applies = counter(
        &mut registry,
        "applies",
        "Children written with server-side apply",
    );
    let skipped = counter(
        &mut registry,
        "skipped_applies",
        "Applies skipped because nothing would change",
    );
    let prunes = counter(
        &mut registry,
        "prunes",
        "Children deleted because no longer desired",
    );
    let loads = counter(
        &mut registry,
        "plugin_loads",
        "Plugin versions put into service",
    );
    let load_failures = counter(
        &mut registry,
        "plugin_load_failures",
        "Plugin versions refused",
    );
    let failures = Family::<FailureLabels, Counter>::default();
    registry.register(
        "plugin_failures",
        "Failed plugin calls by kind",
        failures.clone(),
    );
    let ready = Gauge::<i64>::default();
    registry.register(
        "ready",
        "1 when the initial bindings are processed",
        ready.clone(),
    );
    ready.set(i64::from(metrics.is_ready()));
    let active = Gauge::<i64>::default();
    registry.register("bindings_active", "Bindings in service", active.clone());
    active.set(i64::try_from(metrics.active_bindings()).unwrap_or(i64::MAX));
    for (binding, c) in metrics.snapshot() {
        let label = BindingLabel {
            binding: binding.clone(),
        };
        reconciles.get_or_create(&label).inc_by(c.reconciles);
        errors.get_or_create(&label).inc_by(c.reconcile_errors);
        applies.get_or_create(&label).inc_by(c.applies);
        skipped.get_or_create(&label).inc_by(c.skipped_applies);
        prunes.get_or_create(&label).inc_by(c.prunes);
        loads.get_or_create(&label).inc_by(c.plugin_loads);
        load_failures
            .get_or_create(&label)
            .inc_by(c.plugin_load_failures);
        for (kind, n) in c.plugin_failures {
            failures
                .get_or_create(&FailureLabels {
                    binding: binding.clone(),
                    kind,
                })
                .inc_by(n);
        }
    }
    crate::policy::PolicyMetrics::global().register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
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
    if p.metrics.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "bindings not loaded yet")
    }
}

async fn metrics_text(State(p): State<Probes>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        render_metrics(&p.metrics),
    )
}

/// The router of the endpoints.
pub fn router(metrics: Arc<Metrics>, runtime: Runtime) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(Probes { metrics, runtime })
}

/// Serve the endpoints on `addr` until the task is dropped; returns the
/// bound address (useful with port 0).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    runtime: Runtime,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(metrics, runtime);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "health server stopped");
        }
    });
    tracing::info!(addr = %bound, "serving /livez, /readyz and /metrics");
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_counters_per_binding() {
        let metrics = Metrics::default();
        metrics.record_writes("memcached", 2, 5, 1);
        metrics.record_plugin_failure("memcached", "timeout");
        metrics.set_ready(true);
        let text = render_metrics(&metrics);
        for line in [
            "gantry_applies_total{binding=\"memcached\"} 2",
            "gantry_skipped_applies_total{binding=\"memcached\"} 5",
            "gantry_prunes_total{binding=\"memcached\"} 1",
            "gantry_plugin_failures_total{binding=\"memcached\",kind=\"timeout\"} 1",
            "gantry_ready 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
