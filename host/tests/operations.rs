//! `gantry run` as a platform team runs it: the metrics it exposes after a
//! reconcile, SIGTERM while a reconcile is in flight, and trace export.

mod common;

use common::{
    Backend, NAMESPACE, backends, cluster, endpoints, gantry_run, http_get, memcached, sigterm,
    wait_for,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;

/// The value of the sample `name` (with labels) in a Prometheus text body.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_expose_every_family_after_a_reconcile(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, Some("memcached")).await;
    // A second binding whose plugin never returns, for the breach counters.
    let database = gantry::examples::source_dir("database");
    gantry::dev::apply_file(&client, &database.join("crd.yaml"))
        .await
        .unwrap();
    gantry::dev::wait_for_crd(&client, "databases.db.example.com")
        .await
        .unwrap();
    let breaker = r"
name: breaker
parent: {apiVersion: db.example.com/v1alpha1, kind: Database}
children: [{apiVersion: v1, kind: ConfigMap}]
limits: {deadlineMs: 50}
config: {behaviour: loop}
# Meant to fail on every parent: its first version is not shadow-run.
rollout: {shadow: false}
";
    let hostile = gantry::toolchain::example_plugin("hostile").unwrap();
    let cm =
        gantry::dev::binding_config_map("breaker", NAMESPACE, breaker, &hostile, true).unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();
    let mut gantry = gantry_run(
        &kubeconfig,
        &dir.path().join("gantry.log"),
        &[
            "--health-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        &[],
        true,
    );
    let (health, metrics) = endpoints(&mut gantry);
    assert_eq!(http_get(&health, "/livez").0, 200);
    wait_for("ready", async || {
        (http_get(&health, "/readyz").0 == 200).then_some(())
    })
    .await;
    assert_eq!(
        http_get(&health, "/metrics").0,
        404,
        "metrics have their own port"
    );

    gantry::dev::apply_object(&client, &memcached("cache"))
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    wait_for("the child", async || {
        deployments.get_opt("cache").await.unwrap()
    })
    .await;
    gantry::dev::apply_file(&client, &database.join("example.yaml"))
        .await
        .unwrap();
    let (status, ready) = http_get(&health, "/readyz");
    assert_eq!(
        (status, ready.as_str()),
        (200, "ok: 2 bindings in service, caches synced, standalone")
    );
    let body = wait_for("the reconciles in the metrics", async || {
        let (_, body) = http_get(&metrics, "/metrics");
        let reconciled = sample(&body, "gantry_reconciles_total{binding=\"memcached\"}")
            .is_some_and(|n| n >= 1.0);
        let breached = sample(
            &body,
            "gantry_plugin_limit_breaches_total{binding=\"breaker\",kind=\"timeout\"}",
        )
        .is_some_and(|n| n >= 1.0);
        // The breach is counted when the call fails, the failed reconcile
        // only once its status and Event are written.
        let failed = sample(&body, "gantry_reconcile_errors_total{binding=\"breaker\"}")
            .is_some_and(|n| n >= 1.0);
        (reconciled && breached && failed).then_some(body)
    })
    .await;
    let digest = gantry::runtime::digest(&gantry::toolchain::example_plugin("memcached").unwrap());
    for (name, at_least) in [
        ("gantry_reconciles_total{binding=\"memcached\"}", 1.0),
        ("gantry_reconcile_errors_total{binding=\"memcached\"}", 0.0),
        (
            "gantry_reconcile_duration_seconds_count{binding=\"memcached\"}",
            1.0,
        ),
        (
            &format!(
                "gantry_plugin_call_duration_seconds_count{{plugin=\"memcached\",digest=\"{digest}\"}}"
            ),
            1.0,
        ),
        ("gantry_applies_total{binding=\"memcached\"}", 1.0),
        ("gantry_skipped_applies_total{binding=\"memcached\"}", 0.0),
        ("gantry_prunes_total{binding=\"memcached\"}", 0.0),
        ("gantry_plugin_loads_total{binding=\"memcached\"}", 1.0),
        ("gantry_plugin_swaps_total{binding=\"memcached\"}", 0.0),
        (
            "gantry_plugin_load_failures_total{binding=\"memcached\"}",
            0.0,
        ),
        ("gantry_reconcile_queue_depth{binding=\"memcached\"}", 0.0),
        ("gantry_reconciles_in_flight{binding=\"memcached\"}", 0.0),
        ("gantry_reconcile_errors_total{binding=\"breaker\"}", 1.0),
        ("gantry_ready", 1.0),
        ("gantry_bindings_active", 2.0),
    ] {
        let value = sample(&body, name).unwrap_or_else(|| panic!("no {name} in\n{body}"));
        assert!(value >= at_least, "{name} = {value}, want >= {at_least}");
    }
    for family in [
        "gantry_reconcile_duration_seconds",
        "gantry_plugin_call_duration_seconds",
    ] {
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "no {family} family in\n{body}"
        );
    }
    gantry.kill().unwrap();
    gantry.wait().unwrap();
    server.shutdown().await;
}

