//! Test support: an API server (embedded or real, see
//! `gantry-test-support`) with the operator running against it, and helpers
//! to install bindings and wait for the cluster to converge.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use gantry::controller::{Metrics, OperatorOptions, run_operator};
use gantry::runtime::Runtime;
pub use gantry_test_support::{Backend, Cluster, backends};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod deployed;
pub mod sources;
pub mod tools;

/// Namespace of the bindings in tests.
pub const BINDINGS_NS: &str = "gantry-system";
/// How long a test waits for convergence before failing.
pub const WAIT: Duration = Duration::from_secs(30);
/// How long a test waits for kube-controller-manager's garbage collector:
/// it notices a new CRD's kind only at its next discovery resync (every
/// 30 s), and Kubernetes promises no latency for collection.
pub const GC_WAIT: Duration = Duration::from_mins(2);

/// An API server with the operator running against it.
pub struct Env {
    /// The API server.
    pub server: Cluster,
    /// A client of it.
    pub client: Client,
    /// The operator's counters.
    pub metrics: Arc<Metrics>,
    stop: Option<oneshot::Sender<()>>,
    operator: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Log to the test output when `RUST_LOG` is set.
pub fn init_logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

impl Env {
    /// Start an API server of `backend` and the operator (fast backoff).
    pub async fn start(backend: Backend) -> Env {
        Env::start_with(backend, OperatorOptions::default()).await
    }

    /// Like [`Env::start`], with `options` (its namespace and backoff are
    /// the tests').
    pub async fn start_with(backend: Backend, options: OperatorOptions) -> Env {
        init_logs();
        let server = Cluster::start(backend).await;
        let client = server.client();
        gantry::dev::ensure_namespace(&client, BINDINGS_NS)
            .await
            .expect("namespace");
        let metrics = Arc::new(Metrics::default());
        let options = OperatorOptions {
            namespace: BINDINGS_NS.into(),
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..options
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = Runtime::with_defaults().expect("plugin runtime");
        let operator = tokio::spawn(run_operator(
            client.clone(),
            runtime,
            options,
            metrics.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        Env {
            server,
            client,
            metrics,
            stop: Some(stop),
            operator: Some(operator),
        }
    }

    /// Stop the operator (gracefully) and the server.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(operator) = self.operator.take() {
            operator
                .await
                .expect("operator task")
                .expect("operator stops cleanly");
        }
        self.server.shutdown().await;
    }

    /// Apply any object (server-side, manager `gantry-dev`).
    pub async fn apply(&self, object: Value) -> DynamicObject {
        gantry::dev::apply_object(&self.client, &object)
            .await
            .expect("apply")
    }

    /// Install example `name` (CRD and binding).
    pub async fn install_example(&self, name: &str) {
        gantry::dev::install_example(&self.client, name, BINDINGS_NS)
            .await
            .expect("install example");
    }

    /// Apply a binding ConfigMap named `name` with `binding_yaml` and the
    /// example plugin `plugin`'s component (or `bytes` if given).
    pub async fn bind(&self, name: &str, binding_yaml: &str, component: &[u8]) {
        let cm = gantry::dev::binding_config_map(name, BINDINGS_NS, binding_yaml, component, false)
            .unwrap();
        gantry::dev::apply_binding(&self.client, &cm)
            .await
            .expect("apply binding");
    }

    /// A dynamic API for `api_version`/`kind` (plural given) in `namespace`.
    pub fn api(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Events (core/v1) about the object named `name`, as JSON.
    pub async fn events_for(&self, namespace: &str, name: &str) -> Vec<Value> {
        let api = self.api("events.k8s.io/v1", "Event", "events", Some(namespace));
        let list = api.list(&ListParams::default()).await.expect("list events");
        list.items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name))
            .collect()
    }

    /// The Event about `name` with `reason`, if there is one.
    pub async fn event(&self, namespace: &str, name: &str, reason: &str) -> Option<Value> {
        self.events_for(namespace, name)
            .await
            .into_iter()
            .find(|e| e["reason"] == reason)
    }

    /// The binding ConfigMap `name`.
    pub async fn binding(&self, name: &str) -> ConfigMap {
        Api::<ConfigMap>::namespaced(self.client.clone(), BINDINGS_NS)
            .get(name)
            .await
            .expect("binding ConfigMap")
    }

    /// The binding ConfigMap `name` once its annotation `key` reads
    /// `value`: the loader writes it just after the version goes into
    /// service, so a parent may be reconciled before it lands.
    pub async fn binding_annotated(&self, name: &str, key: &str, value: &str) -> ConfigMap {
        eventually(&format!("{name} annotated {key}: {value}"), || async {
            let cm = self.binding(name).await;
            let annotations = cm.metadata.annotations.as_ref()?;
            (annotations.get(key)? == value).then_some(cm)
        })
        .await
    }

    /// Total successful writes the API server has taken from clients.
    pub fn writes(&self) -> u64 {
        self.server.writes()
    }
}

/// Poll `check` until it returns `Some`, or fail after [`WAIT`] with `what`.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(WAIT, what, check).await
}

/// Poll `check` until it returns `Some`, or fail after `wait` with `what`.
pub async fn eventually_within<T, F, Fut>(wait: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() <= deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The object as JSON, if it exists.
pub async fn get_json(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    api.get_opt(name)
        .await
        .expect("get")
        .map(|o| serde_json::to_value(o).unwrap())
}

/// The condition of `type_` in `obj`'s status.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// A binding of the hostile plugin named `name`: `parent` reconciled and
/// `children` declared (each `"apiVersion Kind"`), `config` passed as is,
/// `extra` appended (e.g. `resyncSeconds: 5` or `limits: ...` lines).
pub fn hostile_binding(
    name: &str,
    parent: &str,
    children: &[&str],
    config: &Value,
    extra: &str,
) -> String {
    let (api_version, kind) = parent.split_once(' ').expect("parent is `apiVersion Kind`");
    let children = children.iter().fold(String::new(), |mut out, k| {
        let (v, k) = k.split_once(' ').expect("child is `apiVersion Kind`");
        // `write!` to a `String` cannot fail.
        let _ = writeln!(out, "  - {{apiVersion: {v}, kind: {k}}}");
        out
    });
    format!(
        "name: {name}\nparent: {{apiVersion: {api_version}, kind: {kind}}}\nchildren:\n{children}config: {config}\n{extra}"
    )
}

/// Install the `Widget` CRD (with status) and wait until Widgets are
/// served. The Widgets of `default`.
pub async fn serve_widgets(env: &Env) -> Api<DynamicObject> {
    env.apply(widget_crd("Widget", "widgets", true)).await;
    gantry::dev::wait_for_crd(&env.client, "widgets.test.gantry.dev")
        .await
        .expect("the Widget CRD is established and served");
    env.api("test.gantry.dev/v1", "Widget", "widgets", Some("default"))
}

/// A test CRD `Widget` (test.gantry.dev/v1, namespaced); `status` selects
/// whether it has a status subresource; `kind` renames it.
pub fn widget_crd(kind: &str, plural: &str, status: bool) -> Value {
    let mut version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.test.gantry.dev")},
        "spec": {"group": "test.gantry.dev", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [version]}
    })
}
