//! Protobuf bodies client-go's protobuf clients send beyond kubectl's generators,
//! on both backends: `DeleteOptions` of a DELETE and an `Eviction`.

use gantry_test_support::{Backend, Cluster, backends, raw};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::Client;
use prost::Message;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf body as kube's clients frame it.
fn framed(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: None,
        content_type: None,
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    raw::request(client, method, path, content_type, "application/json", body).await
}

fn delete_options(options: &metav1::DeleteOptions) -> Vec<u8> {
    // client-go frames DeleteOptions under the client's group version.
    framed("v1", "DeleteOptions", options.encode_to_vec())
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_delete_options_and_evictions_are_read(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let maps = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doomed"}});
    let (code, _) = send(
        &client,
        "POST",
        maps,
        "application/json",
        serde_json::to_vec(&cm).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let path = format!("{maps}/doomed");

    // A precondition that does not hold: the options were read.
    let wrong_uid = delete_options(&metav1::DeleteOptions {
        preconditions: Some(metav1::Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    });
    let (code, body) = send(&client, "DELETE", &path, PROTOBUF, wrong_uid).await;
    assert_eq!(code, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("not-the-uid"),
        "{body}"
    );

    // A dry run deletes nothing; then the delete.
    let dry = delete_options(&metav1::DeleteOptions {
        dry_run: vec!["All".into()],
        ..Default::default()
    });
    let (code, body) = send(&client, "DELETE", &path, PROTOBUF, dry).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        send(&client, "GET", &path, "application/json", vec![])
            .await
            .0,
        200
    );
    let background = delete_options(&metav1::DeleteOptions {
        propagation_policy: Some("Background".into()),
        ..Default::default()
    });
    let (code, body) = send(&client, "DELETE", &path, PROTOBUF, background).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        send(&client, "GET", &path, "application/json", vec![])
            .await
            .0,
        404
    );

    // An Eviction, as kubectl drain sends it.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evicted"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let (code, _) = send(
        &client,
        "POST",
        pods,
        "application/json",
        serde_json::to_vec(&pod).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let eviction = |dry_run: Vec<String>| {
        let e = k8s_pb::api::policy::v1::Eviction {
            metadata: Some(metav1::ObjectMeta {
                name: Some("evicted".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            delete_options: Some(metav1::DeleteOptions {
                dry_run,
                ..Default::default()
            }),
        };
        framed("policy/v1", "Eviction", e.encode_to_vec())
    };
    let path = format!("{pods}/evicted/eviction");
    let (code, body) = send(
        &client,
        "POST",
        &path,
        PROTOBUF,
        eviction(vec!["All".into()]),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        send(
            &client,
            "GET",
            &format!("{pods}/evicted"),
            "application/json",
            vec![]
        )
        .await
        .0,
        200
    );
    let (code, body) = send(&client, "POST", &path, PROTOBUF, eviction(vec![])).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        send(
            &client,
            "GET",
            &format!("{pods}/evicted"),
            "application/json",
            vec![]
        )
        .await
        .0,
        404
    );
    cluster.shutdown().await;
}
