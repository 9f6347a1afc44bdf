//! The memcached plugin in five languages: Rust (`plugins/memcached`),
//! JavaScript (`plugins/memcached-js`, componentize-js), Python
//! (`plugins/memcached-py`, componentize-py), C (`plugins/memcached-c`,
//! clang + wasi-libc + wit-bindgen) and Go (`plugins/memcached-go`, the
//! standard Go toolchain + the Go SDK + wit-component). The same requests
//! must get the same answers from all of them.
//!
//! The first run installs the JavaScript and Python toolchains into the
//! user's cache (`~/.cache/gantry/toolchains`), which needs the npm registry
//! and PyPI.

// The helpers take `json!` literals by value so each call reads as data.
#![allow(clippy::needless_pass_by_value)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use gantry::runtime::{CallError, Limits, ReconcilerPlugin, Runtime, RuntimeSettings};
use gantry::toolchain::{c, example_plugin, go, js, python, source_workspace_root};
use gantry_sdk::{ConditionStatus, PluginError, Request, Response, Trigger, json};
use serde_json::Value;

/// The five plugins, built and loaded once per test process.
struct Plugins {
    all: Vec<(&'static str, Arc<ReconcilerPlugin>)>,
    bytes: Vec<(&'static str, Vec<u8>)>,
    /// Compiled components, so a second runtime need not compile again.
    cache: tempfile::TempDir,
}

/// A runtime with the default settings and the tests' compilation cache.
fn runtime(cache: &tempfile::TempDir) -> Runtime {
    Runtime::new(RuntimeSettings {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeSettings::default()
    })
    .expect("runtime")
}

fn plugin_dir(name: &str) -> PathBuf {
    source_workspace_root().join("plugins").join(name)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn plugins() -> &'static Plugins {
    static PLUGINS: OnceLock<Plugins> = OnceLock::new();
    PLUGINS.get_or_init(|| {
        let cache = tempfile::tempdir().expect("temporary directory");
        let runtime = runtime(&cache);
        let timed = |language: &str, build: &dyn Fn() -> Vec<u8>| {
            let start = Instant::now();
            let bytes = build();
            eprintln!(
                "{language}: built in {:?}, {} bytes",
                start.elapsed(),
                bytes.len()
            );
            bytes
        };
        let rust = timed("rust", &|| {
            example_plugin("memcached").expect("Rust plugin builds")
        });
        let js = timed("js", &|| {
            read(&js::build_plugin(&plugin_dir("memcached-js")).expect("JavaScript plugin builds"))
        });
        let py = timed("python", &|| {
            read(&python::build_plugin(&plugin_dir("memcached-py")).expect("Python plugin builds"))
        });
        let c = timed("c", &|| {
            read(&c::build_plugin(&plugin_dir("memcached-c")).expect("C plugin builds"))
        });
        let go = timed("go", &|| {
            read(&go::build_plugin(&plugin_dir("memcached-go")).expect("Go plugin builds"))
        });
        let load = |name: &str, bytes: &[u8]| {
            let plugin = runtime.load_reconciler(name, bytes).expect("plugin loads");
            assert!(plugin.validates_config(), "{name} exports validate-config");
            plugin
        };
        Plugins {
            all: vec![
                ("rust", load("memcached", &rust)),
                ("js", load("memcached-js", &js)),
                ("python", load("memcached-py", &py)),
                ("c", load("memcached-c", &c)),
                ("go", load("memcached-go", &go)),
            ],
            bytes: vec![
                ("rust", rust),
                ("js", js),
                ("python", py),
                ("c", c),
                ("go", go),
            ],
            cache,
        }
    })
}

/// Limits for comparing answers: the defaults with a generous deadline, so
/// a slow machine does not turn a comparison into a timeout.
fn relaxed() -> Limits {
    Limits {
        deadline: Duration::from_secs(10),
        ..Limits::default()
    }
}

/// What a call produced, comparable across plugins.
#[derive(Debug, PartialEq)]
enum Outcome {
    Ok(Response),
    Plugin(PluginError),
    Other(String),
}

fn outcome<T>(result: Result<T, CallError>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
    match result {
        Ok(value) => ok(value),
        Err(CallError::Plugin(e)) => Outcome::Plugin(e),
        Err(other) => Outcome::Other(other.to_string()),
    }
}

/// Reconcile `request` with every plugin; asserts the answers are equal
/// and returns the Rust plugin's.
fn same_answer(case: &str, request: &Request) -> Outcome {
    let mut answers = plugins().all.iter().map(|(language, plugin)| {
        let answer = outcome(plugin.reconcile_blocking(request, &relaxed()), Outcome::Ok);
        (*language, answer)
    });
    let (_, expected) = answers.next().expect("the Rust plugin");
    for (language, answer) in answers {
        assert_eq!(answer, expected, "{case}: {language} differs from rust");
    }
    expected
}

/// validate-config of `config` with every plugin: all accept, or all reject
/// with the same message.
fn same_validation(config: Value) -> Result<(), Vec<PluginError>> {
    let answers: Vec<(&str, Outcome)> = plugins()
        .all
        .iter()
        .map(|(language, plugin)| {
            let answer = plugin.validate_config_blocking(&config, &relaxed());
            (
                *language,
                outcome(answer, |()| Outcome::Ok(Response::new())),
            )
        })
        .collect();
    if answers.iter().all(|(_, a)| matches!(a, Outcome::Ok(_))) {
        return Ok(());
    }
    let mut errors = Vec::new();
    for (language, answer) in &answers {
        match answer {
            Outcome::Plugin(e) => errors.push(e.clone()),
            other => panic!(
                "validate-config {config}: {language} answered {other:?}, others {answers:?}"
            ),
        }
    }
    for (e, (language, _)) in errors.iter().zip(&answers) {
        assert_eq!(
            e, &errors[0],
            "validate-config {config}: {language} differs from rust"
        );
    }
    Err(errors)
}

fn parent(spec: Value) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "default", "uid": "u1", "generation": 2,
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "spec": spec
    })
}

