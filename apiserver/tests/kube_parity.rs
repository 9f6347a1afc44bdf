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
    // `c`, then what every namespace has.
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
    assert_eq!(typed.len(), 2);
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

/// A Pod of one container with `resources`.
// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn pod(name: &str, resources: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "resources": resources}]}})
}

#[tokio::test]
async fn new_objects_get_the_status_kube_gives_them() {
    let s = server().await;
    let a = s.addr();
    let pods = "/api/v1/namespaces/default/pods";
    let both = json!({"cpu": "1", "memory": "1Gi"});
    for (name, resources, class) in [
        ("best", json!({}), "BestEffort"),
        // Requests default to limits: Guaranteed.
        ("limits", json!({"limits": both}), "Guaranteed"),
        (
            "equal",
            json!({"requests": {"cpu": "1000m", "memory": "1073741824"}, "limits": both}),
            "Guaranteed",
        ),
        ("burst", json!({"requests": {"cpu": "100m"}}), "Burstable"),
    ] {
        let mut p = pod(name, resources);
        p["status"] = json!({"phase": "Running", "podIP": "10.0.0.1"});
        let created = req(a, "POST", pods, Some(&p)).await;
        assert_eq!(created.status, 201, "{}", created.body);
        let created = created.json();
        assert_eq!(
            created["status"],
            json!({"phase": "Pending", "qosClass": class}),
            "{name}"
        );
        assert_eq!(created["spec"]["enableServiceLinks"], true);
    }
    let limits = req(a, "GET", &format!("{pods}/limits"), None).await.json();
    assert_eq!(
        limits["spec"]["containers"][0]["resources"]["requests"],
        json!({"cpu": "1", "memory": "1Gi"})
    );
    let mut gated = pod("gated", json!({}));
    gated["spec"]["schedulingGates"] = json!([{"name": "wait"}]);
    let gated = req(a, "POST", pods, Some(&gated)).await.json();
    assert_eq!(
        gated["status"]["conditions"][0]["reason"], "SchedulingGated",
        "{gated}"
    );
    let pending = req(
        a,
        "GET",
        &format!("{pods}?fieldSelector=status.phase%3DPending"),
        None,
    )
    .await
    .json();
    assert_eq!(pending["items"].as_array().unwrap().len(), 5, "{pending}");
    // Other kinds: the empty status Go writes, with the fields it never omits.
    let template = json!({"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let selector = json!({"matchLabels": {"a": "b"}});
    for (path, body, status) in [
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"ports": [{"port": 80}]}}),
            json!({"loadBalancer": {}}),
        ),
        (
            "/api/v1/namespaces/default/persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"phase": "Pending"}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": selector, "template": template}, "status": {"replicas": 3}}),
            json!({}),
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ss"},
                "spec": {"selector": selector, "template": template}}),
            json!({"replicas": 0, "availableReplicas": 0}),
        ),
        (
            "/apis/apps/v1/namespaces/default/daemonsets",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                "spec": {"selector": selector, "template": template}}),
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0}),
        ),
        (
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                "spec": {"selector": selector, "minAvailable": 1}}),
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
        ),
        (
            "/api/v1/namespaces/default/resourcequotas",
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": {"pods": "1"}}}),
            json!({}),
        ),
    ] {
        let created = req(a, "POST", path, Some(&body)).await;
        assert_eq!(created.status, 201, "{path}: {}", created.body);
        assert_eq!(created.json()["status"], status, "{path}");
    }
}

#[tokio::test]
async fn deletes_answer_as_kube_registries_do() {
    let s = server().await;
    let a = s.addr();
    let ns = "/api/v1/namespaces/default";
    req(a, "POST", &format!("{ns}/pods"), Some(&pod("p", json!({})))).await;
    // A Pod: marked (grace period 0, no kubelet here), then removed; the answer is
    // the Pod as it went.
    let gone = req(a, "DELETE", &format!("{ns}/pods/p"), None).await;
    assert_eq!(gone.status, 200);
    let gone = gone.json();
    assert_eq!(gone["kind"], "Pod", "{gone}");
    assert_eq!(gone["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(gone["metadata"]["generation"], 2);
    assert!(gone["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        req(a, "GET", &format!("{ns}/pods/p"), None).await.status,
        404
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}]}});
    req(a, "POST", &format!("{ns}/services"), Some(&svc)).await;
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}});
    req(a, "POST", &format!("{ns}/serviceaccounts"), Some(&sa)).await;
    for (path, kind) in [
        ("services/s", "Service"),
        ("serviceaccounts/sa", "ServiceAccount"),
    ] {
        let gone = req(a, "DELETE", &format!("{ns}/{path}"), None).await.json();
        assert_eq!(gone["kind"], kind, "{gone}");
        assert!(gone["metadata"].get("deletionTimestamp").is_none());
    }
    // The generic registry answers a Status; custom resources too.
    req(
        a,
        "POST",
        &format!("{ns}/configmaps"),
        Some(&configmap("cm", json!({}))),
    )
    .await;
    let status = req(a, "DELETE", &format!("{ns}/configmaps/cm"), None)
        .await
        .json();
    assert_eq!(status["kind"], "Status");
    install_widgets(a).await;
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    req(a, "POST", widgets, Some(&widget("w", json!({})))).await;
    let status = req(a, "DELETE", &format!("{widgets}/w"), None).await.json();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["details"]["group"], "example.com");
    assert_eq!(status["details"]["kind"], "widgets");
}

