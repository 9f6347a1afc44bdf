//! autoscaling/v1 views of the autoscaling/v2 `HorizontalPodAutoscalers` kube stores,
//! and back: what v1 cannot say travels in kube's round-trip annotations.

use serde_json::{Map, Value, json};

use super::{behavior, go_json, metrics};

/// Non-CPU-utilization metric specs (v1 `MetricSpec` JSON).
pub const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `status.currentMetrics` (v1 `MetricStatus` JSON).
pub const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `status.conditions`.
pub const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `spec.behavior` (Go field names, see [`behavior`]).
pub const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// Every round-trip annotation; kube drops them from v2 objects.
pub const ANNOTATIONS: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

/// A CPU metric with a utilization target: the one v1's spec carries.
fn is_cpu_utilization(m: &Value) -> bool {
    m["type"] == "Resource"
        && m.pointer("/resource/name") == Some(&json!("cpu"))
        && m.pointer("/resource/target/averageUtilization").is_some()
}

fn copy(from: &Value, key: &str, to: &mut Map<String, Value>) {
    if let Some(v) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(key.into(), v.clone());
    }
}

fn annotate(obj: &mut Value, key: &str, text: &str) {
    let meta = obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object");
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    annotations[key] = json!(text);
}

fn array(v: &Value, pointer: &str) -> Vec<Value> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A stored v2 object as autoscaling/v1.
pub fn from_v2(v2: &Value) -> Value {
    let spec2 = v2.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status2 = v2.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut spec = Map::new();
    copy(&spec2, "scaleTargetRef", &mut spec);
    copy(&spec2, "minReplicas", &mut spec);
    spec.insert(
        "maxReplicas".into(),
        spec2.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    let metrics = array(&spec2, "/metrics");
    if let Some(cpu) = metrics
        .iter()
        .find(|m| m["type"] == "Resource" && m.pointer("/resource/name") == Some(&json!("cpu")))
        && let Some(u) = cpu.pointer("/resource/target/averageUtilization")
    {
        spec.insert("targetCPUUtilizationPercentage".into(), u.clone());
    }
    let mut status = Map::new();
    copy(&status2, "observedGeneration", &mut status);
    copy(&status2, "lastScaleTime", &mut status);
    status.insert(
        "currentReplicas".into(),
        status2.get("currentReplicas").cloned().unwrap_or(json!(0)),
    );
    status.insert(
        "desiredReplicas".into(),
        status2.get("desiredReplicas").cloned().unwrap_or(json!(0)),
    );
    let current = array(&status2, "/currentMetrics");
    for m in &current {
        if m["type"] == "Resource"
            && m.pointer("/resource/name") == Some(&json!("cpu"))
            && let Some(u) = m.pointer("/resource/current/averageUtilization")
        {
            status.insert("currentCPUUtilizationPercentage".into(), u.clone());
        }
    }
    let mut v1 = json!({
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "metadata": v2.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": spec,
        "status": status,
    });
    let others: Vec<String> = metrics
        .iter()
        .filter(|m| !is_cpu_utilization(m))
        .map(metrics::spec_to_v1)
        .collect();
    if !others.is_empty() {
        annotate(&mut v1, METRICS, &go_json::array(&others));
    }
    if !current.is_empty() {
        let items: Vec<String> = current.iter().map(metrics::status_to_v1).collect();
        annotate(&mut v1, CURRENT_METRICS, &go_json::array(&items));
    }
    if let Some(b) = spec2.get("behavior").filter(|b| !b.is_null()) {
        annotate(&mut v1, BEHAVIOR, &behavior::to_annotation(b));
    }
    let conditions = array(&status2, "/conditions");
    if !conditions.is_empty() {
        let items: Vec<String> = conditions.iter().map(condition).collect();
        annotate(&mut v1, CONDITIONS, &go_json::array(&items));
    }
    v1
}

/// A condition as Go writes v1's `HorizontalPodAutoscalerCondition`.
fn condition(c: &Value) -> String {
    let f = |k: &str| go_json::field(c, &format!("/{k}"));
    go_json::object(&[
        ("type", f("type")),
        ("status", f("status")),
        (
            "lastTransitionTime",
            Some(f("lastTransitionTime").unwrap_or_else(|| "null".into())),
        ),
        ("reason", f("reason")),
        ("message", f("message")),
    ])
}

/// The annotation `key` of `obj`, parsed as JSON.
fn annotation(obj: &Value, key: &str) -> Option<Value> {
    let text = obj.pointer("/metadata/annotations")?.get(key)?.as_str()?;
    serde_json::from_str(text).ok()
}

/// `obj` without kube's round-trip annotations (an emptied map goes too).
pub fn drop_annotations(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        for key in ANNOTATIONS {
            a.remove(key);
        }
        if a.is_empty() {
            meta.remove("annotations");
        }
    }
}

