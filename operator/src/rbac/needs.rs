//! What a binding and the operator need the API server to allow: per
//! resource, the verbs, and whether cluster-wide or in which namespace.

use crate::watch_scope::WatchScope;

/// A kind as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// API group (`""`: core).
    pub group: String,
    /// Plural resource name.
    pub plural: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource.
    pub has_status: bool,
}

/// Where a need applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Where {
    /// Cluster-wide (a ClusterRole).
    Cluster,
    /// In one namespace (a Role there).
    Namespace(String),
}

/// Verbs on one resource (or subresource), somewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// API group.
    pub group: String,
    /// Resource, or `resource/subresource`.
    pub resource: String,
    /// Verbs, in the order they were asked for.
    pub verbs: Vec<&'static str>,
    /// Where.
    pub place: Where,
}

const WATCH: &[&str] = &["get", "list", "watch"];

/// The places objects of `kind` are read and written: cluster-wide, or in
/// each watched namespace.
fn places(kind_namespaced: bool, scope: &WatchScope) -> Vec<Where> {
    match scope {
        WatchScope::Namespaces(names) if kind_namespaced => {
            names.iter().cloned().map(Where::Namespace).collect()
        }
        _ => vec![Where::Cluster],
    }
}

fn push(
    needs: &mut Vec<Need>,
    kind: &Kind,
    resource: &str,
    verbs: &[&'static str],
    scope: &WatchScope,
) {
    for place in places(kind.namespaced, scope) {
        needs.push(Need {
            group: kind.group.clone(),
            resource: resource.to_string(),
            verbs: verbs.to_vec(),
            place,
        });
    }
}

/// What a binding needs, its kinds resolved as `parent`, `children` and
/// `related` (each with the one other namespace it is read from, if it
/// names one): parents read and patched (the finalizer), their status
/// written, their `finalizers` updated (owner references that block
/// deletion need it); children read, created, patched and pruned; related
/// objects read.
pub fn of_binding(
    parent: &Kind,
    children: &[Kind],
    related: &[(Kind, Option<String>)],
    scope: &WatchScope,
) -> Vec<Need> {
    let mut needs = Vec::new();
    push(
        &mut needs,
        parent,
        &parent.plural,
        &["get", "list", "watch", "patch"],
        scope,
    );
    if parent.has_status {
        push(
            &mut needs,
            parent,
            &format!("{}/status", parent.plural),
            &["patch"],
            scope,
        );
    }
    push(
        &mut needs,
        parent,
        &format!("{}/finalizers", parent.plural),
        &["update"],
        scope,
    );
    for child in children {
        push(
            &mut needs,
            child,
            &child.plural,
            &["get", "list", "watch", "create", "patch", "delete"],
            scope,
        );
    }
    for (kind, namespace) in related {
        match (namespace, kind.namespaced) {
            // Read from one other namespace: a Role there is enough.
            (Some(namespace), true) => needs.push(Need {
                group: kind.group.clone(),
                resource: kind.plural.clone(),
                verbs: WATCH.to_vec(),
                place: Where::Namespace(namespace.clone()),
            }),
            _ => push(&mut needs, kind, &kind.plural, WATCH, scope),
        }
    }
    needs
}

/// What the operator itself needs, whatever it serves: Events next to the
/// parents and next to its binding ConfigMaps (created, and patched when
/// repeats are counted), its binding ConfigMaps (watched, annotated) and
/// Leases in `namespace`, and the webhook configurations when it serves
/// admission policies.
pub fn of_operator(namespace: &str, scope: &WatchScope, policies: bool) -> Vec<Need> {
    let mut needs = Vec::new();
    let here = Where::Namespace(namespace.to_string());
    for group in ["", "events.k8s.io"] {
        let events = Kind {
            group: group.into(),
            plural: "events".into(),
            namespaced: true,
            has_status: false,
        };
        push(&mut needs, &events, "events", &["create", "patch"], scope);
        if !scope.contains(namespace) {
            needs.push(Need {
                group: group.into(),
                resource: "events".into(),
                verbs: vec!["create", "patch"],
                place: here.clone(),
            });
        }
    }
    needs.push(Need {
        group: String::new(),
        resource: "configmaps".into(),
        verbs: vec!["get", "list", "watch", "patch"],
        place: here.clone(),
    });
    needs.push(Need {
        group: "coordination.k8s.io".into(),
        resource: "leases".into(),
        verbs: vec!["get", "list", "watch", "create", "update", "patch"],
        place: here,
    });
    if policies {
        for resource in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ] {
            needs.push(Need {
                group: "admissionregistration.k8s.io".into(),
                resource: resource.into(),
                verbs: vec!["get", "list", "watch", "create", "patch", "delete"],
                place: Where::Cluster,
            });
        }
    }
    needs
}

