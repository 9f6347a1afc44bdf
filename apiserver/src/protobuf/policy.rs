//! Protobuf bodies of `kubectl create quota|pdb|priorityclass`.

use k8s_pb::api::core::v1 as core;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::api::scheduling::v1 as scheduling;
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, int_or_string, meta, opt, put_str, selector, vec_str};
use crate::error::ApiResult;

/// The JSON of a quota, disruption budget or priority class, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    let decoded = match (api_version, kind) {
        ("v1", "ResourceQuota") => core::ResourceQuota::decode(raw).map(quota),
        ("policy/v1", "PodDisruptionBudget") => {
            policy::PodDisruptionBudget::decode(raw).map(disruption_budget)
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            scheduling::PriorityClass::decode(raw).map(|p| {
                let mut o = Map::new();
                o.insert("metadata".into(), meta(p.metadata));
                opt(&mut o, "value", p.value);
                // Go omits a false globalDefault.
                opt(&mut o, "globalDefault", p.global_default.filter(|g| *g));
                put_str(&mut o, "description", p.description.as_deref());
                put_str(&mut o, "preemptionPolicy", p.preemption_policy.as_deref());
                Value::Object(o)
            })
        }
        _ => return None,
    };
    Some(decoded.map_err(bad))
}

fn quota(q: core::ResourceQuota) -> Value {
    let spec = q.spec.unwrap_or_default();
    let mut sp = Map::new();
    if !spec.hard.is_empty() {
        let hard: Map<String, Value> = spec
            .hard
            .into_iter()
            .map(|(k, v)| (k, json!(v.string.unwrap_or_default())))
            .collect();
        sp.insert("hard".into(), Value::Object(hard));
    }
    vec_str(&mut sp, "scopes", &spec.scopes);
    if let Some(s) = spec.scope_selector {
        let expressions: Vec<Value> = s
            .match_expressions
            .iter()
            .map(|e| {
                let mut x = Map::new();
                put_str(&mut x, "scopeName", e.scope_name.as_deref());
                put_str(&mut x, "operator", e.operator.as_deref());
                vec_str(&mut x, "values", &e.values);
                Value::Object(x)
            })
            .collect();
        sp.insert(
            "scopeSelector".into(),
            json!({ "matchExpressions": expressions }),
        );
    }
    json!({ "metadata": meta(q.metadata), "spec": sp })
}

fn disruption_budget(p: policy::PodDisruptionBudget) -> Value {
    let spec = p.spec.unwrap_or_default();
    let mut sp = Map::new();
    if let Some(v) = spec.min_available.as_ref().and_then(int_or_string) {
        sp.insert("minAvailable".into(), v);
    }
    if let Some(v) = spec.max_unavailable.as_ref().and_then(int_or_string) {
        sp.insert("maxUnavailable".into(), v);
    }
    if spec.selector.is_some() {
        sp.insert("selector".into(), selector(spec.selector));
    }
    put_str(
        &mut sp,
        "unhealthyPodEvictionPolicy",
        spec.unhealthy_pod_eviction_policy.as_deref(),
    );
    json!({ "metadata": meta(p.metadata), "spec": sp })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

    #[test]
    fn a_budget_keeps_its_percentage_and_selector() {
        let p = policy::PodDisruptionBudget {
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: Some(IntOrString {
                    r#type: Some(1),
                    int_val: None,
                    str_val: Some("50%".into()),
                }),
                selector: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    match_expressions: vec![],
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = decode("policy/v1", "PodDisruptionBudget", &p.encode_to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(
            v["spec"],
            json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}})
        );
    }

    #[test]
    fn a_quota_keeps_its_quantities() {
        let q = core::ResourceQuota {
            spec: Some(core::ResourceQuotaSpec {
                hard: [(
                    "pods".to_string(),
                    k8s_pb::apimachinery::pkg::api::resource::Quantity {
                        string: Some("10".into()),
                    },
                )]
                .into(),
                scopes: vec!["BestEffort".into()],
                scope_selector: None,
            }),
            ..Default::default()
        };
        let v = decode("v1", "ResourceQuota", &q.encode_to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(
            v["spec"],
            json!({"hard": {"pods": "10"}, "scopes": ["BestEffort"]})
        );
    }
}
