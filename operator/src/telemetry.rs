//! Logs and traces: structured logs to stderr (JSON lines unless stderr is
//! a terminal), and, with the `otlp` feature and an endpoint, spans
//! exported with OpenTelemetry's OTLP over HTTP.
//!
//! Reconciles run in a `reconcile` span whose children are the plugin call,
//! each apply, the prune and the status write. When traces are exported,
//! the `reconcile` span records its `trace_id`, and every JSON log line
//! inside it carries that field, so logs and traces meet.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON lines, or text when stderr is a terminal.
    Auto,
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where spans go.
#[derive(Debug, Clone, Default)]
pub struct TraceExport {
    /// OTLP/HTTP endpoint (e.g. `http://otel-collector:4318`); none: no export.
    pub otlp_endpoint: Option<String>,
}

/// Keeps the exporter alive; dropping it flushes the spans not sent yet.
#[must_use = "dropping the guard stops trace export"]
pub struct TelemetryGuard {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("gantry: flushing traces failed: {e}");
        }
    }
}

/// The filter without `RUST_LOG`: Gantry's `reconcile` span names the
/// binding and the parent; kube-runtime's own span per reconcile would be
/// entered each time its runner polls one of the parents waiting for a slot.
pub const DEFAULT_FILTER: &str = "info,kube_runtime::controller=warn";

/// Install the global subscriber. The filter comes from `RUST_LOG`
/// (default [`DEFAULT_FILTER`]). A second call leaves the first subscriber
/// in place.
pub fn init(format: LogFormat, export: &TraceExport) -> anyhow::Result<TelemetryGuard> {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let terminal = std::io::stderr().is_terminal();
    let json = match format {
        LogFormat::Auto => !terminal,
        LogFormat::Text => false,
        LogFormat::Json => true,
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(terminal)
        .with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().flatten_event(true).boxed()
    } else {
        fmt.boxed()
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otlp")]
    {
        let provider = export
            .otlp_endpoint
            .as_deref()
            .map(otlp::provider)
            .transpose()?;
        let layer = provider.as_ref().map(otlp::layer);
        let _ = registry.with(layer).try_init();
        Ok(TelemetryGuard { provider })
    }
    #[cfg(not(feature = "otlp"))]
    {
        if export.otlp_endpoint.is_some() {
            anyhow::bail!("this gantry was built without the `otlp` feature");
        }
        let _ = registry.try_init();
        Ok(TelemetryGuard {})
    }
}

/// Record the span's OpenTelemetry trace id in its `trace_id` field (when
/// traces are exported), so log lines inside it carry it.
pub fn record_trace_id(span: &tracing::Span) {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let context = span.context();
        let span_context = context.span().span_context().clone();
        if span_context.is_valid() {
            span.record("trace_id", span_context.trace_id().to_string());
        }
    }
    #[cfg(not(feature = "otlp"))]
    let _ = span;
}

#[cfg(feature = "otlp")]
mod otlp {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    /// A tracer provider exporting in batches to `endpoint` (the base URL;
    /// spans go to `/v1/traces`).
    pub(super) fn provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
        // The exporter's HTTP client is reqwest built without a TLS
        // provider of its own (shared with the plugin sources).
        gantry_kube::tls::install_crypto_provider();
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .build()?;
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("gantry").build())
            .build())
    }

    /// The tracing layer that turns spans into OpenTelemetry spans.
    pub(super) fn layer<S>(
        provider: &SdkTracerProvider,
    ) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer().with_tracer(provider.tracer("gantry"))
    }
}
