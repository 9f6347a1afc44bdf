//! The ownership steps shared by apply and update (structured-merge-diff's
//! `Updater.update` and `prune`, kube-apiserver's manager cap).

use serde_json::Value;

use crate::compare::{Comparison, compare};
use crate::conflict::Conflict;
use crate::fieldset::FieldSet;
use crate::managers::{Managed, ManagerId};
use crate::remove::remove_items;
use crate::schema::Schema;
use crate::typed::{ensure_named_fields_are_members, to_field_set};

/// Removes `metadata.managedFields` from a copy of `v`.
pub(crate) fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    v
}

/// Compares `old` and `new` (minus `ignored`) and takes the changed fields away from
/// every manager but `except`: fields added or modified are conflicts (an error unless
/// `force`), removed fields are dropped silently. Managers left empty are dropped.
pub(crate) fn take_changes(
    old: &Value,
    new: &Value,
    schema: &Schema,
    managed: &mut Managed,
    except: Option<&ManagerId>,
    force: bool,
    ignored: &FieldSet,
) -> Result<Comparison, Vec<Conflict>> {
    let cmp = compare(old, new, schema).exclude(ignored);
    let changed = cmp.changed();
    let mut conflicts = Vec::new();
    let mut conflict_sets = Vec::new();
    for (id, ms) in managed.iter() {
        if Some(id) == except {
            continue;
        }
        let c = ms.set.intersection(&changed);
        if !c.is_empty() {
            for path in c.paths() {
                conflicts.push(Conflict {
                    manager: id.manager.clone(),
                    operation: id.operation.clone(),
                    api_version: ms.api_version.clone(),
                    subresource: id.subresource.clone(),
                    field: path.to_string(),
                    path,
                });
            }
            conflict_sets.push((id.clone(), c));
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for (id, c) in conflict_sets {
        if let Some(ms) = managed.get_mut(&id) {
            ms.set = ms.set.difference(&c);
        }
    }
    if !cmp.removed.is_empty() {
        for (id, ms) in managed.iter_mut() {
            if Some(id) != except {
                ms.set = ms.set.difference(&cmp.removed);
            }
        }
    }
    managed.retain(|_, ms| !ms.set.is_empty());
    Ok(cmp)
}

fn fieldset_of(v: &Value, schema: &Schema) -> FieldSet {
    // Live/merged objects tolerate duplicates and keyless elements (AllowDuplicates).
    to_field_set(v, schema, false).unwrap_or_default()
}

fn remove_or_empty(v: &Value, set: &FieldSet, schema: &Schema) -> Value {
    remove_items(v, set, schema).unwrap_or_else(|| Value::Object(serde_json::Map::default()))
}

/// Removes from `merged` what the applier owned last time (`last`), no longer applies,
/// and nobody else owns (structured-merge-diff's `prune`, `addBackOwnedItems`,
/// `addBackDanglingItems`).
pub(crate) fn prune(
    merged: Value,
    managed: &Managed,
    last: Option<&FieldSet>,
    schema: &Schema,
) -> Value {
    let Some(last) = last.filter(|l| !l.is_empty()) else {
        return merged;
    };
    let ens = |s: &FieldSet| ensure_named_fields_are_members(s, schema);
    let last_en = ens(last);
    let pruned = remove_or_empty(&merged, &last_en, schema);

    // Add back what any manager (including the applier's new config) owns.
    let owned = managed
        .values()
        .fold(FieldSet::new(), |acc, ms| acc.union(&ms.set));
    let merged_en = ens(&fieldset_of(&merged, schema));
    let pruned_en = ens(&fieldset_of(&pruned, schema));
    let drop = merged_en.difference(&pruned_en.union(&ens(&owned)));
    let pruned = remove_or_empty(&merged, &drop, schema);

    // Only ever remove what the applier owned last time.
    let pruned_en = ens(&fieldset_of(&pruned, schema));
    let drop = merged_en.difference(&pruned_en).intersection(&last_en);
    remove_or_empty(&merged, &drop, schema)
}

/// kube-apiserver keeps at most this many Update entries.
pub(crate) const MAX_UPDATE_MANAGERS: usize = 10;

/// Merges the oldest Update entries into `ancient-changes` buckets (one per apiVersion)
/// until at most [`MAX_UPDATE_MANAGERS`] Update entries remain (kube's `capManagersManager`).
pub(crate) fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<ManagerId> = managed
        .keys()
        .filter(|id| !id.is_apply())
        .cloned()
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    let secs = |id: &ManagerId, m: &Managed| {
        m.get(id)
            .and_then(|ms| ms.time.as_ref())
            .map_or(0, |t| t.0.as_second())
    };
    updaters.sort_by(|a, b| {
        secs(a, managed)
            .cmp(&secs(b, managed))
            .then_with(|| a.cmp(b))
    });
    let mut first_of_version: std::collections::BTreeMap<String, ManagerId> =
        std::collections::BTreeMap::new();
    let mut length = updaters.len();
    for id in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(ms) = managed.get(&id).cloned() else {
            continue;
        };
        let version = ms.api_version.clone();
        let bucket = ManagerId::update("ancient-changes", &version, None);
        match first_of_version.get(&version) {
            Some(first) => {
                if !managed.contains_key(&bucket)
                    && let Some(f) = managed.remove(first)
                {
                    managed.insert(bucket.clone(), f);
                }
                if let Some(b) = managed.get_mut(&bucket) {
                    b.set = ms.set.union(&b.set);
                    b.time.clone_from(&ms.time);
                }
                if id != bucket {
                    managed.remove(&id);
                }
                length -= 1;
            }
            None => {
                first_of_version.insert(version, id);
            }
        }
    }
}
