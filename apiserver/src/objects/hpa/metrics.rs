//! autoscaling/v2 metric specs and statuses in autoscaling/v1's annotation form
//! (kube's `autoscaling/v1` `MetricSpec`/`MetricStatus`: `targetAverageValue`,
//! `metricName`, ... instead of v2's `target` and `metric`), both ways.

use serde_json::{Map, Value, json};

use super::go_json::{field, object};

/// One v2 `MetricSpec` as the v1 annotation writes it.
pub fn spec_to_v1(m: &Value) -> String {
    let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
    let (key, source) = match kind {
        "Resource" => (
            "resource",
            m.get("resource").map(|s| {
                object(&[
                    ("name", field(s, "/name")),
                    (
                        "targetAverageUtilization",
                        field(s, "/target/averageUtilization"),
                    ),
                    ("targetAverageValue", field(s, "/target/averageValue")),
                ])
            }),
        ),
        "Pods" => (
            "pods",
            m.get("pods").map(|s| {
                object(&[
                    ("metricName", field(s, "/metric/name")),
                    ("targetAverageValue", field(s, "/target/averageValue")),
                    ("selector", field(s, "/metric/selector")),
                ])
            }),
        ),
        "Object" => (
            "object",
            m.get("object").map(|s| {
                object(&[
                    ("target", field(s, "/describedObject")),
                    ("metricName", field(s, "/metric/name")),
                    ("targetValue", field(s, "/target/value")),
                    ("selector", field(s, "/metric/selector")),
                    ("averageValue", field(s, "/target/averageValue")),
                ])
            }),
        ),
        "External" => (
            "external",
            m.get("external").map(|s| {
                object(&[
                    ("metricName", field(s, "/metric/name")),
                    ("metricSelector", field(s, "/metric/selector")),
                    ("targetValue", field(s, "/target/value")),
                    ("targetAverageValue", field(s, "/target/averageValue")),
                ])
            }),
        ),
        "ContainerResource" => (
            "containerResource",
            m.get("containerResource").map(|s| {
                object(&[
                    ("name", field(s, "/name")),
                    (
                        "targetAverageUtilization",
                        field(s, "/target/averageUtilization"),
                    ),
                    ("targetAverageValue", field(s, "/target/averageValue")),
                    ("container", field(s, "/container")),
                ])
            }),
        ),
        _ => ("", None),
    };
    object(&[("type", field(m, "/type")), (key, source)])
}

/// One v2 `MetricStatus` as the v1 annotation writes it.
pub fn status_to_v1(m: &Value) -> String {
    let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
    let (key, source) = match kind {
        "Resource" => (
            "resource",
            m.get("resource").map(|s| {
                object(&[
                    ("name", field(s, "/name")),
                    (
                        "currentAverageUtilization",
                        field(s, "/current/averageUtilization"),
                    ),
                    (
                        "currentAverageValue",
                        Some(quantity_or_zero(s, "/current/averageValue")),
                    ),
                ])
            }),
        ),
        "Pods" => (
            "pods",
            m.get("pods").map(|s| {
                object(&[
                    ("metricName", field(s, "/metric/name")),
                    (
                        "currentAverageValue",
                        Some(quantity_or_zero(s, "/current/averageValue")),
                    ),
                    ("selector", field(s, "/metric/selector")),
                ])
            }),
        ),
        "Object" => (
            "object",
            m.get("object").map(|s| {
                object(&[
                    ("target", field(s, "/describedObject")),
                    ("metricName", field(s, "/metric/name")),
                    ("currentValue", Some(quantity_or_zero(s, "/current/value"))),
                    ("selector", field(s, "/metric/selector")),
                    ("averageValue", field(s, "/current/averageValue")),
                ])
            }),
        ),
        "External" => (
            "external",
            m.get("external").map(|s| {
                object(&[
                    ("metricName", field(s, "/metric/name")),
                    ("metricSelector", field(s, "/metric/selector")),
                    ("currentValue", Some(quantity_or_zero(s, "/current/value"))),
                    ("currentAverageValue", field(s, "/current/averageValue")),
                ])
            }),
        ),
        "ContainerResource" => (
            "containerResource",
            m.get("containerResource").map(|s| {
                object(&[
                    ("name", field(s, "/name")),
                    (
                        "currentAverageUtilization",
                        field(s, "/current/averageUtilization"),
                    ),
                    (
                        "currentAverageValue",
                        Some(quantity_or_zero(s, "/current/averageValue")),
                    ),
                    ("container", field(s, "/container")),
                ])
            }),
        ),
        _ => ("", None),
    };
    object(&[("type", field(m, "/type")), (key, source)])
}

/// Go writes a zero `resource.Quantity` (a non-pointer field) as `"0"`.
fn quantity_or_zero(s: &Value, pointer: &str) -> String {
    field(s, pointer).unwrap_or_else(|| "\"0\"".into())
}

