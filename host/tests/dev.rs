//! `gantry dev --kubeconfig`: the main job against an existing cluster of
//! either backend. The example CRDs, bindings, samples and admission
//! policies go in, the operator reconciles the samples, and the cluster's
//! own API server calls Gantry's webhooks on loopback.

mod common;

use std::process::{Command, Stdio};

use common::{Backend, Cluster, Process, backends, sigterm, wait_for};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_the_examples_and_policies_on_an_existing_cluster(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dev.log");
    let mut dev = Process(
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--log-format", "text", "dev", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .stdout(std::fs::File::create(dir.path().join("dev.out")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("start gantry dev"),
    );

    // The samples are reconciled by their plugins.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment = wait_for("the sample Memcached's Deployment", async || {
        deployments.get_opt("memcached-sample").await.ok()?
    })
    .await;
    assert_eq!(deployment.spec.unwrap().replicas, Some(3));
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    wait_for("the sample Database's StatefulSet", async || {
        let list = sets.list(&kube::api::ListParams::default()).await.ok()?;
        (!list.items.is_empty()).then_some(())
    })
    .await;
    let out = std::fs::read_to_string(dir.path().join("dev.out")).unwrap();
    assert!(
        out.contains(&format!(
            "export KUBECONFIG={}",
            cluster.kubeconfig().display()
        )),
        "{out}"
    );

    // The policies' webhook configuration is in place, and the cluster's
    // API server asks Gantry about a privileged Pod: denied.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for("the validating webhook configuration", async || {
        validating.get_opt("gantry-policies").await.ok()?
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let privileged: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"},
        "spec": {"containers": [{"name": "debug", "image": "busybox",
                                 "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    let denial = wait_for("the webhook to be called", async || {
        match pods.create(&PostParams::default(), &privileged).await {
            Err(kube::Error::Api(status)) if status.message.contains("admission webhook") => {
                Some(status)
            }
            // Not called yet (the configuration takes a moment to be
            // picked up); undo and try again.
            Ok(_) => {
                let _ = pods
                    .delete("debug", &kube::api::DeleteParams::default())
                    .await;
                None
            }
            Err(_) => None,
        }
    })
    .await;
    assert!(
        denial
            .message
            .contains("\"disallow-privileged.policies.gantry.dev\" denied the request"),
        "{denial:?}"
    );

    sigterm(&dev);
    let status = dev.wait().unwrap();
    assert!(
        status.success(),
        "gantry dev exits 0 on SIGTERM: {status:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    cluster.shutdown().await;
}
