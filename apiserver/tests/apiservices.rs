//! `APIServices` of custom resources on both backends: a CRD's served group
//! versions get one each (`automanaged: "true"`, Local, Available), as kube's CRD
//! registration controller makes them, and lose it when no CRD serves them.

use std::time::{Duration, Instant};

use gantry_test_support::{Backend, Cluster, backends};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Sends `body` with `method` to `path`, accepting `accept`; the status code and
/// the JSON answer.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    accept: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json")
        .header("Accept", accept)
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Polls `path` until it answers `code` (kube's controllers take a moment).
async fn until(client: &kube::Client, path: &str, code: u16) -> Value {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let (got, body) = send(client, "GET", path, "application/json", None).await;
        if got == code {
            return body;
        }
        assert!(Instant::now() < deadline, "{path}: {got} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn crd(versions: &[(&str, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, (name, served))| {
            json!({ "name": name, "served": served, "storage": i == 0,
                "schema": { "openAPIV3Schema": { "type": "object" } } })
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "gizmos.fidelity.example.com" },
        "spec": { "group": "fidelity.example.com", "scope": "Namespaced",
            "names": { "plural": "gizmos", "singular": "gizmo", "kind": "Gizmo" },
            "versions": versions }
    })
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_group_versions_get_apiservices(backend: Backend) {
    let s = Cluster::start(backend).await;
    let c = s.client();
    let (code, body) = send(
        &c,
        "POST",
        CRDS,
        "application/json",
        Some(&crd(&[("v1", true), ("v2", false)])),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    let service = until(&c, &format!("{APISERVICES}/v1.fidelity.example.com"), 200).await;
    assert_eq!(
        service["metadata"]["labels"],
        json!({ "kube-aggregator.kubernetes.io/automanaged": "true" })
    );
    assert_eq!(
        service["spec"],
        json!({ "group": "fidelity.example.com", "version": "v1",
            "groupPriorityMinimum": 1000, "versionPriority": 100 })
    );
    // Not served: no APIService.
    let (code, _) = send(
        &c,
        "GET",
        &format!("{APISERVICES}/v2.fidelity.example.com"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 404);

    // `kubectl get apiservices`: Local and Available.
    let available = async || {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
        let (code, t) = send(
            &c,
            "GET",
            &format!("{APISERVICES}/v1.fidelity.example.com"),
            table,
            None,
        )
        .await;
        assert_eq!(code, 200, "{t}");
        t["rows"][0]["cells"].as_array().unwrap()[..3].to_vec()
    };
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut cells = available().await;
    while cells
        != [
            json!("v1.fidelity.example.com"),
            json!("Local"),
            json!("True"),
        ]
    {
        assert!(Instant::now() < deadline, "{cells:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        cells = available().await;
    }

    // Serving v2 adds its APIService; deleting the CRD removes both.
    let patch = json!([{ "op": "replace", "path": "/spec/versions/1/served", "value": true }]);
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{CRDS}/gizmos.fidelity.example.com"))
        .header("Content-Type", "application/json-patch+json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&patch).unwrap(),
        ))
        .unwrap();
    assert_eq!(c.send(req).await.unwrap().status(), 200);
    until(&c, &format!("{APISERVICES}/v2.fidelity.example.com"), 200).await;
    let (code, body) = send(
        &c,
        "DELETE",
        &format!("{CRDS}/gizmos.fidelity.example.com"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    until(&c, &format!("{APISERVICES}/v1.fidelity.example.com"), 404).await;
    until(&c, &format!("{APISERVICES}/v2.fidelity.example.com"), 404).await;
    s.shutdown().await;
}
