//! Partial matching of a case's expectation against the plugin's answer.
//!
//! - A map is compared on the keys the expectation names; other keys of
//!   the answer are not looked at. `key: null` expects the key absent (or
//!   null).
//! - A list must hold the same items, each compared partially. Items are
//!   paired by what identifies them: children by apiVersion, kind,
//!   namespace and name; items that all have a distinct `name` (containers,
//!   ports, env) or `type` (conditions) by it, in any order; any other list
//!   by position.
//! - Scalars must be equal; numbers by value (`1` matches `1.0`).
//!
//! [`project`] turns the answer into the expectation's shape (what
//! `--update` writes): the keys the expectation names, with the answer's
//! values, and whole items for items it did not list.

use std::fmt;

use serde_json::{Map, Value};

use super::case::type_name;

/// One way the answer differs from the expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Where: `children[ConfigMap web].data.message`, `conditions[Ready]`.
    pub path: String,
    /// How, in words.
    pub message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// How the answer (as [`super::answer`] shapes it) differs from `expect`,
/// a case's `expect` section; empty when it matches.
pub fn compare(expect: &Value, answer: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    match (expect.get("error"), answer.get("error")) {
        (Some(expected), None) => out.push(Mismatch {
            path: "error".into(),
            message: format!(
                "expected the call to fail with {}, but the plugin answered",
                show(expected)
            ),
        }),
        (None, Some(error)) => out.push(Mismatch {
            path: "error".into(),
            message: format!(
                "the plugin failed ({}), but the case expects an answer",
                show(error)
            ),
        }),
        _ => compare_at("", expect, Some(answer), &mut out),
    }
    out
}

fn compare_at(path: &str, expected: &Value, actual: Option<&Value>, out: &mut Vec<Mismatch>) {
    let mut differ = |message: String| {
        out.push(Mismatch {
            path: if path.is_empty() {
                "(answer)".into()
            } else {
                path.into()
            },
            message,
        });
    };
    match (expected, actual) {
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Null, Some(actual)) => differ(format!("expected absent, got {}", show(actual))),
        (expected, None) => differ(format!("expected {}, got nothing", show(expected))),
        (Value::Object(expected), Some(Value::Object(actual))) => {
            for (key, value) in expected {
                compare_at(&child_path(path, key), value, actual.get(key), out);
            }
        }
        (Value::Array(expected), Some(Value::Array(actual))) => {
            for pair in pairs(path, expected, actual) {
                let at = format!("{path}[{}]", pair.label);
                match (pair.expected, pair.actual) {
                    (Some(e), Some(a)) => compare_at(&at, e, Some(a), out),
                    (Some(e), None) => out.push(Mismatch {
                        path: at,
                        message: format!("missing: expected {}", show(e)),
                    }),
                    (None, Some(a)) => out.push(Mismatch {
                        path: at,
                        message: format!("not expected, got {}", show(a)),
                    }),
                    (None, None) => {}
                }
            }
        }
        (expected, Some(actual)) if scalars_equal(expected, actual) => {}
        (expected, Some(actual)) => {
            let hint = match (expected, actual) {
                (Value::Bool(_), Value::String(s)) if matches!(s.as_str(), "True" | "False") => {
                    " (in YAML, quote it: \"True\")"
                }
                _ if std::mem::discriminant(expected) != std::mem::discriminant(actual) => {
                    " (another type)"
                }
                _ => "",
            };
            differ(format!(
                "expected {}, got {}{hint}",
                show(expected),
                show(actual)
            ));
        }
    }
}

fn scalars_equal(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        // By value: YAML's `1.0` is the `1` a plugin wrote.
        #[allow(clippy::float_cmp)]
        (Value::Number(e), Value::Number(a)) => {
            e == a || matches!((e.as_f64(), a.as_f64()), (Some(e), Some(a)) if e == a)
        }
        _ => expected == actual,
    }
}

/// `expect` (a case's `expect`, or `None`) with the answer's values: what
/// `--update` writes. With no expectation, or one of an error where the
/// plugin answered (or the other way round), the whole answer.
pub fn project(expect: Option<&Value>, answer: &Value) -> Map<String, Value> {
    match expect.and_then(Value::as_object) {
        Some(expect)
            if !expect.is_empty()
                && expect.contains_key("error") == answer.get("error").is_some() =>
        {
            expect
                .iter()
                .map(|(key, value)| (key.clone(), project_at(key, Some(value), answer.get(key))))
                .collect()
        }
        _ => super::answer::written(answer),
    }
}

