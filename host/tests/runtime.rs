//! The plugin runtime against real components built from `plugins/`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gantry::runtime::{CallError, Limits, LoadError, ReconcilerPlugin, Runtime, RuntimeSettings};
use gantry::toolchain::example_plugin;
use gantry_sdk::{ConditionStatus, Reconciler, Request, json};
use serde_json::Value;

fn runtime() -> Runtime {
    Runtime::with_defaults().expect("runtime")
}

fn load(runtime: &Runtime, name: &str) -> Arc<ReconcilerPlugin> {
    let bytes = example_plugin(name).expect("example plugin builds");
    runtime.load_reconciler(name, &bytes).expect("plugin loads")
}

fn memcached_parent(size: i64) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "default", "uid": "u1", "generation": 1,
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": {"size": size, "containerPort": 11211}
    })
}

fn hostile_request(behaviour: &str) -> Request {
    let mut request = Request::for_parent(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}),
    );
    request.config = json!({ "behaviour": behaviour });
    request
}

#[test]
fn memcached_component_matches_the_native_logic() {
    let rt = runtime();
    let plugin = load(&rt, "memcached");
    assert!(plugin.validates_config());
    let mut request = Request::for_parent(memcached_parent(3));
    request.observed.push(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "mc", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {}, "template": {}},
        "status": {"readyReplicas": 2}
    }));
    let wasm = plugin
        .reconcile_blocking(&request, &Limits::default())
        .unwrap();
    assert_eq!(wasm.children.len(), 1);
    assert_eq!(wasm.children[0]["kind"], "Deployment");
    assert_eq!(wasm.children[0]["spec"]["replicas"], 3);
    assert_eq!(wasm.status.as_ref().unwrap()["readyReplicas"], 2);
    assert_eq!(wasm.conditions[0].condition_type, "Available");
    assert_eq!(wasm.conditions[0].status, ConditionStatus::False);
    assert_eq!(wasm.events[0].reason, "Scaling");

    // The native build of the same crate gives the identical answer.
    let mut stripped = request.clone();
    stripped.parent = gantry::contract::strip_managed_fields(&stripped.parent);
    assert_eq!(memcached::Memcached::reconcile(stripped).unwrap(), wasm);
}

#[test]
fn memcached_reports_invalid_spec_and_config_as_plugin_errors() {
    let rt = runtime();
    let plugin = load(&rt, "memcached");
    let err = plugin
        .reconcile_blocking(
            &Request::for_parent(memcached_parent(0)),
            &Limits::default(),
        )
        .unwrap_err();
    match err {
        CallError::Plugin(e) => {
            assert_eq!(e.reason, "InvalidSpec");
            assert!(!e.retryable);
        }
        other => panic!("expected a plugin error, got {other}"),
    }
    let err = plugin
        .validate_config_blocking(&json!({"image": ""}), &Limits::default())
        .unwrap_err();
    assert!(
        err.to_string().contains("config.image must not be empty"),
        "{err}"
    );
    plugin
        .validate_config_blocking(&json!({"image": "memcached:1.6"}), &Limits::default())
        .unwrap();
}

#[test]
fn database_component_builds_three_children_and_finalizes_after_draining() {
    let rt = runtime();
    let plugin = load(&rt, "database");
    let parent = json!({
        "apiVersion": "db.example.com/v1alpha1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "shop"},
        "spec": {"replicas": 2, "storage": "2Gi", "version": "16"}
    });
    let response = plugin
        .reconcile_blocking(&Request::for_parent(parent.clone()), &Limits::default())
        .unwrap();
    let kinds: Vec<&str> = response
        .children
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["StatefulSet", "Service", "ConfigMap"]);
    assert_eq!(response.conditions[0].condition_type, "Ready");

    let mut finalizing = Request::for_parent(parent);
    finalizing.finalizing = true;
    finalizing.observed.push(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "orders"}, "spec": {"selector": {}, "template": {}, "serviceName": "orders"},
        "status": {"replicas": 1}}));
    let draining = plugin
        .reconcile_blocking(&finalizing, &Limits::default())
        .unwrap();
    assert!(!draining.finalized);
    assert_eq!(draining.children[0]["spec"]["replicas"], 0);
    finalizing.observed.clear();
    assert!(
        plugin
            .reconcile_blocking(&finalizing, &Limits::default())
            .unwrap()
            .finalized
    );
}

