//! kube's validation of a `HorizontalPodAutoscaler`'s spec (`ValidateHorizontalPodAutoscaler`),
//! the checks clients meet most: replica bounds and the scale target reference.

use serde_json::{Value, json};

use crate::error::Cause;

fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        format!("Invalid value: {value}: {detail}"),
        field,
    )
}

fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    Cause::new("FieldValueRequired", message, field)
}

/// The causes of an HPA in its v2 form, in kube's order.
pub fn validate(v2: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let spec = v2.get("spec").cloned().unwrap_or_else(|| json!({}));
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        out.push(invalid(
            "spec.minReplicas",
            &json!(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        out.push(required(
            "spec.maxReplicas",
            "must be set and greater than 0",
        ));
    }
    if let Some(min) = min
        && max >= 1
        && max < min
    {
        out.push(invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = spec
        .get("scaleTargetRef")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let text = |k: &str| {
        target
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if text("kind").is_empty() {
        out.push(required("spec.scaleTargetRef.kind", ""));
    }
    if text("name").is_empty() {
        out.push(required("spec.scaleTargetRef.name", ""));
    }
    if text("apiVersion").is_empty() {
        out.push(invalid(
            "spec.scaleTargetRef.apiVersion",
            &json!(""),
            "apiVersion must specify API group",
        ));
    }
    let object_or_external = spec
        .get("metrics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|m| m["type"] == "Object" || m["type"] == "External");
    if min == Some(0) && !object_or_external {
        out.push(Cause::new(
            "FieldValueForbidden",
            "Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
            "spec.metrics",
        ));
    }
    out
}
