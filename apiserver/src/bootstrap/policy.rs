//! kube-apiserver's bootstrap RBAC policy: the `ClusterRoles` and
//! `ClusterRoleBindings` (the aggregated `admin`, `edit` and `view`, the
//! `system:` roles of users, nodes and controllers) and the Roles and
//! RoleBindings of `kube-system` and `kube-public` that it creates at start.
//! `policy.json` is kube's own policy at the pinned version, written by
//! `scripts/kube-bootstrap-policy`.

use serde_json::Value;

use super::system_object::{created, resource};
use crate::auth::rbac::GROUP;
use crate::registry::Registry;

/// kube's bootstrap policy, as `scripts/kube-bootstrap-policy` writes it.
const POLICY: &str = include_str!("policy.json");

/// Storage keys and objects of the policy, in the order kube creates them
/// (cluster roles, cluster role bindings, roles, role bindings).
pub fn objects(registry: &Registry) -> Vec<(String, Value)> {
    let policy: Value = serde_json::from_str(POLICY).expect("policy.json is valid");
    let mut out = Vec::new();
    for (field, plural) in [
        ("clusterRoles", "clusterroles"),
        ("clusterRoleBindings", "clusterrolebindings"),
    ] {
        let info = resource(registry, GROUP, "v1", plural);
        for obj in policy[field].as_array().into_iter().flatten() {
            out.push(created(&info, obj.clone(), super::APISERVER));
        }
    }
    for (field, plural) in [("roles", "roles"), ("roleBindings", "rolebindings")] {
        let info = resource(registry, GROUP, "v1", plural);
        for (namespace, objs) in policy[field].as_object().into_iter().flatten() {
            for obj in objs.as_array().into_iter().flatten() {
                let mut obj = obj.clone();
                obj["metadata"]["namespace"] = Value::String(namespace.clone());
                out.push(created(&info, obj, super::APISERVER));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_the_default_roles() {
        let objects = objects(&Registry::with_builtins());
        let named = |key: &str| objects.iter().find(|(k, _)| k == key).map(|(_, o)| o);
        let admin = named("rbac.authorization.k8s.io/clusterroles//admin").unwrap();
        assert_eq!(
            admin["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
            "true"
        );
        assert_eq!(
            admin["metadata"]["managedFields"][0]["manager"],
            "kube-apiserver"
        );
        let binding =
            named("rbac.authorization.k8s.io/clusterrolebindings//cluster-admin").unwrap();
        assert_eq!(binding["subjects"][0]["name"], "system:masters");
        assert!(
            named("rbac.authorization.k8s.io/roles/kube-system/extension-apiserver-authentication-reader")
                .is_some()
        );
    }
}
