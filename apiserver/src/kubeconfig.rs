//! Kubeconfig documents for kubectl and kube-rs.

use serde_json::json;

/// A kubeconfig with one cluster/user/context named `gantry` pointing at `url`,
/// trusting `ca_pem` (the server's CA, for https) and sending `token`.
pub fn kubeconfig_yaml(url: &str, token: Option<&str>, ca_pem: Option<&str>) -> String {
    use base64::Engine;
    let user = match token {
        Some(t) => json!({ "token": t }),
        None => json!({}),
    };
    let mut cluster = json!({ "server": url });
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "gantry", "cluster": cluster }],
        "users": [{ "name": "gantry", "user": user }],
        "contexts": [{ "name": "gantry", "context": { "cluster": "gantry", "user": "gantry", "namespace": "default" } }],
        "current-context": "gantry",
        "preferences": {},
    });
    serde_yaml::to_string(&doc).expect("kubeconfig serializes")
}
