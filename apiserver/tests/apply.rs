//! Server-side apply, managedFields, and the patch types.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/default/configmaps";

async fn apply(a: std::net::SocketAddr, path: &str, manager: &str, force: bool, body: &str) -> Raw {
    let q = format!(
        "{path}?fieldManager={manager}{}",
        if force { "&force=true" } else { "" }
    );
    raw(
        a,
        "PATCH",
        &q,
        &[("Content-Type", "application/apply-patch+yaml")],
        body.as_bytes(),
    )
    .await
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn apply_creates_conflicts_forces_and_noops() {
    let s = server().await;
    let a = s.addr();
    let doc1 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\ndata:\n  a: one\n";
    let r = apply(a, &format!("{CM}/sa"), "alice", false, doc1).await;
    assert_eq!(r.status, 201, "create on apply: {}", r.body);
    let created = r.json();
    assert_eq!(managers(&created), vec![("alice".into(), "Apply".into())]);
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    // Same apply again: no write, same resourceVersion.
    let writes_before = s.writes().total();
    let rv_before = current_rv(a).await;
    let again = apply(a, &format!("{CM}/sa"), "alice", false, doc1)
        .await
        .json();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(current_rv(a).await, rv_before);
    assert_eq!(
        s.writes().total(),
        writes_before + 1,
        "the request is counted, but nothing was stored"
    );
    // Another manager applying a different value conflicts.
    let doc2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\ndata:\n  a: two\n";
    let r = apply(a, &format!("{CM}/sa"), "bob", false, doc2).await;
    let st = assert_status(&r, 409, "Conflict");
    let causes = st["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".data.a");
    assert!(
        causes[0]["message"].as_str().unwrap().contains("alice"),
        "{st}"
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("Apply failed with 1 conflict"),
        "{st}"
    );
    // force takes ownership.
    let r = apply(a, &format!("{CM}/sa"), "bob", true, doc2)
        .await
        .json();
    assert_eq!(r["data"]["a"], "two");
    assert_eq!(managers(&r), vec![("bob".into(), "Apply".into())]);
    // Applying without a field manager is rejected.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/sa"),
        &[("Content-Type", "application/apply-patch+yaml")],
        doc1.as_bytes(),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // A manager that stops applying a field removes it.
    let r = apply(
        a,
        &format!("{CM}/sa"),
        "bob",
        false,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sa\n",
    )
    .await
    .json();
    assert!(r.get("data").is_none_or(|d| d.get("a").is_none()), "{r}");
}

#[tokio::test]
async fn updates_record_managers_from_user_agent_or_field_manager() {
    let s = server().await;
    let a = s.addr();
    let body = serde_json::to_vec(&configmap("u", json!({"a": "b"}))).unwrap();
    raw(
        a,
        "POST",
        CM,
        &[
            ("Content-Type", "application/json"),
            ("User-Agent", "kubectl-create/v1.32.4 (linux/amd64)"),
        ],
        &body,
    )
    .await;
    raw(
        a,
        "PATCH",
        &format!("{CM}/u?fieldManager=patcher"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"c":"d"}}"#,
    )
    .await;
    let obj = req(a, "GET", &format!("{CM}/u"), None).await.json();
    assert_eq!(
        managers(&obj),
        vec![
            ("kubectl-create".into(), "Update".into()),
            ("patcher".into(), "Update".into())
        ]
    );
    let patcher = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "patcher")
        .unwrap()
        .clone();
    assert_eq!(patcher["fieldsV1"], json!({"f:data": {"f:c": {}}}));
    // An apply of a field owned by an Update manager conflicts, naming it with its apiVersion.
    let r = apply(
        a,
        &format!("{CM}/u"),
        "applier",
        false,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u\ndata:\n  c: x\n",
    )
    .await;
    let st = assert_status(&r, 409, "Conflict");
    assert!(
        st["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .contains("\"patcher\" using v1"),
        "{st}"
    );
}

