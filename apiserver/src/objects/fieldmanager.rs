//! managedFields bookkeeping for every write, via gantry-merge.

use gantry_merge::{FieldSet, ManagedFieldsEntry, Path, Schema, Time};
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Cause, Details};
use crate::registry::ResourceInfo;

/// The merge schema of a resource (CRD schema or the built-in table).
pub fn merge_schema(info: &ResourceInfo) -> Schema {
    match info.crd.as_ref().and_then(|c| c.raw_schema.as_ref()) {
        Some(raw) => Schema::from_openapi(raw),
        None => Schema::builtin(&info.api_version(), &info.kind),
    }
}

/// Fields a write to `subresource` does not own (kube's reset fields).
pub fn ignored_fields(info: &ResourceInfo, subresource: Option<&str>) -> FieldSet {
    match subresource {
        Some("status") => FieldSet::from_paths([Path::fields(["spec"])]),
        _ if info.has_status => FieldSet::from_paths([Path::fields(["status"])]),
        _ => FieldSet::new(),
    }
}

/// Now, as a managedFields timestamp.
pub fn now() -> Time {
    let t = chrono::Utc::now();
    let secs = t.timestamp();
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid timestamp"))
}

/// The live object's managedFields.
pub fn managed_fields(obj: Option<&Value>) -> Vec<ManagedFieldsEntry> {
    obj.and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .unwrap_or_default()
}

/// Stores `entries` as `metadata.managedFields` (removing the field when empty).
pub fn set_managed_fields(obj: &mut Value, entries: &[ManagedFieldsEntry]) {
    let m = crate::objects::meta::meta_mut(obj);
    if entries.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert(
            "managedFields".into(),
            serde_json::to_value(entries).expect("managedFields serialize"),
        );
    }
}

/// Records an `Update` entry for `manager` for the change `old` -> `new` (in place).
pub fn record_update(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
) -> ApiResult<()> {
    let schema = merge_schema(info);
    let ignored = ignored_fields(info, subresource);
    let live = managed_fields(old);
    let sent: Option<Vec<ManagedFieldsEntry>> = new
        .pointer("/metadata/managedFields")
        .and_then(|m| serde_json::from_value(m.clone()).ok());
    let api_version = info.api_version();
    let entries = gantry_merge::update(
        old,
        new,
        &gantry_merge::UpdateOptions {
            manager,
            subresource,
            api_version: &api_version,
            schema: &schema,
            now: now(),
            managed_fields: &live,
            new_managed_fields: sent.as_deref(),
            ignored: &ignored,
        },
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    set_managed_fields(new, &entries);
    Ok(())
}

/// The 409 for apply conflicts.
pub fn conflict_error(
    info: &ResourceInfo,
    name: &str,
    conflicts: &[gantry_merge::Conflict],
) -> ApiError {
    let causes = gantry_merge::conflict_causes(conflicts)
        .into_iter()
        .map(|c| Cause {
            reason: c.reason.unwrap_or_default(),
            message: c.message.unwrap_or_default(),
            field: c.field.unwrap_or_default(),
        })
        .collect();
    ApiError::Conflict {
        message: gantry_merge::conflict_message(conflicts),
        details: Details {
            name: name.into(),
            group: info.group.clone(),
            kind: info.plural.clone(),
            causes,
        },
    }
}
