//! Differences from kube-apiserver that the differential suite found
//! (`tests/differential.rs`) and that are fixed: each test failed before
//! its fix. The expected values are what kube-apiserver 1.36 answers.

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn namespaces_carry_their_name_label() {
    let s = server().await;
    let a = s.addr();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    let created = req(a, "POST", "/api/v1/namespaces", Some(&ns)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.json()["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "team"})
    );
    // A generated name gets it too.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "gen-"}});
    let created = req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.json();
    let name = created["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        created["metadata"]["labels"]["kubernetes.io/metadata.name"],
        name
    );
    // Removing it or changing it puts it back.
    let patch = json!({"metadata": {"labels": {"kubernetes.io/metadata.name": "other", "a": "b"}}});
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/team",
        &[("Content-Type", "application/merge-patch+json")],
        patch.to_string().as_bytes(),
    )
    .await;
    assert_eq!(
        r.json()["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "team", "a": "b"})
    );
}

#[tokio::test]
async fn discovery_documents_as_kube_writes_them() {
    let s = server().await;
    let a = s.addr();
    let api = req(a, "GET", "/api", None).await.json();
    assert_eq!(
        api["serverAddressByClientCIDRs"][0]["serverAddress"],
        a.to_string(),
        "the address with its port"
    );
    let core = req(a, "GET", "/api/v1", None).await.json();
    assert_eq!(core["kind"], "APIResourceList");
    assert!(
        core.get("apiVersion").is_none(),
        "kube's /api/v1 has none: {core:?}"
    );
    let apps = req(a, "GET", "/apis/apps/v1", None).await.json();
    assert_eq!(apps["apiVersion"], "v1");
    let aggregated = raw(
        a,
        "GET",
        "/api",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        b"",
    )
    .await
    .json();
    assert_eq!(
        aggregated["items"][0]["metadata"],
        json!({}),
        "the core group has no name"
    );
}

fn hash_of(list: &Value, resource: &str) -> Value {
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == resource)
        .unwrap_or_else(|| panic!("{resource} in {list}"))["storageVersionHash"]
        .clone()
}

#[tokio::test]
async fn discovery_has_storage_version_hashes() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    // The values kube-apiserver 1.36 serves.
    let cases = [
        ("/apis/apps/v1", "controllerrevisions", "85nkx63pcBU="),
        ("/apis/batch/v1", "cronjobs", "sd5LIXh4Fjs="),
        ("/apis/coordination.k8s.io/v1", "leases", "gqkMMb/YqFM="),
        // Stored as core/v1 Events.
        ("/apis/events.k8s.io/v1", "events", "r2yiGXH7wu8="),
        // Stored as autoscaling/v2.
        (
            "/apis/autoscaling/v1",
            "horizontalpodautoscalers",
            "qwQve8ut294=",
        ),
        ("/apis/example.com/v1", "widgets", "gIwvi5rymmg="),
    ];
    for (path, resource, hash) in cases {
        let list = req(a, "GET", path, None).await.json();
        assert_eq!(hash_of(&list, resource), hash, "{path} {resource}");
    }
    let core = req(a, "GET", "/api/v1", None).await.json();
    assert!(hash_of(&core, "configmaps").is_string());
    assert!(
        hash_of(&core, "pods/status").is_null(),
        "subresources have none"
    );
}

#[tokio::test]
async fn integral_numbers_of_built_ins_stay_integers() {
    let s = server().await;
    let a = s.addr();
    let r = req(
        a,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&widget_crd()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains(r#""maximum":10"#), "{}", r.body);
    assert!(!r.body.contains(r#""maximum":10.0"#), "{}", r.body);
}

#[tokio::test]
async fn marking_for_deletion_as_kube_registries_do() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    let mut w = widget("w", json!({"replicas": 1}));
    w["metadata"]["finalizers"] = json!(["example.com/keep"]);
    let created = req(a, "POST", widgets, Some(&w)).await.json();
    assert_eq!(created["metadata"]["generation"], 1);
    // The generic registry: grace period 0, generation + 1.
    let marked = req(a, "DELETE", &format!("{widgets}/w"), None).await.json();
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(marked["metadata"]["generation"], 2);
    let again = req(a, "DELETE", &format!("{widgets}/w"), None).await.json();
    assert_eq!(again["metadata"]["generation"], 2, "once");
    // Namespaces and CRDs: only the deletion timestamp.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.status,
        201
    );
    let marked = req(a, "DELETE", "/api/v1/namespaces/gone", None)
        .await
        .json();
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    assert!(
        marked["metadata"]
            .get("deletionGracePeriodSeconds")
            .is_none(),
        "{marked}"
    );
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    let marked = req(a, "DELETE", crd, None).await.json();
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    assert!(
        marked["metadata"]
            .get("deletionGracePeriodSeconds")
            .is_none(),
        "{marked}"
    );
}

#[tokio::test]
async fn generation_only_where_kube_keeps_one() {
    let s = server().await;
    let a = s.addr();
    let cms = "/api/v1/namespaces/default/configmaps";
    let mut cm = configmap("c", json!({"k": "v"}));
    cm["metadata"]["generation"] = json!(7);
    let created = req(a, "POST", cms, Some(&cm)).await.json();
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    let mut changed = created.clone();
    changed["data"]["k"] = json!("w");
    let updated = req(a, "PUT", &format!("{cms}/c"), Some(&changed))
        .await
        .json();
    assert!(updated["metadata"].get("generation").is_none(), "{updated}");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}});
    let created = req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.json();
    assert!(created["metadata"].get("generation").is_none(), "{created}");
    // Workloads and custom resources have one.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let created = req(
        a,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(&deployment),
    )
    .await
    .json();
    assert_eq!(created["metadata"]["generation"], 1, "{created}");
}

