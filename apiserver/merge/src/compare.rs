//! Field-level difference of two objects (structured-merge-diff's `Compare`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::fieldset::FieldSet;
use crate::path::{Path, PathElement, values_equal};
use crate::schema::Schema;
use crate::typed::{Shape, index_list, list_element, map_child, shape};

/// Paths added, modified (leaves with a new value) and removed between two objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// Drops `ignored` paths and everything below them.
    pub fn exclude(&self, ignored: &FieldSet) -> Comparison {
        Comparison {
            added: self.added.recursive_difference(ignored),
            modified: self.modified.recursive_difference(ignored),
            removed: self.removed.recursive_difference(ignored),
        }
    }

    /// Added ∪ modified.
    pub fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares `lhs` (old) and `rhs` (new).
pub(crate) fn compare(lhs: &Value, rhs: &Value, schema: &Schema) -> Comparison {
    let mut c = Comparison::default();
    walk(Some(lhs), Some(rhs), schema, &mut Path::default(), &mut c);
    c
}

fn walk(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    schema: &Schema,
    path: &mut Path,
    c: &mut Comparison,
) {
    match shape(schema, lhs, rhs) {
        Shape::Leaf => {
            match (lhs, rhs) {
                (None, _) => c.added.insert(path),
                (_, None) => c.removed.insert(path),
                (Some(l), Some(r)) => {
                    if !values_equal(l, r) {
                        c.modified.insert(path);
                    }
                }
            }
            return;
        }
        Shape::Map => {
            let empty = Map::new();
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            for k in lm.keys().chain(rm.keys().filter(|k| !lm.contains_key(*k))) {
                let (cs, _) = map_child(schema, k);
                path.0.push(PathElement::Field(k.clone()));
                walk(lm.get(k), rm.get(k), cs, path, c);
                path.0.pop();
            }
        }
        Shape::List => {
            let es = list_element(schema);
            let l = index_list(schema, lhs, path, false).unwrap_or_default();
            let r = index_list(schema, rhs, path, false).unwrap_or_default();
            let lkeys: BTreeMap<&PathElement, &Value> = l.iter().map(|(p, v)| (p, *v)).collect();
            let rkeys: BTreeMap<&PathElement, &Value> = r.iter().map(|(p, v)| (p, *v)).collect();
            for (pe, lv) in &l {
                let rv = rkeys.get(pe).copied();
                path.0.push(pe.clone());
                walk(Some(lv), rv, es, path, c);
                path.0.pop();
            }
            for (pe, rv) in &r {
                if lkeys.contains_key(pe) {
                    continue;
                }
                path.0.push(pe.clone());
                walk(None, Some(rv), es, path, c);
                path.0.pop();
            }
        }
    }
    // Non-leaf node: record its own appearance/disappearance.
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
}
