//! kube's defaults of `HorizontalPodAutoscalers` (`SetDefaults_HorizontalPodAutoscaler`
//! of autoscaling/v1 and v2).

use serde_json::{Value, json};

/// kube's CPU utilization target when no metric is given.
pub const DEFAULT_CPU_UTILIZATION: i64 = 80;

fn default(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.into(), value);
    }
}

/// v1: `minReplicas` 1.
pub fn v1(obj: &mut Value) {
    default(obj, "spec", json!({}));
    default(&mut obj["spec"], "minReplicas", json!(1));
}

/// v2: `minReplicas` 1, 80% CPU utilization without metrics, and the scale-up and
/// scale-down rules of a given `behavior` filled in.
pub fn v2(obj: &mut Value) {
    default(obj, "spec", json!({}));
    let spec = &mut obj["spec"];
    default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]);
    }
    if let Some(behavior) = spec.get_mut("behavior").filter(|b| b.is_object()) {
        default(behavior, "scaleUp", json!({}));
        default(behavior, "scaleDown", json!({}));
        let up = &mut behavior["scaleUp"];
        default(up, "stabilizationWindowSeconds", json!(0));
        default(up, "selectPolicy", json!("Max"));
        default(
            up,
            "policies",
            json!([
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ]),
        );
        let down = &mut behavior["scaleDown"];
        default(down, "stabilizationWindowSeconds", json!(300));
        default(down, "selectPolicy", json!("Max"));
        default(
            down,
            "policies",
            json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
        );
    }
}

/// Decoding at `info`'s version: v1's defaults, or v2's (whose decoding also drops
/// kube's round-trip annotations, as kube's v2 conversion does).
pub fn apply(info: &crate::registry::ResourceInfo, obj: &mut Value) {
    if super::is_v1(info) {
        v1(obj);
    } else {
        super::v1::drop_annotations(obj);
        v2(obj);
    }
}
