//! CustomResourceDefinitions: validation on write, status (`NamesAccepted`,
//! Established, acceptedNames, storedVersions), and turning a CRD into served
//! resources in the [`Registry`].

use std::sync::Arc;

use serde_json::{Value, json};

use crate::discovery::version_priority;
use crate::error::{ApiError, ApiResult, Cause};
use crate::objects::names::{is_dns1123_label, is_dns1123_subdomain};
use crate::registry::{CrdVersion, Registry, ResourceInfo, ScalePaths};

/// The CRD API group.
pub const GROUP: &str = "apiextensions.k8s.io";
/// The CRD resource plural.
pub const PLURAL: &str = "customresourcedefinitions";
/// Finalizer that deletes a CRD's objects before the CRD goes away.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// A CRD about to be deleted gets the cleanup finalizer (kube's CRD registry
/// adds it on the first delete, not on create), so that its custom
/// resources go first.
pub fn with_cleanup_finalizer(crd: &mut Value) {
    if crate::objects::meta::is_deleting(crd) {
        return;
    }
    let m = crate::objects::meta::meta_mut(crd);
    let fins = m.entry("finalizers").or_insert_with(|| json!([]));
    if !fins.is_array() {
        *fins = json!([]);
    }
    let list = fins.as_array_mut().expect("array");
    if !list.iter().any(|f| f == CLEANUP_FINALIZER) {
        list.push(json!(CLEANUP_FINALIZER));
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Validates a CRD and fills in defaults and status; `old` on update.
pub fn admit(crd: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    fn invalid(field: &str, value: &str, detail: &str) -> Cause {
        Cause::new(
            "FieldValueInvalid",
            format!("Invalid value: {value:?}: {detail}"),
            field,
        )
    }
    let name = s(crd, "/metadata/name").to_string();
    let mut causes: Vec<Cause> = vec![];
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    if group.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.group",
        ));
    } else if !group.contains('.') || !is_dns1123_subdomain(&group) {
        causes.push(invalid(
            "spec.group",
            &group,
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.names.plural",
        ));
    } else if !is_dns1123_label(&plural) {
        causes.push(invalid("spec.names.plural", &plural, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"));
    }
    if kind.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value",
            "spec.names.kind",
        ));
    }
    match old {
        // kube checks the name on create only; on update group and scope are frozen.
        None if name != format!("{plural}.{group}") => causes.push(invalid(
            "metadata.name",
            &name,
            "must be spec.names.plural+\".\"+spec.group",
        )),
        None => {}
        Some(old) => {
            // Scope and names freeze once the CRD is established.
            let established = old
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Established" && c["status"] == "True")
                });
            let frozen: &[(&str, &str)] = if established {
                &[
                    ("/spec/group", "spec.group"),
                    ("/spec/scope", "spec.scope"),
                    ("/spec/names/plural", "spec.names.plural"),
                    ("/spec/names/kind", "spec.names.kind"),
                ]
            } else {
                &[("/spec/group", "spec.group")]
            };
            for (ptr, field) in frozen {
                let value = s(crd, ptr);
                if value != s(old, ptr) {
                    causes.push(invalid(field, value, "field is immutable"));
                }
            }
        }
    }
    let scope = s(crd, "/spec/scope").to_string();
    if scope != "Namespaced" && scope != "Cluster" {
        causes.push(Cause::new(
            "FieldValueNotSupported",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
            "spec.scope",
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "Invalid value: must have exactly one version marked as storage version",
            "spec.versions",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v.get("storage") == Some(&json!(true)))
            .count();
        if storage != 1 {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {storage}: must have exactly one version marked as storage version"),
                "spec.versions",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, v) in versions.iter().enumerate() {
            let vname = s(v, "/name");
            if !is_dns1123_label(vname) {
                causes.push(invalid(
                    &format!("spec.versions[{i}].name"),
                    vname,
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-'",
                ));
            }
            if !seen.insert(vname.to_string()) {
                causes.push(Cause::new(
                    "FieldValueDuplicate",
                    format!("Duplicate value: {vname:?}"),
                    format!("spec.versions[{i}].name"),
                ));
            }
            if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
                if let Err(errs) = gantry_schema::StructuralSchema::new_at(
                    schema,
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                ) {
                    causes.extend(
                        errs.iter()
                            .map(|e| Cause::new(e.reason(), e.body(), e.field.clone())),
                    );
                }
            } else {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    "Required value: schemas are required",
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                ));
            }
            if let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) {
                for (j, c) in cols.iter().enumerate() {
                    let errs = gantry_schema::validate_printer_column(
                        c,
                        &format!("spec.versions[{i}].additionalPrinterColumns[{j}]"),
                    );
                    causes.extend(
                        errs.iter()
                            .map(|e| Cause::new(e.reason(), e.body(), e.field.clone())),
                    );
                }
            }
        }
        if !versions
            .iter()
            .any(|v| v.get("served") == Some(&json!(true)))
        {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "Invalid value: must have at least one served version",
                "spec.versions",
            ));
        }
    }
    if crd.pointer("/spec/conversion").is_none_or(Value::is_null) {
        crd["spec"]["conversion"] = json!({ "strategy": "None" });
    } else if let Some(c) = crd["spec"]["conversion"].as_object_mut() {
        c.entry("strategy").or_insert_with(|| json!("None"));
    }
    if let Some(svc) = crd
        .pointer_mut("/spec/conversion/webhook/clientConfig/service")
        .and_then(Value::as_object_mut)
    {
        svc.entry("port").or_insert_with(|| json!(443));
    }
    causes.extend(crate::conversion::validation::causes(crd));
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            GROUP,
            "CustomResourceDefinition",
            &name,
            causes,
        ));
    }
    // Defaults.
    if s(crd, "/spec/names/singular").is_empty() {
        crd["spec"]["names"]["singular"] = json!(kind.to_ascii_lowercase());
    }
    if s(crd, "/spec/names/listKind").is_empty() {
        crd["spec"]["names"]["listKind"] = json!(format!("{kind}List"));
    }
    // The cleanup finalizer is added on delete (`with_cleanup_finalizer`), as kube does.
    // Status.
    let storage = versions
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    let mut stored: Vec<Value> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored.iter().any(|v| v == storage.as_str()) {
        stored.push(json!(storage));
    }
    let now = crate::objects::meta::now_rfc3339();
    let prev_time = |t: &str| {
        old.and_then(|o| o.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c.get("type") == Some(&json!(t))))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or(json!(now))
    };
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"].clone(),
        "conditions": [
            { "type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": prev_time("NamesAccepted") },
            { "type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": prev_time("Established") },
        ],
        "storedVersions": stored,
    });
    Ok(())
}

