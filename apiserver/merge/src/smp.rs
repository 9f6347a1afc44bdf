//! Strategic merge patch (`application/strategic-merge-patch+json`).
//!
//! Hand-written: no maintained Rust crate implements Kubernetes' strategic merge patch
//! (json-patch only does RFC 6902 / RFC 7386).

use serde_json::{Map, Value};

use crate::error::PatchError;
use crate::path::values_equal;
use crate::schema::{ListKind, Schema};
use crate::typed::{list_element, map_child};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `original`, using `schema` for merge keys and list
/// types: list-maps merge by their first key (kube's `patchMergeKey`), sets merge by
/// value, everything else is replaced. Supports `null` deletes, `$patch:
/// replace|merge|delete` (in maps and list elements), `$retainKeys`,
/// `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`.
/// `original` is left unchanged; on error nothing is applied.
///
/// # Errors
///
/// A [`PatchError`] when the patch or `original` is not an object, a directive is
/// unknown or misplaced, a list-map element lacks its merge key, or a directive's
/// value has the wrong shape.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    schema: &Schema,
) -> Result<Value, PatchError> {
    let Value::Object(p) = patch else {
        return Err(PatchError::NotAnObject(format!(
            "strategic merge patch must be a JSON object, got {}",
            crate::apply::kind_of(patch)
        )));
    };
    let Value::Object(o) = original else {
        return Err(PatchError::NotAnObject(format!(
            "original object must be a JSON object, got {}",
            crate::apply::kind_of(original)
        )));
    };
    Ok(Value::Object(merge_map(o.clone(), p, schema)?))
}

fn directive(p: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match p.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "merge" | "delete") => {
            Ok(Some(s.as_str()))
        }
        Some(other) => Err(PatchError::BadDirective(format!(
            "unknown patch type: {} in map: {}",
            other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_string),
            Value::Object(p.clone())
        ))),
    }
}

/// A patch value with every directive processed against nothing (new content).
fn clean(v: &Value, schema: &Schema) -> Result<Value, PatchError> {
    match v {
        Value::Object(p) => Ok(Value::Object(merge_map(Map::new(), p, schema)?)),
        Value::Array(items) => {
            let es = list_element(schema);
            let mut out = Vec::new();
            for it in items {
                if let Value::Object(m) = it {
                    match directive(m)? {
                        Some("delete") => continue,
                        Some("replace") if m.len() == 1 => continue,
                        _ => {}
                    }
                }
                out.push(clean(it, es)?);
            }
            Ok(Value::Array(out))
        }
        other => Ok(other.clone()),
    }
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: &Schema,
) -> Result<Map<String, Value>, PatchError> {
    match directive(patch)? {
        Some("delete") => return Ok(Map::new()),
        Some("replace") => {
            let mut out = Map::new();
            for (k, v) in patch {
                if k == PATCH {
                    continue;
                }
                let (cs, _) = map_child(schema, k);
                out.insert(k.clone(), clean(v, cs)?);
            }
            return Ok(out);
        }
        _ => {}
    }
    if let Some(rk) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = rk else {
            return Err(PatchError::Invalid(format!(
                "$retainKeys must be a list of strings, got {rk}"
            )));
        };
        let keep: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
        if keep.len() != keys.len() {
            return Err(PatchError::Invalid(format!(
                "$retainKeys must be a list of strings, got {rk}"
            )));
        }
        original.retain(|k, _| keep.contains(&k.as_str()));
    }
    // The lists `$setElementOrder` will sort, as they were before the patch.
    let originals: std::collections::BTreeMap<&str, Vec<Value>> = patch
        .keys()
        .filter_map(|k| k.strip_prefix(SET_ELEMENT_ORDER))
        .filter_map(|f| match original.get(f) {
            Some(Value::Array(a)) => Some((f, a.clone())),
            _ => None,
        })
        .collect();
    // Deletions from primitive lists first, so later merges see the result.
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE) {
            let Value::Array(del) = v else {
                return Err(PatchError::Invalid(format!("{k} must be a list, got {v}")));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|it| !del.iter().any(|d| values_equal(d, it)));
            }
        }
    }
    for (k, pv) in patch {
        if k.starts_with('$') {
            continue;
        }
        let (cs, _) = map_child(schema, k);
        if pv.is_null() {
            original.remove(k);
            continue;
        }
        let merged = match (original.remove(k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => Value::Object(merge_map(o, p, cs)?),
            (Some(Value::Array(o)), Value::Array(p)) => Value::Array(merge_list(o, p, cs, k)?),
            (_, pv) => clean(pv, cs)?,
        };
        original.insert(k.clone(), merged);
    }
    for (k, order) in patch {
        if let Some(field) = k.strip_prefix(SET_ELEMENT_ORDER) {
            let before = originals.get(field).map(Vec::as_slice).unwrap_or_default();
            let Value::Array(order) = order else {
                return Err(PatchError::Invalid(format!(
                    "{k} must be a list, got {order}"
                )));
            };
            let (cs, _) = map_child(schema, field);
            if let Some(Value::Array(items)) = original.get_mut(field) {
                *items = reorder(std::mem::take(items), order, before, cs);
            }
        }
    }
    Ok(original)
}

