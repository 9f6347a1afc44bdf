//! Checks on a plugin's desired children before anything is applied. Any
//! violation fails the whole reconcile: nothing is applied, nothing pruned.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::binding::{KindRef, is_dns_label, is_dns_subdomain};

/// A desired child, checked and placed: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredChild {
    /// Its kind.
    pub kind: KindRef,
    /// Its namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The object to apply (without owner references and labels yet).
    pub object: Value,
}

impl DesiredChild {
    /// `kind namespace/name`, for messages.
    pub fn display(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Metadata a plugin must not set: the API server or the host owns it.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
];

/// Kinds whose names must be DNS labels rather than subdomains.
const LABEL_NAMED: &[&str] = &["Service", "Namespace"];

/// Check `children` against the binding: declared kinds only (with their
/// scope in `scopes`: true for namespaced), children of a namespaced parent
/// in its namespace, valid names, no duplicates. Returns every violation.
pub fn check_children(
    children: Vec<Value>,
    parent_namespace: Option<&str>,
    scopes: &HashMap<KindRef, bool>,
) -> Result<Vec<DesiredChild>, Vec<String>> {
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    let mut desired = Vec::with_capacity(children.len());
    for (index, mut object) in children.into_iter().enumerate() {
        let kind = KindRef {
            api_version: object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            kind: object["kind"].as_str().unwrap_or_default().to_string(),
        };
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let label = format!("child {index} ({kind} {name:?})");
        let Some(&namespaced) = scopes.get(&kind) else {
            errors.push(format!(
                "{label}: kind {kind} is not declared in the binding's children"
            ));
            continue;
        };
        let valid_name = if LABEL_NAMED.contains(&kind.kind.as_str()) {
            is_dns_label(&name)
        } else {
            is_dns_subdomain(&name)
        };
        if !valid_name {
            errors.push(format!("{label}: name is not a valid DNS name"));
        }
        let requested = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        let namespace = match (namespaced, parent_namespace, requested) {
            (false, Some(_), _) => {
                errors.push(format!(
                    "{label}: a namespaced parent cannot own a cluster-scoped child"
                ));
                None
            }
            (false, None, Some(_)) => {
                errors.push(format!(
                    "{label}: kind {kind} is cluster-scoped but the child names a namespace"
                ));
                None
            }
            (false, None, None) => None,
            (true, Some(parent_ns), Some(ns)) if ns != parent_ns => {
                errors.push(format!(
                    "{label}: namespace {ns:?} is not the parent's namespace {parent_ns:?}"
                ));
                None
            }
            (true, Some(parent_ns), _) => Some(parent_ns.to_string()),
            (true, None, Some(ns)) => Some(ns),
            (true, None, None) => {
                errors.push(format!("{label}: a namespaced child of a cluster-scoped parent needs metadata.namespace"));
                None
            }
        };
        if !seen.insert((kind.clone(), namespace.clone(), name.clone())) {
            errors.push(format!("{label}: listed more than once"));
        }
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in SERVER_METADATA {
                meta.remove(*key);
            }
            match &namespace {
                Some(ns) => meta.insert("namespace".into(), ns.clone().into()),
                None => meta.remove("namespace"),
            };
        }
        if let Some(status) = object.as_object_mut() {
            // Children are applied by the host's field manager; their status
            // belongs to whoever runs them.
            status.remove("status");
        }
        desired.push(DesiredChild {
            kind,
            namespace,
            name,
            object,
        });
    }
    if errors.is_empty() {
        Ok(desired)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scopes() -> HashMap<KindRef, bool> {
        [
            (
                KindRef {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                },
                true,
            ),
            (
                KindRef {
                    api_version: "v1".into(),
                    kind: "Service".into(),
                },
                true,
            ),
            (
                KindRef {
                    api_version: "rbac.authorization.k8s.io/v1".into(),
                    kind: "ClusterRole".into(),
                },
                false,
            ),
        ]
        .into()
    }

    fn child(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
    }

    #[test]
    fn places_children_in_the_parents_namespace_and_strips_server_fields() {
        let mut d = child("apps/v1", "Deployment", "web");
        d["metadata"]["resourceVersion"] = "5".into();
        d["status"] = json!({"replicas": 3});
        let desired = check_children(vec![d], Some("shop"), &scopes()).unwrap();
        assert_eq!(desired[0].namespace.as_deref(), Some("shop"));
        assert_eq!(
            desired[0].object["metadata"],
            json!({"name": "web", "namespace": "shop"})
        );
        assert!(desired[0].object.get("status").is_none());
    }

    #[test]
    fn reports_every_violation() {
        let mut other_ns = child("apps/v1", "Deployment", "b");
        other_ns["metadata"]["namespace"] = "elsewhere".into();
        let children = vec![
            child("v1", "Secret", "s"),
            child("apps/v1", "Deployment", "Bad_Name"),
            other_ns,
            child("apps/v1", "Deployment", "dup"),
            child("apps/v1", "Deployment", "dup"),
            child("v1", "Service", "a.b"),
            child("rbac.authorization.k8s.io/v1", "ClusterRole", "r"),
        ];
        let errors = check_children(children, Some("shop"), &scopes()).unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "kind v1/Secret is not declared",
            "\"Bad_Name\"): name is not a valid DNS name",
            "namespace \"elsewhere\" is not the parent's namespace",
            "listed more than once",
            "\"a.b\"): name is not a valid DNS name",
            "cannot own a cluster-scoped child",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
        }
        assert_eq!(errors.len(), 6, "{all}");
    }

    #[test]
    fn cluster_scoped_parents_need_explicit_namespaces() {
        let errors =
            check_children(vec![child("apps/v1", "Deployment", "x")], None, &scopes()).unwrap_err();
        assert!(errors[0].contains("needs metadata.namespace"));
        let mut placed = child("apps/v1", "Deployment", "x");
        placed["metadata"]["namespace"] = "team-a".into();
        let ok = check_children(
            vec![
                placed,
                child("rbac.authorization.k8s.io/v1", "ClusterRole", "r"),
            ],
            None,
            &scopes(),
        )
        .unwrap();
        assert_eq!(ok[0].namespace.as_deref(), Some("team-a"));
        assert_eq!(ok[1].namespace, None);
    }
}