fn project_at(path: &str, expected: Option<&Value>, actual: Option<&Value>) -> Value {
    match (expected, actual) {
        (_, None) => Value::Null,
        (Some(Value::Object(expected)), Some(Value::Object(actual))) => expected
            .iter()
            .map(|(key, value)| {
                let at = child_path(path, key);
                (key.clone(), project_at(&at, Some(value), actual.get(key)))
            })
            .collect::<Map<_, _>>()
            .into(),
        (Some(Value::Array(expected)), Some(Value::Array(actual))) => {
            let mut paired: Vec<(usize, Value)> = pairs(path, expected, actual)
                .into_iter()
                .filter_map(|pair| {
                    let index = pair.actual_index?;
                    let at = format!("{path}[{}]", pair.label);
                    Some((index, project_at(&at, pair.expected, pair.actual)))
                })
                .collect();
            paired.sort_by_key(|(index, _)| *index);
            Value::Array(paired.into_iter().map(|(_, value)| value).collect())
        }
        (_, Some(actual)) => actual.clone(),
    }
}

/// An expected and an actual item of a list that are the same item.
struct Pair<'a> {
    label: String,
    expected: Option<&'a Value>,
    actual: Option<&'a Value>,
    actual_index: Option<usize>,
}

/// What identifies an item of a list, when something does.
type KeyOf = Box<dyn Fn(&Value) -> Option<String>>;

/// Pair the items of two lists at `path` (see the module doc): expected
/// items in their order, then the actual items no expected item claims.
fn pairs<'a>(path: &str, expected: &'a [Value], actual: &'a [Value]) -> Vec<Pair<'a>> {
    let key: Option<KeyOf> = if path == "children" {
        Some(Box::new(identity))
    } else {
        ["name", "type"].into_iter().find_map(|field| {
            let by =
                move |item: &Value| item.get(field).and_then(Value::as_str).map(str::to_string);
            (distinct(expected, &by) && distinct(actual, &by)).then(|| Box::new(by) as KeyOf)
        })
    };
    let mut out = Vec::new();
    let Some(key) = key else {
        for index in 0..expected.len().max(actual.len()) {
            out.push(Pair {
                label: index.to_string(),
                expected: expected.get(index),
                actual: actual.get(index),
                actual_index: (index < actual.len()).then_some(index),
            });
        }
        return out;
    };
    let actual_keys: Vec<Option<String>> = actual.iter().map(&key).collect();
    let mut claimed = vec![false; actual.len()];
    for item in expected {
        let label = key(item).unwrap_or_default();
        let found = actual_keys
            .iter()
            .position(|k| k.as_deref() == Some(label.as_str()));
        if let Some(index) = found {
            claimed[index] = true;
        }
        out.push(Pair {
            label,
            expected: Some(item),
            actual: found.map(|index| &actual[index]),
            actual_index: found,
        });
    }
    for (index, item) in actual.iter().enumerate() {
        if !claimed[index] {
            out.push(Pair {
                label: actual_keys[index]
                    .clone()
                    .unwrap_or_else(|| index.to_string()),
                expected: None,
                actual: Some(item),
                actual_index: Some(index),
            });
        }
    }
    out
}

/// Whether every item is a map with a key `by` finds, none twice.
fn distinct(items: &[Value], by: &dyn Fn(&Value) -> Option<String>) -> bool {
    let mut seen = std::collections::HashSet::new();
    !items.is_empty()
        && items
            .iter()
            .all(|item| by(item).is_some_and(|k| seen.insert(k)))
}

/// A child's identity: `apiVersion Kind [namespace/]name`.
fn identity(child: &Value) -> Option<String> {
    let text = |pointer: &str| child.pointer(pointer).and_then(Value::as_str);
    let namespace = text("/metadata/namespace").map_or_else(String::new, |ns| format!("{ns}/"));
    Some(format!(
        "{} {} {namespace}{}",
        text("/apiVersion")?,
        text("/kind")?,
        text("/metadata/name")?
    ))
}

fn child_path(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{key:?}]"),
    }
}

