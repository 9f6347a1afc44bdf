//! Deletion: finalizers, preconditions, propagation policies, garbage collection,
//! `DeleteCollection`, namespace cascade.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/default/configmaps";

async fn eventually_gone(a: SocketAddr, path: &str) {
    for _ in 0..6000 {
        if req(a, "GET", path, None).await.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path} still exists");
}

async fn create(a: SocketAddr, path: &str, body: Value) -> Value {
    let r = req(a, "POST", path, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()
}

fn owned_by(name: &str, owner: &Value, block: bool) -> Value {
    let mut c = configmap(name, json!({}));
    c["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": block
    }]);
    c
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let s = server().await;
    let a = s.addr();
    let mut body = configmap("f", json!({}));
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(a, CM, body).await;
    let r = req(a, "DELETE", &format!("{CM}/f"), None).await;
    assert_eq!(r.status, 200);
    let held = r.json();
    assert_eq!(
        held["kind"], "ConfigMap",
        "pending deletion returns the object"
    );
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    // Still there.
    let got = req(a, "GET", &format!("{CM}/f"), None).await.json();
    assert!(got["metadata"]["deletionTimestamp"].is_string());
    // No new finalizers while deleting.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/f"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"finalizers":["example.com/hold","other"]}}"#,
    )
    .await;
    assert_status(&r, 422, "Invalid");
    // Removing the last finalizer deletes it, on that update; watchers get DELETED with
    // the final state.
    let rv = current_rv(a).await;
    let watch = tokio::spawn(async move {
        raw(
            a,
            "GET",
            &format!("{CM}?watch=1&resourceVersion={rv}&timeoutSeconds=2"),
            &[],
            b"",
        )
        .await
    });
    // (The watch starts from `rv`, so it sees the deletion however late it connects.)
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/f"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(req(a, "GET", &format!("{CM}/f"), None).await.status, 404);
    let body = watch.await.unwrap().body;
    let ev: Value = serde_json::from_str(body.lines().next().expect("one event")).unwrap();
    assert_eq!(ev["type"], "DELETED");
    assert!(ev["object"]["metadata"].get("finalizers").is_none(), "{ev}");
}

#[tokio::test]
async fn delete_preconditions() {
    let s = server().await;
    let a = s.addr();
    let obj = create(a, CM, configmap("pc", json!({}))).await;
    let st = assert_status(
        &req(
            a,
            "DELETE",
            &format!("{CM}/pc"),
            Some(&json!({"preconditions": {"uid": "nope"}})),
        )
        .await,
        409,
        "Conflict",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("the UID in the precondition (nope) does not match the UID in record"),
        "{st}"
    );
    assert_status(
        &req(
            a,
            "DELETE",
            &format!("{CM}/pc"),
            Some(&json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await,
        409,
        "Conflict",
    );
    let ok = req(a, "DELETE", &format!("{CM}/pc"), Some(&json!({"preconditions": {"uid": obj["metadata"]["uid"], "resourceVersion": obj["metadata"]["resourceVersion"]}}))).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["status"], "Success");
    assert_status(
        &req(a, "DELETE", &format!("{CM}/pc"), None).await,
        404,
        "NotFound",
    );
}

#[tokio::test]
async fn background_propagation_garbage_collects_dependents() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CM, configmap("owner", json!({}))).await;
    create(a, CM, owned_by("dep", &owner, false)).await;
    let other = create(a, CM, configmap("other-owner", json!({}))).await;
    // A dependent with one live owner left stays.
    let mut two = owned_by("two-owners", &owner, false);
    two["metadata"]["ownerReferences"].as_array_mut().unwrap().push(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "other-owner", "uid": other["metadata"]["uid"]}));
    create(a, CM, two).await;
    req(a, "DELETE", &format!("{CM}/owner"), None).await;
    eventually_gone(a, &format!("{CM}/dep")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        req(a, "GET", &format!("{CM}/two-owners"), None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn foreground_deletes_blocking_dependents_first() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CM, configmap("fg", json!({}))).await;
    let mut dep = owned_by("fg-dep", &owner, true);
    dep["metadata"]["finalizers"] = json!(["example.com/slow"]);
    create(a, CM, dep).await;
    let r = req(
        a,
        "DELETE",
        &format!("{CM}/fg?propagationPolicy=Foreground"),
        None,
    )
    .await
    .json();
    assert!(
        r["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&json!("foregroundDeletion")),
        "{r}"
    );
    // The dependent is being deleted, the owner waits for it.
    for _ in 0..6000 {
        let d = req(a, "GET", &format!("{CM}/fg-dep"), None).await.json();
        if d["metadata"]["deletionTimestamp"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        req(a, "GET", &format!("{CM}/fg"), None).await.status,
        200,
        "owner waits for blocking dependent"
    );
    raw(
        a,
        "PATCH",
        &format!("{CM}/fg-dep"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    eventually_gone(a, &format!("{CM}/fg")).await;
}

#[tokio::test]
async fn orphan_keeps_dependents_without_owner_reference() {
    let s = server().await;
    let a = s.addr();
    let owner = create(a, CM, configmap("or", json!({}))).await;
    create(a, CM, owned_by("or-dep", &owner, false)).await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"});
    req(a, "DELETE", &format!("{CM}/or"), Some(&body)).await;
    eventually_gone(a, &format!("{CM}/or")).await;
    let d = req(a, "GET", &format!("{CM}/or-dep"), None).await.json();
    assert!(d["metadata"].get("ownerReferences").is_none(), "{d}");
}

#[tokio::test]
async fn delete_collection_with_selector() {
    let s = server().await;
    let a = s.addr();
    for (n, l) in [("c1", "x"), ("c2", "x"), ("c3", "y")] {
        let mut b = configmap(n, json!({}));
        b["metadata"]["labels"] = json!({"k": l});
        create(a, CM, b).await;
    }
    let r = req(a, "DELETE", &format!("{CM}?labelSelector=k%3Dx"), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
    let l = req(a, "GET", CM, None).await.json();
    let names: Vec<&str> = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["c3", "kube-root-ca.crt"]);
}

#[tokio::test]
async fn namespace_deletion_cascades() {
    let s = server().await;
    let a = s.addr();
    create(
        a,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}),
    )
    .await;
    create(
        a,
        "/api/v1/namespaces/doomed/configmaps",
        configmap("x", json!({})),
    )
    .await;
    let mut held = configmap("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(a, "/api/v1/namespaces/doomed/configmaps", held).await;
    let r = req(a, "DELETE", "/api/v1/namespaces/doomed", None)
        .await
        .json();
    assert_eq!(r["status"]["phase"], "Terminating");
    assert_eq!(r["spec"]["finalizers"], json!(["kubernetes"]));
    // No new content in a terminating namespace.
    let st = assert_status(
        &req(
            a,
            "POST",
            "/api/v1/namespaces/doomed/configmaps",
            Some(&configmap("new", json!({}))),
        )
        .await,
        403,
        "Forbidden",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("because it is being terminated")
    );
    eventually_gone(a, "/api/v1/namespaces/doomed/configmaps/x").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        req(a, "GET", "/api/v1/namespaces/doomed", None)
            .await
            .status,
        200,
        "waits for the held object"
    );
    raw(
        a,
        "PATCH",
        "/api/v1/namespaces/doomed/configmaps/held",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    eventually_gone(a, "/api/v1/namespaces/doomed").await;
}
