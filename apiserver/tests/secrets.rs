//! Secrets' `stringData`, on both backends: folded into `data` on create,
//! update and server-side apply, winning over `data`, never stored.

use gantry_test_support::{Backend, Cluster, backends};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_data_is_folded_into_data(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let secrets: Api<Secret> = Api::namespaced(cluster.client(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"},
        "data": {"kept": "a2VwdA==", "both": "b2xk"},
        "stringData": {"token": "Bearer x", "both": "new"},
    }))
    .unwrap();
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let expected = [
        ("both".to_string(), bytes("new")),
        ("kept".to_string(), bytes("kept")),
        ("token".to_string(), bytes("Bearer x")),
    ]
    .into();
    assert_eq!(created.data, Some(expected));
    assert_eq!(created.string_data, None);
    let read = secrets.get("token").await.unwrap();
    assert_eq!(read.data, created.data);
    assert_eq!(read.string_data, None);

    // Server-side apply with stringData only: folded as well.
    let applied = secrets
        .patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "applied", "namespace": "default"},
                "stringData": {"token": "t"},
            })),
        )
        .await
        .unwrap();
    assert_eq!(
        applied.data,
        Some([("token".to_string(), bytes("t"))].into())
    );
    assert_eq!(applied.string_data, None);
    cluster.shutdown().await;
}
