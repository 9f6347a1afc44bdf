//! A Pod's quality-of-service class, as kube's `qos.ComputePodQOS` computes it
//! when the Pod is created (`status.qosClass`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::quantity::Quantity;

/// The resources `QoS` looks at.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Adds the positive cpu/memory quantities of `list` into `into`; returns the
/// names it found.
fn add(into: &mut BTreeMap<String, Quantity>, list: Option<&Value>) -> Vec<String> {
    let mut found = vec![];
    for (name, value) in list.and_then(Value::as_object).into_iter().flatten() {
        if !QOS_RESOURCES.contains(&name.as_str()) {
            continue;
        }
        let Some(q) = value
            .as_str()
            .and_then(Quantity::parse)
            .or_else(|| value.as_f64().and_then(|f| Quantity::parse(&f.to_string())))
        else {
            continue;
        };
        if q.is_positive() {
            let sum = into.get(name).copied().unwrap_or_default() + q;
            into.insert(name.clone(), sum);
            found.push(name.clone());
        }
    }
    found
}

fn has_cpu_and_memory(names: &[String]) -> bool {
    QOS_RESOURCES.iter().all(|r| names.iter().any(|n| n == r))
}

/// `Guaranteed`, `Burstable` or `BestEffort` for the Pod `pod` (after defaults:
/// requests defaulted from limits). Pod-level `spec.resources`, when set, decide
/// alone, as with kube's `PodLevelResources` feature.
pub fn pod_qos_class(pod: &Value) -> &'static str {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    let mut guaranteed = true;
    if let Some(resources) = pod
        .pointer("/spec/resources")
        .filter(|r| r.is_object() && !r.as_object().is_some_and(serde_json::Map::is_empty))
    {
        add(&mut requests, resources.get("requests"));
        let pod_limits = resources.get("limits").and_then(Value::as_object);
        if let Some(pod_limits) = pod_limits.filter(|l| !l.is_empty()) {
            add(&mut limits, resources.get("limits"));
            // kube looks at which QoS resources are named, whatever their value.
            let named: Vec<String> = pod_limits.keys().cloned().collect();
            if !has_cpu_and_memory(&named) {
                guaranteed = false;
            }
        }
    } else {
        for list in ["containers", "initContainers"] {
            for c in pod
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                add(&mut requests, c.pointer("/resources/requests"));
                let found = add(&mut limits, c.pointer("/resources/limits"));
                if !has_cpu_and_memory(&found) {
                    guaranteed = false;
                }
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let matched = requests
        .iter()
        .all(|(name, request)| limits.get(name) == Some(request));
    if guaranteed && matched && requests.len() == limits.len() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(resources: &[Value]) -> Value {
        let containers: Vec<Value> = resources
            .iter()
            .map(|r| json!({"name": "c", "resources": r}))
            .collect();
        json!({"spec": {"containers": containers}})
    }

    #[test]
    fn classes() {
        assert_eq!(pod_qos_class(&pod(&[json!({})])), "BestEffort");
        let both = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            pod_qos_class(&pod(&[json!({"requests": both, "limits": both})])),
            "Guaranteed"
        );
        assert_eq!(
            pod_qos_class(&pod(&[
                json!({"requests": {"cpu": "1000m", "memory": "1073741824"},
                "limits": both})
            ])),
            "Guaranteed",
            "equal quantities written otherwise"
        );
        assert_eq!(
            pod_qos_class(&pod(&[json!({"requests": {"cpu": "100m"}})])),
            "Burstable"
        );
        assert_eq!(
            pod_qos_class(&pod(&[
                json!({"requests": both, "limits": both}),
                json!({})
            ])),
            "Burstable",
            "one container without limits"
        );
        assert_eq!(
            pod_qos_class(&pod(&[json!({"requests": {"ephemeral-storage": "1Gi"}})])),
            "BestEffort",
            "only cpu and memory count"
        );
    }
}
