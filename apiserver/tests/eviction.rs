//! `pods/eviction` on both backends: `PodDisruptionBudgets` are honoured as kube's
//! eviction registry honours them (429 in kube's words, one disruption spent per
//! eviction), dry runs change nothing, and the evicted Pod goes with kube's
//! `DisruptionTarget` condition; admission webhooks see evictions.

#[path = "common/webhook.rs"]
mod webhook_server;

use std::time::Duration;

use futures::StreamExt;
use gantry_test_support::{Backend, Cluster, backends, raw};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

const NS: &str = "default";

async fn running_pod(client: &Client, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "gantry-dev", "containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // What a kubelet would report: Running and Ready.
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap()
}

/// The budget's status as kube's disruption controller would write it.
async fn budget_status(client: &Client, allowed: i32) {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
        "currentHealthy": 2, "desiredHealthy": 2 - allowed, "expectedPods": 2}});
    budgets
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// POSTs an Eviction of `pod`, returning the status code and answer.
async fn evict(client: &Client, pod: &str, delete_options: Value, query: &str) -> (u16, Value) {
    let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NS}, "deleteOptions": delete_options});
    let path = format!("/api/v1/namespaces/{NS}/pods/{pod}/eviction{query}");
    raw::json(client, "POST", &path, Some(body)).await
}

/// A client of `cluster` that shows a 429 instead of retrying it as kube-rs does.
async fn client_without_retries(cluster: &Cluster) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_honour_disruption_budgets(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = client_without_retries(&cluster).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    running_pod(&client, "web-1").await;
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();

    // Not yet observed by a disruption controller: refused, retry in 10 s.
    let (code, body) = evict(&client, "web-1", json!({}), "").await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 10, "{body}");
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget web is still being processed by the server."}])
    );

    // No disruption allowed.
    budget_status(&client, 0).await;
    let (code, body) = evict(&client, "web-1", json!({}), "").await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}])
    );
    assert!(body["details"].get("retryAfterSeconds").is_none(), "{body}");

    // One allowed: a dry run changes nothing.
    budget_status(&client, 1).await;
    let before = budgets.get("web").await.unwrap();
    let (code, body) = evict(&client, "web-1", json!({"dryRun": ["All"]}), "").await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"], "Success");
    let (code, _) = evict(&client, "web-1", json!({}), "?dryRun=All").await;
    assert_eq!(code, 201);
    assert!(pods.get_opt("web-1").await.unwrap().is_some());
    assert_eq!(
        budgets.get("web").await.unwrap().metadata.resource_version,
        before.metadata.resource_version
    );

    let pod = pods.get("web-1").await.unwrap();
    let rv = pod.metadata.resource_version.clone().unwrap();

    // Evicted: the budget spent, the Pod gone with its DisruptionTarget condition.
    let (code, body) = evict(&client, "web-1", json!({"gracePeriodSeconds": 0}), "").await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
    );
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.disruptions_allowed, 0);
    assert!(status.disrupted_pods.unwrap().contains_key("web-1"));
    let condition = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionAllowed")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "InsufficientPods")
    );
    let mut events = pods
        .watch(
            &WatchParams::default()
                .fields("metadata.name=web-1")
                .timeout(10),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    let mut last = None;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), events.next()).await {
        match event.unwrap() {
            WatchEvent::Modified(p) => last = Some(p),
            WatchEvent::Deleted(p) => {
                last = Some(p);
                break;
            }
            _ => {}
        }
    }
    let last = last.expect("the Pod changed");
    let condition = last
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("a DisruptionTarget condition");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("EvictionByEvictionAPI"));
    assert_eq!(condition.message.as_deref(), Some("Eviction API: evicting"));
    assert!(pods.get_opt("web-1").await.unwrap().is_none());

    // Pending Pods go without asking the budget; a mismatched name is refused.
    let pending: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-2", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pending).await.unwrap();
    let body =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}});
    let path = format!("/api/v1/namespaces/{NS}/pods/web-2/eviction");
    let (code, _) = raw::json(&client, "POST", &path, Some(body)).await;
    assert_eq!(code, 400);
    let (code, body) = evict(&client, "web-2", json!({}), "").await;
    assert_eq!(code, 201, "{body}");
    assert!(pods.get_opt("web-2").await.unwrap().is_none());
    let (code, body) = evict(&client, "web-2", json!({}), "").await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["message"], "pods \"web-2\" not found");
    cluster.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_webhooks_review_evictions(backend: Backend) {
    let hook = webhook_server::start_hook(|_, review| {
        webhook_server::deny(
            review,
            json!({"message": "no evictions today", "code": 403}),
        )
    })
    .await;
    let cluster = Cluster::start(backend).await;
    let client = client_without_retries(&cluster).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    running_pod(&client, "web-1").await;
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "no-evictions"},
        "webhooks": [{
            "name": "no-evictions.example.com",
            "clientConfig": {"url": hook.url("/deny"), "caBundle": hook.ca_b64},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods/eviction"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
        }],
    });
    let configs: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::discovery::ApiResource::erase::<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        >(&()),
    );
    configs
        .create(
            &PostParams::default(),
            &serde_json::from_value(config).unwrap(),
        )
        .await
        .unwrap();

    // kube-apiserver picks the configuration up through an informer: retry until called.
    let mut answer = (0, Value::Null);
    for _ in 0..100 {
        answer = evict(&client, "web-1", json!({}), "").await;
        if answer.0 != 201 || hook.count("/deny") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = answer;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "admission webhook \"no-evictions.example.com\" denied the request: no evictions today"
    );
    assert!(
        pods.get_opt("web-1").await.unwrap().is_some(),
        "not evicted"
    );

    let review = hook.received("/deny").pop().unwrap();
    let request = &review["request"];
    eprintln!("{backend:?} review: {request}");
    assert_eq!(
        request["kind"],
        json!({"group": "policy", "version": "v1", "kind": "Eviction"})
    );
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(request["subResource"], "eviction");
    assert_eq!(request["requestSubResource"], "eviction");
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(
        (request["name"].as_str(), request["namespace"].as_str()),
        (Some("web-1"), Some(NS))
    );
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    let object = &request["object"];
    assert_eq!(
        (object["apiVersion"].as_str(), object["kind"].as_str()),
        (Some("policy/v1"), Some("Eviction"))
    );
    assert_eq!(object["metadata"]["name"], "web-1");
    assert_eq!(object["metadata"]["namespace"], NS);
    assert_eq!(object["deleteOptions"], json!({}));
    cluster.shutdown().await;
}
