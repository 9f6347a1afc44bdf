//! Outbound HTTP as a capability, on the sandbox: the
//! `backup-job` example against a loopback backup service, with grants
//! built as a binding's would be; and the same plugin in Go
//! (`fixtures/go-backup-job`), on the Go SDK's `http` and `metrics`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gantry::capability::HttpSpec;
use gantry::capability::secrets::StaticSecrets;
use gantry::capability::{CapabilityMetrics, Grants, HttpGrant, MetricsScope};
use gantry::runtime::{CallError, Limits, ReconcilerPlugin, Runtime};
use gantry::toolchain::example_plugin;
use gantry_sdk::{Request, Response, json};
use gantry_test_support::backup_service::{BackupService, Mode};

const TOKEN: &str = "Bearer s3cret-token";

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::with_defaults().unwrap())
}

fn plugin() -> Arc<ReconcilerPlugin> {
    let bytes = example_plugin("backup-job").expect("backup-job builds");
    runtime().load_reconciler("backup-job", &bytes).unwrap()
}

fn spec(yaml: &str) -> HttpSpec {
    let spec: HttpSpec = serde_yaml::from_str(yaml).unwrap();
    spec.check().unwrap();
    spec
}

/// Grants for `spec`, with the token Secret and `metrics`.
fn grants(spec: &HttpSpec, metrics: &Arc<CapabilityMetrics>, shadow: bool) -> Grants {
    let secrets = StaticSecrets(HashMap::from([(
        ("backup-token".to_string(), "token".to_string()),
        TOKEN.to_string(),
    )]));
    let grant = HttpGrant::new("backups", spec, Arc::new(secrets), Some(metrics.clone())).unwrap();
    Grants {
        http: Some(Arc::new(grant)),
        metrics: Some(MetricsScope {
            metrics: metrics.clone(),
            binding: "backups".into(),
            digest: "d1".into(),
        }),
        shadow,
    }
}

fn allow(origin: &str) -> HttpSpec {
    spec(&format!(
        "allow: [\"{origin}\"]\nsecretHeaders: [{{header: Authorization, secret: backup-token, key: token}}]"
    ))
}

fn request(service: &str, name: &str, finalizing: bool) -> Request {
    let mut request = Request::for_parent(json!({
        "apiVersion": "backup.example.com/v1alpha1", "kind": "BackupJob",
        "metadata": {"name": name, "namespace": "ns"}
    }));
    request.config = json!({"service": service, "pollMs": 1000});
    request.finalizing = finalizing;
    request
}

fn limits(deadline_ms: u64) -> Limits {
    Limits {
        deadline: Duration::from_millis(deadline_ms),
        ..Limits::default()
    }
}

async fn call(
    service: &BackupService,
    name: &str,
    finalizing: bool,
    grants: Grants,
) -> Result<Response, CallError> {
    plugin()
        .reconcile_with(
            request(&service.origin(), name, finalizing),
            limits(3000),
            grants,
        )
        .await
}

