//! Schemas for built-in kinds.
//!
//! k8s-openapi keeps list types only inside generated `DeepMerge` code (dropping some
//! list-map keys such as container ports' `protocol`) and has no
//! `x-kubernetes-patch-merge-key`/`patch-strategy` or `+structType=atomic` metadata, so
//! nothing can be read from it at run time. `generated.rs` is produced from its sources by
//! `tools/gen_builtin_schemas.py` (with the missing facts added there) and covers every
//! kind k8s-openapi `v1_33` knows. Kinds it does not know get the hand-written fallback
//! below: `ObjectMeta`, `status.conditions` keyed by `type`, everything else an open
//! struct (maps merge key by key, lists are atomic).

use std::collections::BTreeMap;

use serde_json::Value;

use super::generated::{KEY_DEFAULTS, KINDS, TYPES};
use super::{ListKind, Schema};

fn obj(fields: Vec<(&str, Schema)>) -> Schema {
    Schema::object(fields)
}

/// `metav1.ObjectMeta`.
pub(super) fn object_meta() -> Schema {
    type_schema("apimachinery::pkg::apis::meta::v1::ObjectMeta", 0)
}

/// Fields of a kind k8s-openapi does not know: `status.conditions` keyed by `type`
/// (true of every built-in that has conditions), everything else open.
fn unknown_kind_fields() -> Vec<(&'static str, Schema)> {
    vec![(
        "status",
        obj(vec![(
            "conditions",
            Schema::list_map(&["type"], obj(vec![])),
        )]),
    )]
}

/// Schema of a built-in kind: from the generated tables when k8s-openapi knows the
/// kind (any version of the group if not this one), else the hand-written fallback.
pub(super) fn builtin(api_version: &str, kind: &str) -> Schema {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    let found = KINDS
        .iter()
        .find(|(g, v, k, _)| *g == group && *v == version && *k == kind)
        .or_else(|| KINDS.iter().find(|(g, _, k, _)| *g == group && *k == kind));
    let mut fields = vec![("apiVersion", Schema::Scalar), ("kind", Schema::Scalar)];
    if let Some((_, _, _, ty)) = found {
        match type_schema(ty, 0) {
            Schema::Map { fields: f, .. } => {
                let mut out = obj(fields);
                if let Schema::Map { fields: base, .. } = &mut out {
                    base.extend(f);
                }
                out
            }
            other => other,
        }
    } else {
        fields.push(("metadata", object_meta()));
        fields.extend(unknown_kind_fields());
        obj(fields)
    }
}

/// Deepest nesting followed through the generated tables (they are acyclic; this only
/// guards against a bad table).
const MAX_DEPTH: usize = 64;

/// The schema of a generated type.
fn type_schema(ty: &str, depth: usize) -> Schema {
    if depth > MAX_DEPTH {
        return Schema::Untyped;
    }
    let Ok(i) = TYPES.binary_search_by(|(name, _, _)| (*name).cmp(ty)) else {
        return Schema::Untyped;
    };
    let (_, atomic, fields) = TYPES[i];
    if atomic {
        return Schema::atomic_map();
    }
    Schema::object(
        fields
            .iter()
            .map(|(name, expr)| (*name, expr_schema(expr, depth + 1))),
    )
}

/// Parses a generated field type expression (see `generated.rs`).
fn expr_schema(expr: &str, depth: usize) -> Schema {
    if let Some(rest) = expr.strip_prefix("[a]") {
        return Schema::List {
            element: Box::new(expr_schema(rest, depth)),
            kind: ListKind::Atomic,
        };
    }
    if let Some(rest) = expr.strip_prefix("[s]") {
        return Schema::List {
            element: Box::new(expr_schema(rest, depth)),
            kind: ListKind::Set,
        };
    }
    if let Some(rest) = expr.strip_prefix("[m:")
        && let Some((keys, element)) = rest.split_once(']')
    {
        let keys: Vec<String> = keys.split(',').map(str::to_string).collect();
        let defaults: BTreeMap<String, Value> = KEY_DEFAULTS
            .iter()
            .filter(|(k, _)| keys.iter().any(|key| key == k))
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        return Schema::List {
            element: Box::new(expr_schema(element, depth)),
            kind: ListKind::Map { keys, defaults },
        };
    }
    if let Some(rest) = expr.strip_prefix("{g}") {
        return Schema::map_of(expr_schema(rest, depth));
    }
    if let Some(rest) = expr.strip_prefix("{a}") {
        return Schema::Map {
            fields: BTreeMap::new(),
            elements: Some(Box::new(expr_schema(rest, depth))),
            atomic: true,
        };
    }
    if let Some(ty) = expr.strip_prefix("T:") {
        return type_schema(ty, depth);
    }
    match expr {
        "s" => Schema::Scalar,
        _ => Schema::Untyped,
    }
}
