//! Preconditions on both backends: a DELETE whose `preconditions` name another uid
//! or resourceVersion, and a PUT naming another uid, fail with kube's 409s and words.

use gantry_test_support::{Backend, Cluster, backends};
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Sends `body` (JSON) with `method` to `path`; the status code and the answer.
async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmet_preconditions_answer_as_kube_does(backend: Backend) {
    let s = Cluster::start(backend).await;
    let c = s.client();
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" },
        "spec": { "selector": { "matchLabels": { "app": "d" } },
            "template": { "metadata": { "labels": { "app": "d" } },
                "spec": { "containers": [{ "name": "c", "image": "i" }] } } } });
    let (code, created) = send(&c, "POST", deployments, &deployment).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let path = format!("{deployments}/d");

    let preconditions = json!({ "preconditions": { "uid": "wrong" } });
    let (code, body) = send(&c, "DELETE", &path, &preconditions).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on Deployment.apps \"d\": the UID in the precondition (wrong) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(body["reason"], "Conflict");
    assert_eq!(
        body["details"],
        json!({ "name": "d", "group": "apps", "kind": "Deployment" })
    );

    let preconditions = json!({ "preconditions": { "resourceVersion": "1" } });
    let (code, body) = send(&c, "DELETE", &path, &preconditions).await;
    assert_eq!(code, 409, "{body}");
    let message = body["message"].as_str().unwrap();
    let prefix = "Operation cannot be fulfilled on Deployment.apps \"d\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (";
    assert!(message.starts_with(prefix), "{message}");
    assert!(
        message.ends_with("). The object might have been modified"),
        "{message}"
    );

    // A ConfigMap replaced under another uid: kube's storage precondition.
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm" } });
    let (code, created) = send(&c, "POST", cms, &cm).await;
    assert_eq!(code, 201, "{created}");
    let cm_uid = created["metadata"]["uid"].as_str().unwrap();
    let replacement = json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "cm", "uid": "wrong" }, "data": { "a": "b" } });
    let (code, body) = send(&c, "PUT", &format!("{cms}/cm"), &replacement).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Operation cannot be fulfilled on configmaps \"cm\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/cm, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: wrong, UID in object meta: {cm_uid}"
        )
    );
    assert_eq!(
        body["details"],
        json!({ "name": "cm", "kind": "configmaps" })
    );

    // The right preconditions delete.
    let preconditions = json!({ "preconditions": { "uid": uid } });
    let (code, body) = send(&c, "DELETE", &path, &preconditions).await;
    assert_eq!(code, 200, "{body}");
    s.shutdown().await;
}
