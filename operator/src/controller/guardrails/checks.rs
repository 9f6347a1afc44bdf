//! The host's own checks on a plugin's desired children before anything is
//! applied. Any violation fails the whole reconcile: nothing is applied,
//! nothing pruned.
//!
//! Besides "declared kinds, the parent's namespace, valid names, no
//! duplicates", the checks keep a plugin from reaching Gantry itself: no
//! child in the operator's namespace (where bindings and policies live),
//! none with Gantry's labels or annotations (`gantry.dev/...`), none of
//! the parent kind. Finalizers a plugin sets on children are dropped:
//! nothing would ever remove them.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::names::is_valid_name;
use crate::controller::spec::KindRef;

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

/// Metadata a plugin must not set, dropped from every child: the API server
/// or the host owns it. Finalizers too: the host would never remove them.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "finalizers",
];

/// Gantry's own label and annotation prefix: a child carrying one could be
/// taken for a binding, a policy or another binding's child.
const GANTRY_PREFIX: &str = "gantry.dev";

/// What children are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The binding's parent kind: never a child.
    pub parent_kind: &'a KindRef,
    /// The parent's namespace (`None` when cluster-scoped).
    pub parent_namespace: Option<&'a str>,
    /// The operator's namespace, where bindings and policies live.
    pub operator_namespace: &'a str,
    /// The declared child kinds, with their scope (true: namespaced).
    pub scopes: &'a HashMap<KindRef, bool>,
}

/// Whether a label or annotation key is in Gantry's prefix
/// (`gantry.dev/...` or `<sub>.gantry.dev/...`).
fn is_gantry_key(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix == GANTRY_PREFIX || prefix.ends_with(&format!(".{GANTRY_PREFIX}"))
    })
}

/// Keys of `metadata.<field>` in Gantry's prefix.
fn gantry_keys(object: &Value, field: &str) -> Vec<String> {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .map(|map| map.keys().filter(|k| is_gantry_key(k)).cloned().collect())
        .unwrap_or_default()
}

/// Check `children` against `rules`: declared kinds only, never the parent
/// kind, children of a namespaced parent in its namespace, none in the
/// operator's namespace, no Gantry labels or annotations, valid names, no
/// duplicates. Returns every violation.
pub fn check_children(
    children: Vec<Value>,
    rules: &Rules<'_>,
) -> Result<Vec<DesiredChild>, Vec<String>> {
    let parent_namespace = rules.parent_namespace;
    let scopes = rules.scopes;
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
        if kind.same_kind(rules.parent_kind) {
            errors.push(format!(
                "{label}: a plugin cannot create objects of its parent kind"
            ));
            continue;
        }
        let Some(&namespaced) = scopes.get(&kind) else {
            errors.push(format!(
                "{label}: kind {kind} is not declared in the binding's children"
            ));
            continue;
        };
        if !is_valid_name(kind.group(), &kind.kind, &name) {
            errors.push(format!("{label}: name is not valid for a {}", kind.kind));
        }
        for field in ["labels", "annotations"] {
            for key in gantry_keys(&object, field) {
                errors.push(format!(
                    "{label}: {field} in {GANTRY_PREFIX}/ are Gantry's own ({key:?})"
                ));
            }
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
        if namespace.as_deref() == Some(rules.operator_namespace) {
            errors.push(format!(
                "{label}: namespace {:?} is the operator's own; no child may be placed there",
                rules.operator_namespace
            ));
        }
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

    fn parent_kind() -> KindRef {
        KindRef {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
        }
    }

    fn check(
        children: Vec<Value>,
        parent_namespace: Option<&str>,
        scopes: &HashMap<KindRef, bool>,
    ) -> Result<Vec<DesiredChild>, Vec<String>> {
        check_children(
            children,
            &Rules {
                parent_kind: &parent_kind(),
                parent_namespace,
                operator_namespace: "gantry-system",
                scopes,
            },
        )
    }

    #[test]
    fn places_children_in_the_parents_namespace_and_strips_server_fields() {
        let mut d = child("apps/v1", "Deployment", "web");
        d["metadata"]["resourceVersion"] = "5".into();
        d["status"] = json!({"replicas": 3});
        let desired = check(vec![d], Some("shop"), &scopes()).unwrap();
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
        let errors = check(children, Some("shop"), &scopes()).unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "kind v1/Secret is not declared",
            "\"Bad_Name\"): name is not valid for a Deployment",
            "namespace \"elsewhere\" is not the parent's namespace",
            "listed more than once",
            "\"a.b\"): name is not valid for a Service",
            "cannot own a cluster-scoped child",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
        }
        assert_eq!(errors.len(), 6, "{all}");
    }

    #[test]
    fn cluster_scoped_parents_need_explicit_namespaces() {
        let errors = check(vec![child("apps/v1", "Deployment", "x")], None, &scopes()).unwrap_err();
        assert!(errors[0].contains("needs metadata.namespace"));
        let mut placed = child("apps/v1", "Deployment", "x");
        placed["metadata"]["namespace"] = "team-a".into();
        let ok = check(
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

    #[test]
    fn children_cannot_reach_gantry_itself() {
        let mut scopes = scopes();
        scopes.insert(
            KindRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            true,
        );
        scopes.insert(
            KindRef {
                api_version: "example.com/v2".into(),
                kind: "Widget".into(),
            },
            true,
        );
        let mut labelled = child("v1", "ConfigMap", "binding");
        labelled["metadata"]["labels"] = json!({"gantry.dev/plugin": "true", "app": "x"});
        let mut annotated = child("v1", "ConfigMap", "annotated");
        annotated["metadata"]["annotations"] = json!({"policy.gantry.dev/x": "y"});
        let mut placed = child("v1", "ConfigMap", "placed");
        placed["metadata"]["namespace"] = "gantry-system".into();
        let errors = check(
            vec![
                labelled,
                annotated,
                placed,
                child("example.com/v2", "Widget", "fork"),
            ],
            None,
            &scopes,
        )
        .unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "labels in gantry.dev/ are Gantry's own (\"gantry.dev/plugin\")",
            "annotations in gantry.dev/ are Gantry's own (\"policy.gantry.dev/x\")",
            "namespace \"gantry-system\" is the operator's own",
            "(example.com/v2/Widget \"fork\"): a plugin cannot create objects of its parent kind",
        ] {
            assert!(all.contains(expected), "missing {expected:?} in:\n{all}");
        }
        // A namespaced parent in the operator's namespace cannot place
        // children there either.
        let errors = check(
            vec![child("v1", "ConfigMap", "c")],
            Some("gantry-system"),
            &scopes,
        )
        .unwrap_err();
        assert!(errors[0].contains("is the operator's own"), "{errors:?}");
    }

    #[test]
    fn finalizers_set_by_the_plugin_are_dropped() {
        let mut d = child("apps/v1", "Deployment", "web");
        d["metadata"]["finalizers"] = json!(["example.com/never-removed"]);
        let desired = check(vec![d], Some("shop"), &scopes()).unwrap();
        assert!(desired[0].object["metadata"].get("finalizers").is_none());
    }

    #[test]
    fn long_subdomain_names_pass_as_in_kubernetes() {
        let name = "a".repeat(70);
        let desired = check(
            vec![child("apps/v1", "Deployment", &name)],
            Some("shop"),
            &scopes(),
        )
        .unwrap();
        assert_eq!(desired[0].name, name);
    }
}
