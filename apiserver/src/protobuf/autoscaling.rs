//! Protobuf bodies of `kubectl autoscale`: autoscaling/v1 and autoscaling/v2
//! `HorizontalPodAutoscalers` (scale target, replica bounds and resource metrics, what
//! kubectl sets).

use k8s_pb::api::autoscaling::{v1, v2};
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, meta, opt, put_str};
use crate::error::ApiResult;

/// The JSON of an HPA, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    let decoded = match (api_version, kind) {
        ("autoscaling/v1", "HorizontalPodAutoscaler") => v1::HorizontalPodAutoscaler::decode(raw)
            .map(|h| {
                let spec = h.spec.unwrap_or_default();
                let mut sp = Map::new();
                sp.insert("scaleTargetRef".into(), v1_target(spec.scale_target_ref));
                opt(&mut sp, "minReplicas", spec.min_replicas);
                opt(&mut sp, "maxReplicas", spec.max_replicas);
                opt(
                    &mut sp,
                    "targetCPUUtilizationPercentage",
                    spec.target_cpu_utilization_percentage,
                );
                json!({ "metadata": meta(h.metadata), "spec": sp })
            }),
        ("autoscaling/v2", "HorizontalPodAutoscaler") => v2::HorizontalPodAutoscaler::decode(raw)
            .map(|h| {
                let spec = h.spec.unwrap_or_default();
                let mut sp = Map::new();
                let mut target = Map::new();
                if let Some(t) = spec.scale_target_ref {
                    put_str(&mut target, "kind", t.kind.as_deref());
                    put_str(&mut target, "name", t.name.as_deref());
                    put_str(&mut target, "apiVersion", t.api_version.as_deref());
                }
                sp.insert("scaleTargetRef".into(), Value::Object(target));
                opt(&mut sp, "minReplicas", spec.min_replicas);
                opt(&mut sp, "maxReplicas", spec.max_replicas);
                let metrics: Vec<Value> = spec.metrics.into_iter().map(metric).collect();
                if !metrics.is_empty() {
                    sp.insert("metrics".into(), Value::Array(metrics));
                }
                json!({ "metadata": meta(h.metadata), "spec": sp })
            }),
        _ => return None,
    };
    Some(decoded.map_err(bad))
}

fn v1_target(t: Option<v1::CrossVersionObjectReference>) -> Value {
    let mut target = Map::new();
    if let Some(t) = t {
        put_str(&mut target, "kind", t.kind.as_deref());
        put_str(&mut target, "name", t.name.as_deref());
        put_str(&mut target, "apiVersion", t.api_version.as_deref());
    }
    Value::Object(target)
}

/// A v2 metric; only resource metrics carry their source (kubectl sets no others).
fn metric(m: v2::MetricSpec) -> Value {
    let mut out = Map::new();
    put_str(&mut out, "type", m.r#type.as_deref());
    if let Some(r) = m.resource {
        let mut source = Map::new();
        put_str(&mut source, "name", r.name.as_deref());
        let t = r.target.unwrap_or_default();
        let mut target = Map::new();
        put_str(&mut target, "type", t.r#type.as_deref());
        opt(&mut target, "averageUtilization", t.average_utilization);
        put_str(
            &mut target,
            "averageValue",
            t.average_value.and_then(|q| q.string).as_deref(),
        );
        put_str(
            &mut target,
            "value",
            t.value.and_then(|q| q.string).as_deref(),
        );
        source.insert("target".into(), Value::Object(target));
        out.insert("resource".into(), Value::Object(source));
    }
    Value::Object(out)
}
