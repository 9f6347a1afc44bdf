//! `spec.behavior` in autoscaling/v1's `autoscaling.alpha.kubernetes.io/behavior`
//! annotation: kube marshals its internal type, which has no JSON tags, so the keys
//! are Go's field names (`ScaleUp`, `StabilizationWindowSeconds`, ...) and unset
//! pointers are written as `null`.

use serde_json::{Map, Value};

use super::go_json::{array, field, object};

/// (v2 key, Go field name) of one scaling rules object, in Go's order.
const RULES: [(&str, &str); 4] = [
    ("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
    ("selectPolicy", "SelectPolicy"),
    ("policies", "Policies"),
    ("tolerance", "Tolerance"),
];
const POLICY: [(&str, &str); 3] = [
    ("type", "Type"),
    ("value", "Value"),
    ("periodSeconds", "PeriodSeconds"),
];
const DIRECTIONS: [(&str, &str); 2] = [("scaleUp", "ScaleUp"), ("scaleDown", "ScaleDown")];

/// Go writes an unset pointer as `null`.
fn or_null(v: Option<String>) -> String {
    v.unwrap_or_else(|| "null".into())
}

fn rules_to_go(rules: &Value) -> String {
    let fields: Vec<(&str, Option<String>)> = RULES
        .iter()
        .map(|(key, go)| {
            let text = if *key == "policies" {
                rules.get("policies").and_then(Value::as_array).map(|ps| {
                    let items: Vec<String> = ps
                        .iter()
                        .map(|p| {
                            let f: Vec<(&str, Option<String>)> = POLICY
                                .iter()
                                .map(|(k, g)| (*g, Some(or_null(field(p, &format!("/{k}"))))))
                                .collect();
                            object(&f)
                        })
                        .collect();
                    array(&items)
                })
            } else {
                field(rules, &format!("/{key}"))
            };
            (*go, Some(or_null(text)))
        })
        .collect();
    object(&fields)
}

/// The annotation's text for a v2 `spec.behavior`.
pub fn to_annotation(behavior: &Value) -> String {
    let fields: Vec<(&str, Option<String>)> = DIRECTIONS
        .iter()
        .map(|(key, go)| {
            (
                *go,
                Some(or_null(
                    behavior.get(*key).filter(|r| !r.is_null()).map(rules_to_go),
                )),
            )
        })
        .collect();
    object(&fields)
}

/// `m[key]`, matched case-insensitively as Go's `json.Unmarshal` does.
fn get_ci<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// `obj` with the keys of `names` renamed to their v2 spelling, unset ones left out.
fn renamed(obj: &Value, names: &[(&str, &str)]) -> Value {
    let mut out = Map::new();
    if let Some(m) = obj.as_object() {
        for (key, _) in names {
            if let Some(v) = get_ci(m, key) {
                out.insert((*key).into(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The v2 `spec.behavior` of the annotation's text (None when it does not parse).
pub fn from_annotation(text: &str) -> Option<Value> {
    let parsed: Value = serde_json::from_str(text).ok()?;
    let mut behavior = renamed(&parsed, &DIRECTIONS);
    for (direction, _) in DIRECTIONS {
        if let Some(rules) = behavior.get_mut(direction) {
            let mut r = renamed(rules, &RULES);
            if let Some(ps) = r.get_mut("policies").and_then(Value::as_array_mut) {
                for p in ps.iter_mut() {
                    *p = renamed(p, &POLICY);
                }
            }
            *rules = r;
        }
    }
    Some(behavior)
}
