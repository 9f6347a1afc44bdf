//! Ownership tracking for non-apply writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use serde_json::Value;

use crate::error::UpdateError;
use crate::fieldset::FieldSet;
use crate::managers::{self, Managed, ManagerId, ManagerSet};
use crate::ownership::{cap_update_managers, take_changes, without_managed_fields};
use crate::schema::Schema;

/// Inputs of [`update`] besides the objects.
#[derive(Clone, Debug)]
pub struct UpdateOptions<'a> {
    /// The field manager (`?fieldManager=`, or derived from the User-Agent as kube does).
    pub manager: &'a str,
    /// The subresource written (`Some("status")`), `None` for the main resource.
    pub subresource: Option<&'a str>,
    /// The `apiVersion` of the resource being written (part of an Update entry's identity).
    pub api_version: &'a str,
    /// How the object merges.
    pub schema: &'a Schema,
    /// Timestamp for the manager's entry when it takes ownership of anything.
    pub now: Time,
    /// The live object's `metadata.managedFields` (empty on create).
    pub managed_fields: &'a [ManagedFieldsEntry],
    /// `metadata.managedFields` as sent in the new object. When non-empty (and not a
    /// subresource write) it replaces the live list as the starting point, so clients can
    /// edit managedFields directly; `[{}]` therefore clears them.
    pub new_managed_fields: Option<&'a [ManagedFieldsEntry]>,
    /// Reset fields, as in [`crate::ApplyOptions::ignored`].
    pub ignored: &'a FieldSet,
}

/// New `metadata.managedFields` after a non-apply write of `new` over `live`
/// (`None` on create).
///
/// Every field that was added or changed (all fields on create) becomes owned by
/// `manager` with operation `Update`; changed fields are taken away from other managers,
/// removed fields from everyone; entries left empty are dropped.
///
/// # Errors
///
/// [`UpdateError::Invalid`] if `new` is not a JSON object.
pub fn update(
    live: Option<&Value>,
    new: &Value,
    opts: &UpdateOptions<'_>,
) -> Result<Vec<ManagedFieldsEntry>, UpdateError> {
    if !new.is_object() {
        return Err(UpdateError::Invalid(format!(
            "object must be a JSON object, got {}",
            crate::apply::kind_of(new)
        )));
    }
    let from_live = || managers::decode(opts.managed_fields).unwrap_or_default();
    let mut managed = match opts.new_managed_fields {
        Some(sent) if !sent.is_empty() && opts.subresource.is_none() => {
            managers::decode(sent).unwrap_or_else(|_| from_live())
        }
        _ => from_live(),
    };
    let live_obj = live.map_or_else(
        || Value::Object(serde_json::Map::default()),
        without_managed_fields,
    );
    let new_obj = without_managed_fields(new);
    let id = ManagerId::update(opts.manager, opts.api_version, opts.subresource);
    record_update(
        &mut managed,
        &live_obj,
        &new_obj,
        &id,
        opts.schema,
        opts.ignored,
        &opts.now,
    );
    managers::strip_and_drop_empty(&mut managed);
    cap_update_managers(&mut managed);
    Ok(managers::encode(&managed))
}

/// The ownership step of an Update by `id`: changed fields go to `id` (with `now`),
/// are taken from everyone else; removed fields leave everyone.
pub(crate) fn record_update(
    managed: &mut Managed,
    live_obj: &Value,
    new_obj: &Value,
    id: &ManagerId,
    schema: &Schema,
    ignored: &FieldSet,
    now: &Time,
) {
    let cmp =
        take_changes(live_obj, new_obj, schema, managed, None, true, ignored).unwrap_or_default();
    let taken = cmp
        .changed()
        .difference(&cmp.removed)
        .recursive_difference(ignored)
        .difference(&managers::strip_set());
    if !taken.is_empty() {
        let entry = managed.entry(id.clone()).or_insert_with(|| ManagerSet {
            api_version: id.api_version.clone(),
            set: FieldSet::new(),
            time: None,
        });
        entry.set = entry.set.union(&taken);
        entry.api_version.clone_from(&id.api_version);
        entry.time = Some(now.clone());
    }
}
