//! kube's validation of built-ins, on both backends: objects kube refuses are
//! refused with kube's 422 causes (field and message), and an update that
//! changes an immutable field is refused.

use gantry_test_support::{Backend, Cluster, backends};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const NS: &str = "default";

/// Sends `body` with `method` to `path` (a PATCH as a JSON patch when `body` is
/// an array, else a merge patch); the status code and the JSON answer.
async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let content_type = match (method, body) {
        ("PATCH", Value::Array(_)) => "application/json-patch+json",
        ("PATCH", _) => "application/merge-patch+json",
        _ => "application/json",
    };
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The Status's causes as `field: message`, sorted (kube's order follows Go maps).
fn causes(status: &Value) -> Vec<String> {
    let mut out: Vec<String> = status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

/// A dry-run create of `obj` at `collection` is refused with exactly `want`.
async fn refused(client: &kube::Client, collection: &str, obj: Value, want: &[&str]) {
    let (code, status) = send(client, "POST", &format!("{collection}?dryRun=All"), &obj).await;
    assert_eq!(code, 422, "{obj}\n{status}");
    let mut want: Vec<String> = want.iter().map(ToString::to_string).collect();
    want.sort();
    assert_eq!(causes(&status), want, "{obj}");
}

fn pod(spec: &Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" }, "spec": spec })
}

fn deployment(replicas: i64, pod_spec: &Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": "d" } },
            "template": { "metadata": { "labels": { "app": "d" } }, "spec": pod_spec }
        }
    })
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_builtins_are_refused_as_kube_does(backend: Backend) {
    let s = Cluster::start(backend).await;
    let c = s.client();
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    let range = "must be between 1 and 65535, inclusive";

    refused(
        &c,
        &format!("/apis/apps/v1/namespaces/{NS}/deployments"),
        deployment(
            -1,
            &json!({ "containers": [{ "name": "c", "image": "i" }] }),
        ),
        &["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
    )
    .await;
    refused(&c, &format!("/apis/apps/v1/namespaces/{NS}/deployments"),
        deployment(1, &json!({ "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] })),
        &["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]).await;
    refused(&c, &pods,
        pod(&json!({ "restartPolicy": "Sometimes", "containers": [{ "name": "c", "image": "i" }] })),
        &["spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""]).await;
    refused(
        &c,
        &pods,
        pod(
            &json!({ "containers": [{ "name": "c", "image": "i", "ports": [
            { "containerPort": 80, "name": "web" }, { "containerPort": 0 },
            { "containerPort": 70000, "name": "web" }] }] }),
        ),
        &[
            "spec.containers[0].ports[1].containerPort: Required value",
            "spec.containers[0].ports[2].name: Duplicate value: \"web\"",
            &format!("spec.containers[0].ports[2].containerPort: Invalid value: 70000: {range}"),
        ],
    )
    .await;
    refused(&c, &pods,
        pod(&json!({ "containers": [{ "name": "c", "image": "i",
            "resources": { "requests": { "memory": "2Gi" }, "limits": { "memory": "1Gi" } } }] })),
        &["spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"]).await;
    refused(&c, &format!("/api/v1/namespaces/{NS}/services"),
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "s" },
            "spec": { "ports": [{ "port": 70000, "targetPort": 80, "name": "a" }, { "port": 80, "name": "a" }, { "port": 81 }] } }),
        &[
            &format!("spec.ports[0].port: Invalid value: 70000: {range}"),
            "spec.ports[1].name: Duplicate value: \"a\"",
            "spec.ports[2].name: Required value",
        ]).await;
    refused(&c, &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm" },
            "data": { "bad key": "x", "..": "y", "both": "z" }, "binaryData": { "both": "eA==" } }),
        &[
            "data[..]: Invalid value: \"..\": must not be '..'",
            "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            "data[both]: Invalid value: \"both\": duplicate of key present in binaryData",
        ]).await;
    refused(&c, &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm", "annotations": { "bad key!": "x" } } }),
        &["metadata.annotations: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]).await;
    refused(&c, &format!("/api/v1/namespaces/{NS}/configmaps"),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm", "annotations": { "a": "x".repeat(256 * 1024) } } }),
        &["metadata.annotations: Too long: may not be more than 262144 bytes"]).await;
    refused(&c, &format!("/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses"),
        json!({ "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": { "name": "i" },
            "spec": { "rules": [{ "http": { "paths": [
                { "path": "/", "backend": { "service": { "name": "s", "port": { "number": 80 } } } },
                { "path": "/b", "pathType": "Sometimes", "backend": { "service": { "name": "s", "port": { "number": 80 } } } }] } }] } }),
        &[
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[1].pathType: Unsupported value: \"Sometimes\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
        ]).await;
    refused(&c, &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles"),
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": { "name": "r" },
            "rules": [{ "apiGroups": [""], "resources": ["pods"] }, { "verbs": ["get"] }] }),
        &[
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[1].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[1].resources: Required value: resource rules must supply at least one resource",
        ]).await;
    let cronjob = |schedule: &str| {
        json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": { "name": "cj" },
            "spec": { "schedule": schedule, "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } } } }
        })
    };
    let cronjobs = format!("/apis/batch/v1/namespaces/{NS}/cronjobs");
    refused(&c, &cronjobs, cronjob("every minute"),
        &["spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"]).await;
    refused(&c, &cronjobs, cronjob("*/5 25 * * *"),
        &["spec.schedule: Invalid value: \"*/5 25 * * *\": end of range (25) above maximum (23): 25"]).await;
    refused(
        &c,
        &format!("/api/v1/namespaces/{NS}/persistentvolumeclaims"),
        json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": "pvc" },
            "spec": { "accessModes": ["ReadWriteOnce"] } }),
        &["spec.resources[storage]: Required value"],
    )
    .await;
    s.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_fields_are_refused(backend: Backend) {
    let s = Cluster::start(backend).await;
    let c = s.client();
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    let p = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "frozen" },
        "spec": { "containers": [{ "name": "c", "image": "i" }] } });
    let (code, body) = send(&c, "POST", &pods, &p).await;
    assert_eq!(code, 201, "{body}");
    // The image and the deadline may change.
    let patch = json!([
        { "op": "replace", "path": "/spec/containers/0/image", "value": "i2" },
        { "op": "add", "path": "/spec/activeDeadlineSeconds", "value": 60 }
    ]);
    let (code, body) = send(&c, "PATCH", &format!("{pods}/frozen"), &patch).await;
    assert_eq!(code, 200, "{body}");
    // Nothing else.
    let patch = json!({ "spec": { "restartPolicy": "Never" } });
    let (code, body) = send(&c, "PATCH", &format!("{pods}/frozen"), &patch).await;
    assert_eq!(code, 422, "{body}");
    let cause = &causes(&body)[0];
    assert!(
        cause.starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"),
        "{cause}"
    );

    let jobs = format!("/apis/batch/v1/namespaces/{NS}/jobs");
    let job = json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": "j" },
        "spec": { "template": { "spec": { "restartPolicy": "Never", "containers": [{ "name": "c", "image": "i" }] } } } });
    let (code, body) = send(&c, "POST", &jobs, &job).await;
    assert_eq!(code, 201, "{body}");
    let patch = json!({ "spec": { "template": { "spec": { "activeDeadlineSeconds": 5 } } } });
    let (code, body) = send(&c, "PATCH", &format!("{jobs}/j"), &patch).await;
    assert_eq!(code, 422, "{body}");
    let cause = &causes(&body)[0];
    assert!(
        cause.starts_with("spec.template: Invalid value: "),
        "{cause}"
    );
    assert!(cause.ends_with(": field is immutable"), "{cause}");
    s.shutdown().await;
}

