//! Policies on each API server backend: policy bindings from ConfigMaps
//! (load, refuse, swap, delete), the webhook configurations kept in sync,
//! guardrail policies on a reconcile plugin's output, and, through
//! kubectl, the API server calling the webhooks.

mod webhook_support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use gantry::controller::{Metrics, OperatorOptions, run_operator};
use gantry::policy::sync::{SyncOptions, run_sync};
use gantry::policy::{Policies, PolicyMetrics, manager};
use gantry::runtime::Runtime;
use gantry::webhook::server::WebhookServer;
use gantry::webhook::{server, tls};
use gantry_test_support::{Backend, backends};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::watch;

const NS: &str = "gantry-system";
const WAIT: Duration = Duration::from_secs(30);

struct Cluster {
    server: gantry_test_support::Cluster,
    client: Client,
    policies: Policies,
    webhooks: WebhookServer,
    certificate: tls::Certificate,
    base_url: String,
    stop: watch::Sender<bool>,
    operator: tokio::task::JoinHandle<anyhow::Result<()>>,
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

impl Cluster {
    /// The API server, the policy manager, the webhook server on loopback,
    /// the configuration sync and the operator, as `gantry dev` runs them.
    async fn start(backend: Backend) -> Cluster {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
        let server = gantry_test_support::Cluster::start(backend).await;
        let client = server.client();
        gantry::dev::ensure_namespace(&client, NS).await.unwrap();
        let runtime = Runtime::with_defaults().unwrap();
        let policies = Policies::new(Arc::new(PolicyMetrics::default()));
        let (stop, rx) = watch::channel(false);
        tokio::spawn({
            let (client, runtime, policies, rx) = (
                client.clone(),
                runtime.clone(),
                policies.clone(),
                rx.clone(),
            );
            async move {
                manager::run_policy_manager(
                    client,
                    runtime,
                    NS,
                    policies,
                    gantry::delivery::source::FetchSettings::default(),
                    stopped(rx),
                )
                .await
                .unwrap();
            }
        });
        let certificate = tls::self_signed(&["127.0.0.1".into()]).unwrap();
        let webhooks = server::serve(
            "127.0.0.1:0".parse().unwrap(),
            tls::server_config(&certificate).unwrap(),
            gantry::policy::server::router(policies.clone()),
        )
        .await
        .unwrap();
        let base_url = format!("https://{}", webhooks.addr);
        tokio::spawn(run_sync(
            client.clone(),
            policies.clone(),
            SyncOptions {
                name: "gantry-policies".into(),
                reach: gantry::webhook::reach::Reach {
                    base_url: base_url.clone(),
                    ca_pem: certificate.ca_pem.clone().into(),
                    service: None,
                },
                exclude_namespaces: vec![NS.into()],
            },
            stopped(rx.clone()),
        ));
        let options = OperatorOptions {
            namespace: NS.into(),
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            policies: policies.clone(),
            ..OperatorOptions::default()
        };
        let operator = tokio::spawn(run_operator(
            client.clone(),
            runtime,
            options,
            Arc::new(Metrics::default()),
            stopped(rx),
        ));
        Cluster {
            server,
            client,
            policies,
            webhooks,
            certificate,
            base_url,
            stop,
            operator,
        }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        self.operator.await.unwrap().unwrap();
        self.webhooks.shutdown();
        self.server.shutdown().await;
    }

    async fn bind_policy(&self, cm_name: &str, plugin: &str, policy_yaml: &str) {
        let component = gantry::toolchain::example_plugin(plugin).unwrap();
        let cm =
            gantry::dev::policy_config_map(cm_name, NS, policy_yaml, &component, true).unwrap();
        gantry::dev::apply_binding(&self.client, &cm).await.unwrap();
    }