fn observed_deployment(replicas: Value, ready: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "mc", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {}, "template": {}},
        "status": {"readyReplicas": ready, "replicas": 3}
    })
}

fn expect_ok(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Ok(response) => response,
        other => panic!("expected a response, got {other:?}"),
    }
}

fn expect_error(outcome: Outcome) -> PluginError {
    match outcome {
        Outcome::Plugin(error) => error,
        other => panic!("expected a plugin error, got {other:?}"),
    }
}

#[test]
fn a_plain_create_gets_the_same_deployment_from_all_three() {
    let response = expect_ok(same_answer(
        "plain create",
        &Request::for_parent(parent(json!({"size": 3, "containerPort": 11211}))),
    ));
    assert_eq!(response.children.len(), 1);
    let deployment = &response.children[0];
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "memcached:1.6.26-alpine"
    );
    assert_eq!(response.status, Some(json!({"readyReplicas": 0})));
    assert_eq!(response.conditions[0].status, ConditionStatus::False);
    assert_eq!(response.conditions[0].message, "0/3 replicas ready");
    assert!(response.events.is_empty());
    assert_eq!(response.requeue_after, None);
    assert!(!response.finalized);

    // Defaults: no spec at all means one replica on port 11211.
    let mut bare = parent(json!({}));
    bare.as_object_mut().unwrap().remove("spec");
    let response = expect_ok(same_answer("no spec", &Request::for_parent(bare)));
    assert_eq!(response.children[0]["spec"]["replicas"], 1);
}

