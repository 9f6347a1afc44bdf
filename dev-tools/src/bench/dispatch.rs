//! `gantry bench dispatch`: the cost of one reconcile call of the same
//! memcached logic, three ways, in one run: a native Rust function call, the
//! Rust plugin in the wasmtime sandbox, and the native function behind an
//! HTTP webhook on loopback (JSON over HTTP/1.1 with keep-alive, the
//! Metacontroller and Crossplane-function model). Optionally the JavaScript,
//! Python, C and Go builds of the same plugin too.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use gantry_sdk::{Reconciler, Request, Response, Trigger};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::{Measurement, measure};
use gantry_sandbox::runtime::{Limits, ReconcilerPlugin};

/// Annotation that pads a parent to the size under test.
const FILLER: &str = "bench.gantry.dev/filler";

/// A Memcached parent whose JSON is `bytes` long (at least its natural size).
pub fn parent_of_size(bytes: usize) -> Value {
    let mut parent = json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "bench", "namespace": "default", "uid": "0000-bench",
            "generation": 1, "annotations": {FILLER: ""}},
        "spec": {"size": 3},
    });
    let natural = parent.to_string().len();
    parent["metadata"]["annotations"][FILLER] = "x".repeat(bytes.saturating_sub(natural)).into();
    parent
}

/// The request the three implementations answer.
pub fn request_of_size(bytes: usize) -> Request {
    let mut request = Request::for_parent(parent_of_size(bytes));
    request.config = json!({"image": "memcached:1.6.26-alpine"});
    request.trigger = Trigger::ParentChanged;
    request
}

/// Parse `1k`, `20k`, `500k`, `1m` or a plain number of bytes.
pub fn parse_size(text: &str) -> anyhow::Result<usize> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, factor) = match lower.strip_suffix('k') {
        Some(d) => (d, 1 << 10),
        None => match lower.strip_suffix('m') {
            Some(d) => (d, 1 << 20),
            None => (lower.as_str(), 1),
        },
    };
    let n: usize = digits
        .parse()
        .with_context(|| format!("size {text:?}: want e.g. 1k, 20k, 500k"))?;
    Ok(n * factor)
}

/// A webhook on loopback that answers reconcile requests with the native
/// memcached logic, as a Metacontroller-style hook would.
pub struct Webhook {
    addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

impl Webhook {
    /// Start the webhook on its own one-thread runtime.
    pub fn start() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(SocketAddr::from((
            [127, 0, 0, 1],
            0,
        ))))?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new().route(
            "/reconcile",
            axum::routing::post(|axum::Json(request): axum::Json<Request>| async move {
                match memcached::Memcached::reconcile(request) {
                    Ok(response) => Ok(axum::Json(response)),
                    Err(e) => Err((axum::http::StatusCode::UNPROCESSABLE_ENTITY, e.message)),
                }
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            addr,
            _runtime: runtime,
        })
    }

    /// The URL reconcile requests go to.
    pub fn url(&self) -> String {
        format!("http://{}/reconcile", self.addr)
    }
}

/// A keep-alive HTTP client driving one webhook from the calling thread.
pub struct WebhookClient {
    runtime: tokio::runtime::Runtime,
    client: Client<HttpConnector, Full<Bytes>>,
    url: hyper::Uri,
}

impl WebhookClient {
    /// A client of `url`.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            runtime,
            client,
            url: url.parse()?,
        })
    }

    /// Send `request` as JSON and read the JSON response.
    pub fn call(&self, request: &Request) -> anyhow::Result<Response> {
        let body = serde_json::to_vec(request)?;
        self.runtime.block_on(async {
            let http_request = hyper::Request::post(self.url.clone())
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))?;
            let response = self.client.request(http_request).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            anyhow::ensure!(status.is_success(), "webhook answered {status}");
            Ok(serde_json::from_slice(&bytes)?)
        })
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct DispatchPlan {
    /// Parent sizes in bytes.
    pub sizes: Vec<usize>,
    /// Measured calls per implementation and size.
    pub calls: usize,
    /// Unmeasured calls first.
    pub warmup: usize,
    /// Limits of the sandboxed calls.
    pub limits: Limits,
}

