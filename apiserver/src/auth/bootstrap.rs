//! The default `ClusterRoles` and `ClusterRoleBindings` kube-apiserver creates
//! at start (its bootstrap policy), those that say what every user may do:
//! the admin's `cluster-admin`, and discovery, public information and the
//! self-reviews for every authenticated user. Created when missing, so a
//! service account can find the API before anything else is granted.
//! kube's aggregated `admin`, `edit` and `view` roles are not made here.

use serde_json::{Value, json};

use super::rbac::GROUP;

/// (ClusterRole name, rules, groups bound to it).
fn policy() -> Vec<(&'static str, Value, &'static [&'static str])> {
    vec![
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
            &["system:masters"],
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                "/openapi/*", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
            &["system:authenticated"],
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
            &["system:authenticated"],
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "uid": uuid::Uuid::new_v4().to_string(),
        "creationTimestamp": crate::objects::meta::now_rfc3339(),
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

/// Storage keys and objects of the bootstrap policy.
pub fn objects() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, rules, groups) in policy() {
        out.push((
            format!("{GROUP}/clusterroles//{name}"),
            json!({
                "apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRole",
                "metadata": metadata(name), "rules": rules,
            }),
        ));
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
            .collect();
        out.push((
            format!("{GROUP}/clusterrolebindings//{name}"),
            json!({
                "apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding",
                "metadata": metadata(name),
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            }),
        ));
    }
    out
}
