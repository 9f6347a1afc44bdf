//! Server-side apply.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use serde_json::Value;

use crate::error::ApplyError;
use crate::fieldset::FieldSet;
use crate::last_applied;
use crate::managers::{self, ManagerId, ManagerSet, managed_fields_changed};
use crate::merge::merge;
use crate::ownership::{prune, take_changes, without_managed_fields};
use crate::path::{Path, values_equal};
use crate::schema::Schema;
use crate::typed::to_field_set;
use crate::update::record_update;

/// Manager name kube-apiserver gives the pre-existing fields of an object applied to
/// for the first time without any managedFields.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Inputs of [`apply`] besides the objects.
#[derive(Clone, Debug)]
pub struct ApplyOptions<'a> {
    /// The field manager (`?fieldManager=`; required for apply).
    pub manager: &'a str,
    /// `?force=true`: take ownership of conflicting fields instead of failing.
    pub force: bool,
    /// The subresource written (`Some("status")`), `None` for the main resource.
    pub subresource: Option<&'a str>,
    /// The `apiVersion` of the resource being written (recorded on the entry).
    pub api_version: &'a str,
    /// How the object merges.
    pub schema: &'a Schema,
    /// Timestamp for the applier's entry when the object changes (kube: now, UTC, seconds).
    pub now: Time,
    /// The live object's `metadata.managedFields` (empty on create).
    pub managed_fields: &'a [ManagedFieldsEntry],
    /// Reset fields (kube's `GetResetFields`): each member path and everything below it is
    /// left out of ownership, conflicts and pruning. Pass `status` for writes to the main
    /// resource of a kind with a status subresource, `spec` (CRDs) or the kind's reset
    /// fields for writes to `/status`. The merged object still carries the applied values
    /// there; reset them as kube's strategies do (see [`crate::reset_ignored`]).
    pub ignored: &'a FieldSet,
}

/// Result of [`apply`].
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    /// The new object, without `metadata.managedFields` (the caller stores `managed_fields`
    /// there). Equal to the live object when `object_changed` is false.
    pub object: Value,
    /// The new `metadata.managedFields`.
    pub managed_fields: Vec<ManagedFieldsEntry>,
    /// Whether the object (ignoring managedFields) differs from the live one.
    pub object_changed: bool,
    /// Whether managedFields differ from the live ones in anything but timestamps.
    pub managed_fields_changed: bool,
}

impl Merged {
    /// True when nothing changed: kube-apiserver then writes nothing and keeps the
    /// resourceVersion (and managedFields timestamps are not bumped).
    pub fn is_noop(&self) -> bool {
        !self.object_changed && !self.managed_fields_changed
    }
}

/// Server-side apply of `applied` onto `live` (`None` to create).
///
/// Merges per `opts.schema`, fails with [`ApplyError::Conflicts`] when another manager
/// owns an applied field with a different value (unless `force`), removes fields the
/// manager applied before but no longer applies and nobody else owns, and records the
/// manager's ownership (operation `Apply`).
///
/// For the manager `kubectl`, as kube-apiserver does: conflicts on fields that kubectl's
/// client-side apply set last (per the `kubectl.kubernetes.io/last-applied-configuration`
/// annotation) and that still hold those values are forced, and an existing annotation is
/// rewritten to the newly applied configuration.
///
/// # Errors
///
/// [`ApplyError::Conflicts`] when fields conflict and `force` is not set,
/// [`ApplyError::Invalid`] when the applied configuration does not fit the schema,
/// [`ApplyError::ManagedFields`] when the live `managedFields` do not decode.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions<'_>,
) -> Result<Merged, ApplyError> {
    if opts.manager != last_applied::KUBECTL {
        return apply_structured(live, applied, opts);
    }
    let result = match apply_structured(live, applied, opts) {
        Err(ApplyError::Conflicts(conflicts)) => {
            let allowed = live.and_then(|l| {
                last_applied::allowed_conflicts(
                    &without_managed_fields(l),
                    opts.api_version,
                    opts.schema,
                )
            });
            let Some(allowed) = allowed else {
                return Err(ApplyError::Conflicts(conflicts));
            };
            let rest = last_applied::remaining(conflicts, &allowed);
            if !rest.is_empty() {
                return Err(ApplyError::Conflicts(rest));
            }
            let forced = ApplyOptions {
                force: true,
                ..opts.clone()
            };
            apply_structured(live, applied, &forced)?
        }
        other => other?,
    };
    let mut result = result;
    let before = result.object.clone();
    last_applied::sync_annotation(&mut result.object, applied);
    if result.object != before {
        result.object_changed = true;
    }
    Ok(result)
}

