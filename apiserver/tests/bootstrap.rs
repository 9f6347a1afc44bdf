//! What every cluster has from its start, on both backends: the
//! `default/kubernetes` Service with its `Endpoints` and `EndpointSlice`
//! pointing at the server, the system namespaces, `kube-root-ca.crt` in
//! every namespace, kube's default roles with their aggregation; metadata
//! and Table answers to every verb that returns an object;
//! `CertificateSigningRequests` approved, denied and signed; ephemeral
//! containers added to a Pod.

use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use gantry_test_support::raw::{self, json as send, json_ok as ok};
use gantry_test_support::{Backend, Cluster, backends};
use kube::Client;
use serde_json::{Value, json};

const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";

/// One request with `accept`; the status and the JSON answer.
async fn call(
    client: &Client,
    method: &str,
    path: &str,
    accept: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let bytes = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    raw::request(client, method, path, content_type, accept, bytes).await
}

/// Retries `check` until it returns Some (controllers act a moment after
/// the write they follow).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The object at `path`, once it exists and `done` holds for it.
async fn get_when(client: &Client, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(path, || async {
        let (code, obj) = send(client, "GET", path, None).await;
        (code == 200 && done(&obj)).then_some(obj)
    })
    .await
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_service_points_at_the_server(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let port = cluster.server_port();

    let service = ok(
        &client,
        "GET",
        "/api/v1/namespaces/default/services/kubernetes",
        None,
    )
    .await;
    assert_eq!(
        service["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
    );
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(service["spec"]["sessionAffinity"], "None");
    assert_eq!(service["spec"]["ipFamilyPolicy"], "SingleStack");
    assert_eq!(
        service["spec"]["clusterIPs"][0],
        service["spec"]["clusterIP"]
    );
    assert!(service["spec"].get("selector").is_none());
    assert_eq!(
        service["metadata"]["managedFields"][0]["manager"],
        "kube-apiserver"
    );

    // kube-apiserver cannot write the endpoints of a loopback address
    // (Endpoints validation refuses 127.0.0.0/8), which the tests' real
    // control plane advertises; the embedded server writes them.
    if backend != Backend::Embedded {
        return;
    }
    let endpoints = "/api/v1/namespaces/default/endpoints/kubernetes";
    let found = ok(&client, "GET", endpoints, None).await;
    assert_eq!(
        found["metadata"]["labels"],
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"})
    );
    assert_eq!(
        found["subsets"],
        json!([{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );

    let slice = get_when(
        &client,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
        |_| true,
    )
    .await;
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"kubernetes.io/service-name": "kubernetes"})
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}])
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "https", "port": port, "protocol": "TCP"}])
    );

    // Deleted, the Endpoints come back as they were.
    ok(&client, "DELETE", endpoints, None).await;
    let again = get_when(&client, endpoints, |_| true).await;
    assert_eq!(again["subsets"], found["subsets"]);
    assert_ne!(again["metadata"]["uid"], found["metadata"]["uid"]);
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_has_the_root_ca(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let ca = cluster.ca_pem().expect("a TLS server");

    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let ns = ok(&client, "GET", &format!("/api/v1/namespaces/{name}"), None).await;
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            name
        );
        assert_eq!(ns["status"]["phase"], "Active");
        let path = format!("/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt");
        let cm = get_when(&client, &path, |_| true).await;
        assert_eq!(cm["data"], json!({ "ca.crt": ca }));
        assert!(
            cm["metadata"]["annotations"]["kubernetes.io/description"]
                .as_str()
                .unwrap()
                .starts_with("Contains a CA bundle that can be used to verify the kube-apiserver")
        );
    }

    // A namespace created later gets it; deleted or changed, it comes back.
    ok(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "later"}})),
    )
    .await;
    let path = "/api/v1/namespaces/later/configmaps/kube-root-ca.crt";
    let first = get_when(&client, path, |_| true).await;
    assert_eq!(first["data"]["ca.crt"], ca);
    ok(&client, "DELETE", path, None).await;
    let second = get_when(&client, path, |cm| {
        cm["metadata"]["uid"] != first["metadata"]["uid"]
    })
    .await;
    assert_eq!(second["data"]["ca.crt"], ca);
    ok(
        &client,
        "PATCH",
        path,
        Some(json!({"data": {"ca.crt": "not a CA"}})),
    )
    .await;
    get_when(&client, path, |cm| cm["data"]["ca.crt"] == ca).await;
}

