//! kube-apiserver's handling of kubectl's client-side-apply annotation during server-side
//! apply by the field manager `kubectl` (`lastAppliedManager`, `lastAppliedUpdater`).

use serde_json::Value;

use crate::compare::compare;
use crate::conflict::Conflict;
use crate::fieldset::FieldSet;
use crate::schema::Schema;
use crate::typed::to_field_set;

/// The annotation `kubectl apply` (client side) keeps the last applied configuration in.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The only field manager these upgrades apply to.
pub(crate) const KUBECTL: &str = "kubectl";

fn annotation(obj: &Value) -> Option<&str> {
    obj.get("metadata")?
        .get("annotations")?
        .get(LAST_APPLIED_ANNOTATION)?
        .as_str()
        .filter(|s| !s.is_empty())
}

/// Fields the last client-side apply set and that still hold those values in `live`:
/// conflicts on them are allowed when `kubectl` moves to server-side apply.
pub(crate) fn allowed_conflicts(
    live: &Value,
    api_version: &str,
    schema: &Schema,
) -> Option<FieldSet> {
    let last: Value = serde_json::from_str(annotation(live)?).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let set = to_field_set(&last, schema, true).ok()?;
    let cmp = compare(&last, live, schema);
    Some(
        set.difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

/// Conflicts whose path is not in `allowed`.
pub(crate) fn remaining(conflicts: Vec<Conflict>, allowed: &FieldSet) -> Vec<Conflict> {
    conflicts
        .into_iter()
        .filter(|c| !allowed.has(&c.path))
        .collect()
}

/// When `object` carries the annotation, rewrites it to `applied` (without the
/// annotation), encoded like kube does (sorted keys, trailing newline).
pub(crate) fn sync_annotation(object: &mut Value, applied: &Value) {
    if annotation(object).is_none() {
        return;
    }
    let mut cfg = applied.clone();
    if let Some(ann) = cfg
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        ann.remove(LAST_APPLIED_ANNOTATION);
    }
    cfg.sort_all_objects();
    let text = format!("{cfg}\n");
    if let Some(ann) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        ann.insert(LAST_APPLIED_ANNOTATION.to_string(), Value::String(text));
    }
}
