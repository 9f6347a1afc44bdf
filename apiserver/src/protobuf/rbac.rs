//! Protobuf bodies of `kubectl create role|clusterrole|rolebinding|clusterrolebinding`.

use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, meta, put_str, selector, vec_str};
use crate::error::ApiResult;

/// The JSON of an RBAC object, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    if api_version != "rbac.authorization.k8s.io/v1" {
        return None;
    }
    let decoded = match kind {
        "Role" => rbac::Role::decode(raw)
            .map(|r| json!({ "metadata": meta(r.metadata), "rules": rules(&r.rules) })),
        "ClusterRole" => rbac::ClusterRole::decode(raw).map(|r| {
            let mut o = json!({ "metadata": meta(r.metadata), "rules": rules(&r.rules) });
            if let Some(a) = r.aggregation_rule {
                let selectors: Vec<Value> = a
                    .cluster_role_selectors
                    .into_iter()
                    .map(|s| selector(Some(s)))
                    .collect();
                o["aggregationRule"] = json!({ "clusterRoleSelectors": selectors });
            }
            o
        }),
        "RoleBinding" => {
            rbac::RoleBinding::decode(raw).map(|b| binding(b.metadata, &b.subjects, b.role_ref))
        }
        "ClusterRoleBinding" => rbac::ClusterRoleBinding::decode(raw)
            .map(|b| binding(b.metadata, &b.subjects, b.role_ref)),
        _ => return None,
    };
    Some(decoded.map_err(bad))
}

fn rules(rules: &[rbac::PolicyRule]) -> Value {
    rules
        .iter()
        .map(|r| {
            let mut o = Map::new();
            // kube's JSON always carries `verbs` (no omitempty).
            o.insert("verbs".into(), json!(r.verbs));
            vec_str(&mut o, "apiGroups", &r.api_groups);
            vec_str(&mut o, "resources", &r.resources);
            vec_str(&mut o, "resourceNames", &r.resource_names);
            vec_str(&mut o, "nonResourceURLs", &r.non_resource_ur_ls);
            Value::Object(o)
        })
        .collect()
}

fn binding(
    metadata: Option<ObjectMeta>,
    subjects: &[rbac::Subject],
    role_ref: Option<rbac::RoleRef>,
) -> Value {
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|s| {
            let mut o = Map::new();
            put_str(&mut o, "kind", s.kind.as_deref());
            put_str(&mut o, "apiGroup", s.api_group.as_deref());
            put_str(&mut o, "name", s.name.as_deref());
            put_str(&mut o, "namespace", s.namespace.as_deref());
            Value::Object(o)
        })
        .collect();
    let role_ref = role_ref.unwrap_or_default();
    let mut r = Map::new();
    put_str(&mut r, "apiGroup", role_ref.api_group.as_deref());
    put_str(&mut r, "kind", role_ref.kind.as_deref());
    put_str(&mut r, "name", role_ref.name.as_deref());
    let mut o = json!({ "metadata": meta(metadata), "roleRef": r });
    if !subjects.is_empty() {
        o["subjects"] = Value::Array(subjects);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_binding_keeps_subjects_and_role_ref() {
        let b = rbac::RoleBinding {
            subjects: vec![rbac::Subject {
                kind: Some("ServiceAccount".into()),
                name: Some("sa".into()),
                namespace: Some("ns".into()),
                api_group: None,
            }],
            role_ref: Some(rbac::RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: Some("Role".into()),
                name: Some("r".into()),
            }),
            ..Default::default()
        };
        let v = decode(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            &b.encode_to_vec(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            v["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ns"})
        );
        assert_eq!(v["roleRef"]["name"], "r");
    }

    #[test]
    fn a_cluster_role_keeps_rules_and_aggregation() {
        let r = rbac::ClusterRole {
            rules: vec![rbac::PolicyRule {
                verbs: vec!["get".into()],
                non_resource_ur_ls: vec!["/healthz".into()],
                ..Default::default()
            }],
            aggregation_rule: Some(rbac::AggregationRule {
                cluster_role_selectors: vec![
                    k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector {
                        match_labels: [("a".to_string(), "b".to_string())].into(),
                        match_expressions: vec![],
                    },
                ],
            }),
            ..Default::default()
        };
        let v = decode(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            &r.encode_to_vec(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            v["rules"][0],
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
        );
        assert_eq!(
            v["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["a"],
            "b"
        );
    }
}