fn apply_structured(
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions<'_>,
) -> Result<Merged, ApplyError> {
    let Value::Object(applied_map) = applied else {
        return Err(ApplyError::Invalid(format!(
            "applied configuration must be a JSON object, got {}",
            kind_of(applied)
        )));
    };
    if applied_map
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|mf| !mf.is_null())
    {
        return Err(ApplyError::Invalid(
            "metadata.managedFields must be nil".into(),
        ));
    }
    if let Some(Value::String(v)) = applied_map.get("apiVersion")
        && !opts.api_version.is_empty()
        && v != opts.api_version
    {
        return Err(ApplyError::Invalid(format!(
            "Incorrect version specified in apply patch. Specified patch version: {v}, expected: {}",
            opts.api_version
        )));
    }
    let schema = opts.schema;
    let live_obj = live.map_or_else(
        || Value::Object(serde_json::Map::default()),
        without_managed_fields,
    );

    let config_set = to_field_set(applied, schema, true)
        .map_err(ApplyError::Invalid)?
        .recursive_difference(opts.ignored);
    let merged = merge(Some(&live_obj), Some(applied), schema, &mut Path::default())
        .map_err(ApplyError::Invalid)?
        .unwrap_or_else(|| Value::Object(serde_json::Map::default()));
    // An applied `managedFields: null` must not reach the object.
    let merged = without_managed_fields(&merged);

    let mut managed = managers::decode(opts.managed_fields)?;
    let before = managers::encode(&managed);
    if live.is_some() && managed.is_empty() {
        // kube's skipNonAppliedManager: an existing object nobody manages is first
        // attributed to "before-first-apply", so applying over it can conflict.
        record_update(
            &mut managed,
            &Value::Object(serde_json::Map::default()),
            &live_obj,
            &ManagerId::update(BEFORE_FIRST_APPLY, opts.api_version, None),
            schema,
            opts.ignored,
            &opts.now,
        );
    }
    let id = ManagerId::apply(opts.manager, opts.subresource);
    let previous = managed.remove(&id);
    let last = previous.as_ref().map(|p| p.set.clone());
    managed.insert(
        id.clone(),
        ManagerSet {
            api_version: opts.api_version.to_string(),
            set: config_set,
            time: previous.and_then(|p| p.time),
        },
    );
    let merged = prune(merged, &managed, last.as_ref(), schema);
    take_changes(
        &live_obj,
        &merged,
        schema,
        &mut managed,
        Some(&id),
        opts.force,
        opts.ignored,
    )
    .map_err(ApplyError::Conflicts)?;
    managers::strip_and_drop_empty(&mut managed);

    let object_changed = live.is_none() || !values_equal(&live_obj, &merged);
    if let Some(ms) = managed.get_mut(&id)
        && (object_changed || ms.time.is_none())
    {
        ms.time = Some(opts.now.clone());
    }
    let managed_fields = managers::encode(&managed);
    let managed_fields_changed = managed_fields_changed(&before, &managed_fields);
    Ok(Merged {
        object: if object_changed { merged } else { live_obj },
        managed_fields,
        object_changed,
        managed_fields_changed,
    })
}

/// A short name for the JSON type of `v`, for error messages.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
