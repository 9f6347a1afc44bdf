//! CustomResourceDefinitions: validation, serving, schema, subresources, versions,
//! printer columns, cleanup.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const W: &str = "/apis/example.com/v1/namespaces/default/widgets";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

#[tokio::test]
async fn invalid_crds_are_rejected_with_causes() {
    let s = server().await;
    let a = s.addr();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut no_storage = widget_crd();
    no_storage["spec"]["versions"][0]["storage"] = json!(false);
    let st = assert_status(
        &req(a, "POST", path, Some(&no_storage)).await,
        422,
        "Invalid",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("exactly one version marked as storage version"),
        "{st}"
    );
    let mut bad_name = widget_crd();
    bad_name["metadata"]["name"] = json!("wrong.example.com");
    let st = assert_status(&req(a, "POST", path, Some(&bad_name)).await, 422, "Invalid");
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
    let mut non_structural = widget_crd();
    non_structural["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        json!({"properties": {"a": {"type": "string"}}});
    let st = assert_status(
        &req(a, "POST", path, Some(&non_structural)).await,
        422,
        "Invalid",
    );
    let causes = st["details"]["causes"].as_array().unwrap();
    assert!(
        causes.iter().any(|c| c["field"]
            .as_str()
            .unwrap()
            .starts_with("spec.versions[0].schema.openAPIV3Schema")),
        "{st}"
    );
    // Nothing got served.
    assert_eq!(
        req(a, "GET", "/apis/example.com/v1", None).await.status,
        404
    );
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn crd_is_established_and_discoverable_immediately() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let crd = req(
        a,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com",
        None,
    )
    .await
    .json();
    let conds = crd["status"]["conditions"].as_array().unwrap();
    for t in ["NamesAccepted", "Established"] {
        assert!(
            conds
                .iter()
                .any(|c| c["type"] == t && c["status"] == "True"),
            "{t}: {conds:?}"
        );
    }
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    let d = req(a, "GET", "/apis/example.com/v1", None).await.json();
    let w = d["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "widgets")
        .unwrap()
        .clone();
    assert_eq!(w["shortNames"], json!(["wd"]));
    assert_eq!(w["categories"], json!(["all"]));
    assert_eq!(w["namespaced"], true);
    let names: Vec<&str> = d["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"widgets/status") && names.contains(&"widgets/scale"),
        "{names:?}"
    );
    let g = req(a, "GET", "/apis/example.com", None).await.json();
    assert_eq!(g["preferredVersion"]["version"], "v1");
}

#[tokio::test]
async fn defaults_pruning_and_validation() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let rv0 = current_rv(a).await;
    // Schema violation → 422 with a field cause, nothing stored.
    let st = assert_status(
        &req(a, "POST", W, Some(&widget("big", json!({"replicas": 50})))).await,
        422,
        "Invalid",
    );
    assert_eq!(st["details"]["causes"][0]["field"], "spec.replicas");
    assert_eq!(st["details"]["kind"], "Widget");
    assert_eq!(current_rv(a).await, rv0);
    // Unknown fields under Strict → 400 listing them.
    let st = assert_status(
        &req(
            a,
            "POST",
            &format!("{W}?fieldValidation=Strict"),
            Some(&widget("u", json!({"bogus": 1}))),
        )
        .await,
        400,
        "BadRequest",
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.bogus\""),
        "{st}"
    );
    // Under Warn (default) they are dropped with a warning header.
    let r = req(
        a,
        "POST",
        W,
        Some(&widget("u", json!({"bogus": 1, "replicas": 1}))),
    )
    .await;
    assert_eq!(r.status, 201);
    assert!(
        r.header("warning")
            .iter()
            .any(|w| w.contains("unknown field \\\"spec.bogus\\\"") || w.contains("spec.bogus")),
        "{:?}",
        r.headers
    );
    let obj = r.json();
    assert!(obj["spec"].get("bogus").is_none());
    assert_eq!(obj["spec"]["size"], "small", "defaulted");
    // Ignore: dropped silently.
    let r = req(
        a,
        "POST",
        &format!("{W}?fieldValidation=Ignore"),
        Some(&widget("v", json!({"bogus": 1}))),
    )
    .await;
    assert_eq!(r.status, 201);
    assert!(r.header("warning").is_empty());
}

#[tokio::test]
async fn versions_status_and_generation() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let r = req(a, "POST", W, Some(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 1}, "status": {"phase": "x"}}))).await;
    let created = r.json();
    assert!(
        created.get("status").is_none(),
        "status dropped on create: {created}"
    );
    assert_eq!(created["metadata"]["generation"], 1);
    // Served at v1beta1 with the apiVersion rewritten.
    let b = req(
        a,
        "GET",
        "/apis/example.com/v1beta1/namespaces/default/widgets/w",
        None,
    )
    .await
    .json();
    assert_eq!(b["apiVersion"], "example.com/v1beta1");
    // /status changes only status and keeps generation.
    let mut st = created.clone();
    st["status"] = json!({"phase": "Ready", "replicas": 1});
    st["spec"]["replicas"] = json!(9);
    let r = req(a, "PUT", &format!("{W}/w/status"), Some(&st)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let after = r.json();
    assert_eq!(after["status"]["phase"], "Ready");
    assert_eq!(after["spec"]["replicas"], 1);
    assert_eq!(after["metadata"]["generation"], 1);
    let mf = after["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["subresource"] == "status" && e["fieldsV1"]["f:status"].is_object()),
        "{mf:?}"
    );
    // Main resource writes ignore status and bump generation on spec changes.
    let mut main = after.clone();
    main["status"] = json!({"phase": "Hacked"});
    main["spec"]["replicas"] = json!(2);
    let r = req(a, "PUT", &format!("{W}/w"), Some(&main)).await.json();
    assert_eq!(r["status"]["phase"], "Ready");
    assert_eq!(r["metadata"]["generation"], 2);
    // Metadata-only change: generation unchanged.
    let r = raw(
        a,
        "PATCH",
        &format!("{W}/w"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"labels":{"x":"y"}}}"#,
    )
    .await
    .json();
    assert_eq!(r["metadata"]["generation"], 2);
}

