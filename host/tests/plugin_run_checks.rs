//! `gantry plugin run` sees what the cluster would: the parent gets its
//! CRD's defaults and validation before the call (as the API server applies
//! them on create), and the answer must pass the binding's guardrails, with
//! the operator's own message.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use gantry_test_support::output_text as text;
use std::sync::Arc;
use std::time::Duration;

use common::{Backend, Cluster, NAMESPACE, backends, wait_for};
use gantry::toolchain::example_plugin;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

fn gantry(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CACHE_DIR", dir.join("cache"))
        .current_dir(dir)
        .output()
        .expect("run gantry")
}

fn write(dir: &Path, name: &str, content: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_yaml::to_string(content).unwrap()).unwrap();
    path.display().to_string()
}

/// The memcached kind, with a default size of 2 and a CEL rule.
fn memcached_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "memcacheds.cache.example.com"},
        "spec": {"group": "cache.example.com", "scope": "Namespaced",
            "names": {"kind": "Memcached", "plural": "memcacheds"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object",
                        "x-kubernetes-validations": [{"rule": "self.size % 2 == 0",
                                                      "message": "size must be even"}],
                        "properties": {
                            "size": {"type": "integer", "minimum": 1, "default": 2},
                            "containerPort": {"type": "integer"}}}}}}}]}
    })
}

fn memcached(spec: &Value) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
           "metadata": {"name": "cache", "namespace": "default"}, "spec": spec})
}

#[test]
fn the_parent_gets_its_crds_defaults_and_an_invalid_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("memcached.wasm");
    std::fs::write(&wasm, example_plugin("memcached").unwrap()).unwrap();
    let crd = write(dir.path(), "crd.yaml", &memcached_crd());
    let run = |parent: &Value, extra: &[&str]| {
        let parent = write(dir.path(), "parent.yaml", parent);
        let args = [
            &[
                "plugin",
                "run",
                "--plugin",
                wasm.to_str().unwrap(),
                "--parent",
                &parent,
            ][..],
            extra,
        ]
        .concat();
        gantry(&args, dir.path())
    };
    let replicas = |out: &Output| -> Value {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let first: Value = serde_yaml::Deserializer::from_str(&stdout)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .next()
            .unwrap();
        first["spec"]["replicas"].clone()
    };

    // The plugin's own default is 1; the CRD's, 2, lands in the request.
    let without_size = memcached(&json!({"containerPort": 11211}));
    let out = run(&without_size, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(replicas(&out), 1, "{}", text(&out));
    let out = run(&without_size, &["--crd", &crd]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(replicas(&out), 2, "{}", text(&out));

    // Unknown fields are dropped, with the API server's warning.
    let out = run(&memcached(&json!({"size": 4, "sise": 6})), &["--crd", &crd]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(replicas(&out), 4);
    assert!(
        text(&out).contains("Warning: unknown field \"spec.sise\""),
        "{}",
        text(&out)
    );

    // Invalid by the OpenAPI schema, then by the CEL rule: refused before
    // the call, naming the field.
    for (spec, message) in [
        (
            json!({"size": 0}),
            "Memcached.cache.example.com \"cache\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            json!({"size": 3}),
            "Memcached.cache.example.com \"cache\" is invalid: spec: Invalid value: \"object\": size must be even",
        ),
    ] {
        let out = run(&memcached(&spec), &["--crd", &crd]);
        assert_eq!(out.status.code(), Some(5), "{}", text(&out));
        assert!(text(&out).contains(message), "{}", text(&out));
        assert!(out.stdout.is_empty(), "{}", text(&out));
    }
}

/// A Widget CRD whose spec keeps whatever it is given.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.gantry.dev"},
        "spec": {"group": "test.gantry.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    })
}

/// A child placed in `kube-system` is refused by `plugin run` with the
/// message the operator writes into the parent's `Synced` condition.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guardrail_refusal_reads_as_the_operators(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let server = Cluster::start(backend).await;
    let client = server.client();
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    gantry::dev::apply_object(&client, &widget_crd())
        .await
        .unwrap();
    gantry::dev::wait_for_crd(&client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    let binding = "name: widgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Widget}\nchildren:\n  - {apiVersion: v1, kind: ConfigMap}\nrollout: {shadow: false}\n";
    let hostile = example_plugin("hostile").unwrap();
    let cm =
        gantry::dev::binding_config_map("widgets", NAMESPACE, binding, &hostile, false).unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(gantry::controller::run_operator(
        client.clone(),
        gantry::runtime::Runtime::with_defaults().unwrap(),
        gantry::controller::OperatorOptions {
            namespace: NAMESPACE.into(),
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..Default::default()
        },
        Arc::new(gantry::controller::Metrics::default()),
        async move {
            let _ = stopped.await;
        },
    ));
    let widget = json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"hostile": {"behaviour": "children", "children": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "elsewhere", "namespace": "kube-system"}}]}}});
    gantry::dev::apply_object(&client, &widget).await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.gantry.dev", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let (reason, message) = wait_for("the operator refuses the answer", async || {
        let w = serde_json::to_value(widgets.get("w").await.ok()?).ok()?;
        let synced = w["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Synced" && c["status"] == "False")?
            .clone();
        Some((
            synced["reason"].as_str()?.to_string(),
            synced["message"].as_str()?.to_string(),
        ))
    })
    .await;
    assert_eq!(reason, "GuardrailViolation");
    assert!(message.contains("kube-system"), "{message}");

    let wasm = dir.path().join("hostile.wasm");
    std::fs::write(&wasm, &hostile).unwrap();
    std::fs::write(dir.path().join("binding.yaml"), binding).unwrap();
    let run = |parent: &str| {
        tokio::task::block_in_place(|| {
            gantry(
                &[
                    "plugin",
                    "run",
                    "--plugin",
                    wasm.to_str().unwrap(),
                    "--binding",
                    "binding.yaml",
                    "--parent",
                    parent,
                ],
                dir.path(),
            )
        })
    };
    let out = run(&write(dir.path(), "widget.yaml", &widget));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("error: {reason}: {message}")),
        "the operator said {reason}: {message}\n{}",
        text(&out)
    );

    // The same answer placed in the parent's namespace passes.
    let mut fine = widget.clone();
    fine["spec"]["hostile"]["children"][0]["metadata"]["namespace"] = json!("default");
    let out = run(&write(dir.path(), "widget.yaml", &fine));
    assert!(out.status.success(), "{}", text(&out));
    let _ = stop.send(());
    operator.await.unwrap().unwrap();
    server.shutdown().await;
}
