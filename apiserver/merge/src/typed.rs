//! Walking a JSON value together with its [`Schema`]: node shapes, list element
//! identities and the field set of a value (structured-merge-diff's `ToFieldSet`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::fieldset::FieldSet;
use crate::path::{Path, PathElement};
use crate::schema::{ListKind, OPEN_STRUCT, Schema};

/// Schema of unknown structure.
pub(crate) static UNTYPED: Schema = Schema::Untyped;
/// Schema of an unknown named field of a struct.
pub(crate) static OPEN: Schema = OPEN_STRUCT;

/// The schema of key `key` of a map node, and whether it is a named (struct) field.
pub(crate) fn map_child<'s>(schema: &'s Schema, key: &str) -> (&'s Schema, bool) {
    match schema {
        Schema::Map {
            fields, elements, ..
        } => {
            if let Some(s) = fields.get(key) {
                (s, true)
            } else if let Some(e) = elements {
                (e, false)
            } else {
                (&OPEN, true)
            }
        }
        _ => (&UNTYPED, false),
    }
}

/// The schema of a list's elements.
pub(crate) fn list_element(schema: &Schema) -> &Schema {
    match schema {
        Schema::List { element, .. } => element,
        _ => &UNTYPED,
    }
}

/// How a node is walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A leaf: scalar, atomic map/list, or a value whose shape does not fit the schema.
    Leaf,
    /// A map merged key by key.
    Map,
    /// A set or list-map merged element by element.
    List,
}

fn is_empty_or_null(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// The shape of a node whose two sides (either may be absent) are `lhs` and `rhs`.
/// As in structured-merge-diff, two empty/null sides make a leaf (keeps the
/// empty/null distinction), and so does a value of the wrong kind.
pub(crate) fn shape(schema: &Schema, lhs: Option<&Value>, rhs: Option<&Value>) -> Shape {
    let granular = match schema {
        Schema::Scalar
        | Schema::Map { atomic: true, .. }
        | Schema::List {
            kind: ListKind::Atomic,
            ..
        } => None,
        Schema::Map { .. } | Schema::Untyped => Some(Shape::Map),
        Schema::List { .. } => Some(Shape::List),
    };
    let Some(g) = granular else {
        return Shape::Leaf;
    };
    let fits = |v: Option<&Value>| {
        matches!(
            (g, v),
            (_, None | Some(Value::Null))
                | (Shape::Map, Some(Value::Object(_)))
                | (Shape::List, Some(Value::Array(_)))
        )
    };
    if !fits(lhs) || !fits(rhs) {
        return Shape::Leaf;
    }
    if is_empty_or_null(lhs) && is_empty_or_null(rhs) {
        return Shape::Leaf;
    }
    g
}

/// The identity of one list element (`k:`, `v:` or `i:`), or why it has none.
pub(crate) fn list_item_pe(schema: &Schema, item: &Value) -> Result<PathElement, String> {
    match schema {
        Schema::List {
            kind: ListKind::Map { keys, defaults },
            ..
        } => {
            let Value::Object(m) = item else {
                return Err(format!(
                    "associative list with keys has an element that is not a map: {item}"
                ));
            };
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                match m.get(k) {
                    Some(v) if !v.is_null() => fields.push((k.clone(), v.clone())),
                    _ => match defaults.get(k) {
                        Some(d) => fields.push((k.clone(), d.clone())),
                        None => {
                            return Err(format!(
                                "associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                            ));
                        }
                    },
                }
            }
            Ok(PathElement::key(fields))
        }
        Schema::List {
            kind: ListKind::Set,
            ..
        } => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => {
                Err("associative list without keys has an element that's a list type".into())
            }
            v => Ok(PathElement::Value(v.clone())),
        },
        _ => Err("invalid indexing of non-associative list".into()),
    }
}

/// Identities of a list's elements, in order. In strict mode an element without an
/// identity or a repeated identity is an error; otherwise such elements are skipped
/// (structured-merge-diff's `AllowDuplicates` for live objects keeps the first).
pub(crate) fn index_list<'v>(
    schema: &Schema,
    list: Option<&'v Value>,
    path: &Path,
    strict: bool,
) -> Result<Vec<(PathElement, &'v Value)>, String> {
    let mut out = Vec::new();
    let Some(Value::Array(items)) = list else {
        return Ok(out);
    };
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        match list_item_pe(schema, item) {
            Ok(pe) => {
                if !seen.insert(pe.clone()) {
                    if strict {
                        let what = match &pe {
                            PathElement::Value(v) => format!("duplicate entries for key {v}"),
                            other => format!("duplicate entries for key {other}"),
                        };
                        return Err(format!("{path}: {what}"));
                    }
                    continue;
                }
                out.push((pe, item));
            }
            Err(e) => {
                if strict {
                    return Err(format!("{path}: element {i}: {e}"));
                }
            }
        }
    }
    Ok(out)
}

