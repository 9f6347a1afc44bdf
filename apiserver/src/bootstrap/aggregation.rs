//! kube's cluster role aggregation controller: a ClusterRole with an
//! `aggregationRule` gets the rules of every other ClusterRole its
//! selectors match (selector by selector, roles by name, each rule once),
//! applied by `clusterrole-aggregation-controller` as kube applies them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::system_object::{applied, resource};
use crate::admission::matching::{labels, selector_matches};
use crate::auth::rbac::GROUP;
use crate::registry::Registry;
use crate::storage::{View, Write};

/// The field manager of the aggregated rules, kube's.
pub const MANAGER: &str = "clusterrole-aggregation-controller";

/// The aggregated rules of the role `name` with these selectors, from `roles`
/// (sorted by name, as stored).
fn aggregated_rules(
    name: &str,
    selectors: &[LabelSelector],
    roles: &[(String, Value)],
) -> Vec<Value> {
    let mut found: Vec<Value> = Vec::new();
    for selector in selectors {
        for (other, role) in roles {
            if other == name || !selector_matches(selector, &labels(Some(role))) {
                continue;
            }
            for rule in role["rules"].as_array().into_iter().flatten() {
                if !found.contains(rule) {
                    found.push(rule.clone());
                }
            }
        }
    }
    found
}

/// The writes that bring every aggregated ClusterRole's rules up to date.
pub fn plan(registry: &Registry, view: &View<'_>) -> Vec<Write> {
    let info = resource(registry, GROUP, "v1", "clusterroles");
    let roles: Vec<(String, Value)> = view
        .list(&info.prefix())
        .into_iter()
        .map(|(_, role)| {
            let name = role["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, (*role).clone())
        })
        .collect();
    let mut writes = Vec::new();
    for (name, role) in &roles {
        let Some(rule) = role.get("aggregationRule").filter(|r| !r.is_null()) else {
            continue;
        };
        if crate::objects::meta::is_deleting(role) {
            continue;
        }
        let selectors: Vec<LabelSelector> =
            serde_json::from_value(rule["clusterRoleSelectors"].clone()).unwrap_or_default();
        let aggregated = aggregated_rules(name, &selectors, &roles);
        let live: Vec<Value> = role["rules"].as_array().cloned().unwrap_or_default();
        if aggregated == live {
            continue;
        }
        let body = json!({
            "apiVersion": info.api_version(), "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": aggregated,
        });
        if let Some(obj) = applied(&info, role, &body, MANAGER) {
            writes.push(Write::Put(info.key(None, name), obj));
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, label: Option<&str>, verbs: &[&str]) -> (String, Value) {
        let labels = label.map_or(json!({}), |l| json!({ l: "true" }));
        let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]);
        (
            name.to_string(),
            json!({"metadata": {"name": name, "labels": labels}, "rules": rules}),
        )
    }

    #[test]
    fn rules_of_matching_roles_once_each_in_selector_then_name_order() {
        let roles = vec![
            role("a-view", Some("to-view"), &["get"]),
            role("b-edit", Some("to-edit"), &["create"]),
            role("c-view", Some("to-view"), &["get"]),
            role("other", None, &["delete"]),
        ];
        let selectors: Vec<LabelSelector> = serde_json::from_value(json!([
            {"matchLabels": {"to-edit": "true"}}, {"matchLabels": {"to-view": "true"}}
        ]))
        .unwrap();
        let verbs: Vec<Value> = aggregated_rules("edit", &selectors, &roles)
            .iter()
            .map(|r| r["verbs"].clone())
            .collect();
        assert_eq!(verbs, vec![json!(["create"]), json!(["get"])]);
    }
}
