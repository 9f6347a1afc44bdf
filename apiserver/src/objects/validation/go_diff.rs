//! The diff kube appends to some Forbidden messages: its internal Go struct as
//! indented JSON (Go field names, one-space indent), old against new, as a unified
//! diff with three lines of context and no file header.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// A value as Go marshals it: JSON (maps in key order, as Go sorts them) or a
/// struct, whose fields keep their declaration order.
enum Go {
    Json(Value),
    Struct(Vec<(&'static str, Go)>),
    List(Vec<Go>),
}

/// The unified diff of `old` and `new` rendered as Go's `json.MarshalIndent`.
fn diff(old: &Go, new: &Go) -> String {
    let (old, new) = (indented(old), indented(new));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .to_string()
}

/// `json.MarshalIndent(v, "", " ")` and a final newline.
fn indented(v: &Go) -> String {
    let mut out = String::new();
    write_go(v, 0, &mut out);
    out.push('\n');
    out
}

fn write_go(v: &Go, depth: usize, out: &mut String) {
    match v {
        Go::Json(v) => write_json(v, depth, out),
        Go::Struct(fields) => {
            let entries = fields.iter().map(|(k, v)| ((*k).to_string(), v));
            write_entries(entries, depth, out, write_go);
        }
        Go::List(items) if items.is_empty() => out.push_str("[]"),
        Go::List(items) => write_items(items, depth, out, write_go),
    }
}

fn write_items<T>(items: &[T], depth: usize, out: &mut String, write: fn(&T, usize, &mut String)) {
    out.push_str("[\n");
    for (i, item) in items.iter().enumerate() {
        out.push_str(&" ".repeat(depth + 1));
        write(item, depth + 1, out);
        out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
    }
    out.push_str(&" ".repeat(depth));
    out.push(']');
}

fn write_json(v: &Value, depth: usize, out: &mut String) {
    match v {
        Value::Array(items) if !items.is_empty() => write_items(items, depth, out, write_json),
        Value::Object(map) if !map.is_empty() => {
            write_entries(
                map.iter().map(|(k, v)| (k.clone(), v)),
                depth,
                out,
                write_json,
            );
        }
        other => out.push_str(&other.to_string()),
    }
}

fn write_entries<'a, T: 'a>(
    entries: impl ExactSizeIterator<Item = (String, &'a T)>,
    depth: usize,
    out: &mut String,
    write: fn(&T, usize, &mut String),
) {
    let n = entries.len();
    out.push_str("{\n");
    for (i, (k, v)) in entries.enumerate() {
        let _ = write!(out, "{}{}: ", " ".repeat(depth + 1), Value::String(k));
        write(v, depth + 1, out);
        out.push_str(if i + 1 < n { ",\n" } else { "\n" });
    }
    out.push_str(&" ".repeat(depth));
    out.push('}');
}

/// A field of `obj` (JSON `key`), `null` when absent.
fn field(obj: &Value, key: &str) -> Go {
    Go::Json(obj.get(key).cloned().unwrap_or(Value::Null))
}

/// A string field as Go holds a non-pointer string: `""` when absent.
fn string(obj: &Value, key: &str) -> Go {
    Go::Json(obj.get(key).cloned().unwrap_or(json!("")))
}

fn reference(r: &Value, namespaced: bool) -> Go {
    if r.is_null() {
        return Go::Json(Value::Null);
    }
    let mut fields = vec![
        ("APIGroup", field(r, "apiGroup")),
        ("Kind", string(r, "kind")),
        ("Name", string(r, "name")),
    ];
    if namespaced {
        fields.push(("Namespace", field(r, "namespace")));
    }
    Go::Struct(fields)
}

fn selector(s: &Value) -> Go {
    if s.is_null() {
        return Go::Json(Value::Null);
    }
    let expressions = match s.get("matchExpressions").and_then(Value::as_array) {
        Some(es) => Go::List(
            es.iter()
                .map(|e| {
                    Go::Struct(vec![
                        ("Key", string(e, "key")),
                        ("Operator", string(e, "operator")),
                        ("Values", field(e, "values")),
                    ])
                })
                .collect(),
        ),
        None => Go::Json(Value::Null),
    };
    Go::Struct(vec![
        ("MatchLabels", field(s, "matchLabels")),
        ("MatchExpressions", expressions),
    ])
}

/// kube's internal `PersistentVolumeClaimSpec` of a claim's JSON `spec`.
fn claim_spec(spec: &Value) -> Go {
    let resources = spec.get("resources").cloned().unwrap_or(Value::Null);
    Go::Struct(vec![
        ("AccessModes", field(spec, "accessModes")),
        (
            "Selector",
            selector(spec.get("selector").unwrap_or(&Value::Null)),
        ),
        (
            "Resources",
            Go::Struct(vec![
                ("Limits", field(&resources, "limits")),
                ("Requests", field(&resources, "requests")),
            ]),
        ),
        ("VolumeName", string(spec, "volumeName")),
        ("StorageClassName", field(spec, "storageClassName")),
        ("VolumeMode", field(spec, "volumeMode")),
        (
            "DataSource",
            reference(spec.get("dataSource").unwrap_or(&Value::Null), false),
        ),
        (
            "DataSourceRef",
            reference(spec.get("dataSourceRef").unwrap_or(&Value::Null), true),
        ),
        (
            "VolumeAttributesClassName",
            field(spec, "volumeAttributesClassName"),
        ),
    ])
}

/// kube's diff of two claims' JSON specs.
pub fn claim_spec_diff(old: &Value, new: &Value) -> String {
    diff(&claim_spec(old), &claim_spec(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_spec_diff_as_kube_prints_it() {
        let old = json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"});
        let mut new = old.clone();
        new["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(
            claim_spec_diff(&old, &new),
            "@@ -1,6 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n  \"Selector\": null,\n  \"Resources\": {\n"
        );
    }
}