/// The served resources of a CRD (one per served version).
pub fn resources(crd: &Value) -> Vec<ResourceInfo> {
    let group = s(crd, "/spec/group").to_string();
    let names = &crd["spec"]["names"];
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage = versions
        .iter()
        .find(|v| v.get("storage") == Some(&json!(true)))
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    let served: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("served") == Some(&json!(true)))
        .collect();
    let preferred = served
        .iter()
        .map(|v| s(v, "/name"))
        .max_by_key(|n| version_priority(n))
        .unwrap_or("")
        .to_string();
    let crd_name = s(crd, "/metadata/name").to_string();
    let conversion = crate::conversion::Webhook::of_crd(crd);
    served
        .into_iter()
        .map(|v| {
            let raw = v.pointer("/schema/openAPIV3Schema").cloned();
            let schema = raw
                .as_ref()
                .and_then(|r| gantry_schema::StructuralSchema::new(r).ok())
                .map(Arc::new);
            let version = s(v, "/name").to_string();
            let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: s(sc, "/specReplicasPath").to_string(),
                status_replicas: s(sc, "/statusReplicasPath").to_string(),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(String::from),
            });
            ResourceInfo {
                group: group.clone(),
                kind: s(names, "/kind").to_string(),
                plural: s(names, "/plural").to_string(),
                singular: s(names, "/singular").to_string(),
                namespaced: s(crd, "/spec/scope") == "Namespaced",
                short_names: strs(&names["shortNames"]),
                categories: strs(&names["categories"]),
                has_status: v.pointer("/subresources/status").is_some(),
                scale,
                roundtrip: None,
                crd: Some(CrdVersion {
                    schema,
                    raw_schema: raw,
                    printer_columns: v
                        .get("additionalPrinterColumns")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    crd_name: crd_name.clone(),
                    conversion: conversion.clone(),
                }),
                storage_version: storage.clone(),
                storage_group: group.clone(),
                preferred: version == preferred,
                version,
            }
        })
        .collect()
}

/// Updates the registry for a stored (or removed, `None`) CRD.
pub fn sync(registry: &Registry, current: Option<&Value>, previous: Option<&Value>) {
    if let Some(prev) = previous {
        let (g, p) = (s(prev, "/spec/group"), s(prev, "/spec/names/plural"));
        if current.is_none_or(|c| s(c, "/spec/group") != g || s(c, "/spec/names/plural") != p) {
            registry.remove_custom(g, p);
        }
    }
    if let Some(crd) = current {
        registry.set_custom(
            s(crd, "/spec/group"),
            s(crd, "/spec/names/plural"),
            resources(crd),
        );
    }
}
