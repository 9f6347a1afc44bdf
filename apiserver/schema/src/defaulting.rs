//! Defaulting as apiextensions-apiserver does it (`structuraldefaulting`): first drop
//! non-nullable `null`s that have no default, then fill defaults top-down.

use serde_json::Value;

use crate::schema::{AdditionalProperties, StructuralSchema};

fn ap_schema(s: &StructuralSchema) -> Option<&StructuralSchema> {
    match &s.additional_properties {
        Some(AdditionalProperties::Schema(ap)) => Some(ap),
        _ => None,
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: removes `"k": null` where the field's schema
/// is not nullable and has no default (a default fills it in later).
pub(crate) fn prune_nulls(x: &mut Value, s: &StructuralSchema) {
    match x {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let Some(prop) = s.properties.get(&k).or_else(|| ap_schema(s)) else {
                    continue;
                };
                let is_null = m.get(&k).is_some_and(Value::is_null);
                if is_null && !prop.nullable && prop.default.is_none() {
                    m.remove(&k);
                } else if let Some(v) = m.get_mut(&k) {
                    prune_nulls(v, prop);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for v in a {
                    prune_nulls(v, items);
                }
            }
        }
        _ => {}
    }
}

fn is_non_nullable_null(v: &Value, s: &StructuralSchema) -> bool {
    v.is_null() && !s.nullable
}

/// `Default`: sets defaults of absent (or non-nullable null) properties, then recurses
/// into every property, additionalProperties value and array item.
pub(crate) fn apply(x: &mut Value, s: &StructuralSchema) {
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(def) = &prop.default else { continue };
                let absent_or_null = m.get(k).is_none_or(|v| is_non_nullable_null(v, prop));
                if absent_or_null {
                    m.insert(k.clone(), def.clone());
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, prop);
                } else if let Some(ap) = ap_schema(s) {
                    if is_non_nullable_null(v, ap)
                        && let Some(def) = &ap.default
                    {
                        *v = def.clone();
                    }
                    apply(v, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for v in a.iter_mut() {
                    if is_non_nullable_null(v, items)
                        && let Some(def) = &items.default
                    {
                        *v = def.clone();
                    }
                    apply(v, items);
                }
            }
        }
        _ => {}
    }
}