/// The field set of a value (`ToFieldSet`): leaves, atomic nodes, list elements, map
/// keys that are not named fields, and named fields that are null or `{}`.
/// `strict` reports elements without identity and duplicates (used for applied configs).
pub(crate) fn to_field_set(v: &Value, schema: &Schema, strict: bool) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    let mut path = Path::default();
    walk_set(v, schema, strict, &mut path, &mut set)?;
    Ok(set)
}

fn walk_set(
    v: &Value,
    schema: &Schema,
    strict: bool,
    path: &mut Path,
    set: &mut FieldSet,
) -> Result<(), String> {
    let sh = match (schema, v) {
        // A single value: null/empty granular nodes are simply walked (nothing inside).
        (Schema::Map { atomic: false, .. } | Schema::Untyped, Value::Object(_)) => Shape::Map,
        (
            Schema::List {
                kind: ListKind::Set | ListKind::Map { .. },
                ..
            },
            Value::Array(_),
        ) => Shape::List,
        (
            Schema::Map { atomic: false, .. }
            | Schema::Untyped
            | Schema::List {
                kind: ListKind::Set | ListKind::Map { .. },
                ..
            },
            Value::Null,
        ) => return Ok(()),
        _ => Shape::Leaf,
    };
    match sh {
        Shape::Leaf => set.insert(path),
        Shape::Map => {
            let Value::Object(m) = v else { return Ok(()) };
            for (k, cv) in m {
                let (cs, named) = map_child(schema, k);
                path.0.push(PathElement::Field(k.clone()));
                walk_set(cv, cs, strict, path, set)?;
                let empty_map = matches!(cv, Value::Object(o) if o.is_empty());
                if !named || cv.is_null() || empty_map {
                    set.insert(path);
                }
                path.0.pop();
            }
        }
        Shape::List => {
            let es = list_element(schema);
            for (pe, item) in index_list(schema, Some(v), path, strict)? {
                path.0.push(pe);
                walk_set(item, es, strict, path, set)?;
                set.insert(path);
                path.0.pop();
            }
        }
    }
    Ok(())
}

/// `EnsureNamedFieldsAreMembers`: every named (struct) field that has children in the
/// set becomes a member too.
pub(crate) fn ensure_named_fields_are_members(set: &FieldSet, schema: &Schema) -> FieldSet {
    let mut out = FieldSet::new();
    ensure_into(set, schema, &mut Vec::new(), &mut out);
    out
}

fn ensure_into(set: &FieldSet, schema: &Schema, prefix: &mut Vec<PathElement>, out: &mut FieldSet) {
    for p in set.paths_one_level_members() {
        prefix.push(p.clone());
        out.insert_elements(prefix);
        prefix.pop();
    }
    for (pe, child) in set.children_iter() {
        let cs = match pe {
            PathElement::Field(name) => {
                let (cs, named) = map_child(schema, name);
                if named && matches!(schema, Schema::Map { .. }) {
                    prefix.push(pe.clone());
                    out.insert_elements(prefix);
                    prefix.pop();
                }
                cs
            }
            _ => list_element(schema),
        };
        prefix.push(pe.clone());
        ensure_into(child, cs, prefix, out);
        prefix.pop();
    }
}
