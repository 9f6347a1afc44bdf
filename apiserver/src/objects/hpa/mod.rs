//! `HorizontalPodAutoscalers`, served at autoscaling/v1 and autoscaling/v2 and stored
//! as v2, as kube does: [`v1`] converts (kube's round-trip annotations carry what v1
//! cannot say, [`metrics`] and [`behavior`] their formats), [`defaults`] are kube's
//! v2 defaults, [`validation`] kube's messages for the spec, [`table`] the cells of
//! `kubectl get hpa`.

pub mod behavior;
pub mod defaults;
mod go_json;
pub mod metrics;
pub mod table;
pub mod v1;
pub mod validation;

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// Whether `info` is `HorizontalPodAutoscalers` (either version).
pub fn is_hpa(info: &ResourceInfo) -> bool {
    info.group == "autoscaling" && info.plural == "horizontalpodautoscalers"
}

/// Whether `info` is the autoscaling/v1 view of `HorizontalPodAutoscalers`.
pub fn is_v1(info: &ResourceInfo) -> bool {
    is_hpa(info) && info.version == "v1"
}

/// The v2 form of `obj`, whichever version it is at (for validation and tables).
pub fn as_v2(obj: &Value) -> Value {
    if obj["apiVersion"] == "autoscaling/v1" {
        let mut v2 = v1::to_v2(obj);
        defaults::v2(&mut v2);
        v2
    } else {
        obj.clone()
    }
}

/// The stored (v2) form of an object written at `info`: v1 objects are converted
/// and get v2's defaults.
pub fn to_storage(info: &ResourceInfo, obj: Value) -> Value {
    if is_v1(info) { as_v2(&obj) } else { obj }
}

/// A stored object as served at `info`'s version, with the fields Go writes even
/// when unset.
pub fn present(info: &ResourceInfo, stored: &Value) -> Value {
    let mut obj = if is_v1(info) {
        v1::from_v2(stored)
    } else {
        stored.clone()
    };
    if !is_v1(info) {
        // v2's status: `currentMetrics` and `desiredReplicas` have no `omitempty`,
        // `currentReplicas` has.
        let status = obj
            .as_object_mut()
            .map(|m| m.entry("status").or_insert_with(|| json!({})));
        if let Some(Value::Object(s)) = status {
            s.entry("currentMetrics").or_insert(Value::Null);
            s.entry("desiredReplicas").or_insert(json!(0));
            if s.get("currentReplicas").and_then(Value::as_i64) == Some(0) {
                s.remove("currentReplicas");
            }
        }
    }
    obj
}

/// `obj` without the status fields [`present`] fills in with their zero value, for
/// telling whether an update changes anything.
pub fn without_zero_fields(mut obj: Value) -> Value {
    if let Some(s) = obj.get_mut("status").and_then(Value::as_object_mut) {
        for key in ["currentMetrics", "currentReplicas", "desiredReplicas"] {
            if s.get(key)
                .is_some_and(|v| v.is_null() || v.as_i64() == Some(0))
            {
                s.remove(key);
            }
        }
    }
    obj
}
