//! Serving, discovery, CRUD, errors, resourceVersions, namespaces, bad input.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn discovery_documents() {
    let s = server().await;
    let a = s.addr();
    let v = req(a, "GET", "/version", None).await.json();
    assert_eq!(v["major"], "1");
    let apis = req(a, "GET", "/apis", None).await.json();
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "batch",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "events.k8s.io",
    ] {
        assert!(groups.contains(&g), "{g} missing from {groups:?}");
    }
    let apps_v1 = req(a, "GET", "/apis/apps/v1", None).await.json();
    let res = apps_v1["resources"].as_array().unwrap();
    let dep = res.iter().find(|r| r["name"] == "deployments").unwrap();
    assert_eq!(dep["kind"], "Deployment");
    assert_eq!(dep["namespaced"], true);
    assert_eq!(dep["singularName"], "deployment");
    assert_eq!(dep["shortNames"], json!(["deploy"]));
    assert_eq!(dep["categories"], json!(["all"]));
    assert!(res.iter().any(|r| r["name"] == "deployments/status"));
    let scale = res
        .iter()
        .find(|r| r["name"] == "deployments/scale")
        .unwrap();
    assert_eq!(scale["kind"], "Scale");
    let core = req(a, "GET", "/api/v1", None).await.json();
    let cr = core["resources"].as_array().unwrap();
    let ns = cr.iter().find(|r| r["name"] == "namespaces").unwrap();
    assert_eq!(ns["namespaced"], false);
    // ConfigMaps have no status field in k8s-openapi: no status subresource.
    assert!(!cr.iter().any(|r| r["name"] == "configmaps/status"));
    assert!(cr.iter().any(|r| r["name"] == "pods/status"));
    let rbac = req(a, "GET", "/apis/rbac.authorization.k8s.io/v1", None)
        .await
        .json();
    let cluster_roles = rbac["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "clusterroles")
        .unwrap()
        .clone();
    assert_eq!(cluster_roles["namespaced"], false);
    assert_eq!(
        req(a, "GET", "/apis/nope.example/v1", None).await.status,
        404
    );
}

#[tokio::test]
async fn default_namespaces_exist() {
    let s = server().await;
    let ns: Api<Namespace> = Api::all(s.client());
    let names: Vec<String> = ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for n in ["default", "kube-system", "kube-public"] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
}

#[tokio::test]
async fn create_get_update_delete_with_resource_versions() {
    let s = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let cm: ConfigMap = serde_json::from_value(configmap("a", json!({"k": "v"}))).unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    let m = &created.metadata;
    assert!(m.uid.as_ref().is_some_and(|u| u.len() == 36));
    assert!(m.creation_timestamp.is_some());
    assert_eq!(m.generation, None, "kube gives ConfigMaps no generation");
    let rv1: u64 = m.resource_version.as_ref().unwrap().parse().unwrap();
    let got = cms.get("a").await.unwrap();
    assert_eq!(got.metadata.resource_version, m.resource_version);

    let mut upd = got.clone();
    upd.data.as_mut().unwrap().insert("k".into(), "w".into());
    let updated = cms
        .replace("a", &PostParams::default(), &upd)
        .await
        .unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_ref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(updated.metadata.generation, None);
    assert_eq!(updated.metadata.uid, m.uid);

    // Stale resourceVersion → 409 Conflict with kube's message.
    let err = cms
        .replace("a", &PostParams::default(), &upd)
        .await
        .unwrap_err();
    let kube::Error::Api(e) = err else {
        panic!("{err}")
    };
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(e.message.contains("the object has been modified; please apply your changes to the latest version and try again"), "{}", e.message);

    // An update that changes nothing keeps the resourceVersion.
    let same = cms
        .replace("a", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        updated.metadata.resource_version
    );

    // Duplicate create → 409 AlreadyExists.
    let err = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let err = cms.get("a").await.unwrap_err();
    let kube::Error::Api(e) = err else { panic!() };
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"a\" not found");
}