#[tokio::test]
async fn events_as_kube_serves_them() {
    let s = server().await;
    let a = s.addr();
    let core = "/api/v1/namespaces/default/events";
    let v1 = "/apis/events.k8s.io/v1/namespaces/default/events";
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "R", "message": "m", "type": "Normal", "count": 0});
    let created = req(a, "POST", core, Some(&event)).await.json();
    // Go writes zero times as null, empty structs as {}, these strings always,
    // and leaves a zero count out.
    for (field, value) in [
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("eventTime", Value::Null),
        ("source", json!({})),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
    ] {
        assert_eq!(created.get(field), Some(&value), "{field}: {created}");
    }
    assert!(created.get("count").is_none(), "{created}");
    let seen = req(a, "GET", &format!("{v1}/e"), None).await.json();
    for (field, value) in [
        ("deprecatedFirstTimestamp", Value::Null),
        ("deprecatedLastTimestamp", Value::Null),
        ("eventTime", Value::Null),
        ("deprecatedSource", json!({})),
    ] {
        assert_eq!(seen.get(field), Some(&value), "{field}: {seen}");
    }
    // `kubectl events --for pod/p` selects by involvedObject.apiVersion and more.
    for (path, selector) in [
        (
            core,
            "involvedObject.kind=Pod,involvedObject.name=p,involvedObject.apiVersion=v1",
        ),
        (core, "involvedObject.fieldPath=,reason=R,type=Normal"),
        (v1, "regarding.apiVersion=v1,regarding.name=p"),
    ] {
        let list = req(a, "GET", &format!("{path}?fieldSelector={selector}"), None).await;
        assert_eq!(list.status, 200, "{selector}: {}", list.body);
        assert_eq!(
            list.json()["items"].as_array().unwrap().len(),
            1,
            "{selector}"
        );
    }
    let bad = req(
        a,
        "GET",
        &format!("{v1}?fieldSelector=involvedObject.name=p"),
        None,
    )
    .await;
    assert_status(&bad, 400, "BadRequest");
}

#[tokio::test]
async fn field_selectors_of_each_kind_as_kube_has_them() {
    let s = server().await;
    let a = s.addr();
    let pods = "/api/v1/namespaces/default/pods";
    let mut p = pod("p", json!({}));
    p["spec"]["restartPolicy"] = json!("Never");
    req(a, "POST", pods, Some(&p)).await;
    for (selector, found) in [
        ("spec.restartPolicy=Never", 1),
        ("spec.restartPolicy=Always", 0),
        ("spec.schedulerName=default-scheduler", 1),
        ("spec.serviceAccountName=", 1),
        ("spec.hostNetwork=false", 1),
        ("status.podIP=", 1),
        ("status.nominatedNodeName=", 1),
        ("spec.nodeName=", 1),
    ] {
        let list = req(a, "GET", &format!("{pods}?fieldSelector={selector}"), None).await;
        assert_eq!(list.status, 200, "{selector}: {}", list.body);
        assert_eq!(
            list.json()["items"].as_array().unwrap().len(),
            found,
            "{selector}"
        );
    }
    for (path, message) in [
        (pods, "field label not supported: spec.bogus"),
        (
            "/api/v1/namespaces/default/configmaps",
            r#""spec.bogus" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            r#"field label "spec.bogus" not supported for Job"#,
        ),
    ] {
        let r = req(
            a,
            "GET",
            &format!("{path}?fieldSelector=spec.bogus=1"),
            None,
        )
        .await;
        assert_eq!(assert_status(&r, 400, "BadRequest")["message"], message);
    }
}

#[tokio::test]
async fn status_bodies_and_not_found_as_kube_writes_them() {
    let s = server().await;
    let a = s.addr();
    let r = req(a, "GET", "/api/v1/namespaces/default/configmaps/none", None).await;
    assert_eq!(
        r.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"configmaps \\\"none\\\" not found\",\"reason\":\"NotFound\",\
         \"details\":{\"name\":\"none\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );
    // A resource the group version does not have: the generic 404, empty details.
    let r = req(a, "GET", "/api/v1/bogus", None).await;
    assert_eq!(assert_status(&r, 404, "NotFound")["details"], json!({}));
    // A group not served at all, or a path outside the API: kube's mux.
    for path in [
        "/apis/nope.example.com/v1",
        "/apis/nope.example.com",
        "/bogus",
    ] {
        let r = req(a, "GET", path, None).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.body, "404 page not found\n", "{path}");
        assert!(
            r.header("content-type")[0].starts_with("text/plain"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn empty_labels_and_annotations_are_not_stored() {
    let s = server().await;
    let a = s.addr();
    let mut cm = configmap("cm", json!({}));
    cm["metadata"]["labels"] = json!({});
    cm["metadata"]["annotations"] = json!({});
    cm["metadata"]["finalizers"] = json!([]);
    let created = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await
    .json();
    let metadata = created["metadata"].as_object().unwrap();
    for field in ["labels", "annotations", "finalizers"] {
        assert!(!metadata.contains_key(field), "{field}: {created}");
    }
    install_widgets(a).await;
    let mut w = widget("w", json!({}));
    w["metadata"]["labels"] = json!({});
    let created = req(
        a,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        Some(&w),
    )
    .await
    .json();
    assert!(created["metadata"].get("labels").is_none(), "{created}");
}
