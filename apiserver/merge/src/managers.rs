//! Decoding, bookkeeping and encoding of `metadata.managedFields`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};

use crate::error::FieldsError;
use crate::fieldset::FieldSet;
use crate::path::Path;

/// `managedFields[].operation` of server-side apply.
pub const OPERATION_APPLY: &str = "Apply";
/// `managedFields[].operation` of every other write.
pub const OPERATION_UPDATE: &str = "Update";
/// The only `managedFields[].fieldsType`.
pub const FIELDS_TYPE_V1: &str = "FieldsV1";

/// Identity of a manager entry, as kube-apiserver's `BuildManagerIdentifier`:
/// Apply entries are per (manager, subresource); Update entries per
/// (manager, apiVersion, subresource).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ManagerId {
    pub manager: String,
    pub operation: String,
    /// Empty for Apply entries.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    pub fn apply(manager: &str, subresource: Option<&str>) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation: OPERATION_APPLY.to_string(),
            api_version: String::new(),
            subresource: subresource.unwrap_or_default().to_string(),
        }
    }

    pub fn update(manager: &str, api_version: &str, subresource: Option<&str>) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation: OPERATION_UPDATE.to_string(),
            api_version: api_version.to_string(),
            subresource: subresource.unwrap_or_default().to_string(),
        }
    }

    pub fn is_apply(&self) -> bool {
        self.operation == OPERATION_APPLY
    }
}

/// One decoded manager entry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ManagerSet {
    pub api_version: String,
    pub set: FieldSet,
    pub time: Option<Time>,
}

/// All managers of an object.
pub(crate) type Managed = BTreeMap<ManagerId, ManagerSet>;

/// Paths kube-apiserver's `stripMetaManager` removes from every manager's set (exact paths).
pub(crate) fn strip_set() -> FieldSet {
    FieldSet::from_paths(
        [
            vec!["apiVersion"],
            vec!["kind"],
            vec!["metadata"],
            vec!["metadata", "name"],
            vec!["metadata", "namespace"],
            vec!["metadata", "creationTimestamp"],
            vec!["metadata", "selfLink"],
            vec!["metadata", "uid"],
            vec!["metadata", "clusterName"],
            vec!["metadata", "generation"],
            vec!["metadata", "managedFields"],
            vec!["metadata", "resourceVersion"],
        ]
        .into_iter()
        .map(Path::fields),
    )
}

/// Decodes managedFields entries into the manager map. Entries with the same identity
/// are merged (union of sets, latest time).
pub(crate) fn decode(entries: &[ManagedFieldsEntry]) -> Result<Managed, FieldsError> {
    let mut out = Managed::new();
    for e in entries {
        let operation = e.operation.clone().unwrap_or_default();
        if let Some(ft) = &e.fields_type
            && !ft.is_empty()
            && ft != FIELDS_TYPE_V1
        {
            return Err(FieldsError::BadEntry(format!(
                "unsupported fieldsType {ft:?} (must be \"FieldsV1\")"
            )));
        }
        let set = match &e.fields_v1 {
            Some(FieldsV1(v)) => FieldSet::from_fields_v1(v)?,
            None => FieldSet::new(),
        };
        let api_version = e.api_version.clone().unwrap_or_default();
        let id = ManagerId {
            manager: e.manager.clone().unwrap_or_default(),
            api_version: if operation == OPERATION_APPLY {
                String::new()
            } else {
                api_version.clone()
            },
            operation,
            subresource: e.subresource.clone().unwrap_or_default(),
        };
        match out.get_mut(&id) {
            Some(existing) => {
                existing.set = existing.set.union(&set);
                if e.time.as_ref().map(|t| t.0) > existing.time.as_ref().map(|t| t.0) {
                    existing.time.clone_from(&e.time);
                }
            }
            None => {
                out.insert(
                    id,
                    ManagerSet {
                        api_version,
                        set,
                        time: e.time.clone(),
                    },
                );
            }
        }
    }
    Ok(out)
}

/// Encodes the manager map in kube-apiserver's order: Apply entries before Update
/// entries, then by time (seconds), manager, apiVersion, subresource. Empty sets are dropped.
pub(crate) fn encode(managed: &Managed) -> Vec<ManagedFieldsEntry> {
    let strip = strip_set();
    let mut out: Vec<ManagedFieldsEntry> = managed
        .iter()
        .filter_map(|(id, ms)| {
            let set = ms.set.difference(&strip);
            if set.is_empty() {
                return None;
            }
            Some(ManagedFieldsEntry {
                manager: non_empty(&id.manager),
                operation: non_empty(&id.operation),
                api_version: non_empty(&ms.api_version),
                time: ms.time.clone(),
                fields_type: Some(FIELDS_TYPE_V1.to_string()),
                fields_v1: Some(FieldsV1(set.to_fields_v1())),
                subresource: non_empty(&id.subresource),
            })
        })
        .collect();
    out.sort_by(|p, q| {
        let secs = |t: &Option<Time>| t.as_ref().map_or(0, |t| t.0.as_second());
        p.operation
            .cmp(&q.operation)
            .then_with(|| secs(&p.time).cmp(&secs(&q.time)))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    out
}

/// `None` for an empty string (kube's `omitempty`).
fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Removes the strip set from every manager and drops managers left empty.
pub(crate) fn strip_and_drop_empty(managed: &mut Managed) {
    let strip = strip_set();
    for ms in managed.values_mut() {
        ms.set = ms.set.difference(&strip);
    }
    managed.retain(|_, ms| !ms.set.is_empty());
}

/// Validates managedFields as kube-apiserver's `ValidateManagedFields` does: operation
/// `Apply` or `Update`, fieldsType empty or `FieldsV1`, a decodable `fieldsV1`,
/// subresource at most 256 characters.
///
/// # Errors
///
/// [`FieldsError::BadEntry`] for a bad operation, fieldsType or subresource, or the
/// error decoding an entry's `fieldsV1`.
pub fn validate_managed_fields(entries: &[ManagedFieldsEntry]) -> Result<(), FieldsError> {
    for (i, e) in entries.iter().enumerate() {
        let op = e.operation.as_deref().unwrap_or_default();
        if op != OPERATION_APPLY && op != OPERATION_UPDATE {
            return Err(FieldsError::BadEntry(format!(
                "metadata.managedFields[{i}].operation: Invalid value: {op:?}: must be `Apply` or `Update`"
            )));
        }
        let ft = e.fields_type.as_deref().unwrap_or_default();
        if !ft.is_empty() && ft != FIELDS_TYPE_V1 {
            return Err(FieldsError::BadEntry(format!(
                "metadata.managedFields[{i}].fieldsType: Invalid value: {ft:?}: must be `FieldsV1`"
            )));
        }
        if e.subresource.as_deref().unwrap_or_default().len() > 256 {
            return Err(FieldsError::BadEntry(format!(
                "metadata.managedFields[{i}].subresource: Too long: may not be more than 256 bytes"
            )));
        }
        if let Some(FieldsV1(v)) = &e.fields_v1 {
            FieldSet::from_fields_v1(v)?;
        }
    }
    Ok(())
}

/// True when two managedFields lists differ in anything but `time`.
pub fn managed_fields_changed(a: &[ManagedFieldsEntry], b: &[ManagedFieldsEntry]) -> bool {
    if a.len() != b.len() {
        return true;
    }
    a.iter().zip(b).any(|(x, y)| {
        let mut x = x.clone();
        let mut y = y.clone();
        x.time = None;
        y.time = None;
        x != y
    })
}