#[tokio::test]
async fn discovery_lists_sorted_with_kube_verb_order() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    for path in ["/api/v1", "/apis/apps/v1"] {
        let list = req(a, "GET", path, None).await.json();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "{path}");
    }
    let widgets = req(a, "GET", "/apis/example.com/v1", None).await.json();
    assert_eq!(
        widgets["resources"][0]["verbs"],
        json!([
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch"
        ])
    );
}

#[tokio::test]
async fn crd_cleanup_finalizer_comes_with_the_delete() {
    let s = server().await;
    let a = s.addr();
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = req(a, "POST", crds, Some(&widget_crd())).await.json();
    assert!(created["metadata"].get("finalizers").is_none(), "{created}");
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        req(a, "POST", widgets, Some(&widget("w", json!({}))))
            .await
            .status,
        201
    );
    let marked = req(a, "DELETE", &format!("{crds}/widgets.example.com"), None)
        .await
        .json();
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    // The custom resources go, then the CRD.
    for _ in 0..200 {
        if req(a, "GET", &format!("{crds}/widgets.example.com"), None)
            .await
            .status
            == 404
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the CRD was not deleted");
}

#[tokio::test]
async fn probes_get_kube_defaults() {
    let s = server().await;
    let a = s.addr();
    let container = json!({"name": "c", "image": "nginx:1",
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
        "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [container]}});
    let created = req(a, "POST", "/api/v1/namespaces/default/pods", Some(&pod)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let c = &created.json()["spec"]["containers"][0];
    assert_eq!(
        c["livenessProbe"],
        json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
            "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
    assert_eq!(c["readinessProbe"]["successThreshold"], 1);
    assert_eq!(
        c["lifecycle"]["preStop"]["httpGet"],
        json!({"port": 80, "path": "/stop", "scheme": "HTTP"})
    );
}

#[tokio::test]
async fn internal_errors_carry_their_cause() {
    let s = server().await;
    let a = s.addr();
    // A webhook nobody listens on, failing closed.
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gone"},
        "webhooks": [{
            "name": "gone.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["configmaps"]}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    });
    let r = req(
        a,
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        Some(&config),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("c", json!({}))),
    )
    .await;
    let status = assert_status(&r, 500, "InternalError");
    let message = status["message"].as_str().unwrap();
    let cause = status["details"]["causes"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Internal error occurred: failed calling webhook"),
        "{status}"
    );
    assert_eq!(format!("Internal error occurred: {cause}"), message);
}

#[tokio::test]
async fn list_items_of_built_ins_have_no_type() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        req(a, "POST", cms, Some(&configmap("c", json!({}))))
            .await
            .status,
        201
    );
    let list = req(a, "GET", cms, None).await.json();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    let item = &list["items"][0];
    assert_eq!(item["metadata"]["name"], "c");
    assert!(
        item.get("kind").is_none() && item.get("apiVersion").is_none(),
        "{item}"
    );
    // Typed clients read such lists.
    let typed: Vec<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(s.client())
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items;
    assert_eq!(typed.len(), 1);
    // Custom resources keep theirs.
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        req(a, "POST", widgets, Some(&widget("w", json!({}))))
            .await
            .status,
        201
    );
    let list = req(a, "GET", widgets, None).await.json();
    assert_eq!(
        list["metadata"]["continue"], "",
        "kube's unstructured lists have one"
    );
    assert_eq!(list["items"][0]["kind"], "Widget");
    assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
}