#[tokio::test]
async fn not_found_status_has_details() {
    let s = server().await;
    let r = req(
        s.addr(),
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/nope",
        None,
    )
    .await;
    let st = assert_status(&r, 404, "NotFound");
    assert_eq!(st["message"], "deployments.apps \"nope\" not found");
    assert_eq!(
        st["details"],
        json!({"name": "nope", "group": "apps", "kind": "deployments"})
    );
}

#[tokio::test]
async fn generate_name_and_name_validation() {
    let s = server().await;
    let a = s.addr();
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let name = r.json()["metadata"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("Bad_Name", json!({}))),
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(st["details"]["kind"], "ConfigMap");

    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}});
    let r = req(a, "POST", "/api/v1/namespaces", Some(&ns)).await;
    assert_status(&r, 422, "Invalid");

    let missing = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&missing),
    )
    .await;
    assert_status(&r, 422, "Invalid");
}

#[tokio::test]
async fn namespaced_objects_need_their_namespace() {
    let s = server().await;
    let r = req(
        s.addr(),
        "POST",
        "/api/v1/namespaces/missing/configmaps",
        Some(&configmap("a", json!({}))),
    )
    .await;
    let st = assert_status(&r, 404, "NotFound");
    assert_eq!(st["message"], "namespaces \"missing\" not found");
}

