//! Objects the control plane writes itself, not through requests: made as
//! a create or an apply through the API would make them (decoded,
//! defaulted, system metadata, a managedFields entry for the component that
//! writes them), without admission.

use std::sync::Arc;

use gantry_merge::ManagedFieldsEntry;
use serde_json::Value;

use crate::objects::admission::{FieldValidation, normalize};
use crate::objects::{fieldmanager, initial_status, meta};
use crate::registry::{Registry, ResourceInfo};

/// The served resource `group/version/plural` (a built-in: always served).
pub fn resource(
    registry: &Registry,
    group: &str,
    version: &str,
    plural: &str,
) -> Arc<ResourceInfo> {
    registry
        .get(group, version, plural)
        .unwrap_or_else(|| panic!("built-in {group}/{version}/{plural} is served"))
}

/// `obj` as a create by `manager` stores it, with its storage key.
pub fn created(info: &ResourceInfo, mut obj: Value, manager: &str) -> (String, Value) {
    normalize(info, &mut obj, FieldValidation::Ignore).expect("a valid built-in object");
    let namespace = meta::meta_str(&obj, "namespace").map(ToString::to_string);
    meta::prepare_create(info, namespace.as_deref(), &mut obj).expect("valid metadata");
    initial_status::set_initial_status(info, &mut obj);
    crate::strategy::on_create(info, &mut obj).expect("a valid built-in object");
    fieldmanager::record_update(info, None, &mut obj, manager, None).expect("managedFields");
    let name = meta::meta_str(&obj, "name").unwrap_or_default().to_string();
    (info.key(namespace.as_deref(), &name), obj)
}

/// `live` after a forced server-side apply of `body` by `manager`, or None
/// when that changes nothing.
pub fn applied(info: &ResourceInfo, live: &Value, body: &Value, manager: &str) -> Option<Value> {
    let schema = fieldmanager::merge_schema(info);
    let live_managed = fieldmanager::managed_fields(Some(live));
    let api_version = info.api_version();
    let merged = gantry_merge::apply(
        Some(live),
        body,
        &gantry_merge::ApplyOptions {
            manager,
            force: true,
            subresource: None,
            api_version: &api_version,
            schema: &schema,
            now: fieldmanager::now(),
            managed_fields: &live_managed,
            ignored: &fieldmanager::ignored_fields(info, None),
        },
    )
    .ok()?;
    let mut obj = merged.object;
    fieldmanager::set_managed_fields(&mut obj, &merged.managed_fields);
    let unchanged = meta::comparable(&obj) == meta::comparable(live)
        && same_owners(&merged.managed_fields, &live_managed);
    (!unchanged).then_some(obj)
}

/// Whether two managedFields lists name the same managers and fields (times aside).
fn same_owners(a: &[ManagedFieldsEntry], b: &[ManagedFieldsEntry]) -> bool {
    let key = |e: &ManagedFieldsEntry| {
        let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.remove("time");
        }
        v
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| key(x) == key(y))
}
