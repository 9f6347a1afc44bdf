//! `gantry plugin diff`, `gantry plugin capture` and `gantry plugin run
//! --request` against a live cluster: a binding
//! served by the operator, reproduced by the command line, which writes
//! nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use common::{Backend, Cluster, NAMESPACE, backends, wait_for};
use gantry::controller::{Metrics, OperatorOptions, run_operator};
use gantry::runtime::Runtime;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

/// The binding: hostile's `ok` makes one ConfigMap `NAME-fine` per Widget,
/// and reads the Secrets labelled `widget-input`.
const BINDING: &str = "name: widgets\nparent: {apiVersion: test.gantry.dev/v1, kind: Widget}\nchildren:\n- {apiVersion: v1, kind: ConfigMap}\nrelated:\n- apiVersion: v1\n  kind: Secret\n  selector: {matchLabels: {widget-input: \"yes\"}}\nconfig: {}\n";

/// A cluster with three Widgets served by the hostile plugin, `Synced`;
/// the operator is stopped then, so that nothing else writes.
struct Served {
    cluster: Cluster,
    kubeconfig: PathBuf,
    plugins: tempfile::TempDir,
}

async fn served(backend: Backend) -> Served {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.gantry.dev"},
        "spec": {"group": "test.gantry.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    gantry::dev::apply_object(&client, &crd).await.unwrap();
    gantry::dev::wait_for_crd(&client, "widgets.test.gantry.dev")
        .await
        .unwrap();
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.gantry.dev", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let plugins = tempfile::tempdir().unwrap();
    for name in ["hostile", "fanout", "memcached"] {
        let bytes = gantry::toolchain::example_plugin(name).unwrap();
        std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
    }
    let hostile = std::fs::read(plugins.path().join("hostile.wasm")).unwrap();
    let cm =
        gantry::dev::binding_config_map("widgets", NAMESPACE, BINDING, &hostile, true).unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "input", "namespace": "default", "labels": {"widget-input": "yes"}},
        "stringData": {"password": "hunter2"}});
    gantry::dev::apply_object(&client, &secret).await.unwrap();
    for i in 0..3 {
        let widget = json!({"apiVersion": "test.gantry.dev/v1", "kind": "Widget",
            "metadata": {"name": format!("w-{i}"), "namespace": "default"}, "spec": {}});
        gantry::dev::apply_object(&client, &widget).await.unwrap();
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = OperatorOptions {
        namespace: NAMESPACE.into(),
        ..OperatorOptions::default()
    };
    let operator = tokio::spawn(run_operator(
        client.clone(),
        Runtime::with_defaults().unwrap(),
        options,
        Arc::new(Metrics::default()),
        async move {
            let _ = stopped.await;
        },
    ));
    wait_for("every widget Synced with its child", async || {
        for i in 0..3 {
            let w = serde_json::to_value(widgets.get(&format!("w-{i}")).await.ok()?).ok()?;
            let synced = w["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Synced" && c["status"] == "True");
            synced.then_some(())?;
        }
        Some(())
    })
    .await;
    let _ = stop.send(());
    operator.await.unwrap().unwrap();
    Served {
        kubeconfig: cluster.kubeconfig().to_path_buf(),
        cluster,
        plugins,
    }
}

impl Served {
    fn plugin(&self, name: &str) -> PathBuf {
        self.plugins.path().join(format!("{name}.wasm"))
    }