/// A value for a message: compact JSON, cut short when long.
fn show(value: &Value) -> String {
    const MOST: usize = 200;
    let text = value.to_string();
    if text.len() <= MOST {
        return text;
    }
    let mut end = MOST;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({})", &text[..end], type_name(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer() -> Value {
        json!({
            "children": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
                 "spec": {"replicas": 2, "template": {"spec": {"containers": [
                     {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
                     {"name": "sidecar", "image": "envoy"}]}}}},
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": "ClusterIP"}}
            ],
            "status": {"ready": false, "replicas": 2},
            "conditions": [
                {"type": "Available", "status": "False", "reason": "Scaling", "message": "0 of 2"},
                {"type": "Progressing", "status": "True", "reason": "Rolling", "message": ""}
            ],
            "events": [{"type": "Normal", "reason": "Scaled", "message": "to 2"}],
            "requeueAfterMs": null,
            "finalized": false
        })
    }

    fn mismatches(expect: &Value) -> Vec<String> {
        compare(expect, &answer())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn only_what_the_expectation_names_is_compared() {
        assert_eq!(mismatches(&json!({})), Vec::<String>::new());
        assert_eq!(
            mismatches(&json!({
                "children": [
                    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
                    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                     "spec": {"replicas": 2.0, "template": {"spec": {"containers": [
                         {"name": "sidecar"}, {"name": "web", "image": "nginx:1"}]}}}}
                ],
                "conditions": [{"type": "Progressing", "status": "True"}, {"type": "Available", "reason": "Scaling"}],
                "status": {"replicas": 2, "gone": null},
                "requeueAfterMs": null
            })),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_difference_is_named_by_where_it_is() {
        let found = mismatches(&json!({
            "children": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web"}},
                 "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}
            ],
            "status": {"ready": null},
            "conditions": [{"type": "Available", "status": true}, {"type": "Progressing"}],
            "events": [{"reason": "Scaled"}, {"reason": "Ready"}],
            "finalized": true
        }));
        assert_eq!(
            found,
            [
                "children[apps/v1 Deployment web].metadata.labels[\"app.kubernetes.io/name\"]: expected \"web\", got nothing",
                "children[apps/v1 Deployment web].spec.replicas: expected 3, got 2",
                "children[apps/v1 Deployment web].spec.template.spec.containers[web].image: expected \"nginx:2\", got \"nginx:1\"",
                "children[apps/v1 Deployment web].spec.template.spec.containers[sidecar]: not expected, got {\"image\":\"envoy\",\"name\":\"sidecar\"}",
                "children[v1 ConfigMap web]: missing: expected {\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"web\"}}",
                "children[v1 Service web]: not expected, got {\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"web\"},\"spec\":{\"type\":\"ClusterIP\"}}",
                "conditions[Available].status: expected true, got \"False\" (in YAML, quote it: \"True\")",
                "events[1]: missing: expected {\"reason\":\"Ready\"}",
                "finalized: expected true, got false",
                "status.ready: expected absent, got false",
            ]
        );
    }

    #[test]
    fn an_error_and_an_answer_do_not_match() {
        let failed = json!({"error": {"reason": "InvalidInput", "message": "spec.who must be a string", "retryable": false}});
        assert_eq!(
            compare(&json!({"error": {"reason": "InvalidInput"}}), &failed),
            []
        );
        assert_eq!(
            compare(&json!({"error": {"reason": "Refused"}}), &failed)[0].to_string(),
            "error.reason: expected \"Refused\", got \"InvalidInput\""
        );
        assert!(
            compare(&json!({"children": []}), &failed)[0]
                .message
                .starts_with("the plugin failed ({\"message\":\"spec.who must be a string\"")
        );
        assert!(
            compare(&json!({"error": {}}), &answer())[0]
                .message
                .ends_with("but the plugin answered")
        );
    }

    #[test]
    fn the_projection_keeps_the_expectations_shape_with_the_answers_values() {
        let expect = json!({
            "children": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                          "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}}],
            "conditions": [{"type": "Available", "status": "True"}],
            "status": {"ready": null}
        });
        let projected = Value::Object(project(Some(&expect), &answer()));
        assert_eq!(
            projected,
            json!({
                "children": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                     "spec": {"replicas": 2, "template": {"spec": {"containers": [
                         {"name": "web", "image": "nginx:1"},
                         {"name": "sidecar", "image": "envoy"}]}}}},
                    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": "ClusterIP"}}
                ],
                "conditions": [
                    {"type": "Available", "status": "False"},
                    {"type": "Progressing", "status": "True", "reason": "Rolling", "message": ""}
                ],
                "status": {"ready": false}
            })
        );
        assert_eq!(compare(&projected, &answer()), [], "an update passes");
        // No expectation yet, or the other outcome: the whole answer.
        let whole = project(None, &answer());
        assert_eq!(whole["events"], answer()["events"]);
        assert!(!whole.contains_key("requeueAfterMs"));
        let failed = json!({"error": {"reason": "X", "message": "m", "retryable": true}});
        assert_eq!(Value::Object(project(Some(&expect), &failed)), failed);
    }
}