/// One size's measurements, in the order native, wasm, webhook, then any
/// other plugins.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SizeResult {
    /// Parent size, bytes.
    pub parent_bytes: usize,
    /// The measurements.
    pub rows: Vec<Measurement>,
}

/// Measure every size: native, `plugin` (the Rust memcached component),
/// the webhook, then each of `others` (e.g. the JS, Python, C and Go builds).
pub fn run(
    plan: &DispatchPlan,
    plugin: &ReconcilerPlugin,
    others: &[Arc<ReconcilerPlugin>],
) -> anyhow::Result<Vec<SizeResult>> {
    let webhook = Webhook::start()?;
    let client = WebhookClient::new(&webhook.url())?;
    let mut results = Vec::new();
    for &size in &plan.sizes {
        let request = request_of_size(size);
        // All must agree before anything is timed.
        let expected = memcached::Memcached::reconcile(request.clone())?;
        anyhow::ensure!(
            plugin.reconcile_blocking(&request, &plan.limits)? == expected,
            "the sandboxed plugin disagrees with the native logic"
        );
        anyhow::ensure!(client.call(&request)? == expected, "the webhook disagrees");
        let mut rows = vec![
            measure("native Rust call", plan.warmup, plan.calls, || {
                memcached::Memcached::reconcile(request.clone())?;
                Ok(())
            })?,
            measure(
                "wasm, Rust guest (sandboxed)",
                plan.warmup,
                plan.calls,
                || {
                    plugin.reconcile_blocking(&request, &plan.limits)?;
                    Ok(())
                },
            )?,
            measure("HTTP webhook on loopback", plan.warmup, plan.calls, || {
                client.call(&request)?;
                Ok(())
            })?,
        ];
        for other in others {
            anyhow::ensure!(
                other.reconcile_blocking(&request, &plan.limits)? == expected,
                "plugin {} disagrees with the native logic",
                other.name()
            );
            rows.push(measure(
                &format!("wasm, {} (sandboxed)", other.name()),
                plan.warmup.min(10),
                (plan.calls / 10).max(1),
                || {
                    other.reconcile_blocking(&request, &plan.limits)?;
                    Ok(())
                },
            )?);
        }
        results.push(SizeResult {
            parent_bytes: size,
            rows,
        });
    }
    Ok(results)
}

/// The results as a table per size, each row's p50 relative to native.
pub fn render(results: &[SizeResult]) -> String {
    let mut out = String::new();
    for result in results {
        let _ = writeln!(out, "parent of {} bytes", result.parent_bytes);
        out.push_str(&super::render_against(&result.rows, 0));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_have_the_size_asked_for() {
        for size in [1 << 10, 20 << 10, 500 << 10] {
            assert_eq!(parent_of_size(size).to_string().len(), size);
        }
        // Smaller than natural: the natural size.
        assert!(parent_of_size(10).to_string().len() > 10);
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("1k").unwrap(), 1024);
        assert_eq!(parse_size("500K").unwrap(), 500 << 10);
        assert_eq!(parse_size("2m").unwrap(), 2 << 20);
        assert_eq!(parse_size("300").unwrap(), 300);
        assert!(parse_size("big").is_err());
    }

    #[test]
    fn the_webhook_answers_like_the_native_logic() {
        let webhook = Webhook::start().unwrap();
        let client = WebhookClient::new(&webhook.url()).unwrap();
        let request = request_of_size(20 << 10);
        let native = memcached::Memcached::reconcile(request.clone()).unwrap();
        assert_eq!(client.call(&request).unwrap(), native);
        assert!(!native.children.is_empty());
    }
}