#[tokio::test]
async fn patch_types() {
    let s = server().await;
    let a = s.addr();
    req(
        a,
        "POST",
        CM,
        Some(&configmap("p", json!({"a": "1", "b": "2"}))),
    )
    .await;
    let p = |ct: &'static str, body: &'static str| async move {
        raw(
            a,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/p",
            &[("Content-Type", ct)],
            body.as_bytes(),
        )
        .await
    };
    let r = p(
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/data/a","value":"x"},{"op":"remove","path":"/data/b"}]"#,
    )
    .await
    .json();
    assert_eq!(r["data"], json!({"a": "x"}));
    let r = p(
        "application/merge-patch+json",
        r#"{"data":{"a":null,"c":"3"}}"#,
    )
    .await
    .json();
    assert_eq!(r["data"], json!({"c": "3"}));
    let r = p(
        "application/strategic-merge-patch+json",
        r#"{"data":{"d":"4"}}"#,
    )
    .await
    .json();
    assert_eq!(r["data"], json!({"c": "3", "d": "4"}));
    // A failing JSON patch test op: 422, nothing changed.
    let rv = current_rv(a).await;
    let r = p(
        "application/json-patch+json",
        r#"[{"op":"test","path":"/data/c","value":"nope"}]"#,
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let r = p("application/json-patch+json", r"not json").await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(current_rv(a).await, rv);
    // Patch with a stale resourceVersion conflicts.
    let r = p(
        "application/merge-patch+json",
        r#"{"metadata":{"resourceVersion":"1"},"data":{"e":"5"}}"#,
    )
    .await;
    assert_status(&r, 409, "Conflict");
    // Patch of a missing object: 404.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/missing"),
        &[("Content-Type", "application/merge-patch+json")],
        b"{}",
    )
    .await;
    assert_status(&r, 404, "NotFound");
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let s = server().await;
    let api: Api<Deployment> = Api::namespaced(s.client(), "default");
    let dep: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "main", "image": "one"}, {"name": "side", "image": "s"}]}}}
    })).unwrap();
    api.create(&kube::api::PostParams::default(), &dep)
        .await
        .unwrap();
    let patched = api
        .patch("d", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "two"}]}}}})))
        .await
        .unwrap();
    let cs = patched.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0].image.as_deref(), Some("two"));
    assert_eq!(cs[1].image.as_deref(), Some("s"));
    // Server-side apply through kube-rs, with status kept out of main-resource applies.
    let applied = api
        .patch(
            "d",
            &PatchParams::apply("ctl").force(),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3}, "status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.as_ref().unwrap().replicas, Some(3));
    assert!(applied.status.as_ref().and_then(|s| s.replicas).is_none());
    assert_eq!(applied.metadata.generation, Some(3));
    // Apply to /status changes status and records a status-subresource manager.
    let st = api
        .patch_status("d", &PatchParams::apply("ctl-status"), &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "status": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().replicas, Some(3));
    let mf = st.metadata.managed_fields.unwrap();
    assert!(mf.iter().any(|e| e.manager.as_deref() == Some("ctl-status")
        && e.subresource.as_deref() == Some("status")));
}

#[tokio::test]
async fn strategic_merge_patch_is_415_for_custom_resources() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    req(
        a,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        Some(&widget("w", json!({}))),
    )
    .await;
    let r = raw(
        a,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w",
        &[("Content-Type", "application/strategic-merge-patch+json")],
        b"{}",
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    // Apply to a CR uses the CRD schema: list-type set merges across managers.
    let r = apply(
        a,
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "m1",
        false,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  tags: [a]\n",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = apply(
        a,
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "m2",
        false,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  tags: [b]\n",
    )
    .await
    .json();
    let mut tags: Vec<String> = serde_json::from_value(r["spec"]["tags"].clone()).unwrap();
    tags.sort();
    assert_eq!(tags, vec!["a", "b"]);
    // Apply violating the schema: 422.
    let r = apply(
        a,
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "m1",
        false,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  replicas: 99\n",
    )
    .await;
    assert_status(&r, 422, "Invalid");
    // Malformed YAML: 400.
    let r = apply(
        a,
        "/apis/example.com/v1/namespaces/default/widgets/w",
        "m1",
        false,
        "spec: [",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
}
