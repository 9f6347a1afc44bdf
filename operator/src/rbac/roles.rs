//! Needs as RBAC objects: a ClusterRole for what is cluster-wide, a Role
//! in each namespace for the rest, each bound to the operator's service
//! account.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

use super::{Need, Where};

/// One rule per resource, verbs merged, in the order first needed.
pub fn rules(needs: &[&Need]) -> Vec<PolicyRule> {
    let mut rules: Vec<PolicyRule> = Vec::new();
    for need in needs {
        let same = rules.iter_mut().find(|r| {
            r.api_groups.as_deref() == Some(std::slice::from_ref(&need.group))
                && r.resources.as_deref() == Some(std::slice::from_ref(&need.resource))
        });
        match same {
            Some(rule) => {
                for verb in &need.verbs {
                    if !rule.verbs.iter().any(|v| v == verb) {
                        rule.verbs.push((*verb).to_string());
                    }
                }
            }
            None => rules.push(PolicyRule {
                api_groups: Some(vec![need.group.clone()]),
                resources: Some(vec![need.resource.clone()]),
                verbs: need.verbs.iter().map(|v| (*v).to_string()).collect(),
                ..PolicyRule::default()
            }),
        }
    }
    rules
}

/// The ClusterRole (when anything is cluster-wide) and a Role per
/// namespace, named `name`, each with its binding to the service account
/// `sa_namespace/sa_name`.
pub fn objects(needs: &[Need], name: &str, sa_namespace: &str, sa_name: &str) -> Vec<Value> {
    let mut by_place: BTreeMap<&Where, Vec<&Need>> = BTreeMap::new();
    for need in needs {
        by_place.entry(&need.place).or_default().push(need);
    }
    let subject = json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}]);
    let mut objects = Vec::new();
    for (place, needs) in by_place {
        let rules = serde_json::to_value(rules(&needs)).expect("rules serialize");
        let (role_kind, binding_kind, metadata) = match place {
            Where::Cluster => ("ClusterRole", "ClusterRoleBinding", json!({"name": name})),
            Where::Namespace(ns) => (
                "Role",
                "RoleBinding",
                json!({"name": name, "namespace": ns}),
            ),
        };
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": role_kind,
            "metadata": metadata, "rules": rules,
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding_kind,
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": subject,
        }));
    }
    objects
}

/// `rbac: {rules: [...]}`, the chart's values for the bindings' rules
/// (the chart adds the operator's own and places them per namespace).
pub fn helm_values(binding_needs: &[Need]) -> Value {
    let needs: Vec<&Need> = binding_needs.iter().collect();
    json!({"rbac": {"rules": rules(&needs)}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(resource: &str, verbs: &[&'static str], place: Where) -> Need {
        Need {
            group: "apps".into(),
            resource: resource.into(),
            verbs: verbs.to_vec(),
            place,
        }
    }

    #[test]
    fn merges_verbs_per_resource_and_splits_cluster_from_namespaces() {
        let needs = [
            need("deployments", &["get", "list"], Where::Cluster),
            need("deployments", &["list", "patch"], Where::Cluster),
            need("statefulsets", &["get"], Where::Namespace("a".into())),
        ];
        let objects = objects(&needs, "gantry", "gantry-system", "gantry");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        );
        assert_eq!(
            objects[0]["rules"][0]["verbs"],
            json!(["get", "list", "patch"])
        );
        assert_eq!(objects[0]["rules"].as_array().unwrap().len(), 1);
        assert_eq!(objects[2]["metadata"]["namespace"], "a");
        assert_eq!(objects[3]["subjects"][0]["namespace"], "gantry-system");
        assert_eq!(objects[3]["roleRef"]["kind"], "Role");
    }
}