/// Every hostile behaviour is stopped with its own typed error, and the
/// runtime keeps serving a good plugin right after each one.
#[test]
fn hostile_plugins_are_stopped_with_typed_errors_and_the_host_stays_usable() {
    type Expectation = Box<dyn Fn(&CallError) -> bool>;
    let rt = runtime();
    let hostile = load(&rt, "hostile");
    let good = load(&rt, "memcached");
    // Only the loop gets a short deadline, so that on a loaded machine no
    // other breach is mistaken for a timeout.
    let limits = Limits {
        deadline: Duration::from_secs(20),
        memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let loop_limits = Limits {
        deadline: Duration::from_millis(200),
        ..limits
    };
    let cases: Vec<(&str, Expectation)> = vec![
        (
            "loop",
            Box::new(
                |e| matches!(e, CallError::Timeout { deadline } if *deadline == Duration::from_millis(200)),
            ),
        ),
        (
            "memory-bomb",
            Box::new(|e| matches!(e, CallError::OutOfMemory { limit } if *limit == 32 << 20)),
        ),
        (
            "panic",
            Box::new(
                |e| matches!(e, CallError::Trap { message } if message.contains("hostile plugin panics on purpose")),
            ),
        ),
        (
            "oversized-output",
            Box::new(
                |e| matches!(e, CallError::OutputTooLarge { limit, size } if *limit == 4 << 20 && *size > 6 << 20),
            ),
        ),
        (
            "too-many-children",
            Box::new(|e| {
                matches!(
                    e,
                    CallError::TooManyChildren {
                        count: 1001,
                        limit: 1000
                    }
                )
            }),
        ),
        (
            "invalid-json",
            Box::new(
                |e| matches!(e, CallError::ContractViolation { detail } if detail.contains("child 0 is not valid JSON")),
            ),
        ),
        (
            "not-an-object",
            Box::new(
                |e| matches!(e, CallError::ContractViolation { detail } if detail.contains("not a JSON object")),
            ),
        ),
        (
            "missing-name",
            Box::new(
                |e| matches!(e, CallError::ContractViolation { detail } if detail.contains("has no metadata.name")),
            ),
        ),
        (
            "error",
            Box::new(|e| matches!(e, CallError::Plugin(p) if p.reason == "Refused" && p.retryable)),
        ),
    ];
    for (behaviour, expected) in cases {
        let limits = if behaviour == "loop" {
            &loop_limits
        } else {
            &limits
        };
        let err = hostile
            .reconcile_blocking(&hostile_request(behaviour), limits)
            .unwrap_err();
        assert!(expected(&err), "{behaviour}: unexpected error {err:?}");
        let ok = good.reconcile_blocking(
            &Request::for_parent(memcached_parent(1)),
            &Limits::default(),
        );
        assert!(ok.is_ok(), "good plugin failed after {behaviour}: {ok:?}");
    }
    assert_eq!(
        hostile
            .reconcile_blocking(&hostile_request("ok"), &Limits::default())
            .unwrap()
            .children
            .len(),
        1
    );
}

#[test]
fn every_call_gets_a_fresh_instance() {
    let rt = runtime();
    let hostile = load(&rt, "hostile");
    for _ in 0..3 {
        let response = hostile
            .reconcile_blocking(&hostile_request("counter"), &Limits::default())
            .unwrap();
        assert_eq!(response.children[0]["metadata"]["name"], "call-1");
    }
}

#[test]
fn validate_config_failures_are_reported() {
    let rt = runtime();
    let hostile = load(&rt, "hostile");
    let err = hostile
        .validate_config_blocking(&json!({"behaviour": "reject-config"}), &Limits::default())
        .unwrap_err();
    assert!(
        matches!(&err, CallError::Plugin(p) if p.reason == "InvalidConfig" && p.message.contains("rejected on purpose")),
        "{err:?}"
    );
    hostile
        .validate_config_blocking(&json!({}), &Limits::default())
        .unwrap();
}

#[test]
fn plugin_output_and_logs_reach_the_host_logs() {
    use std::io::Write;
    #[derive(Clone, Default)]
    struct Buffer(Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let rt = runtime();
    let hostile = load(&rt, "hostile");
    tracing::subscriber::with_default(subscriber, || {
        hostile
            .reconcile_blocking(&hostile_request("chatty"), &Limits::default())
            .unwrap();
    });
    let logs = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    for expected in [
        "hello from stdout",
        "hello from stderr",
        "hello from the log import",
        "plugin=hostile",
    ] {
        assert!(
            logs.contains(expected),
            "missing {expected:?} in logs:\n{logs}"
        );
    }
}

#[test]
fn reloading_a_known_digest_does_not_compile_again() {
    let cache = tempfile::tempdir().unwrap();
    let settings = RuntimeSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeSettings::default()
    };
    let bytes = example_plugin("memcached").unwrap();

    let rt = Runtime::new(settings.clone()).unwrap();
    let first = rt.load_reconciler("a", &bytes).unwrap();
    assert_eq!(rt.compiles(), 1);
    let second = rt.load_reconciler("b", &bytes).unwrap();
    assert_eq!(
        rt.compiles(),
        1,
        "same digest must come from the memory cache"
    );
    assert_eq!(first.digest(), second.digest());
    assert_eq!(first.digest(), gantry::runtime::digest(&bytes));

    // A new process (runtime) with the same cache dir loads from disk.
    let rt2 = Runtime::new(settings).unwrap();
    let third = rt2.load_reconciler("c", &bytes).unwrap();
    assert_eq!((rt2.compiles(), rt2.disk_cache_hits()), (0, 1));
    third
        .reconcile_blocking(
            &Request::for_parent(memcached_parent(2)),
            &Limits::default(),
        )
        .unwrap();

    // A corrupt cache entry is discarded and recompiled, not trusted.
    // (Each entry is a directory: its compiled file and that file's stamp;
    // host/tests/compile_cache.rs tries more ways of spoiling one.)
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let code = entry.unwrap().path().join("component.cwasm");
        std::fs::remove_file(&code).unwrap();
        std::fs::write(&code, b"garbage").unwrap();
    }
    let rt3 = Runtime::new(RuntimeSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeSettings::default()
    })
    .unwrap();
    rt3.load_reconciler("d", &bytes).unwrap();
    assert_eq!(rt3.compiles(), 1);
}

