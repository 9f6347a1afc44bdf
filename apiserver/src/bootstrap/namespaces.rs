//! The namespaces kube-apiserver makes at start: `default`, `kube-system`,
//! `kube-public` and `kube-node-lease`.

use serde_json::{Value, json};

use super::system_object::{created, resource};
use crate::registry::Registry;

/// The system namespaces' names.
pub const SYSTEM: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Storage keys and objects of the system namespaces, as kube-apiserver
/// creates them.
pub fn objects(registry: &Registry) -> Vec<(String, Value)> {
    let info = resource(registry, "", "v1", "namespaces");
    SYSTEM
        .iter()
        .map(|name| {
            created(
                &info,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                super::APISERVER,
            )
        })
        .collect()
}
