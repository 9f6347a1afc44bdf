//! What every write does to an object before it is stored: type checks, schema
//! admission (pruning, defaulting, validation), metadata rules, managedFields.

pub mod admission;
pub mod defaults;
pub mod events;
pub mod field_manager_name;
pub mod fieldmanager;
pub mod hpa;
pub mod initial_status;
pub mod lifecycle;
pub mod meta;
pub use gantry_kube::names;
pub mod qos;
pub mod quantity;
pub mod validation;

use serde_json::Value;

use crate::registry::ResourceInfo;

/// The stored form of an object written at `info` (events.k8s.io Events as core
/// Events, autoscaling/v1 `HorizontalPodAutoscalers` as v2; others as they are).
pub fn to_storage(info: &ResourceInfo, obj: Value) -> Value {
    hpa::to_storage(info, events::to_storage(info, obj))
}

/// `obj` without the fields served objects get filled in with their zero value,
/// for telling whether an update changes anything.
pub fn without_zero_fields(info: &ResourceInfo, obj: Value) -> Value {
    let obj = events::without_zero_fields(info, obj);
    if hpa::is_hpa(info) {
        hpa::without_zero_fields(obj)
    } else {
        obj
    }
}