    fn api(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        ns: Option<&str>,
    ) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Event reasons and notes about the object `name` in `ns`.
    async fn events(&self, ns: &str, name: &str) -> Vec<(String, String)> {
        let list = self
            .api("events.k8s.io/v1", "Event", "events", Some(ns))
            .list(&ListParams::default())
            .await
            .unwrap();
        list.items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name))
            .map(|e| {
                (
                    e["reason"].as_str().unwrap_or("").to_string(),
                    e["note"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }
}

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const DISALLOW_PRIVILEGED: &str = "name: disallow-privileged\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}\nsettings: {allowHostPathPrefixes: [/var/log]}\n";
const DEFAULT_RESOURCES: &str = "name: default-resources\nmutating: true\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE]}\nsettings: {cpu: 100m, memory: 128Mi}\n";

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_bindings_load_swap_and_keep_webhook_configurations_in_sync(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    cluster
        .bind_policy("no-privileged", "disallow-privileged", DISALLOW_PRIVILEGED)
        .await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(cluster.client.clone());
    let configuration = eventually("the validating configuration", || async {
        validating.get_opt("gantry-policies").await.unwrap()
    })
    .await;
    let webhooks = configuration.webhooks.unwrap();
    assert_eq!(webhooks.len(), 1);
    let webhook = serde_json::to_value(&webhooks[0]).unwrap();
    assert_eq!(webhook["name"], "disallow-privileged.policies.gantry.dev");
    assert_eq!(
        webhook["clientConfig"]["url"],
        format!("{}/policies/disallow-privileged", cluster.base_url)
    );
    assert_eq!(
        webhook["clientConfig"]["caBundle"],
        base64::engine::general_purpose::STANDARD.encode(&cluster.certificate.ca_pem)
    );
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
    assert_eq!(webhook["rules"][0]["resources"], json!(["pods"]));

    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), NS);
    let digest = eventually("the digest annotation", || async {
        configmaps
            .get("no-privileged")
            .await
            .unwrap()
            .metadata
            .annotations
            .and_then(|a| a.get("gantry.dev/policy-digest").cloned())
    })
    .await;
    assert_eq!(
        cluster
            .policies
            .get("disallow-privileged")
            .unwrap()
            .plugin
            .digest(),
        digest
    );

    // Settings the policy rejects: refused, the old version keeps serving.
    cluster
        .bind_policy(
            "no-privileged",
            "disallow-privileged",
            &DISALLOW_PRIVILEGED.replace("/var/log", "var/log"),
        )
        .await;
    let (_, note) = eventually("the refusal event", || async {
        cluster
            .events(NS, "no-privileged")
            .await
            .into_iter()
            .find(|(reason, _)| reason == "InvalidSettings")
    })
    .await;
    assert!(note.contains("must be an absolute path"), "{note}");
    assert!(
        note.contains("the previous version keeps serving"),
        "{note}"
    );
    let serving = cluster.policies.get("disallow-privileged").unwrap();
    assert_eq!(
        serving.spec.settings,
        json!({"allowHostPathPrefixes": ["/var/log"]})
    );

    // A mutating policy lands in the mutating configuration; deleting its
    // binding removes the configuration again.
    cluster
        .bind_policy("defaults", "default-resources", DEFAULT_RESOURCES)
        .await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(cluster.client.clone());
    let configuration = eventually("the mutating configuration", || async {
        mutating.get_opt("gantry-policies").await.unwrap()
    })
    .await;
    let webhook = serde_json::to_value(&configuration.webhooks.unwrap()[0]).unwrap();
    assert_eq!(webhook["name"], "default-resources.policies.gantry.dev");
    assert_eq!(webhook["reinvocationPolicy"], "Never");
    assert_eq!(
        validating
            .get("gantry-policies")
            .await
            .unwrap()
            .webhooks
            .unwrap()
            .len(),
        1,
        "the validating configuration keeps only validating policies"
    );
    configmaps
        .delete("defaults", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the mutating configuration to go", || async {
        mutating
            .get_opt("gantry-policies")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(cluster.policies.get("default-resources").is_none());
    cluster.stop().await;
}

fn runner_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "runners.test.gantry.dev"},
        "spec": {"group": "test.gantry.dev", "scope": "Namespaced",
                 "names": {"kind": "Runner", "plural": "runners", "singular": "runner", "listKind": "RunnerList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                         "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                         "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    })
}

fn runner(name: &str, privileged: bool) -> Value {
    json!({"apiVersion": "test.gantry.dev/v1", "kind": "Runner",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"image": "busybox:1.36", "privileged": privileged}})
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guardrail_policies_refuse_a_privileged_pod_from_a_reconcile_plugin(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    gantry::dev::apply_object(&cluster.client, &runner_crd())
        .await
        .unwrap();
    gantry::dev::wait_for_crd(&cluster.client, "runners.test.gantry.dev")
        .await
        .unwrap();
    cluster
        .bind_policy("no-privileged", "disallow-privileged", DISALLOW_PRIVILEGED)
        .await;
    let binding = "name: runners\nparent: {apiVersion: test.gantry.dev/v1, kind: Runner}\nchildren:\n- {apiVersion: v1, kind: Pod}\nguardrailPolicies: [disallow-privileged]\n";
    let cm = gantry::dev::binding_config_map(
        "runners",
        NS,
        binding,
        &gantry::toolchain::example_plugin("pod-runner").unwrap(),
        true,
    )
    .unwrap();
    gantry::dev::apply_binding(&cluster.client, &cm)
        .await
        .unwrap();

    let runners = cluster.api("test.gantry.dev/v1", "Runner", "runners", Some("default"));
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    gantry::dev::apply_object(&cluster.client, &runner("safe", false))
        .await
        .unwrap();
    gantry::dev::apply_object(&cluster.client, &runner("root", true))
        .await
        .unwrap();

    eventually("the safe runner's Pod", || async {
        pods.get_opt("safe").await.unwrap()
    })
    .await;
    let synced = eventually("the root runner's Synced=False", || async {
        let obj = serde_json::to_value(runners.get("root").await.unwrap()).unwrap();
        condition(&obj, "Synced")
            .filter(|c| c["status"] == "False")
            .cloned()
    })
    .await;
    assert_eq!(synced["reason"], "PolicyDenied");
    let message = synced["message"].as_str().unwrap();
    assert!(
        message.contains("policy disallow-privileged denied v1/Pod default/root")
            && message.contains("container \"main\" is privileged"),
        "{message}"
    );
    // The Event follows the status write.
    eventually("the PolicyDenied Event", || async {
        cluster
            .events("default", "root")
            .await
            .into_iter()
            .find(|(reason, note)| reason == "PolicyDenied" && note.contains("is privileged"))
    })
    .await;
    assert!(
        pods.get_opt("root").await.unwrap().is_none(),
        "nothing applied"
    );
    assert!(
        cluster
            .policies
            .metrics()
            .evaluations("disallow-privileged", "denied")
            >= 1
    );

    // The policy switched to monitor mode: the parents it guards are
    // reconciled again at once, and the denial no longer blocks.
    cluster
        .bind_policy(
            "no-privileged",
            "disallow-privileged",
            &format!("{DISALLOW_PRIVILEGED}mode: monitor\n"),
        )
        .await;
    eventually("the root runner's Pod", || async {
        pods.get_opt("root").await.unwrap()
    })
    .await;
    cluster.stop().await;
}

/// Run kubectl with `kubeconfig`; `stdin` is piped in when given.
fn kubectl(
    bin: &std::path::Path,
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const PRIVILEGED_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: root, namespace: default}\nspec:\n  containers:\n  - {name: app, image: busybox:1.36, securityContext: {privileged: true}}\n";
const PLAIN_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec:\n  containers:\n  - {name: app, image: nginx:1.27}\n";

/// The API server calls the webhooks that the sync writes: kubectl sees a
/// denial with the policy's message, a mutating policy's change, monitor
/// mode letting everything through, and a hostile policy answered by its
/// failurePolicy.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_the_policies_through_the_api_server(backend: Backend) {
    // One kubectl is enough here; the kubectl suite runs them all.
    let bin = gantry_test_support::kubectls().remove(0);
    let cluster = Cluster::start(backend).await;
    cluster
        .bind_policy("no-privileged", "disallow-privileged", DISALLOW_PRIVILEGED)
        .await;
    cluster
        .bind_policy("defaults", "default-resources", DEFAULT_RESOURCES)
        .await;
    cluster
        .bind_policy(
            "watcher",
            "hostile-policy",
            "name: watcher\nmode: monitor\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}\nsettings: {behaviour: deny}\n",
        )
        .await;
    cluster
        .bind_policy(
            "spinner",
            "hostile-policy",
            "name: spinner\nfailurePolicy: Ignore\nlimits: {deadlineMs: 200}\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [secrets], operations: [CREATE]}\nsettings: {behaviour: loop}\n",
        )
        .await;
    cluster
        .bind_policy(
            "bomb",
            "hostile-policy",
            "name: bomb\nlimits: {memoryMiB: 16}\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [services], operations: [CREATE]}\nsettings: {behaviour: memory-bomb}\n",
        )
        .await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(cluster.client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(cluster.client.clone());
    eventually("both configurations with every policy", || async {
        let v = validating.get_opt("gantry-policies").await.unwrap()?;
        let m = mutating.get_opt("gantry-policies").await.unwrap()?;
        (v.webhooks?.len() == 4 && m.webhooks?.len() == 1).then_some(())
    })
    .await;
    let kubeconfig = cluster.server.kubeconfig();

    // A denied create returns the policy's message. kube-apiserver picks up
    // new configurations through an informer: until it has, the Pod goes
    // in; undo that and try again.
    let deadline = std::time::Instant::now() + WAIT;
    let stderr = loop {
        let (ok, _, stderr) = kubectl(
            &bin,
            kubeconfig,
            &["apply", "-f", "-"],
            Some(PRIVILEGED_POD),
        );
        if !ok {
            break stderr;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the privileged pod was admitted"
        );
        let (ok, _, stderr) = kubectl(
            &bin,
            kubeconfig,
            &["delete", "-f", "-"],
            Some(PRIVILEGED_POD),
        );
        assert!(ok, "{stderr}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        stderr.contains(
            "admission webhook \"disallow-privileged.policies.gantry.dev\" denied the request"
        ) && stderr
            .contains("Pod is not allowed to run privileged: container \"app\" is privileged"),
        "{stderr}"
    );
    // The mutating policy's change is visible. kube-apiserver's informer
    // for mutating configurations syncs on its own, apart from the
    // validating one: until it has the configuration, the Pod goes in
    // unchanged; undo that and try again.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (ok, _, stderr) = kubectl(&bin, kubeconfig, &["apply", "-f", "-"], Some(PLAIN_POD));
        assert!(ok, "{stderr}");
        let (ok, requests, stderr) = kubectl(
            &bin,
            kubeconfig,
            &[
                "get",
                "pod",
                "web",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.containers[0].resources.requests}",
            ],
            None,
        );
        assert!(ok, "{stderr}");
        let requests: Value = serde_json::from_str(&requests).unwrap_or(Value::Null);
        if requests == json!({"cpu": "100m", "memory": "128Mi"}) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the pod was never mutated: requests {requests}"
        );
        let (ok, _, stderr) = kubectl(&bin, kubeconfig, &["delete", "-f", "-"], Some(PLAIN_POD));
        assert!(ok, "{stderr}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Monitor mode allows, and counts what it would have denied.
    let (ok, _, stderr) = kubectl(
        &bin,
        kubeconfig,
        &["create", "configmap", "watched", "-n", "default"],
        None,
    );
    assert!(ok, "{stderr}");
    assert_eq!(
        cluster.policies.metrics().evaluations("watcher", "denied"),
        1
    );
    // A policy that loops is cut off at its deadline; Ignore lets the
    // request through, with a warning.
    let (ok, _, stderr) = kubectl(
        &bin,
        kubeconfig,
        &[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            "default",
            "--from-literal=a=b",
        ],
        None,
    );
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("allowed by failurePolicy Ignore"),
        "{stderr}"
    );
    // A memory bomb with failurePolicy Fail denies, saying why.
    let (ok, _, stderr) = kubectl(
        &bin,
        kubeconfig,
        &[
            "create",
            "service",
            "clusterip",
            "svc",
            "-n",
            "default",
            "--tcp=80:80",
        ],
        None,
    );
    assert!(!ok);
    assert!(stderr.contains("memory limit"), "{stderr}");
    // And the server still answers.
    let (ok, _, stderr) = kubectl(
        &bin,
        kubeconfig,
        &["apply", "-f", "-"],
        Some(PRIVILEGED_POD),
    );
    assert!(!ok && stderr.contains("is privileged"), "{stderr}");
    assert_eq!(cluster.policies.metrics().errors("spinner", "timeout"), 1);
    cluster.stop().await;
}