/// Copies `from[key]` (if set) to `to[to_key]`.
fn copy(from: &Value, key: &str, to: &mut Map<String, Value>, to_key: &str) {
    if let Some(v) = from.get(key).filter(|v| !v.is_null()) {
        to.insert(to_key.into(), v.clone());
    }
}

/// `{"name": ..., "selector": ...}` of a named metric.
fn metric_id(s: &Value, name: &str, selector: &str) -> Value {
    let mut id = Map::new();
    copy(s, name, &mut id, "name");
    copy(s, selector, &mut id, "selector");
    Value::Object(id)
}

/// A v2 `MetricTarget` from v1's target fields: the type is the one whose value is set.
fn target(s: &Value, utilization: &str, average: &str, value: &str, fallback: &str) -> Value {
    let mut t = Map::new();
    let kind = if s.get(utilization).is_some() {
        "Utilization"
    } else if s.get(value).is_some() {
        "Value"
    } else if s.get(average).is_some() {
        "AverageValue"
    } else {
        fallback
    };
    t.insert("type".into(), json!(kind));
    copy(s, utilization, &mut t, "averageUtilization");
    copy(s, average, &mut t, "averageValue");
    copy(s, value, &mut t, "value");
    Value::Object(t)
}

/// A v2 `MetricValueStatus` from v1's current fields.
fn current(s: &Value, utilization: &str, average: &str, value: &str) -> Value {
    let mut c = Map::new();
    copy(s, utilization, &mut c, "averageUtilization");
    copy(s, average, &mut c, "averageValue");
    copy(s, value, &mut c, "value");
    Value::Object(c)
}

/// One v1 annotation `MetricSpec` as v2.
pub fn spec_from_v1(m: &Value) -> Value {
    let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    let none = "\u{0}";
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            if let Some(s) = m.get(key) {
                let mut r = Map::new();
                copy(s, "name", &mut r, "name");
                copy(s, "container", &mut r, "container");
                r.insert(
                    "target".into(),
                    target(
                        s,
                        "targetAverageUtilization",
                        "targetAverageValue",
                        none,
                        "AverageValue",
                    ),
                );
                out.insert(key.into(), Value::Object(r));
            }
        }
        "Pods" => {
            if let Some(s) = m.get("pods") {
                out.insert(
                    "pods".into(),
                    json!({
                        "metric": metric_id(s, "metricName", "selector"),
                        "target": target(s, none, "targetAverageValue", none, "AverageValue"),
                    }),
                );
            }
        }
        "Object" => {
            if let Some(s) = m.get("object") {
                let mut o = Map::new();
                copy(s, "target", &mut o, "describedObject");
                o.insert("metric".into(), metric_id(s, "metricName", "selector"));
                let t = if s.get("averageValue").is_some() {
                    target(s, none, "averageValue", none, "AverageValue")
                } else {
                    target(s, none, none, "targetValue", "Value")
                };
                o.insert("target".into(), t);
                out.insert("object".into(), Value::Object(o));
            }
        }
        "External" => {
            if let Some(s) = m.get("external") {
                out.insert(
                    "external".into(),
                    json!({
                        "metric": metric_id(s, "metricName", "metricSelector"),
                        "target": target(s, none, "targetAverageValue", "targetValue", "Value"),
                    }),
                );
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// One v1 annotation `MetricStatus` as v2.
pub fn status_from_v1(m: &Value) -> Value {
    let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    let none = "\u{0}";
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            if let Some(s) = m.get(key) {
                let mut r = Map::new();
                copy(s, "name", &mut r, "name");
                copy(s, "container", &mut r, "container");
                r.insert(
                    "current".into(),
                    current(s, "currentAverageUtilization", "currentAverageValue", none),
                );
                out.insert(key.into(), Value::Object(r));
            }
        }
        "Pods" => {
            if let Some(s) = m.get("pods") {
                out.insert(
                    "pods".into(),
                    json!({
                        "metric": metric_id(s, "metricName", "selector"),
                        "current": current(s, none, "currentAverageValue", none),
                    }),
                );
            }
        }
        "Object" => {
            if let Some(s) = m.get("object") {
                let mut o = Map::new();
                copy(s, "target", &mut o, "describedObject");
                o.insert("metric".into(), metric_id(s, "metricName", "selector"));
                o.insert(
                    "current".into(),
                    current(s, none, "averageValue", "currentValue"),
                );
                out.insert("object".into(), Value::Object(o));
            }
        }
        "External" => {
            if let Some(s) = m.get("external") {
                out.insert(
                    "external".into(),
                    json!({
                        "metric": metric_id(s, "metricName", "metricSelector"),
                        "current": current(s, none, "currentAverageValue", "currentValue"),
                    }),
                );
            }
        }
        _ => {}
    }
    Value::Object(out)
}