#[tokio::test]
async fn bad_input_changes_nothing() {
    let s = server().await;
    let a = s.addr();
    let mut events = kube_watch_lines(&s).await;
    let rv0 = current_rv(a).await;
    let path = "/api/v1/namespaces/default/configmaps";
    // Malformed JSON.
    let r = raw(
        a,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        b"{not json",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // Malformed YAML.
    let r = raw(
        a,
        "POST",
        path,
        &[("Content-Type", "application/yaml")],
        b"a: [b",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // Wrong kind / apiVersion for the path.
    let r = req(
        a,
        "POST",
        path,
        Some(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    let r = req(
        a,
        "POST",
        path,
        Some(&json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // Wrong type for a field.
    let r = req(
        a,
        "POST",
        path,
        Some(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": 5}),
        ),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // Unsupported media types.
    let r = raw(
        a,
        "POST",
        path,
        &[("Content-Type", "application/cbor")],
        b"\xa0",
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    // Garbage protobuf: 400.
    let r = raw(
        a,
        "POST",
        path,
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        b"k8s\0\xff\xff",
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    let r = raw(
        a,
        "PATCH",
        &format!("{path}/x"),
        &[("Content-Type", "text/plain")],
        b"{}",
    )
    .await;
    assert_status(&r, 415, "UnsupportedMediaType");
    // Too large (over 3 MiB).
    let big = vec![b' '; 3 * 1024 * 1024 + 10];
    let r = raw(
        a,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        &big,
    )
    .await;
    assert_status(&r, 413, "RequestEntityTooLarge");
    // Method not allowed.
    let r = raw(
        a,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        b"{}",
    )
    .await;
    assert_status(&r, 405, "MethodNotAllowed");
    assert_eq!(current_rv(a).await, rv0, "no write happened");
    let r = req(a, "GET", path, None).await.json();
    let names: Vec<&str> = r["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["kube-root-ca.crt"], "only what every namespace has");
    // The watch saw nothing but the marker we create now.
    req(a, "POST", path, Some(&configmap("marker", json!({})))).await;
    let first = events.recv().await.unwrap();
    assert_eq!(first["object"]["metadata"]["name"], "marker", "{first}");
}

/// Watches all configmaps from now; yields parsed events.
async fn kube_watch_lines(
    s: &gantry_apiserver::ApiServerHandle,
) -> tokio::sync::mpsc::Receiver<serde_json::Value> {
    use futures::StreamExt;
    let rv = current_rv(s.addr()).await;
    let (tx, rx) = tokio::sync::mpsc::channel(100);
    let client = s.client();
    let req = http::Request::get(format!("/api/v1/configmaps?watch=1&resourceVersion={rv}"))
        .body(Vec::new())
        .unwrap();
    let mut stream = client
        .request_events::<serde_json::Value>(req)
        .await
        .unwrap()
        .boxed();
    tokio::spawn(async move {
        while let Some(Ok(ev)) = stream.next().await {
            if tx.send(serde_json::to_value(&ev).unwrap()).await.is_err() {
                return;
            }
        }
    });
    rx
}

#[tokio::test]
async fn dry_run_stores_nothing() {
    let s = server().await;
    let a = s.addr();
    let rv0 = current_rv(a).await;
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        Some(&configmap("d", json!({"a": "b"}))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["data"]["a"], "b");
    assert_eq!(
        req(a, "GET", "/api/v1/namespaces/default/configmaps/d", None)
            .await
            .status,
        404
    );
    assert_eq!(current_rv(a).await, rv0);
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("d", json!({"a": "b"}))),
    )
    .await;
    let rv1 = current_rv(a).await;
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/d?dryRun=All",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"a":"c"}}"#,
    )
    .await;
    assert_eq!(r.json()["data"]["a"], "c");
    let r = req(
        a,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/d?dryRun=All",
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let got = req(a, "GET", "/api/v1/namespaces/default/configmaps/d", None)
        .await
        .json();
    assert_eq!(got["data"]["a"], "b");
    assert_eq!(current_rv(a).await, rv1);
    assert_eq!(
        s.writes().get("create", "configmaps"),
        1,
        "dry runs are not counted: {:?}",
        s.writes()
    );
}

#[tokio::test]
async fn token_auth() {
    let s = server_with(gantry_apiserver::Config {
        token: Some("sekret".into()),
        ..Default::default()
    })
    .await;
    let r = raw_unauthenticated(s.addr(), "GET", "/api/v1/namespaces", &[], b"").await;
    assert_status(&r, 401, "Unauthorized");
    let r = raw_unauthenticated(
        s.addr(),
        "GET",
        "/api/v1/namespaces",
        &[("Authorization", "Bearer sekret")],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let ns: Api<Namespace> = Api::all(s.client());
    assert!(ns.get("default").await.is_ok());
    assert!(s.kubeconfig_yaml().contains("sekret"));
}

#[tokio::test]
async fn write_counter_counts_successful_writes() {
    let s = server().await;
    let a = s.addr();
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("w", json!({}))),
    )
    .await;
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("w", json!({}))),
    )
    .await; // 409
    raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/w",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"a":"b"}}"#,
    )
    .await;
    req(a, "DELETE", "/api/v1/namespaces/default/configmaps/w", None).await;
    let w = s.writes();
    assert_eq!(w.since(&w).total(), 0);
    assert_eq!(w.since(&gantry_apiserver::WriteCounts::default()), w);
    assert_eq!(w.for_resource("configmaps"), 3);
    assert_eq!(w.get("create", "configmaps"), 1);
    assert_eq!(w.get("patch", "configmaps"), 1);
    assert_eq!(w.get("delete", "configmaps"), 1);
    assert_eq!(w.total(), 3);
}

#[tokio::test]
async fn cluster_scoped_and_builtin_kinds() {
    let s = server().await;
    let a = s.addr();
    let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": []});
    assert_eq!(
        req(
            a,
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            Some(&cr)
        )
        .await
        .status,
        201
    );
    let got = req(
        a,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
        None,
    )
    .await
    .json();
    assert!(got["metadata"].get("namespace").is_none());
    // Namespaced path for a cluster-scoped resource: 404.
    assert_eq!(
        req(
            a,
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles/r",
            None
        )
        .await
        .status,
        404
    );
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
    assert_eq!(
        req(
            a,
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            Some(&lease)
        )
        .await
        .status,
        201
    );
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 5}});
    let r = req(
        a,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(&dep),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(
        r.json()["status"].get("replicas").is_none(),
        "status is ignored on create"
    );
}

#[tokio::test]
async fn required_builtin_kinds_are_served_with_scope_and_plural() {
    let s = server().await;
    let a = s.addr();
    let sel = json!({"matchLabels": {"app": "x"}});
    let tmpl = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let job_tmpl =
        json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}});
    // (collection path, kind, body extras)
    let cases = [
        (
            "/api/v1/namespaces/default/secrets",
            "v1",
            "Secret",
            json!({"stringData": {"a": "b"}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            "v1",
            "Service",
            json!({"spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            "v1",
            "ServiceAccount",
            json!({}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            "v1",
            "Pod",
            json!({"spec": {"containers": [{"name": "c", "image": "i"}]}}),
        ),
        (
            "/api/v1/namespaces/default/events",
            "v1",
            "Event",
            json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            "events.k8s.io/v1",
            "Event",
            json!({"eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "x", "reportingInstance": "y", "action": "A", "reason": "R"}),
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            "apps/v1",
            "StatefulSet",
            json!({"spec": {"selector": sel.clone(), "template": tmpl.clone()}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/replicasets",
            "apps/v1",
            "ReplicaSet",
            json!({"spec": {"selector": sel.clone(), "template": tmpl.clone()}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/daemonsets",
            "apps/v1",
            "DaemonSet",
            json!({"spec": {"selector": sel.clone(), "template": tmpl.clone()}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            "batch/v1",
            "Job",
            json!({"spec": {"template": job_tmpl.clone()}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/cronjobs",
            "batch/v1",
            "CronJob",
            json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": job_tmpl.clone()}}}}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            json!({}),
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            json!({}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            "rbac.authorization.k8s.io/v1",
            "Role",
            json!({}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}}),
        ),
    ];
    for (i, (path, api_version, kind, extra)) in cases.into_iter().enumerate() {
        // Distinct names: both Event APIs share one store.
        let name = format!("x{i}");
        let mut body = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = req(a, "POST", path, Some(&body)).await;
        assert_eq!(r.status, 201, "{kind}: {}", r.body);
        let got = req(a, "GET", &format!("{path}/{name}"), None).await;
        assert_eq!(got.status, 200, "{kind}");
        assert_eq!(got.json()["kind"], kind);
        let namespaced = path.contains("/namespaces/");
        assert_eq!(
            got.json()["metadata"].get("namespace").is_some(),
            namespaced,
            "{kind}"
        );
        let list = req(a, "GET", path, None).await.json();
        assert_eq!(list["kind"], format!("{kind}List"));
    }
}

#[tokio::test]
async fn aggregated_discovery() {
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let r = raw(a, "GET", "/apis", &[("Accept", accept)], b"").await;
    assert!(r.header("content-type")[0].contains("as=APIGroupDiscoveryList"));
    let doc = r.json();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    let apps = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .unwrap()
        .clone();
    let dep = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap()
        .clone();
    assert_eq!(dep["scope"], "Namespaced");
    assert_eq!(dep["responseKind"]["kind"], "Deployment");
    // kube-rs's aggregated discovery sees built-ins and CRDs.
    let d = kube::Discovery::new(s.client())
        .run_aggregated()
        .await
        .unwrap();
    assert!(d.has_group("example.com"));
    let (ar, caps) = d
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        ))
        .unwrap();
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        d.resolve_gvk(&kube::core::GroupVersionKind::gvk("", "v1", "ConfigMap"))
            .is_some()
    );
    // Plain JSON without the aggregated media type: legacy documents.
    let legacy = req(a, "GET", "/apis", None).await.json();
    assert_eq!(legacy["kind"], "APIGroupList");
    let d = kube::Discovery::new(s.client()).run().await.unwrap();
    assert!(d.has_group("apps"));
}

#[tokio::test]
async fn kubeconfig_works_for_kube_rs() {
    let s = server_with(gantry_apiserver::Config {
        token: Some("t0k".into()),
        ..Default::default()
    })
    .await;
    let kc = kube::config::Kubeconfig::from_yaml(&s.kubeconfig_yaml()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    assert_eq!(cfg.default_namespace, "default");
    let client = kube::Client::try_from(cfg).unwrap();
    let ns: Api<Namespace> = Api::all(client);
    assert!(ns.get("kube-system").await.is_ok());
}

#[tokio::test]
async fn field_validation_for_builtins() {
    let s = server().await;
    let a = s.addr();
    let mut body = configmap("fv", json!({"a": "b"}));
    body["bogus"] = json!(1);
    body["metadata"]["alsoBogus"] = json!(2);
    let st = assert_status(
        &req(
            a,
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            Some(&body),
        )
        .await,
        400,
        "BadRequest",
    );
    let msg = st["message"].as_str().unwrap();
    assert!(
        msg.contains("strict decoding error")
            && msg.contains("unknown field \"bogus\"")
            && msg.contains("unknown field \"metadata.alsoBogus\""),
        "{msg}"
    );
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("warning").len(), 2, "{:?}", r.headers);
    assert!(r.json().get("bogus").is_none());
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps?fieldValidation=Bogus",
        Some(&configmap("x", json!({}))),
    )
    .await;
    assert_status(&r, 400, "BadRequest");
    // Strict applies to patches too.
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/fv?fieldValidation=Strict",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"nope":1}"#,
    )
    .await;
    assert_status(&r, 400, "BadRequest");
}

#[tokio::test]
async fn builtin_defaults_and_service_cluster_ip() {
    let s = server().await;
    let a = s.addr();
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}});
    let d = req(
        a,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(&dep),
    )
    .await
    .json();
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
    let created = req(a, "POST", "/api/v1/namespaces/default/services", Some(&svc))
        .await
        .json();
    let ip = created["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(created["spec"]["ports"][0]["targetPort"], 80);
    assert_eq!(created["spec"]["type"], "ClusterIP");
    // A replace without clusterIP keeps the allocated one.
    let mut upd = svc.clone();
    upd["metadata"]["labels"] = json!({"x": "y"});
    let r = req(
        a,
        "PUT",
        "/api/v1/namespaces/default/services/web",
        Some(&upd),
    )
    .await
    .json();
    assert_eq!(r["spec"]["clusterIP"], ip);
}

#[tokio::test]
async fn immutable_configmaps_and_protected_namespaces() {
    let s = server().await;
    let a = s.addr();
    let mut cm = configmap("imm", json!({"a": "b"}));
    cm["immutable"] = json!(true);
    req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await;
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/imm",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"a":"c"}}"#,
    )
    .await;
    assert_status(&r, 422, "Invalid");
    // Metadata may still change.
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/imm",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"labels":{"a":"b"}}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = req(a, "DELETE", "/api/v1/namespaces/default", None).await;
    assert_status(&r, 403, "Forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_with_one_resource_version_one_wins() {
    let s = server().await;
    let a = s.addr();
    let created = req(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&configmap("race", json!({}))),
    )
    .await
    .json();
    let mut tasks = vec![];
    for i in 0..10 {
        let mut body = created.clone();
        body["data"] = json!({"writer": i.to_string()});
        tasks.push(tokio::spawn(async move {
            req(
                a,
                "PUT",
                "/api/v1/namespaces/default/configmaps/race",
                Some(&body),
            )
            .await
            .status
        }));
    }
    let mut codes = vec![];
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 409).count(), 9, "{codes:?}");
}

#[tokio::test]
async fn events_are_one_store_in_two_api_groups() {
    let s = server().await;
    let a = s.addr();
    let ev = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "ctl", "reportingInstance": "i",
        "action": "Sync", "reason": "Synced", "type": "Normal", "note": "all good",
        "regarding": {"kind": "Widget", "name": "w", "namespace": "default"}});
    let r = req(
        a,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Some(&ev),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["note"], "all good");
    assert_eq!(r.json()["apiVersion"], "events.k8s.io/v1");
    let core = req(a, "GET", "/api/v1/namespaces/default/events/e", None)
        .await
        .json();
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "all good");
    assert_eq!(core["involvedObject"]["name"], "w");
    assert_eq!(core["reportingComponent"], "ctl");
    // kubectl describe's query.
    let l = req(
        a,
        "GET",
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dw",
        None,
    )
    .await
    .json();
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    // Patch through the new group; a no-op changes nothing. (Events have no
    // generation in kube.)
    let r = raw(
        a,
        "PATCH",
        "/apis/events.k8s.io/v1/namespaces/default/events/e",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"note":"changed"}"#,
    )
    .await
    .json();
    assert_eq!(r["note"], "changed");
    assert!(r["metadata"].get("generation").is_none(), "{r}");
    let same = raw(
        a,
        "PATCH",
        "/apis/events.k8s.io/v1/namespaces/default/events/e",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"note":"changed"}"#,
    )
    .await
    .json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        r["metadata"]["resourceVersion"]
    );
    assert_eq!(
        req(a, "GET", "/api/v1/namespaces/default/events/e", None)
            .await
            .json()["message"],
        "changed"
    );
}