#[test]
fn bytes_that_are_not_a_component_are_rejected_clearly() {
    let rt = runtime();
    let err = rt.load_reconciler("empty", b"").err().unwrap();
    assert!(
        matches!(&err, LoadError::NotWasm { detail, .. } if detail.contains("empty")),
        "{err}"
    );
    let err = rt
        .load_reconciler("text", b"hello world, not wasm")
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::NotWasm { .. }), "{err}");
    // The smallest core module: magic and version 1.
    let err = rt
        .load_reconciler("core", b"\0asm\x01\0\0\0")
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::CoreModule { .. }), "{err}");
    assert!(err.to_string().contains("not a component"));
    // A real component cut in half.
    let bytes = example_plugin("memcached").unwrap();
    let err = rt
        .load_reconciler("truncated", &bytes[..bytes.len() / 2])
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
}

#[test]
fn components_of_the_wrong_world_are_rejected_naming_what_is_missing() {
    let rt = runtime();
    let policy = example_plugin("require-labels").unwrap();
    let err = rt.load_reconciler("require-labels", &policy).err().unwrap();
    let message = err.to_string();
    assert!(matches!(err, LoadError::WrongWorld { .. }), "{message}");
    assert!(
        message.contains("gantry:plugin/reconciler@0.1.0"),
        "{message}"
    );
    assert!(
        message.contains("gantry:plugin/admission@0.1.0"),
        "should list what it exports: {message}"
    );

    let memcached = example_plugin("memcached").unwrap();
    let err = rt.load_policy("memcached", &memcached).err().unwrap();
    assert!(
        matches!(
            err,
            LoadError::WrongWorld {
                world: "gantry:plugin/policy@0.1.0",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn policy_plugins_run_in_the_same_sandbox() {
    let rt = runtime();
    let policy = rt
        .load_policy("require-labels", &example_plugin("require-labels").unwrap())
        .unwrap();
    let request = gantry_sdk::AdmissionRequest {
        request: json!({"operation": "CREATE", "object": {"metadata": {"name": "x", "labels": {"team": "a"}}}}),
        settings: json!({"labels": ["team", "app"]}),
    };
    let verdict = policy
        .validate_blocking(&request, &Limits::default())
        .unwrap();
    assert!(!verdict.allowed);
    assert_eq!(
        verdict.message.as_deref(),
        Some("missing required labels: app")
    );
    let err = policy
        .validate_settings_blocking(&json!({"labels": [""]}), &Limits::default())
        .unwrap_err();
    assert!(err.to_string().contains("must not be empty"));
}

/// A plugin spinning until its deadline does not hold up the async
/// executor: on a single-threaded runtime, a timer keeps ticking meanwhile,
/// and calls run in parallel.
#[test]
fn calls_never_block_the_async_executor() {
    let rt = runtime();
    let hostile = load(&rt, "hostile");
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    executor.block_on(async {
        let ticks = Arc::new(AtomicUsize::new(0));
        let counter = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        let limits = Limits {
            deadline: Duration::from_millis(400),
            ..Limits::default()
        };
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let plugin = hostile.clone();
                tokio::spawn(async move { plugin.reconcile(hostile_request("loop"), limits).await })
            })
            .collect();
        for call in calls {
            assert!(matches!(
                call.await.unwrap(),
                Err(CallError::Timeout { .. })
            ));
        }
        ticker.abort();
        // 4 calls of 400 ms ran; had they blocked the only executor thread,
        // the timer could not have ticked in between.
        assert!(
            ticks.load(Ordering::Relaxed) >= 10,
            "timer ticked only {} times",
            ticks.load(Ordering::Relaxed)
        );
    });
}
