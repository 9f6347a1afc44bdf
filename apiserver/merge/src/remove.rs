//! Removing the paths of a field set from a value (structured-merge-diff's `RemoveItems`).

use serde_json::{Map, Value};

use crate::fieldset::FieldSet;
use crate::path::PathElement;
use crate::schema::Schema;
use crate::typed::{Shape, list_element, map_child, shape};

/// Returns `v` without the members of `set` (each member removes its whole subtree).
/// A map or list emptied by the removal disappears (`None`), as a nil Go value would.
pub(crate) fn remove_items(v: &Value, set: &FieldSet, schema: &Schema) -> Option<Value> {
    if set.is_empty() {
        return Some(v.clone());
    }
    match shape(schema, Some(v), None) {
        Shape::Leaf => Some(v.clone()),
        Shape::Map => {
            let Value::Object(m) = v else {
                return Some(v.clone());
            };
            let mut out = Map::new();
            for (k, cv) in m {
                let pe = PathElement::Field(k.clone());
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        let (cs, _) = map_child(schema, k);
                        if let Some(nv) = remove_items(cv, sub, cs) {
                            out.insert(k.clone(), nv);
                        }
                    }
                    None => {
                        out.insert(k.clone(), cv.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Shape::List => {
            let Value::Array(items) = v else {
                return Some(v.clone());
            };
            let es = list_element(schema);
            let mut out = Vec::new();
            for item in items {
                // Elements without an identity cannot be addressed: keep them.
                let Ok(pe) = crate::typed::list_item_pe(schema, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has_member(&pe) {
                    continue;
                }
                match set.child(&pe) {
                    Some(sub) => {
                        if let Some(nv) = remove_items(item, sub, es) {
                            out.push(nv);
                        }
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
    }
}