#[tokio::test]
async fn kube_runtime_event_recorder() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder};
    let s = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let cm: ConfigMap = serde_json::from_value(configmap("rec", json!({}))).unwrap();
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let recorder = Recorder::new(s.client(), "gantry-test".into());
    let ev = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("ok".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&ev, &cm.object_ref(&())).await.unwrap();
    recorder.publish(&ev, &cm.object_ref(&())).await.unwrap();
    // kubectl (core/v1) sees the events.k8s.io event, with the series count bumped.
    let core: Api<CoreEvent> = Api::namespaced(s.client(), "default");
    let list = core
        .list(&ListParams::default().fields("involvedObject.name=rec"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].message.as_deref(), Some("ok"));
    assert_eq!(list.items[0].series.as_ref().and_then(|s| s.count), Some(2));
}

#[tokio::test]
async fn builtin_spec_validation() {
    let s = server().await;
    let a = s.addr();
    let dep = |labels: serde_json::Value, containers: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}}})
    };
    let path = "/apis/apps/v1/namespaces/default/deployments";
    let st = assert_status(
        &req(
            a,
            "POST",
            path,
            Some(&dep(
                json!({"app": "y"}),
                json!([{"name": "c", "image": "i"}]),
            )),
        )
        .await,
        422,
        "Invalid",
    );
    assert_eq!(
        st["details"]["causes"][0]["field"],
        "spec.template.metadata.labels"
    );
    let st = assert_status(
        &req(
            a,
            "POST",
            path,
            Some(&dep(json!({"app": "x"}), json!([{"name": "c"}]))),
        )
        .await,
        422,
        "Invalid",
    );
    assert_eq!(
        st["details"]["causes"][0]["field"],
        "spec.template.spec.containers[0].image"
    );
    let st = assert_status(
        &req(a, "POST", path, Some(&dep(json!({"app": "x"}), json!([])))).await,
        422,
        "Invalid",
    );
    assert_eq!(
        st["details"]["causes"][0]["field"],
        "spec.template.spec.containers"
    );
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let st = assert_status(
        &req(
            a,
            "POST",
            "/apis/batch/v1/namespaces/default/jobs",
            Some(&job),
        )
        .await,
        422,
        "Invalid",
    );
    assert_eq!(
        st["details"]["causes"][0]["field"],
        "spec.template.spec.restartPolicy"
    );
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
    assert_status(
        &req(a, "POST", "/api/v1/namespaces/default/services", Some(&svc)).await,
        422,
        "Invalid",
    );
    let headless = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
    assert_eq!(
        req(
            a,
            "POST",
            "/api/v1/namespaces/default/services",
            Some(&headless)
        )
        .await
        .status,
        201
    );
}

#[tokio::test]
async fn immutable_workload_selectors() {
    let s = server().await;
    let a = s.addr();
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sel"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x", "b": "c"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    assert_eq!(
        req(
            a,
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            Some(&dep)
        )
        .await
        .status,
        201
    );
    let r = raw(
        a,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/sel",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"spec":{"selector":{"matchLabels":{"b":"c"}}}}"#,
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(st["details"]["causes"][0]["field"], "spec.selector");
    // Other spec changes are fine.
    let r = raw(
        a,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/sel",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"spec":{"replicas":4}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}
