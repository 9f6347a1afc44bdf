//! Kubeconfig documents for kubectl and kube-rs.

use serde_json::json;

/// A kubeconfig with one cluster/user/context named `gantry` pointing at `url`.
pub fn kubeconfig_yaml(url: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(t) => json!({ "token": t }),
        None => json!({}),
    };
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "gantry", "cluster": { "server": url } }],
        "users": [{ "name": "gantry", "user": user }],
        "contexts": [{ "name": "gantry", "context": { "cluster": "gantry", "user": "gantry", "namespace": "default" } }],
        "current-context": "gantry",
        "preferences": {},
    });
    serde_yaml::to_string(&doc).expect("kubeconfig serializes")
}