/// An autoscaling/v1 object as the v2 object kube stores (without defaults).
pub fn to_v2(v1: &Value) -> Value {
    let spec1 = v1.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status1 = v1.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut spec = Map::new();
    copy(&spec1, "scaleTargetRef", &mut spec);
    copy(&spec1, "minReplicas", &mut spec);
    copy(&spec1, "maxReplicas", &mut spec);
    // kube puts the annotation's metrics first, then the CPU target.
    let mut metrics_v2 = vec![];
    if let Some(Value::Array(others)) = annotation(v1, METRICS) {
        metrics_v2.extend(others.iter().map(metrics::spec_from_v1));
    }
    if let Some(u) = spec1
        .get("targetCPUUtilizationPercentage")
        .filter(|u| !u.is_null())
    {
        metrics_v2.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": u}}}));
    }
    if !metrics_v2.is_empty() {
        spec.insert("metrics".into(), Value::Array(metrics_v2));
    }
    let behavior = v1
        .pointer(&format!(
            "/metadata/annotations/{}",
            BEHAVIOR.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .and_then(behavior::from_annotation);
    if let Some(b) = behavior {
        spec.insert("behavior".into(), b);
    }
    let mut status = Map::new();
    copy(&status1, "observedGeneration", &mut status);
    copy(&status1, "lastScaleTime", &mut status);
    copy(&status1, "currentReplicas", &mut status);
    copy(&status1, "desiredReplicas", &mut status);
    if let Some(Value::Array(current)) = annotation(v1, CURRENT_METRICS) {
        let current: Vec<Value> = current.iter().map(metrics::status_from_v1).collect();
        status.insert("currentMetrics".into(), Value::Array(current));
    } else if let Some(u) = status1
        .get("currentCPUUtilizationPercentage")
        .filter(|u| !u.is_null())
    {
        status.insert(
            "currentMetrics".into(),
            json!([{"type": "Resource", "resource": {
            "name": "cpu", "current": {"averageUtilization": u}}}]),
        );
    }
    if let Some(Value::Array(conditions)) = annotation(v1, CONDITIONS) {
        status.insert("conditions".into(), Value::Array(conditions));
    }
    let mut v2 = json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": v1.get("metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": spec,
        "status": status,
    });
    drop_annotations(&mut v2);
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every metric source survives v2 → v1 annotation → v2.
    #[test]
    fn metrics_round_trip() {
        let metrics = json!([
            {"type": "Pods", "pods": {"metric": {"name": "qps"},
                "target": {"type": "AverageValue", "averageValue": "1k"}}},
            {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s"},
                "metric": {"name": "hits"}, "target": {"type": "Value", "value": "10"}}},
            {"type": "External", "external": {"metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "30"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 50}}},
        ]);
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"}, "spec": {"maxReplicas": 2, "metrics": metrics}});
        let v1 = from_v2(&v2);
        assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
        let back = to_v2(&v1);
        assert_eq!(back["spec"]["metrics"], metrics);
        assert!(back["metadata"].get("annotations").is_none());
    }

    /// The behavior annotation parses back (Go field names, case-insensitively).
    #[test]
    fn behavior_round_trip() {
        let b = json!({"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}});
        let text = behavior::to_annotation(&b);
        assert!(text.starts_with(r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"#));
        assert!(text.ends_with(r#""ScaleDown":null}"#));
        assert_eq!(behavior::from_annotation(&text), Some(b));
    }
}