/// SIGTERM while a reconcile runs: the reconcile finishes (its child is
/// applied and the status written), the Lease is released, exit code 0.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_reconcile_finishes_it_and_exits_cleanly(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, None).await;
    let crd_path = gantry::examples::source_dir("memcached").join("crd.yaml");
    gantry::dev::apply_file(&client, &crd_path).await.unwrap();
    gantry::dev::wait_for_crd(&client, "memcacheds.cache.example.com")
        .await
        .unwrap();
    let binding = r"
name: slow
parent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached}
children: [{apiVersion: v1, kind: ConfigMap}]
limits: {deadlineMs: 20000}
config: {behaviour: slow, millis: 2500}
";
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let plugin = gantry::toolchain::example_plugin("hostile").unwrap();
    let cm = gantry::dev::binding_config_map("slow", NAMESPACE, binding, &plugin, true).unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();

    let mut gantry = gantry_run(
        &kubeconfig,
        &dir.path().join("gantry.log"),
        &[
            "--health-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--leader-elect",
            "--lease-duration-secs",
            "5",
            "--lease-retry-secs",
            "1",
        ],
        &[("HOSTNAME", "only")],
        true,
    );
    let (health, metrics) = endpoints(&mut gantry);
    gantry::dev::apply_object(&client, &memcached("busy"))
        .await
        .unwrap();
    wait_for("a reconcile in flight", async || {
        let (_, body) = http_get(&metrics, "/metrics");
        (sample(&body, "gantry_reconciles_in_flight{binding=\"slow\"}") == Some(1.0)).then_some(())
    })
    .await;
    let (_, ready) = http_get(&health, "/readyz");
    assert!(ready.ends_with(", leader"), "{ready}");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(
        config_maps.get_opt("busy-fine").await.unwrap().is_none(),
        "the reconcile has not applied its child yet"
    );
    sigterm(&gantry);
    let status = tokio::task::spawn_blocking(move || gantry.wait())
        .await
        .unwrap()
        .unwrap();
    let log = std::fs::read_to_string(dir.path().join("gantry.log")).unwrap();
    assert!(status.success(), "exit {status:?}; log:\n{log}");

    assert!(
        config_maps.get_opt("busy-fine").await.unwrap().is_some(),
        "the in-flight reconcile applied its child before exit; log:\n{log}"
    );
    let resource = ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    };
    let parents: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let parent = serde_json::to_value(parents.get("busy").await.unwrap()).unwrap();
    let synced = parent["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Synced")
        .cloned();
    assert_eq!(
        synced.as_ref().map(|c| c["status"].clone()),
        Some("True".into()),
        "status written before exit: {parent}"
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = leases
        .get("gantry-leader")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "the Lease was released");
    server.shutdown().await;
}

/// With `--otlp-endpoint`, each reconcile is a trace: a `reconcile` span
/// with the plugin call, the apply of each child and the status write as
/// children; JSON logs inside it carry its trace id.
#[cfg(feature = "otlp")]
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_exports_one_trace_per_reconcile(backend: Backend) {
    use std::sync::{Arc, Mutex};

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;

    /// (name, trace id, span id, parent span id), hex.
    type Spans = Arc<Mutex<Vec<(String, String, String, String)>>>;
    let spans: Spans = Arc::default();
    let collector = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(
                |axum::extract::State(spans): axum::extract::State<Spans>,
                 body: axum::body::Bytes| async move {
                    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    let mut spans = spans.lock().unwrap();
                    for span in request
                        .resource_spans
                        .into_iter()
                        .flat_map(|r| r.scope_spans)
                        .flat_map(|s| s.spans)
                    {
                        spans.push((
                            span.name,
                            hex::encode(span.trace_id),
                            hex::encode(span.span_id),
                            hex::encode(span.parent_span_id),
                        ));
                    }
                    ""
                },
            ),
        )
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, Some("memcached")).await;
    let log_path = dir.path().join("gantry.log");
    let mut gantry = gantry_run(
        &kubeconfig,
        &log_path,
        &[
            "--health-addr",
            "off",
            "--metrics-addr",
            "off",
            "--log-format",
            "json",
            "--otlp-endpoint",
            &endpoint,
        ],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ("RUST_LOG", "info,gantry_operator::controller=debug"),
        ],
        false,
    );
    gantry::dev::apply_object(&client, &memcached("traced"))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    let (reconcile, trace) = wait_for("a reconcile trace with its children", async || {
        let spans = spans.lock().unwrap().clone();
        if std::time::Instant::now() + std::time::Duration::from_millis(300) > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            panic!("spans received: {spans:?}\nlog tail:\n{}", tail.join("\n"));
        }
        spans
            .iter()
            .filter(|(name, ..)| name == "reconcile")
            .find(|(_, trace, id, _)| {
                ["plugin_call", "apply", "status"].iter().all(|child| {
                    spans
                        .iter()
                        .any(|(n, t, _, parent)| n == child && t == trace && parent == id)
                })
            })
            .map(|(_, trace, id, _)| (id.clone(), trace.clone()))
    })
    .await;
    assert!(!reconcile.is_empty());
    sigterm(&gantry);
    let status = tokio::task::spawn_blocking(move || gantry.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit {status:?}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    let carrying: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l.to_string().contains(&trace))
        .collect();
    assert!(
        !carrying.is_empty(),
        "no JSON log line carries trace id {trace}:\n{log}"
    );
    server.shutdown().await;
}
