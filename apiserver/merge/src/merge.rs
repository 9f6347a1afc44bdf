//! Merging an applied configuration into a live object (structured-merge-diff's `Merge`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::path::{Path, PathElement};
use crate::schema::Schema;
use crate::typed::{Shape, index_list, list_element, map_child, shape};

/// Merges `rhs` (the applied configuration) over `lhs` (the live object): leaves and
/// atomic nodes take `rhs`'s value, maps merge key by key, sets and list-maps element by
/// element. `rhs` lists are checked strictly (missing keys, duplicates).
pub(crate) fn merge(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    schema: &Schema,
    path: &mut Path,
) -> Result<Option<Value>, String> {
    match shape(schema, lhs, rhs) {
        Shape::Leaf => Ok(rhs.or(lhs).cloned()),
        Shape::Map => {
            let empty = Map::new();
            let lm = lhs.and_then(Value::as_object).unwrap_or(&empty);
            let rm = rhs.and_then(Value::as_object).unwrap_or(&empty);
            let mut out = Map::new();
            let keys = lm.keys().chain(rm.keys().filter(|k| !lm.contains_key(*k)));
            for k in keys {
                let (cs, _) = map_child(schema, k);
                path.0.push(PathElement::Field(k.clone()));
                let merged = merge(lm.get(k), rm.get(k), cs, path)?;
                path.0.pop();
                if let Some(v) = merged {
                    out.insert(k.clone(), v);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        Shape::List => merge_list(lhs, rhs, schema, path),
    }
}

/// The element order of structured-merge-diff's `visitListItems`: shared elements follow
/// the applied order, live-only elements keep their place, new ones are inserted where
/// the applied configuration has them.
fn merge_list(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    schema: &Schema,
    path: &mut Path,
) -> Result<Option<Value>, String> {
    let es = list_element(schema);
    let rpes = index_list(schema, rhs, path, true)?;
    let lpes = index_list(schema, lhs, path, false)?;
    let lmap: BTreeMap<&PathElement, &Value> = lpes.iter().map(|(p, v)| (p, *v)).collect();
    let rmap: BTreeMap<&PathElement, &Value> = rpes.iter().map(|(p, v)| (p, *v)).collect();
    let mut shared: std::collections::VecDeque<&PathElement> = rpes
        .iter()
        .filter(|(pe, _)| lmap.contains_key(pe))
        .map(|(pe, _)| pe)
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: BTreeSet<PathElement> = BTreeSet::new();
    let mut out = Vec::new();
    let (llen, rlen) = (lpes.len(), rpes.len());
    let (mut li, mut ri) = (0, 0);
    let emit = |pe: &PathElement,
                l: Option<&Value>,
                r: Option<&Value>,
                path: &mut Path,
                out: &mut Vec<Value>|
     -> Result<(), String> {
        path.0.push(pe.clone());
        let m = merge(l, r, es, path)?;
        path.0.pop();
        if let Some(v) = m {
            out.push(v);
        }
        Ok(())
    };
    while li < llen || ri < rlen {
        if li < llen && ri < rlen {
            let pe = &lpes[li].0;
            if *pe == rpes[ri].0 {
                merged_rhs.insert(pe.clone());
                emit(pe, Some(lpes[li].1), Some(rpes[ri].1), path, &mut out)?;
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if rmap.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < llen {
            let pe = &lpes[li].0;
            if !rmap.contains_key(pe) {
                emit(pe, Some(lpes[li].1), None, path, &mut out)?;
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < rlen {
            let pe = &rpes[ri].0;
            merged_rhs.insert(pe.clone());
            emit(pe, lmap.get(pe).copied(), Some(rpes[ri].1), path, &mut out)?;
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}
