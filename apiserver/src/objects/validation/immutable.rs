//! kube's refusals of updates that change what may not change after create, per
//! kind, with kube's fields and messages.

use serde_json::Value;

use super::{go_diff, pod};
use crate::error::Cause;
use crate::registry::ResourceInfo;

/// The StatefulSet spec fields an update may change (kube's `ValidateStatefulSetUpdate`).
const STATEFULSET_MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

const STATEFULSET_FORBIDDEN: &str = "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

const PVC_FORBIDDEN: &str = "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

const WHEN_IMMUTABLE: &str = "Forbidden: field is immutable when `immutable` is set";

/// Fields kube refuses to change once set, per kind (JSON pointers and field paths),
/// answered `Invalid value: NEW: field is immutable`.
fn immutable_fields(info: &ResourceInfo) -> &'static [(&'static str, &'static str)] {
    match (info.group.as_str(), info.plural.as_str()) {
        ("apps", "deployments" | "replicasets" | "daemonsets") => {
            &[("/spec/selector", "spec.selector")]
        }
        ("batch", "jobs") => &[
            ("/spec/selector", "spec.selector"),
            ("/spec/template", "spec.template"),
            ("/spec/completionMode", "spec.completionMode"),
        ],
        ("", "secrets") => &[("/type", "type")],
        _ => &[],
    }
}

/// kube's errors for changing immutable fields from `old` to `new`.
pub fn validate_update(info: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    let mut out: Vec<Cause> = immutable_fields(info)
        .iter()
        .filter(|(ptr, _)| old.pointer(ptr).is_some() && old.pointer(ptr) != new.pointer(ptr))
        .map(|(ptr, field)| {
            let value = new.pointer(ptr).cloned().unwrap_or(Value::Null);
            Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {value}: field is immutable"),
                *field,
            )
        })
        .collect();
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => out.extend(pod::update(old, new)),
        ("apps", "statefulsets")
            if spec_without(old, STATEFULSET_MUTABLE) != spec_without(new, STATEFULSET_MUTABLE) =>
        {
            out.push(Cause::new(
                "FieldValueForbidden",
                STATEFULSET_FORBIDDEN,
                "spec",
            ));
        }
        ("", "persistentvolumeclaims") => claim_spec(old, new, &mut out),
        ("", "services") => cluster_ips(old, new, &mut out),
        ("", "configmaps") => frozen_data(old, new, &["data", "binaryData"], &mut out),
        ("", "secrets") => frozen_data(old, new, &["data"], &mut out),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            role_ref(old, new, &mut out);
        }
        _ => {}
    }
    out
}

/// `spec` without the given fields.
fn spec_without(obj: &Value, fields: &[&str]) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(map) = spec.as_object_mut() {
        for f in fields {
            map.remove(*f);
        }
    }
    spec
}

/// A claim's spec is frozen, but for the requests of a bound claim, its
/// `volumeAttributesClassName`, and the `volumeName` the binder sets once.
fn claim_spec(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let mut mutable = vec!["volumeAttributesClassName"];
    let unset = |o: &Value| {
        o.pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    };
    if unset(old) {
        mutable.push("volumeName");
    }
    let (mut old_spec, mut new_spec) = (spec_without(old, &mutable), spec_without(new, &mutable));
    let bound = old.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound {
        for spec in [&mut old_spec, &mut new_spec] {
            if let Some(r) = spec.get_mut("resources").and_then(Value::as_object_mut) {
                r.remove("requests");
            }
        }
    }
    if old_spec == new_spec {
        return;
    }
    // kube's clones: the fields an update may change made equal, then diffed.
    let old_full = old.get("spec").cloned().unwrap_or(Value::Null);
    let mut old_clone = old_full.clone();
    let mut new_clone = new.get("spec").cloned().unwrap_or(Value::Null);
    set(
        &mut new_clone,
        "volumeAttributesClassName",
        old_full.get("volumeAttributesClassName"),
    );
    if unset(old) {
        set(
            &mut old_clone,
            "volumeName",
            new_clone.get("volumeName").cloned().as_ref(),
        );
    }
    if bound {
        let requests = old_full.pointer("/resources/requests").cloned();
        if let Some(r) = new_clone.get_mut("resources").filter(|r| r.is_object()) {
            set(r, "requests", requests.as_ref());
        }
    }
    let diff = go_diff::claim_spec_diff(&old_clone, &new_clone);
    out.push(Cause::new(
        "FieldValueForbidden",
        format!("{PVC_FORBIDDEN}\n{diff}"),
        "spec",
    ));
}

/// Sets (or removes, for None) the field `key` of the object `obj`.
fn set(obj: &mut Value, key: &str, value: Option<&Value>) {
    if let Some(map) = obj.as_object_mut() {
        match value {
            Some(v) => {
                map.insert(key.to_string(), v.clone());
            }
            None => {
                map.remove(key);
            }
        }
    }
}

/// A Service's cluster IPs may not change once set (kube normalizes a changed
/// `clusterIP` into `clusterIPs` first); `ExternalName` Services are exempt.
fn cluster_ips(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let external =
        |s: &Value| s.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    if external(old) || external(new) {
        return;
    }
    let ips = |s: &Value| -> Vec<String> {
        s.pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let ip = |s: &Value| {
        s.pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (old_ips, mut new_ips) = (ips(old), ips(new));
    if ip(old) != ip(new) && old_ips == new_ips {
        new_ips = if ip(new).is_empty() {
            vec![]
        } else {
            vec![ip(new)]
        };
    }
    for (i, old_ip) in old_ips.iter().enumerate() {
        match new_ips.get(i) {
            Some(new_ip) if new_ip != old_ip => out.push(Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: {}: may not change once set",
                    Value::from(new_ips.clone())
                ),
                format!("spec.clusterIPs[{i}]"),
            )),
            _ => {}
        }
    }
}

/// A ConfigMap or Secret marked `immutable: true` keeps that mark and its data.
fn frozen_data(old: &Value, new: &Value, bags: &[&str], out: &mut Vec<Cause>) {
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    if new.get("immutable") != Some(&Value::Bool(true)) {
        out.push(Cause::new(
            "FieldValueForbidden",
            WHEN_IMMUTABLE,
            "immutable",
        ));
    }
    let bag = |o: &Value, b: &str| o.get(b).filter(|v| !v.is_null()).cloned();
    for b in bags {
        if bag(old, b) != bag(new, b) {
            out.push(Cause::new("FieldValueForbidden", WHEN_IMMUTABLE, *b));
        }
    }
}

/// A binding's `roleRef` never changes; kube prints its internal struct.
fn role_ref(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    if old.get("roleRef") == new.get("roleRef") {
        return;
    }
    let field = |k: &str| {
        Value::from(
            new.pointer(&format!("/roleRef/{k}"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    };
    out.push(Cause::new(
        "FieldValueInvalid",
        format!(
            "Invalid value: {{\"APIGroup\":{},\"Kind\":{},\"Name\":{}}}: cannot change roleRef",
            field("apiGroup"),
            field("kind"),
            field("name")
        ),
        "roleRef",
    ));
}