fn plugin_message(result: Result<Response, CallError>) -> String {
    match result {
        Err(CallError::Plugin(e)) => e.message,
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_granted_plugin_lists_and_deletes_with_the_secret_header() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());
    let granted = grants(&allow(&service.origin()), &metrics, false);

    let listed = call(&service, "db", false, granted.clone()).await.unwrap();
    assert_eq!(listed.status, Some(json!({"remoteBackups": 3})));
    // In progress: requeue, not finalized; then done: finalized.
    let first = call(&service, "db", true, granted.clone()).await.unwrap();
    assert!(!first.finalized && first.requeue_after == Some(Duration::from_secs(1)));
    let second = call(&service, "db", true, granted.clone()).await.unwrap();
    assert!(second.finalized);
    // Idempotent: nothing left is done too.
    assert!(call(&service, "db", true, granted).await.unwrap().finalized);

    let seen = service.seen();
    assert_eq!(seen.len(), 4);
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(TOKEN)),
        "the host adds the Secret header to every request: {seen:?}"
    );
    let mut registry = prometheus_client::registry::Registry::with_prefix("gantry");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let origin = service.origin();
    assert!(
        text.contains(&format!(
            "gantry_plugin_http_requests_total{{binding=\"backups\",method=\"DELETE\",origin=\"{origin}\",outcome=\"2xx\"}} 2"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "gantry_plugin_metric_backup_deletion_polls_total{binding=\"backups\",digest=\"d1\",outcome=\"done\"} 2"
        ),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "no Secret value in the metrics");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_grant_requests_fail_and_plain_plugins_do_not_import_http() {
    let service = BackupService::start().await;
    let message = plugin_message(call(&service, "db", false, Grants::default()).await);
    assert!(message.contains("not granted"), "{message}");
    assert!(service.seen().is_empty());
    assert!(plugin().imports_http());
    let runtime = Runtime::with_defaults().unwrap();
    for plain in ["memcached", "hostile"] {
        let loaded = runtime
            .load_reconciler(plain, &example_plugin(plain).unwrap())
            .unwrap();
        assert!(!loaded.imports_http(), "{plain} does not use HTTP");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_allowed_origins_are_reached_and_redirects_stay_within_them() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());
    let elsewhere = grants(&allow("http://127.0.0.1:9"), &metrics, false);
    let message = plugin_message(call(&service, "db", false, elsewhere).await);
    assert!(
        message.contains("is not in the binding's allow list"),
        "{message}"
    );
    assert!(service.seen().is_empty(), "nothing was sent");

    let granted = grants(&allow(&service.origin()), &metrics, false);
    let message = plugin_message(call(&service, "redirect-out", false, granted.clone()).await);
    assert!(message.contains("redirect refused"), "{message}");
    let followed = call(&service, "redirect-in", false, granted).await.unwrap();
    assert_eq!(followed.status, Some(json!({"remoteBackups": 3})));
    let paths: Vec<String> = service.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/backups/ns/redirect-out",
            "/v1/backups/ns/redirect-in",
            "/v1/backups/ns/redirected"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn response_size_and_request_count_are_capped() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());
    let small = spec(&format!(
        "allow: [\"{}\"]\nmaxResponseBytes: 1024\nmaxRequestsPerCall: 1",
        service.origin()
    ));
    let message =
        plugin_message(call(&service, "big", false, grants(&small, &metrics, false)).await);
    assert!(message.contains("over the cap of 1024 bytes"), "{message}");
    let message = plugin_message(
        call(
            &service,
            "redirect-in",
            false,
            grants(&small, &metrics, false),
        )
        .await,
    );
    assert!(message.contains("maxRequestsPerCall"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_service_does_not_outlive_the_deadline() {
    let service = BackupService::start().await;
    service.set_mode(Mode::Hang);
    let metrics = Arc::new(CapabilityMetrics::default());
    // A generous per-request timeout: the call's deadline must cut it.
    let patient = spec(&format!(
        "allow: [\"{}\"]\ntimeoutMs: 30000",
        service.origin()
    ));
    let plugin = plugin();
    let started = Instant::now();
    let result = plugin
        .reconcile_with(
            request(&service.origin(), "db", true),
            limits(300),
            grants(&patient, &metrics, false),
        )
        .await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(CallError::Timeout { .. })),
        "{result:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // A short per-request timeout: the plugin sees it, within the deadline.
    let impatient = spec(&format!(
        "allow: [\"{}\"]\ntimeoutMs: 100",
        service.origin()
    ));
    let message =
        plugin_message(call(&service, "db", true, grants(&impatient, &metrics, false)).await);
    assert!(message.contains("HTTP timeout"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shadow_run_sends_get_only() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());
    let shadow = grants(&allow(&service.origin()), &metrics, true);
    let listed = call(&service, "db", false, shadow.clone()).await.unwrap();
    assert_eq!(listed.status, Some(json!({"remoteBackups": 3})));
    let refused = call(&service, "db", true, shadow).await;
    assert!(
        matches!(refused, Err(CallError::ShadowRefused)),
        "{refused:?}"
    );
    assert_eq!(service.count("DELETE"), 0, "nothing but GET was sent");
    assert_eq!(service.count("GET"), 1);
}

/// `gantry plugin run --binding F --secret S/K=V`: the local loop grants
/// what the binding grants, with the Secret's value as the header; without
/// `--binding` the plugin's requests fail `not-granted`.
#[tokio::test(flavor = "multi_thread")]
async fn plugin_run_grants_what_the_binding_grants() {
    let service = BackupService::start().await;
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("backup_job.wasm");
    std::fs::write(&wasm, example_plugin("backup-job").unwrap()).unwrap();
    let example = gantry::examples::source_dir("backup-job");
    let binding = dir.path().join("binding.yaml");
    std::fs::write(
        &binding,
        std::fs::read_to_string(example.join("binding.yaml"))
            .unwrap()
            .replace("http://127.0.0.1:8089", &service.origin()),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("service: {}\n", service.origin())).unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["plugin", "run", "--deadline-ms", "3000", "--plugin"])
            .arg(&wasm)
            .arg("--parent")
            .arg(example.join("example.yaml"))
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (code, out, err) = tokio::task::block_in_place(|| {
        run(&[
            "--binding",
            binding.to_str().unwrap(),
            "--secret",
            "backup-service-token/token=Bearer local",
        ])
    });
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("remoteBackups: 3"), "{out}");
    let seen = service.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer local"));

    let (code, _, err) = tokio::task::block_in_place(|| run(&[]));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("not-granted") || err.contains("not granted"),
        "{err}"
    );
    assert_eq!(service.seen().len(), 1, "nothing sent without the grant");

    let (code, _, err) = tokio::task::block_in_place(|| {
        run(&[
            "--binding",
            binding.to_str().unwrap(),
            "--secret",
            "no-separator",
        ])
    });
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("expected SECRET/KEY=VALUE"), "{err}");
}