fn has_rule(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    role["rules"].as_array().is_some_and(|rules| {
        rules.iter().any(|r| {
            let has = |field: &str, v: &str| {
                r[field]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == v || x == "*"))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    })
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_roles_and_their_aggregation(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";

    // kube's bootstrap policy: users' roles, the controllers' and nodes'.
    for name in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "system:auth-delegator",
        "system:node",
        "system:kube-scheduler",
        "system:controller:replicaset-controller",
    ] {
        let role = ok(&client, "GET", &format!("{roles}/{name}"), None).await;
        assert_eq!(
            role["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(
            role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    let binding = ok(
        &client,
        "GET",
        &format!("{bindings}/system:controller:replicaset-controller"),
        None,
    )
    .await;
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "replicaset-controller", "namespace": "kube-system"}])
    );
    ok(
        &client,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/extension-apiserver-authentication-reader",
        None,
    )
    .await;

    // admin, edit and view are aggregated from the roles their selectors match.
    for (name, verb) in [("admin", "create"), ("edit", "create"), ("view", "list")] {
        let role = get_when(&client, &format!("{roles}/{name}"), |r| {
            has_rule(r, "apps", "deployments", verb)
        })
        .await;
        assert_eq!(
            role["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
                [format!("rbac.authorization.k8s.io/aggregate-to-{name}")],
            "true"
        );
        let managers: Vec<&str> = role["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(
            managers.contains(&"clusterrole-aggregation-controller"),
            "{managers:?}"
        );
    }
    let view = ok(&client, "GET", &format!("{roles}/view"), None).await;
    assert!(!has_rule(&view, "", "secrets", "get"));

    // A role labelled for view adds its rules to view, then through view
    // (labelled for edit) to edit, and through edit to admin; one labelled
    // for admin only to admin. Gone, its rules go too.
    for (name, label) in [("widget-viewer", "view"), ("widget-admin", "admin")] {
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name,
                "labels": {format!("rbac.authorization.k8s.io/aggregate-to-{label}"): "true"}},
            "rules": [{"apiGroups": ["example.com"], "resources": [name], "verbs": ["get"]}]});
        ok(&client, "POST", roles, Some(role)).await;
    }
    for target in ["view", "edit", "admin"] {
        get_when(&client, &format!("{roles}/{target}"), |r| {
            has_rule(r, "example.com", "widget-viewer", "get")
        })
        .await;
    }
    get_when(&client, &format!("{roles}/admin"), |r| {
        has_rule(r, "example.com", "widget-admin", "get")
    })
    .await;
    for target in ["view", "edit"] {
        let role = ok(&client, "GET", &format!("{roles}/{target}"), None).await;
        assert!(
            !has_rule(&role, "example.com", "widget-admin", "get"),
            "{target}"
        );
    }
    ok(&client, "DELETE", &format!("{roles}/widget-viewer"), None).await;
    get_when(&client, &format!("{roles}/admin"), |r| {
        !has_rule(r, "example.com", "widget-viewer", "get")
            && has_rule(r, "example.com", "widget-admin", "get")
            && has_rule(r, "apps", "deployments", "create")
    })
    .await;

    // Bound to view in a namespace, a service account may read there, not write.
    ok(
        &client,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "viewers"}})),
    )
    .await;
    ok(
        &client,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/viewers/rolebindings",
        Some(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "viewers"}]})),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("reader");
    cluster
        .service_account_kubeconfig("viewers", "reader", &kubeconfig)
        .await;
    let reader = gantry_test_support::client_for(&kubeconfig).await.unwrap();
    let config_maps = "/api/v1/namespaces/viewers/configmaps";
    eventually("the reader lists ConfigMaps", || async {
        (send(&reader, "GET", config_maps, None).await.0 == 200).then_some(())
    })
    .await;
    let (code, refusal) = send(
        &reader,
        "POST",
        config_maps,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})),
    )
    .await;
    assert_eq!(code, 403, "{refusal:#}");
    assert_eq!(refusal["reason"], "Forbidden");
}

/// A ConfigMap with a finalizer, so its DELETE answers with the object.
fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "finalizers": ["example.com/keep"]}, "data": {"a": "1"}})
}