/// What the converter of CRD `crd` (`<plural>.<group>`) needs: to read
/// its CRD and point it at the webhook server (`spec.conversion`), and to
/// list the CRD's objects for shadow runs.
pub fn of_converter(crd: &str) -> Vec<Need> {
    let (plural, group) = crd.split_once('.').unwrap_or(("", ""));
    vec![
        Need {
            group: "apiextensions.k8s.io".into(),
            resource: "customresourcedefinitions".into(),
            verbs: vec!["get", "patch"],
            place: Where::Cluster,
        },
        Need {
            group: group.into(),
            resource: plural.into(),
            verbs: vec!["list"],
            place: Where::Cluster,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, plural: &str, namespaced: bool) -> Kind {
        Kind {
            group: group.into(),
            plural: plural.into(),
            namespaced,
            has_status: true,
        }
    }

    #[test]
    fn a_binding_needs_its_parents_children_and_related_kinds_and_no_more() {
        let needs = of_binding(
            &kind("cache.example.com", "memcacheds", true),
            &[kind("apps", "deployments", true)],
            &[(kind("", "secrets", true), None)],
            &WatchScope::All,
        );
        let described: Vec<String> = needs
            .iter()
            .map(|n| format!("{}/{} {}", n.group, n.resource, n.verbs.join(",")))
            .collect();
        assert_eq!(
            described,
            [
                "cache.example.com/memcacheds get,list,watch,patch",
                "cache.example.com/memcacheds/status patch",
                "cache.example.com/memcacheds/finalizers update",
                "apps/deployments get,list,watch,create,patch,delete",
                "/secrets get,list,watch",
            ]
        );
        assert!(needs.iter().all(|n| n.place == Where::Cluster));
    }

    #[test]
    fn a_scoped_operator_needs_namespaced_kinds_only_where_it_watches() {
        let scope = WatchScope::parse("a,b").unwrap();
        // A Secret read from namespace `shared` only, and a cluster-scoped kind.
        let needs = of_binding(
            &kind("cache.example.com", "memcacheds", true),
            &[],
            &[
                (kind("", "secrets", true), Some("shared".into())),
                (kind("storage.k8s.io", "storageclasses", false), None),
            ],
            &scope,
        );
        let places = |resource: &str| -> Vec<Where> {
            needs
                .iter()
                .filter(|n| n.resource == resource)
                .map(|n| n.place.clone())
                .collect()
        };
        let ns = |n: &str| Where::Namespace(n.into());
        assert_eq!(places("memcacheds"), [ns("a"), ns("b")]);
        assert_eq!(places("secrets"), [ns("shared")]);
        assert_eq!(places("storageclasses"), [Where::Cluster]);
        let operator = of_operator("gantry-system", &scope, false);
        // Events about binding ConfigMaps go to the operator's namespace.
        assert!(
            operator
                .iter()
                .any(|n| n.resource == "events"
                    && n.place == Where::Namespace("gantry-system".into()))
        );
        assert!(
            operator
                .iter()
                .all(|n| matches!(&n.place, Where::Namespace(_)))
        );
        assert!(
            of_operator("gantry-system", &WatchScope::All, true)
                .iter()
                .any(|n| n.resource == "validatingwebhookconfigurations")
        );
    }
}