/// Creates `obj` at `collection`, then merge-patches it with `patch`; kube's
/// causes of the refusal (`field: message`, sorted).
async fn update_refused(
    client: &kube::Client,
    collection: &str,
    obj: Value,
    patch: Value,
) -> Vec<String> {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let (code, body) = send(client, "POST", collection, &obj).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(client, "PATCH", &format!("{collection}/{name}"), &patch).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    causes(&body)
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immutable_fields_of_operator_kinds_are_refused(backend: Backend) {
    let s = Cluster::start(backend).await;
    let c = s.client();
    let template = json!({ "metadata": { "labels": { "app": "s" } },
        "spec": { "containers": [{ "name": "c", "image": "i" }] } });

    // StatefulSets: only replicas, ordinals, template, updateStrategy,
    // revisionHistoryLimit, persistentVolumeClaimRetentionPolicy, minReadySeconds.
    let sets = format!("/apis/apps/v1/namespaces/{NS}/statefulsets");
    let set = |name: &str| {
        json!({ "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": { "name": name },
            "spec": { "serviceName": "s", "replicas": 1, "selector": { "matchLabels": { "app": "s" } },
                "template": template } })
    };
    let forbidden = "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
    let got = update_refused(
        &c,
        &sets,
        set("s1"),
        json!({ "spec": { "serviceName": "t" } }),
    )
    .await;
    assert_eq!(got, [forbidden]);
    let patch = json!({ "spec": { "replicas": 2, "minReadySeconds": 3, "revisionHistoryLimit": 4,
        "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "partition": 1 } },
        "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Delete" } } });
    let (code, body) = send(&c, "PATCH", &format!("{sets}/s1"), &patch).await;
    assert_eq!(code, 200, "{body}");
    // A new selector is the same Forbidden spec, not an immutable selector.
    let patch = json!({ "spec": { "selector": { "matchLabels": { "app": "s", "x": "y" } },
        "template": { "metadata": { "labels": { "app": "s", "x": "y" } } } } });
    let got = update_refused(&c, &sets, set("s2"), patch).await;
    assert_eq!(got, [forbidden]);

    // Deployment selectors.
    let deployments = format!("/apis/apps/v1/namespaces/{NS}/deployments");
    let patch = json!({ "spec": { "selector": { "matchLabels": { "app": "d", "x": "y" } },
        "template": { "metadata": { "labels": { "app": "d", "x": "y" } } } } });
    let got = update_refused(&c, &deployments, deployment(1, &template["spec"]), patch).await;
    assert_eq!(
        got,
        [
            "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"d\",\"x\":\"y\"}}: field is immutable"
        ]
    );

    // A claim's spec, with kube's diff of its internal structs.
    let claims = format!("/api/v1/namespaces/{NS}/persistentvolumeclaims");
    let claim = json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": { "name": "c" },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } });
    let pvc = "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";
    let got = update_refused(
        &c,
        &claims,
        claim,
        json!({ "spec": { "accessModes": ["ReadWriteMany"] } }),
    )
    .await;
    assert_eq!(
        got,
        [format!(
            "{pvc}\n@@ -1,6 +1,6 @@\n {{\n  \"AccessModes\": [\n-  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n  \"Selector\": null,\n  \"Resources\": {{\n"
        )]
    );
    // Unbound: the requests too.
    let patch = json!({ "spec": { "resources": { "requests": { "storage": "2Gi" } } } });
    let (code, body) = send(&c, "PATCH", &format!("{claims}/c"), &patch).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        [format!(
            "{pvc}\n@@ -6,7 +6,7 @@\n  \"Resources\": {{\n   \"Limits\": null,\n   \"Requests\": {{\n-   \"storage\": \"1Gi\"\n+   \"storage\": \"2Gi\"\n   }}\n  }},\n  \"VolumeName\": \"\",\n"
        )]
    );

    // A Service's cluster IP.
    let services = format!("/api/v1/namespaces/{NS}/services");
    let svc = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "sv" },
        "spec": { "ports": [{ "port": 80 }] } });
    let got = update_refused(
        &c,
        &services,
        svc,
        json!({ "spec": { "clusterIP": "10.0.0.99" } }),
    )
    .await;
    assert_eq!(
        got,
        ["spec.clusterIPs[0]: Invalid value: [\"10.0.0.99\"]: may not change once set"]
    );

    // Immutable ConfigMaps and Secrets: every changed field is named.
    let when = "Forbidden: field is immutable when `immutable` is set";
    let cm = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cm" },
        "data": { "a": "b" }, "immutable": true });
    let patch = json!({ "immutable": false, "data": { "a": "c" }, "binaryData": { "x": "eA==" } });
    let got = update_refused(
        &c,
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        cm,
        patch,
    )
    .await;
    assert_eq!(
        got,
        [
            format!("binaryData: {when}"),
            format!("data: {when}"),
            format!("immutable: {when}")
        ]
    );
    let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "sec" },
        "data": { "a": "Yg==" }, "immutable": true });
    let patch = json!({ "immutable": null, "data": { "a": "Yw==" } });
    let got = update_refused(
        &c,
        &format!("/api/v1/namespaces/{NS}/secrets"),
        secret,
        patch,
    )
    .await;
    assert_eq!(got, [format!("data: {when}"), format!("immutable: {when}")]);

    // A CRD's group and scope.
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let crd = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "things.immutable.example.com" },
        "spec": { "group": "immutable.example.com", "scope": "Namespaced",
            "names": { "plural": "things", "singular": "thing", "kind": "Thing" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object" } } }] } });
    let (code, body) = send(&c, "POST", crds, &crd).await;
    assert_eq!(code, 201, "{body}");
    let crd_path = format!("{crds}/things.immutable.example.com");
    // Scope and names freeze once it is established (kube's controller takes a moment).
    for _ in 0..100 {
        let (_, crd) = send(&c, "GET", &crd_path, &Value::Null).await;
        let established = crd["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        if established {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let patch = json!({ "spec": { "scope": "Cluster", "group": "other.example.com",
        "names": { "plural": "others", "kind": "Other" } } });
    let (code, body) = send(&c, "PATCH", &crd_path, &patch).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        causes(&body),
        [
            "spec.group: Invalid value: \"other.example.com\": field is immutable",
            "spec.names.kind: Invalid value: \"Other\": field is immutable",
            "spec.names.plural: Invalid value: \"others\": field is immutable",
            "spec.scope: Invalid value: \"Cluster\": field is immutable",
        ]
    );

    // A binding's roleRef.
    let bindings = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings");
    let rb = json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "rb" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view" },
        "subjects": [{ "kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io" }] });
    let got = update_refused(&c, &bindings, rb, json!({ "roleRef": { "name": "edit" } })).await;
    assert_eq!(
        got,
        [
            "roleRef: Invalid value: {\"APIGroup\":\"rbac.authorization.k8s.io\",\"Kind\":\"ClusterRole\",\"Name\":\"edit\"}: cannot change roleRef"
        ]
    );
    s.shutdown().await;
}
