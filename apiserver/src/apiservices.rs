//! `apiregistration.k8s.io/v1` `APIServices`, read-only: kube's aggregator lists one
//! per group version it serves itself (`Local`, `Available`), labelled
//! `kube-aggregator.kubernetes.io/automanaged: onstart`, which `kubectl get
//! apiservices` shows. They are made at start for the built-in group versions, when
//! missing; nothing is aggregated here, so writes are refused (405).
//!
//! Group versions of custom resources get theirs as kube's CRD registration
//! controller makes them ([`sync_custom`], run by the background controllers):
//! one per version some CRD serves, labelled `automanaged: "true"`, removed when no
//! CRD serves it any more.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::storage::{View, Write};

/// The label kube's aggregator marks the `APIServices` it manages with.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The API group.
pub const GROUP: &str = "apiregistration.k8s.io";

/// The resource.
pub const PLURAL: &str = "apiservices";

/// kube's `groupPriorityMinimum` and `versionPriority` of its own group versions
/// (as kube-apiserver 1.36 lists them); others get kube's default for CRDs.
fn priorities(group: &str, version: &str) -> (i64, i64) {
    let group_priority = match group {
        "" | GROUP => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "admissionregistration.k8s.io" | "apiextensions.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" | "resource.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        _ => 1000,
    };
    let version_priority = match (group, version) {
        ("", _) => 1,
        ("autoscaling", "v2") => 30,
        ("flowcontrol.apiserver.k8s.io" | "resource.k8s.io", _) => 21,
        (_, _) if group_priority == 1000 => 100,
        _ => 15,
    };
    (group_priority, version_priority)
}

/// The name of a group version's `APIService`: `VERSION.GROUP` (`v1.` for core).
pub fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The storage key of an `APIService`.
pub fn key(name: &str) -> String {
    format!("{GROUP}/{PLURAL}//{name}")
}

/// Storage keys and objects of the `APIServices` of `group_versions` (built-in ones,
/// managed `onstart`).
pub fn objects(group_versions: &[(String, String)]) -> Vec<(String, Value)> {
    managed(group_versions, "onstart")
}

/// Storage keys and objects of `APIServices` for `group_versions`, labelled with
/// how the aggregator manages them.
fn managed(group_versions: &[(String, String)], how: &str) -> Vec<(String, Value)> {
    let now = crate::objects::meta::now_rfc3339();
    group_versions
        .iter()
        .map(|(group, version)| {
            let name = name(group, version);
            let (group_priority, version_priority) = priorities(group, version);
            let mut spec = json!({
                "version": version,
                "groupPriorityMinimum": group_priority,
                "versionPriority": version_priority,
            });
            if !group.is_empty() {
                spec["group"] = json!(group);
            }
            let object = json!({
                "apiVersion": format!("{GROUP}/v1"),
                "kind": "APIService",
                "metadata": {
                    "name": name,
                    "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": now,
                    "labels": {AUTOMANAGED: how},
                },
                "spec": spec,
                "status": {"conditions": [{
                    "type": "Available", "status": "True", "lastTransitionTime": now,
                    "reason": "Local", "message": "Local APIServices are always available",
                }]},
            });
            (key(&name), object)
        })
        .collect()
}

/// The group versions the server serves itself: the core API, every built-in
/// group version and the review groups.
pub fn served(registry: &Registry) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = registry
        .all()
        .iter()
        .filter(|r| r.crd.is_none())
        .map(|r| (r.group.clone(), r.version.clone()))
        .chain(
            crate::auth::reviews::RESOURCES
                .iter()
                .map(|r| (r.group.to_string(), r.version.to_string())),
        )
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The writes that make the `APIServices` of custom resources match the CRDs in
/// `view`: one for each group version a CRD serves, none for the others.
pub fn sync_custom(view: &View<'_>) -> Vec<Write> {
    let crds = view.list(&format!("{}/{}/", crate::crd::GROUP, crate::crd::PLURAL));
    let wanted: BTreeSet<(String, String)> = crds
        .iter()
        .flat_map(|(_, crd)| {
            let group = crd["spec"]["group"].as_str().unwrap_or("").to_string();
            crd["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["served"] == true)
                .filter_map(move |v| Some((group.clone(), v["name"].as_str()?.to_string())))
        })
        .collect();
    let existing = view.list(&format!("{GROUP}/{PLURAL}/"));
    let is_custom = |o: &Value| o["metadata"]["labels"][AUTOMANAGED] == "true";
    let missing: Vec<(String, String)> = wanted
        .iter()
        .filter(|(g, v)| view.get(&key(&name(g, v))).is_none())
        .cloned()
        .collect();
    let stale = existing.into_iter().filter(|(_, o)| {
        is_custom(o)
            && !wanted.iter().any(|(g, v)| {
                o["spec"]["group"].as_str() == Some(g.as_str()) && o["spec"]["version"] == **v
            })
    });
    stale
        .map(|(k, _)| Write::Delete(k))
        .chain(
            managed(&missing, "true")
                .into_iter()
                .map(|(k, o)| Write::Put(k, o)),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiservices_as_kube_names_them() {
        let objects = objects(&[(String::new(), "v1".into()), ("apps".into(), "v1".into())]);
        assert_eq!(objects[0].0, "apiregistration.k8s.io/apiservices//v1.");
        assert_eq!(
            objects[0].1["spec"],
            json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1})
        );
        assert_eq!(objects[1].1["metadata"]["name"], "v1.apps");
        assert_eq!(objects[1].1["spec"]["group"], "apps");
        assert_eq!(objects[1].1["status"]["conditions"][0]["reason"], "Local");
    }
}