/// The same plugin in Go (`fixtures/go-backup-job`), on the Go SDK's
/// `http` and `metrics` packages.
fn go_plugin() -> Arc<ReconcilerPlugin> {
    static GO: OnceLock<Arc<ReconcilerPlugin>> = OnceLock::new();
    GO.get_or_init(|| {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/go-backup-job");
        let built = gantry::toolchain::go::build_plugin(&dir).expect("go-backup-job builds");
        runtime()
            .load_reconciler("go-backup-job", &std::fs::read(built).unwrap())
            .unwrap()
    })
    .clone()
}

async fn go_call(
    service: &BackupService,
    name: &str,
    finalizing: bool,
    grants: Grants,
) -> Result<Response, CallError> {
    go_plugin()
        .reconcile_with(
            request(&service.origin(), name, finalizing),
            // Go starts its runtime in every call: room for that.
            Limits {
                memory_bytes: 128 << 20,
                ..limits(10_000)
            },
            grants,
        )
        .await
}

/// The plugin error of `result`: (reason, message, retryable).
fn go_error(result: Result<Response, CallError>) -> (String, String, bool) {
    match result {
        Err(CallError::Plugin(e)) => (e.reason, e.message, e.retryable),
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_plugin_sends_requests_and_records_metrics() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());
    let granted = grants(&allow(&service.origin()), &metrics, false);
    assert!(go_plugin().imports_http(), "a reconciler-capable component");

    let listed = go_call(&service, "db", false, granted.clone())
        .await
        .unwrap();
    assert_eq!(listed.status, Some(json!({"remoteBackups": 3})));
    let first = go_call(&service, "db", true, granted.clone())
        .await
        .unwrap();
    assert!(!first.finalized && first.requeue_after == Some(Duration::from_secs(1)));
    assert_eq!(first.conditions[0].reason, "DeletingBackups");
    let second = go_call(&service, "db", true, granted).await.unwrap();
    assert!(second.finalized);

    let seen = service.seen();
    let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(methods, ["GET", "DELETE", "DELETE"]);
    assert!(
        seen.iter()
            .all(|s| s.path == "/v1/backups/ns/db" && s.authorization.as_deref() == Some(TOKEN))
    );
    let mut registry = prometheus_client::registry::Registry::with_prefix("gantry");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for outcome in ["in_progress", "done"] {
        assert!(
            text.contains(&format!(
                "gantry_plugin_metric_backup_deletion_polls_total{{binding=\"backups\",digest=\"d1\",outcome=\"{outcome}\"}} 1"
            )),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_plugin_gets_the_hosts_refusals_as_http_errors() {
    let service = BackupService::start().await;
    let metrics = Arc::new(CapabilityMetrics::default());

    let (reason, message, retryable) =
        go_error(go_call(&service, "db", false, Grants::default()).await);
    assert_eq!(reason, "HttpError");
    assert!(message.starts_with("HTTP not granted: "), "{message}");
    assert!(!retryable);

    let elsewhere = grants(&allow("http://127.0.0.1:9"), &metrics, false);
    let (reason, message, retryable) = go_error(go_call(&service, "db", false, elsewhere).await);
    assert_eq!(reason, "HttpError");
    assert!(
        message.starts_with("HTTP not allowed: ")
            && message.contains("is not in the binding's allow list"),
        "{message}"
    );
    assert!(!retryable);
    assert!(service.seen().is_empty(), "nothing was sent");

    let granted = grants(&allow(&service.origin()), &metrics, false);
    let (_, message, _) = go_error(go_call(&service, "redirect-out", false, granted).await);
    assert!(message.contains("redirect refused"), "{message}");

    // A 2 MiB body reaches the plugin whole (through cabi_realloc during
    // the import), which then fails to decode it as JSON.
    let roomy = spec(&format!(
        "allow: [\"{}\"]\nmaxResponseBytes: 4194304",
        service.origin()
    ));
    let (_, message, _) =
        go_error(go_call(&service, "big", false, grants(&roomy, &metrics, false)).await);
    assert!(
        message.starts_with("HTTP decode: invalid character 'x'"),
        "{message}"
    );
    let small = spec(&format!(
        "allow: [\"{}\"]\nmaxResponseBytes: 1024",
        service.origin()
    ));
    let (_, message, _) =
        go_error(go_call(&service, "big", false, grants(&small, &metrics, false)).await);
    assert!(
        message.starts_with("HTTP too large: ") && message.contains("over the cap of 1024 bytes"),
        "{message}"
    );
}