#[tokio::test]
async fn scale_subresource() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    req(a, "POST", W, Some(&widget("s", json!({"replicas": 2})))).await;
    let sc = req(a, "GET", &format!("{W}/s/scale"), None).await.json();
    assert_eq!(sc["kind"], "Scale");
    assert_eq!(sc["apiVersion"], "autoscaling/v1");
    assert_eq!(sc["spec"]["replicas"], 2);
    let mut upd = sc.clone();
    upd["spec"]["replicas"] = json!(4);
    let r = req(a, "PUT", &format!("{W}/s/scale"), Some(&upd)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["replicas"], 4);
    let w = req(a, "GET", &format!("{W}/s"), None).await.json();
    assert_eq!(w["spec"]["replicas"], 4);
    // Stale scale update → 409.
    assert_status(
        &req(a, "PUT", &format!("{W}/s/scale"), Some(&upd)).await,
        409,
        "Conflict",
    );
    let r = raw(
        a,
        "PATCH",
        &format!("{W}/s/scale"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"spec":{"replicas":5}}"#,
    )
    .await;
    assert_eq!(r.json()["spec"]["replicas"], 5);
}

#[tokio::test]
async fn printer_columns_in_table() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    req(
        a,
        "POST",
        W,
        Some(&widget("t", json!({"replicas": 3, "size": "large"}))),
    )
    .await;
    let r = raw(a, "GET", W, &[("Accept", TABLE)], b"").await.json();
    assert_eq!(r["kind"], "Table");
    let cols: Vec<&str> = r["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Size", "Replicas"]);
    assert_eq!(r["rows"][0]["cells"], json!(["t", "large", 3]));
    assert_eq!(r["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    // Built-ins: NAME, DATA, AGE for configmaps.
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("c", json!({"a": "b", "c": "d"}))),
    )
    .await;
    let t = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps/c",
        &[("Accept", TABLE)],
        b"",
    )
    .await
    .json();
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Data", "Age"]);
    assert_eq!(t["rows"][0]["cells"][1], 2);
    // Every kind has kube's columns: Roles have Name and Created At.
    let t = raw(
        a,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/roles",
        &[("Accept", TABLE)],
        b"",
    )
    .await
    .json();
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Created At"]);
}

#[tokio::test]
async fn crd_update_takes_effect_and_delete_removes_objects() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    req(a, "POST", W, Some(&widget("d1", json!({"replicas": 8})))).await;
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let mut crd = req(a, "GET", path, None).await.json();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
        ["maximum"] = json!(100);
    crd["spec"]["versions"][1]["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(json!({"name": "v2", "served": true, "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}));
    let r = req(a, "PUT", path, Some(&crd)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        req(a, "POST", W, Some(&widget("d2", json!({"replicas": 50}))))
            .await
            .status,
        201
    );
    assert_eq!(
        req(
            a,
            "GET",
            "/apis/example.com/v2/namespaces/default/widgets/d2",
            None
        )
        .await
        .json()["apiVersion"],
        "example.com/v2"
    );
    // Delete: objects go, then the CRD, then the endpoints.
    let r = req(a, "DELETE", path, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut gone = false;
    for _ in 0..3000 {
        if req(a, "GET", path, None).await.status == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "CRD deleted after its objects");
    assert_eq!(req(a, "GET", W, None).await.status, 404);
    // Re-creating the CRD shows no old objects.
    install_widgets(a).await;
    let l: Value = req(a, "GET", W, None).await.json();
    assert_eq!(l["items"], json!([]));
}

#[tokio::test]
async fn cluster_scoped_crd() {
    let s = server().await;
    let a = s.addr();
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["scope"] = json!("Cluster");
    crd["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    let r = req(
        a,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["spec"]["names"]["singular"], "gadget");
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {}});
    let r = req(a, "POST", "/apis/example.com/v1/gadgets", Some(&g)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.json()["metadata"].get("namespace").is_none());
    assert_eq!(
        req(
            a,
            "GET",
            "/apis/example.com/v1/namespaces/default/gadgets/g",
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn custom_resource_updates_need_a_resource_version() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let mut w = req(a, "POST", W, Some(&widget("rv", json!({"replicas": 1}))))
        .await
        .json();
    w["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let st = assert_status(
        &req(a, "PUT", &format!("{W}/rv"), Some(&w)).await,
        422,
        "Invalid",
    );
    assert_eq!(
        st["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );
    // Built-ins allow it.
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("u", json!({}))),
    )
    .await;
    let r = req(
        a,
        "PUT",
        "/api/v1/namespaces/default/configmaps/u",
        Some(&configmap("u", json!({"a": "b"}))),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}
