//! kube's root CA publisher: every active namespace has the ConfigMap
//! `kube-root-ca.crt` with the CA that signed the server's certificate, put
//! back when it is deleted or changed.

use serde_json::{Value, json};

use super::system_object::{created, resource};
use crate::objects::fieldmanager;
use crate::registry::Registry;
use crate::storage::{View, Write};

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";

/// kube's description annotation and its text.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
when using internal endpoints such as the internal service IP or kubernetes.default.svc. No \
other usage is guaranteed across distributions of Kubernetes clusters.";

/// The field manager of the ConfigMaps (kube-controller-manager's).
const MANAGER: &str = "kube-controller-manager";

/// The writes that give each active namespace its up-to-date ConfigMap.
pub fn plan(registry: &Registry, view: &View<'_>, ca_pem: &str) -> Vec<Write> {
    let namespaces = resource(registry, "", "v1", "namespaces");
    let config_maps = resource(registry, "", "v1", "configmaps");
    let data = json!({ "ca.crt": ca_pem });
    let mut writes = Vec::new();
    for (_, ns) in view.list(&namespaces.prefix()) {
        if crate::objects::meta::is_deleting(&ns) || ns["status"]["phase"] == "Terminating" {
            continue;
        }
        let Some(name) = ns["metadata"]["name"].as_str() else {
            continue;
        };
        let key = config_maps.key(Some(name), NAME);
        match view.get(&key) {
            None => {
                let obj = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": name,
                        "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data,
                });
                let (key, obj) = created(&config_maps, obj, MANAGER);
                writes.push(Write::Put(key, obj));
            }
            Some(live) if crate::objects::meta::is_deleting(live) => {}
            Some(live) => {
                let described = live["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
                    .as_str()
                    .is_some_and(|d| !d.is_empty());
                if live.get("data") == Some(&data) && described {
                    continue;
                }
                let mut obj: Value = (**live).clone();
                obj["data"] = data.clone();
                if !obj["metadata"]["annotations"].is_object() {
                    obj["metadata"]["annotations"] = json!({});
                }
                obj["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
                if fieldmanager::record_update(&config_maps, Some(live), &mut obj, MANAGER, None)
                    .is_ok()
                {
                    writes.push(Write::Put(key, obj));
                }
            }
        }
    }
    writes
}