    /// `gantry plugin SUBCOMMAND --kubeconfig … --binding widgets …`, off
    /// the executor.
    async fn gantry(&self, subcommand: &str, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gantry"));
        command
            .args(["--log-format", "text", "plugin", subcommand, "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(["--binding", "widgets", "--namespace", NAMESPACE])
            .args(args);
        tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap()
    }

    async fn stop(self) {
        self.cluster.shutdown().await;
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_diff_prints_what_a_new_version_would_change(backend: Backend) {
    let served = served(backend).await;
    let writes_before = served.cluster.writes();

    // The version in service, as the new one: nothing changes.
    let same = served.plugin("hostile");
    let out = served
        .gantry("diff", &["--plugin", same.to_str().unwrap()])
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("default/w-0: unchanged\n"), "{stdout}");
    assert!(
        stdout.ends_with("3 parents: 3 unchanged, 0 changed, 0 failed\n"),
        "{stdout}"
    );

    // Another plugin: three ConfigMaps per Widget instead of one.
    let fanout = served.plugin("fanout");
    let out = served
        .gantry("diff", &["--plugin", fanout.to_str().unwrap()])
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("default/w-1: 3 created, 0 changed, 1 pruned, status changed\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+ v1 ConfigMap default/w-1-0\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- v1 ConfigMap default/w-1-fine\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("3 parents: 0 unchanged, 3 changed, 0 failed\n"),
        "{stdout}"
    );

    // A plugin that fails on Widgets (no spec.size), on one parent only.
    let memcached = served.plugin("memcached");
    let out = served
        .gantry(
            "diff",
            &[
                "--plugin",
                memcached.to_str().unwrap(),
                "--parent",
                "default/w-2",
            ],
        )
        .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("default/w-2: the new version fails: "),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("1 parents: 0 unchanged, 0 changed, 1 failed\n"),
        "{stdout}"
    );

    // A parent that does not exist is an error, not an empty diff.
    let out = served
        .gantry(
            "diff",
            &[
                "--plugin",
                same.to_str().unwrap(),
                "--parent",
                "default/nope",
            ],
        )
        .await;
    assert_eq!(out.status.code(), Some(5));
    assert!(
        text(&out.stderr).contains("no test.gantry.dev/v1/Widget default/nope"),
        "{}",
        text(&out.stderr)
    );

    // Reading and comparing writes nothing.
    assert_eq!(served.cluster.writes(), writes_before, "plugin diff wrote");
    served.stop().await;
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_request_replays_to_the_same_answer(backend: Backend) {
    let served = served(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("w-0");
    let out = served
        .gantry(
            "capture",
            &["--parent", "default/w-0", "-o", out_dir.to_str().unwrap()],
        )
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("1 Secret(s) left out"),
        "{}",
        text(&out.stderr)
    );

    let request: Value = serde_yaml::from_str(&read(&out_dir.join("request.yaml"))).unwrap();
    assert_eq!(request["parent"]["metadata"]["name"], "w-0");
    assert_eq!(request["trigger"]["type"], "resync");
    let observed: Vec<&str> = request["observed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        observed,
        ["w-0-fine"],
        "the child the operator made is observed"
    );
    assert_eq!(request["related"], json!([]), "the Secret is left out");
    assert!(!read(&out_dir.join("request.yaml")).contains("hunter2"));

    // Replayed with the version in service, it answers as captured.
    let hostile = served.plugin("hostile");
    let replay = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["plugin", "run", "--plugin"])
        .arg(&hostile)
        .arg("--request")
        .arg(out_dir.join("request.yaml"))
        .output()
        .unwrap();
    assert!(replay.status.success(), "{}", text(&replay.stderr));
    let response = read(&out_dir.join("response.yaml"));
    assert!(response.contains("name: w-0-fine"), "{response}");
    assert_eq!(text(&replay.stdout), response);

    // With --include-secrets the Secret is there.
    let with_secrets = dir.path().join("with-secrets");
    let out = served
        .gantry(
            "capture",
            &[
                "--parent",
                "default/w-0",
                "--include-secrets",
                "-o",
                with_secrets.to_str().unwrap(),
            ],
        )
        .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let request: Value = serde_yaml::from_str(&read(&with_secrets.join("request.yaml"))).unwrap();
    assert_eq!(request["related"][0]["metadata"]["name"], "input");
    served.stop().await;
}
