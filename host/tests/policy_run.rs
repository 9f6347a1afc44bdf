//! `gantry run` with its webhook flags, as a process: it serves the policy
//! bindings over HTTPS, writes the CA bundle, keeps the webhook
//! configurations in sync, so the API server enforces the policy, and
//! counts the evaluations on `/metrics`.

mod common;

use std::io::{BufRead, BufReader};

use base64::Engine;
use common::{Backend, NAMESPACE, backends, cluster, gantry_run, http_get, sigterm, wait_for};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const POLICY: &str = "name: disallow-privileged\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}\ntimeoutSeconds: 5\n";

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gantry_run_serves_policies_and_keeps_the_configurations_in_sync(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (server, client, kubeconfig) = cluster(backend, None).await;
    gantry::dev::ensure_namespace(&client, NAMESPACE)
        .await
        .unwrap();
    let component = gantry::toolchain::example_plugin("disallow-privileged").unwrap();
    let cm = gantry::dev::policy_config_map("no-privileged", NAMESPACE, POLICY, &component, true)
        .unwrap();
    gantry::dev::apply_binding(&client, &cm).await.unwrap();

    let ca_out = dir.path().join("ca.pem");
    let mut gantry = gantry_run(
        &kubeconfig,
        &dir.path().join("gantry.log"),
        &[
            "--health-addr",
            "off",
            "--metrics-addr",
            "127.0.0.1:0",
            "--webhook-listen",
            "127.0.0.1:0",
            "--sync-webhook-configurations",
            "--webhook-ca-out",
            ca_out.to_str().unwrap(),
        ],
        &[],
        true,
    );
    let mut lines = BufReader::new(gantry.stdout.take().unwrap()).lines();
    let (mut metrics, mut webhooks) = (None, None);
    while metrics.is_none() || webhooks.is_none() {
        let line = lines.next().expect("gantry printed its endpoints").unwrap();
        if let Some(rest) = line.split("http://").nth(1) {
            metrics = rest.strip_suffix("/metrics").map(str::to_string);
        }
        if let Some(rest) = line.split("webhooks at ").nth(1) {
            webhooks = rest
                .strip_suffix("/policies/<name> and /convert/<crd>")
                .map(str::to_string);
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let (metrics, webhooks) = (metrics.unwrap(), webhooks.unwrap());
    assert!(webhooks.starts_with("https://127.0.0.1:"), "{webhooks}");

    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let webhook = wait_for("the validating configuration", async || {
        let configuration = validating.get_opt("gantry-policies").await.unwrap()?;
        configuration.webhooks?.into_iter().next()
    })
    .await;
    assert_eq!(
        webhook.client_config.url.as_deref(),
        Some(format!("{webhooks}/policies/disallow-privileged").as_str())
    );
    let ca = std::fs::read(&ca_out).expect("the CA bundle was written");
    assert!(String::from_utf8_lossy(&ca).starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .encode(&webhook.client_config.ca_bundle.unwrap().0),
        base64::engine::general_purpose::STANDARD.encode(&ca)
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"},
        "spec": {"containers": [{"name": "app", "image": "busybox", "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    match pods.create(&PostParams::default(), &pod).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(
                e.message.contains("container \"app\" is privileged"),
                "{e:?}"
            );
        }
        other => panic!("the privileged pod was not denied: {other:?}"),
    }
    let (status, body) = http_get(&metrics, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains(
            "gantry_policy_denials_total{policy=\"disallow-privileged\",mode=\"enforce\"} 1"
        ),
        "{body}"
    );

    sigterm(&gantry);
    assert!(gantry.wait().unwrap().success());
    server.shutdown().await;
}