#[test]
fn an_observed_deployment_gives_the_same_status_conditions_and_events() {
    let mut scaling = Request::for_parent(parent(json!({"size": 3})));
    scaling
        .observed
        .push(observed_deployment(json!(1), json!(1)));
    scaling.trigger = Trigger::ChildChanged(gantry_sdk::ObjectRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some("default".into()),
        name: "mc".into(),
    });
    let response = expect_ok(same_answer("scaling up", &scaling));
    assert_eq!(response.status, Some(json!({"readyReplicas": 1})));
    assert_eq!(response.conditions[0].reason, "Scaling");
    assert_eq!(response.events.len(), 1);
    assert_eq!(
        response.events[0].message,
        "scaling memcached from 1 to 3 replicas"
    );

    let mut ready = Request::for_parent(parent(json!({"size": 2})));
    ready
        .observed
        .push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mc"}}));
    ready.observed.push(observed_deployment(json!(2), json!(2)));
    let response = expect_ok(same_answer("ready", &ready));
    assert_eq!(response.conditions[0].status, ConditionStatus::True);
    assert_eq!(response.conditions[0].reason, "DeploymentReady");
    assert!(response.events.is_empty());

    let mut unset = Request::for_parent(parent(json!({"size": 2})));
    unset
        .observed
        .push(observed_deployment(Value::Null, Value::Null));
    let response = expect_ok(same_answer("replicas unset", &unset));
    assert_eq!(response.status, Some(json!({"readyReplicas": 0})));

    let mut broken = Request::for_parent(parent(json!({"size": 2})));
    broken
        .observed
        .push(observed_deployment(json!("two"), json!(2)));
    let error = expect_error(same_answer("observed does not deserialize", &broken));
    assert_eq!(error.reason, "InvalidInput");
}

#[test]
fn finalizing_is_finished_at_once_by_all_three() {
    let mut request = Request::for_parent(parent(json!({"size": 3})));
    request.finalizing = true;
    let response = expect_ok(same_answer("finalizing", &request));
    assert!(response.finalized);
    assert!(response.children.is_empty());
    assert_eq!(response.status, None);
}

#[test]
fn invalid_specs_are_the_same_plugin_errors() {
    for size in [0, 11] {
        let request = Request::for_parent(parent(json!({"size": size})));
        let error = expect_error(same_answer(&format!("size {size}"), &request));
        assert_eq!(error.reason, "InvalidSpec");
        assert!(!error.retryable);
        assert_eq!(
            error.message,
            format!("spec.size must be between 1 and 10, got {size}")
        );
    }
    // Malformed input gets serde's messages from all of them.
    for spec in [
        json!({"size": "3"}),
        json!({"size": null}),
        json!({"size": 3_000_000_000_i64}),
        json!({"containerPort": true, "size": 2}),
        json!("big"),
        json!([2, 11211]),
    ] {
        same_answer(&format!("spec {spec}"), &Request::for_parent(parent(spec)));
    }
    let nameless =
        json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "spec": {}});
    let error = expect_error(same_answer("no name", &Request::for_parent(nameless)));
    assert_eq!(error.message, "parent has no metadata.name");
}

#[test]
fn related_objects_and_config_are_treated_alike() {
    let mut related = Request::for_parent(parent(json!({"size": 1})));
    related.related.push(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mc-auth", "namespace": "default"}, "data": {"password": "c2VjcmV0"}
    }));
    related.trigger = Trigger::Resync;
    expect_ok(same_answer("related object", &related));

    let mut configured = Request::for_parent(parent(json!({"size": 2})));
    configured.config = json!({"image": "registry.example.com/memcached:1.6.38"});
    let response = expect_ok(same_answer("config with image", &configured));
    assert_eq!(
        response.children[0]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/memcached:1.6.38"
    );

    for config in [
        json!({"image": null}),
        json!({"image": 7}),
        json!({"replicas": 2}),
        json!(["x"]),
    ] {
        let mut request = Request::for_parent(parent(json!({"size": 2})));
        request.config = config.clone();
        same_answer(&format!("config {config}"), &request);
    }
}

#[test]
fn validate_config_accepts_and_rejects_alike() {
    for good in [
        Value::Null,
        json!({}),
        json!({"image": "memcached:1.6"}),
        json!({"image": null}),
    ] {
        assert_eq!(same_validation(good.clone()), Ok(()), "{good}");
    }
    let errors = same_validation(json!({"image": " \t"})).unwrap_err();
    assert_eq!(errors[0].reason, "InvalidConfig");
    assert_eq!(errors[0].message, "config.image must not be empty");
    for bad in [json!({"image": 1}), json!("memcached"), json!([])] {
        same_validation(bad.clone()).expect_err("rejected");
    }
    // Unknown fields: all reject, and with serde's message.
    let errors = same_validation(json!({"image": "memcached:1.6", "replicas": 3})).unwrap_err();
    assert_eq!(
        errors[0].message,
        "invalid config: unknown field `replicas`, expected `image`"
    );
}

