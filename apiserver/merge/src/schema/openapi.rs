//! Schema from a CRD's OpenAPI v3 schema (apiextensions v1 `openAPIV3Schema`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ListKind, Schema};

fn flag(s: &Value, name: &str) -> bool {
    s.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// Adds `apiVersion`, `kind` and the `ObjectMeta` `metadata` to a map schema.
fn with_object_header(s: Schema) -> Schema {
    match s {
        Schema::Map {
            mut fields,
            elements,
            atomic,
        } => {
            fields.insert("apiVersion".into(), Schema::Scalar);
            fields.insert("kind".into(), Schema::Scalar);
            fields.insert("metadata".into(), super::builtin::object_meta());
            Schema::Map {
                fields,
                elements,
                atomic,
            }
        }
        Schema::Untyped => with_object_header(Schema::Map {
            fields: BTreeMap::new(),
            elements: Some(Box::new(Schema::Untyped)),
            atomic: false,
        }),
        other => other,
    }
}

pub(super) fn from_openapi_root(schema: &Value) -> Schema {
    with_object_header(convert(schema))
}

fn convert(s: &Value) -> Schema {
    if !s.is_object() {
        // `true` (e.g. additionalProperties: true) or anything odd: unknown structure.
        return Schema::Untyped;
    }
    if flag(s, "x-kubernetes-int-or-string") {
        return Schema::Scalar;
    }
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let ty = s.get("type").and_then(Value::as_str);
    let out = match ty {
        Some("object") => object(s, preserve),
        Some("array") => array(s),
        Some(_) => Schema::Scalar,
        None if s.get("properties").is_some() || s.get("additionalProperties").is_some() => {
            object(s, preserve)
        }
        None if s.get("items").is_some() => array(s),
        None => Schema::Untyped,
    };
    if flag(s, "x-kubernetes-embedded-resource") {
        with_object_header(out)
    } else {
        out
    }
}

fn object(s: &Value, preserve: bool) -> Schema {
    let fields: BTreeMap<String, Schema> = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
        .unwrap_or_default();
    let elements = match s.get("additionalProperties") {
        Some(Value::Bool(false)) | None => None,
        Some(ap) => Some(Box::new(convert(ap))),
    };
    let elements = elements.or_else(|| preserve.then(|| Box::new(Schema::Untyped)));
    let atomic = s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
    Schema::Map {
        fields,
        elements,
        atomic,
    }
}

fn array(s: &Value) -> Schema {
    let items = s.get("items");
    let element = items.map_or(Schema::Untyped, convert);
    let kind = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListKind::Set,
        Some("map") => {
            let keys: Vec<String> = s
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|k| k.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if keys.is_empty() {
                ListKind::Atomic
            } else {
                let mut defaults = BTreeMap::new();
                for k in &keys {
                    if let Some(d) = items
                        .and_then(|i| i.get("properties"))
                        .and_then(|p| p.get(k))
                        .and_then(|p| p.get("default"))
                    {
                        defaults.insert(k.clone(), d.clone());
                    }
                }
                ListKind::Map { keys, defaults }
            }
        }
        _ => ListKind::Atomic,
    };
    Schema::List {
        element: Box::new(element),
        kind,
    }
}
