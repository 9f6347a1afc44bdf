//! Helpers shared by the integration tests.
#![allow(dead_code)]

use gantry_merge::{
    ApplyError, ApplyOptions, FieldSet, ManagedFieldsEntry, Merged, Schema, Time, UpdateOptions,
    apply, update,
};
use serde_json::Value;

/// A timestamp at `secs` seconds past 2024-01-01T00:00:00Z.
pub fn time(secs: i64) -> Time {
    let base: k8s_openapi::jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    Time(base + k8s_openapi::jiff::SignedDuration::from_secs(secs))
}

pub fn deployment_schema() -> Schema {
    Schema::builtin("apps/v1", "Deployment")
}

/// Server-side apply as `manager` on the main resource.
pub fn ssa(
    schema: &Schema,
    live: Option<&Value>,
    live_mf: &[ManagedFieldsEntry],
    applied: &Value,
    manager: &str,
    force: bool,
    now: i64,
) -> Result<Merged, ApplyError> {
    let ignored = FieldSet::new();
    apply(
        live,
        applied,
        &ApplyOptions {
            manager,
            force,
            subresource: None,
            api_version: applied
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("v1"),
            schema,
            now: time(now),
            managed_fields: live_mf,
            ignored: &ignored,
        },
    )
}

/// A non-apply write as `manager` on the main resource.
pub fn upd(
    schema: &Schema,
    live: Option<&Value>,
    live_mf: &[ManagedFieldsEntry],
    new: &Value,
    manager: &str,
    now: i64,
) -> Vec<ManagedFieldsEntry> {
    let ignored = FieldSet::new();
    update(
        live,
        new,
        &UpdateOptions {
            manager,
            subresource: None,
            api_version: new
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("v1"),
            schema,
            now: time(now),
            managed_fields: live_mf,
            new_managed_fields: None,
            ignored: &ignored,
        },
    )
    .expect("update succeeds")
}

/// The fieldsV1 of `manager`'s entry with `operation`, if any.
pub fn fields_of(mf: &[ManagedFieldsEntry], manager: &str, operation: &str) -> Option<Value> {
    mf.iter()
        .find(|e| {
            e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some(operation)
        })
        .and_then(|e| e.fields_v1.as_ref().map(|f| f.0.clone()))
}

/// The set of `manager`'s entry with `operation` (empty when absent).
pub fn set_of(mf: &[ManagedFieldsEntry], manager: &str, operation: &str) -> FieldSet {
    fields_of(mf, manager, operation)
        .map(|v| FieldSet::from_fields_v1(&v).unwrap())
        .unwrap_or_default()
}

pub fn managers(mf: &[ManagedFieldsEntry]) -> Vec<(String, String)> {
    mf.iter()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}