fn merge_key(schema: &Schema) -> Option<&str> {
    match schema {
        Schema::List {
            kind: ListKind::Map { keys, .. },
            ..
        } => keys.first().map(String::as_str),
        _ => None,
    }
}

fn merge_list(
    mut original: Vec<Value>,
    patch: &[Value],
    schema: &Schema,
    field: &str,
) -> Result<Vec<Value>, PatchError> {
    // A `{"$patch": "replace"}` element replaces the whole list with the other elements.
    for it in patch {
        if let Value::Object(m) = it
            && directive(m)? == Some("replace")
        {
            let rest: Vec<Value> = patch.iter().filter(|x| *x != it).cloned().collect();
            return match clean(&Value::Array(rest), schema)? {
                Value::Array(a) => Ok(a),
                _ => Ok(Vec::new()),
            };
        }
    }
    let es = list_element(schema);
    match (schema, merge_key(schema)) {
        (_, Some(key)) => {
            for it in patch {
                let Value::Object(pm) = it else {
                    return Err(PatchError::Invalid(format!(
                        "list {field} merges by key {key:?}, but element {it} is not a map"
                    )));
                };
                let Some(kv) = pm.get(key) else {
                    return Err(PatchError::MissingMergeKey(format!(
                        "map: {it} does not contain declared merge key: {key}"
                    )));
                };
                let pos = original
                    .iter()
                    .position(|o| o.get(key).is_some_and(|ov| values_equal(ov, kv)));
                match (directive(pm)?, pos) {
                    (Some("delete"), Some(i)) => {
                        original.remove(i);
                    }
                    (Some("delete"), None) => {}
                    (_, Some(i)) => {
                        let o = match original[i].take() {
                            Value::Object(o) => o,
                            _ => Map::new(),
                        };
                        original[i] = Value::Object(merge_map(o, pm, es)?);
                    }
                    (_, None) => original.push(Value::Object(merge_map(Map::new(), pm, es)?)),
                }
            }
            Ok(original)
        }
        (
            Schema::List {
                kind: ListKind::Set,
                ..
            },
            None,
        ) => {
            for it in patch {
                if !original.iter().any(|o| values_equal(o, it)) {
                    original.push(it.clone());
                }
            }
            Ok(original)
        }
        _ => match clean(&Value::Array(patch.to_vec()), schema)? {
            Value::Array(a) => Ok(a),
            _ => Ok(Vec::new()),
        },
    }
}

/// `$setElementOrder` as kube's `normalizeElementOrder`: the merged elements named in
/// `order` are sorted by it, the others (server-only) keep their original order, and the
/// two runs are interleaved by their positions in the original (pre-patch) list.
fn reorder(items: Vec<Value>, order: &[Value], original: &[Value], schema: &Schema) -> Vec<Value> {
    let key = merge_key(schema);
    let same = |a: &Value, b: &Value| match key {
        Some(k) => match (a.get(k), b.get(k)) {
            (Some(x), Some(y)) => values_equal(x, y),
            _ => false,
        },
        None => values_equal(a, b),
    };
    let index_in = |list: &[Value], item: &Value| list.iter().position(|x| same(x, item));
    let (mut patch, mut server): (Vec<Value>, Vec<Value>) = items
        .into_iter()
        .partition(|it| index_in(order, it).is_some());
    patch.sort_by_key(|it| index_in(order, it));
    server.sort_by_key(|it| index_in(original, it).unwrap_or(usize::MAX));
    // mergeSortedSlice(left = server-only, right = patch, serverOrder = original).
    let mut out = Vec::with_capacity(patch.len() + server.len());
    let (mut i, mut j) = (0, 0);
    while i < server.len() || j < patch.len() {
        let take_left = if i >= server.len() {
            false
        } else if j >= patch.len() {
            true
        } else {
            match (
                index_in(original, &server[i]),
                index_in(original, &patch[j]),
            ) {
                (Some(l), Some(r)) => l < r,
                _ => false,
            }
        };
        if take_left {
            out.push(server[i].clone());
            i += 1;
        } else {
            out.push(patch[j].clone());
            j += 1;
        }
    }
    out
}