/// Calls of one plugin within the default limits (500 ms, 64 MiB), the
/// first one cold: a runtime of its own (as after a restart: the compiled
/// component comes from the disk cache) that has never run the plugin.
fn stays_under_default_limits(language: &str) {
    let plugins = plugins();
    let bytes = &plugins
        .bytes
        .iter()
        .find(|(l, _)| *l == language)
        .unwrap()
        .1;
    let runtime = runtime(&plugins.cache);
    let start = Instant::now();
    let plugin = runtime
        .load_reconciler(language, bytes)
        .expect("plugin loads");
    let load = start.elapsed();
    assert_eq!(runtime.compiles(), 0, "{language} came from the disk cache");
    let request = Request::for_parent(parent(json!({"size": 3})));
    let mut times = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let response = plugin
            .reconcile_blocking(&request, &Limits::default())
            .unwrap_or_else(|e| panic!("{language} within the default limits: {e}"));
        times.push(start.elapsed());
        assert_eq!(response.children.len(), 1);
    }
    plugin
        .validate_config_blocking(&json!({"image": "memcached:1.6"}), &Limits::default())
        .unwrap_or_else(|e| panic!("{language} validate-config within the default limits: {e}"));
    eprintln!("{language}: load (from disk cache) {load:?}, calls (cold first) {times:?}");
}

#[test]
fn the_rust_plugin_stays_under_default_limits() {
    stays_under_default_limits("rust");
}

#[test]
fn the_js_plugin_stays_under_default_limits() {
    stays_under_default_limits("js");
}

#[test]
fn the_python_plugin_stays_under_default_limits() {
    stays_under_default_limits("python");
}

#[test]
fn the_c_plugin_stays_under_default_limits() {
    stays_under_default_limits("c");
}

#[test]
fn the_go_plugin_stays_under_default_limits() {
    stays_under_default_limits("go");
}

/// A request of `objects` observed ConfigMaps of `bytes` bytes each.
fn big_request(objects: usize, bytes: usize) -> Request {
    let mut request = Request::for_parent(parent(json!({"size": 2})));
    for i in 0..objects {
        request.observed.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("filler-{i}"), "namespace": "default"},
            "data": {"blob": "x".repeat(bytes)}
        }));
    }
    request
}

/// Regression: the host copies a call's arguments into the instance through
/// the Go SDK's `cabi_realloc`, and the component model traps ("cannot
/// leave component instance") if the instance calls an import meanwhile.
/// When `cabi_realloc` allocated from the Go heap, the allocations of a
/// large request started a garbage collection, which reads the clock
/// through WASI, and the call trapped. These requests (many strings; one
/// larger than the SDK's 4 MiB arena, so that it grows) must be answered,
/// the same as Rust answers them, again and again.
#[test]
fn large_requests_never_make_the_go_plugin_leave_its_instance() {
    let plugins = plugins();
    let plugin_of = |language: &str| {
        &plugins
            .all
            .iter()
            .find(|(l, _)| *l == language)
            .expect("plugin")
            .1
    };
    let (rust, go) = (plugin_of("rust"), plugin_of("go"));
    let limits = Limits {
        memory_bytes: 256 << 20,
        ..relaxed()
    };
    for (objects, bytes) in [(4000, 64), (400, 4096), (600, 10_000)] {
        let request = big_request(objects, bytes);
        let expected = outcome(rust.reconcile_blocking(&request, &limits), Outcome::Ok);
        for round in 0..3 {
            let answer = outcome(go.reconcile_blocking(&request, &limits), Outcome::Ok);
            assert_eq!(
                answer, expected,
                "{objects} objects of {bytes} bytes, round {round}"
            );
        }
    }
}