fn assert_metadata(answer: &Value, name: &str) {
    assert_eq!(answer["kind"], "PartialObjectMetadata", "{answer:#}");
    assert_eq!(answer["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(answer["metadata"]["name"], name);
    assert!(answer.get("data").is_none());
}

fn assert_table(answer: &Value, name: &str) {
    assert_eq!(answer["kind"], "Table", "{answer:#}");
    assert_eq!(answer["apiVersion"], "meta.k8s.io/v1");
    let columns: Vec<&str> = answer["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["Name", "Data", "Age"]);
    assert_eq!(answer["rows"].as_array().unwrap().len(), 1);
    assert_eq!(answer["rows"][0]["cells"][0], name);
    assert_eq!(answer["rows"][0]["cells"][1], 1);
    assert_eq!(answer["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(answer["rows"][0]["object"]["metadata"]["name"], name);
    assert_eq!(
        answer["metadata"]["resourceVersion"],
        answer["rows"][0]["object"]["metadata"]["resourceVersion"]
    );
}

/// The object of the first event of a watch asked for as `accept`, which
/// must be an ADDED.
async fn first_added(client: &Client, path: &str, accept: &str) -> Value {
    let request = http::Request::builder()
        .uri(path)
        .header("Accept", accept)
        .body(Vec::new())
        .unwrap();
    let mut events = Box::pin(client.request_events::<Value>(request).await.unwrap());
    let event = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("an event in time")
        .expect("an event")
        .expect("a decoded event");
    match event {
        kube::api::WatchEvent::Added(object) => object,
        other => panic!("not an ADDED event: {other:?}"),
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_and_tables_from_every_verb(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let base = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let merge = "application/merge-patch+json";

    for (accept, check, name) in [
        (METADATA, assert_metadata as fn(&Value, &str), "meta"),
        (TABLE, assert_table as fn(&Value, &str), "table"),
    ] {
        let path = format!("{base}/{name}");
        let (code, created) =
            call(&client, "POST", base, accept, json, Some(config_map(name))).await;
        assert_eq!(code, 201, "{created:#}");
        check(&created, name);
        let (code, got) = call(&client, "GET", &path, accept, json, None).await;
        assert_eq!(code, 200);
        check(&got, name);
        let labels = json!({"metadata": {"labels": {"patched": "yes"}}});
        let (code, patched) = call(&client, "PATCH", &path, accept, merge, Some(labels)).await;
        assert_eq!(code, 200, "{patched:#}");
        check(&patched, name);
        let mut replaced = ok(&client, "GET", &path, None).await;
        replaced["data"]["a"] = json!("2");
        let (code, put) = call(&client, "PUT", &path, accept, json, Some(replaced)).await;
        assert_eq!(code, 200, "{put:#}");
        check(&put, name);
        let (code, deleting) = call(&client, "DELETE", &path, accept, json, None).await;
        assert_eq!(code, 200, "{deleting:#}");
        check(&deleting, name);
        // Once gone: kube's Status, whatever was asked.
        let finalizers = json!({"metadata": {"finalizers": null}});
        ok(&client, "PATCH", &path, Some(finalizers)).await;
        let gone = format!("{name}-gone");
        let mut plain = config_map(&gone);
        plain["metadata"]["finalizers"] = json!(null);
        ok(&client, "POST", base, Some(plain)).await;
        let (code, status) = call(
            &client,
            "DELETE",
            &format!("{base}/{gone}"),
            accept,
            json,
            None,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(status["kind"], "Status", "{status:#}");
        assert_eq!(status["status"], "Success");
    }

    // Tables without objects; lists of metadata; watches of either.
    ok(
        &client,
        "POST",
        base,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "plain"}, "data": {"a": "1"}})),
    )
    .await;
    let (_, without_objects) = call(
        &client,
        "GET",
        &format!("{base}/plain?includeObject=None"),
        TABLE,
        json,
        None,
    )
    .await;
    assert_eq!(without_objects["rows"][0]["cells"][0], "plain");
    assert!(
        without_objects["rows"][0]
            .get("object")
            .is_none_or(Value::is_null)
    );
    let (_, list) = call(&client, "GET", base, METADATA_LIST, json, None).await;
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["kind"] == "PartialObjectMetadata" && i.get("data").is_none())
    );
    let watch = format!("{base}?watch=true&fieldSelector=metadata.name%3Dplain");
    assert_metadata(&first_added(&client, &watch, METADATA).await, "plain");
    let table = first_added(&client, &watch, TABLE).await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"][0], "plain");
}

/// A PKCS#10 request for `cn` (PEM), made with a new key.
fn certificate_request(cn: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "readers");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(name: &str, request: &str, usages: &[&str]) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(request),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": 3600, "usages": usages}})
}

fn condition(kind: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": "Test", "message": "by the test"})
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_signing_requests(backend: Backend) {
    use x509_parser::prelude::*;
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let base = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let usages = ["digital signature", "client auth"];

    // Created: the requester is recorded, any status dropped.
    let mut alice = csr("alice", &certificate_request("alice"), &usages);
    alice["status"] = json!({"conditions": [condition("Approved")]});
    let created = ok(&client, "POST", base, Some(alice)).await;
    assert!(!created["spec"]["username"].as_str().unwrap().is_empty());
    assert!(
        created["spec"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:authenticated"))
    );
    assert!(
        created
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none())
    );

    // /status cannot approve.
    let mut status = created.clone();
    status["status"] = json!({"conditions": [condition("Approved")]});
    let (code, refusal) = send(
        &client,
        "PUT",
        &format!("{base}/alice/status"),
        Some(status),
    )
    .await;
    assert_eq!(code, 422, "{refusal:#}");
    assert_eq!(
        refusal["details"]["causes"][0]["message"],
        "Forbidden: updates may not add a condition of type \"Approved\""
    );
    let after = ok(&client, "GET", &format!("{base}/alice"), None).await;

    // /approval approves; the signer issues a client certificate from the CA.
    let mut approval = after.clone();
    approval["status"] = json!({"conditions": [condition("Approved")]});
    let approved = ok(
        &client,
        "PUT",
        &format!("{base}/alice/approval"),
        Some(approval),
    )
    .await;
    let c = &approved["status"]["conditions"][0];
    assert_eq!(c["type"], "Approved");
    assert!(c["lastUpdateTime"].is_string() && c["lastTransitionTime"].is_string());
    let signed = get_when(&client, &format!("{base}/alice"), |o| {
        o["status"]["certificate"].is_string()
    })
    .await;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(signed["status"]["certificate"].as_str().unwrap())
        .unwrap();
    let (_, pem) = parse_x509_pem(&pem).unwrap();
    let cert = pem.parse_x509().unwrap();
    let ca_pem = cluster.ca_pem().unwrap();
    let (_, ca_pem) = parse_x509_pem(ca_pem.as_bytes()).unwrap();
    let ca = ca_pem.parse_x509().unwrap();
    cert.verify_signature(Some(ca.public_key())).unwrap();
    assert_eq!(cert.issuer(), ca.subject());
    let cn: Vec<&str> = cert
        .subject()
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .collect();
    assert_eq!(cn, ["alice"]);
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    assert!(!cert.is_ca());
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert!((3600..=3900).contains(&lifetime), "{lifetime}");

    // kube's printer columns.
    let (_, table) = call(
        &client,
        "GET",
        &format!("{base}/alice"),
        TABLE,
        "application/json",
        None,
    )
    .await;
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[2], "kubernetes.io/kube-apiserver-client", "{table:#}");
    assert_eq!(cells[3], signed["spec"]["username"]);
    assert_eq!(cells[4], "60m");
    assert_eq!(cells[5], "Approved,Issued");

    // Denied: no certificate. Approved and denied at once: refused.
    ok(
        &client,
        "POST",
        base,
        Some(csr("bob", &certificate_request("bob"), &usages)),
    )
    .await;
    let mut both = ok(&client, "GET", &format!("{base}/bob"), None).await;
    both["status"] = json!({"conditions": [condition("Approved"), condition("Denied")]});
    let (code, refusal) = send(
        &client,
        "PUT",
        &format!("{base}/bob/approval"),
        Some(both.clone()),
    )
    .await;
    assert_eq!(code, 422, "{refusal:#}");
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .contains("Approved and Denied conditions are mutually exclusive"),
        "{refusal:#}"
    );
    both["status"] = json!({"conditions": [condition("Denied")]});
    let denied = ok(&client, "PUT", &format!("{base}/bob/approval"), Some(both)).await;
    assert_eq!(denied["status"]["conditions"][0]["type"], "Denied");

    // Usages a client certificate cannot have: the signer fails the request.
    ok(
        &client,
        "POST",
        base,
        Some(csr(
            "carol",
            &certificate_request("carol"),
            &["server auth"],
        )),
    )
    .await;
    let mut carol = ok(&client, "GET", &format!("{base}/carol"), None).await;
    carol["status"] = json!({"conditions": [condition("Approved")]});
    ok(
        &client,
        "PUT",
        &format!("{base}/carol/approval"),
        Some(carol),
    )
    .await;
    let failed = get_when(&client, &format!("{base}/carol"), |o| {
        o["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Failed"))
    })
    .await;
    let failure = failed["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .unwrap()
        .clone();
    assert_eq!(failure["reason"], "SignerValidationFailure");
    assert_eq!(
        failure["message"],
        "invalid usage for client certificate: server auth"
    );
    assert!(failed["status"].get("certificate").is_none());
    let bob = ok(&client, "GET", &format!("{base}/bob"), None).await;
    assert!(bob["status"].get("certificate").is_none());

    // A request that is not a PEM certificate request: kube's 422.
    let (code, refusal) = send(
        &client,
        "POST",
        base,
        Some(csr("dave", "not a request", &usages)),
    )
    .await;
    assert_eq!(code, 422, "{refusal:#}");
    assert_eq!(refusal["details"]["causes"][0]["field"], "spec.request");
    assert!(
        refusal["message"]
            .as_str()
            .unwrap()
            .ends_with("PEM block type must be CERTIFICATE REQUEST"),
        "{refusal:#}"
    );
    let (code, refusal) = send(&client, "POST", base, Some(json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "erin"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(certificate_request("erin")),
            "signerName": "kubernetes.io/kube-apiserver-client", "expirationSeconds": 60,
            "usages": ["client auth", "client auth"]}}))).await;
    assert_eq!(code, 422, "{refusal:#}");
    let fields: Vec<&str> = refusal["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(fields, ["spec.usages[1]", "spec.expirationSeconds"]);
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_containers_are_added_not_changed(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let client = cluster.client();
    let pods = "/api/v1/namespaces/default/pods";
    ok(
        &client,
        "POST",
        pods,
        Some(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "app"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}})),
    )
    .await;
    let path = format!("{pods}/app/ephemeralcontainers");
    let strategic = "application/strategic-merge-patch+json";
    let debugger = json!({"name": "debugger", "image": "busybox", "targetContainerName": "app",
        "stdin": true, "tty": true});

    let (code, pod) = call(
        &client,
        "PATCH",
        &path,
        "application/json",
        strategic,
        Some(json!({"spec": {"ephemeralContainers": [debugger]}})),
    )
    .await;
    assert_eq!(code, 200, "{pod:#}");
    let added = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(added["name"], "debugger");
    assert_eq!(added["targetContainerName"], "app");
    assert_eq!(added["imagePullPolicy"], "Always");
    assert_eq!(added["terminationMessagePolicy"], "File");
    assert_eq!(added["terminationMessagePath"], "/dev/termination-log");
    let got = ok(&client, "GET", &path, None).await;
    assert_eq!(got["kind"], "Pod");
    assert_eq!(
        got["spec"]["ephemeralContainers"],
        pod["spec"]["ephemeralContainers"]
    );

    // Changing one already there, or giving one ports, is refused.
    let mut changed = got.clone();
    changed["spec"]["ephemeralContainers"][0]["image"] = json!("alpine");
    let (code, refusal) = send(&client, "PUT", &path, Some(changed)).await;
    assert_eq!(code, 422, "{refusal:#}");
    assert_eq!(
        refusal["details"]["causes"][0]["field"],
        "spec.ephemeralContainers"
    );
    assert!(
        refusal["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with(
                "Forbidden: existing ephemeral containers \"debugger\" may not be changed"
            ),
        "{refusal:#}"
    );
    let mut ports = got.clone();
    ports["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "web", "image": "busybox", "ports": [{"containerPort": 80}]}));
    let (code, refusal) = send(&client, "PUT", &path, Some(ports)).await;
    assert_eq!(code, 422, "{refusal:#}");
    let causes = refusal["details"]["causes"].as_array().unwrap();
    assert!(
        causes
            .iter()
            .any(|c| c["field"] == "spec.ephemeralContainers[1].ports"
                && c["message"] == "Forbidden: cannot be set for an Ephemeral Container"),
        "{refusal:#}"
    );

    // Through the Pod itself they cannot be added.
    let mut pod = ok(&client, "GET", &format!("{pods}/app"), None).await;
    pod["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "other", "image": "busybox"}));
    let (code, refusal) = send(&client, "PUT", &format!("{pods}/app"), Some(pod)).await;
    assert_eq!(code, 422, "{refusal:#}");
}
