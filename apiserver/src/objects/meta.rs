//! Object metadata: system fields on create/update, name and label validation,
//! generation bookkeeping.

use serde_json::{Map, Value, json};

use super::names::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceInfo;

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// The metadata map of an object (created if missing).
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

/// A string field of metadata.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

/// Validates the object's name and labels, and the kind's spec rules
/// ([`crate::objects::validation`]), as kube does.
pub fn validate_name_and_labels(info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or("");
    let mut causes = vec![];
    if name.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "Required value: name or generateName is required",
            "metadata.name",
        ));
    } else {
        let (ok, msg) = match (info.group.as_str(), info.plural.as_str()) {
            ("", "namespaces") => (is_dns1123_label(name), DNS1123_LABEL_MSG),
            ("", "services") => (is_dns1035_label(name), DNS1035_LABEL_MSG),
            _ => (is_dns1123_subdomain(name), DNS1123_SUBDOMAIN_MSG),
        };
        if !ok {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {name:?}: {msg}"),
                "metadata.name",
            ));
        }
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            let val = v.as_str().unwrap_or("");
            let key_name = k.rsplit('/').next().unwrap_or("");
            let prefix_ok = k
                .split_once('/')
                .is_none_or(|(p, _)| is_dns1123_subdomain(p));
            if !(prefix_ok && is_qualified_part(key_name) && key_name.len() <= 63) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                    "metadata.labels",
                ));
            }
            if !(val.is_empty() || (val.len() <= 63 && is_qualified_part(val))) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {val:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                    format!("metadata.labels[{k}]"),
                ));
            }
        }
    }
    if let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        annotation_causes(annotations, &mut causes);
    }
    causes.extend(crate::objects::validation::validate(info, obj));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&info.group, &info.kind, name, causes))
    }
}

/// Largest total size of an object's annotations (keys and values), as kube.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// kube's `ValidateAnnotations`: keys are qualified names (case aside), and
/// all of them with their values fit in 256 KiB.
fn annotation_causes(annotations: &serde_json::Map<String, Value>, causes: &mut Vec<Cause>) {
    let mut total = 0;
    for (k, v) in annotations {
        for m in crate::conversion::review::qualified_name_errors(&k.to_ascii_lowercase()) {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {k:?}: {m}"),
                "metadata.annotations",
            ));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_LIMIT {
        causes.push(Cause::new(
            "FieldValueTooLong",
            format!("Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"),
            "metadata.annotations",
        ));
    }
}

fn is_qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// Now, as kube formats timestamps (RFC 3339, seconds, UTC).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Sets the system metadata of a new object: name from generateName, namespace, uid,
/// creationTimestamp, generation; clears fields clients may not set on create.
pub fn prepare_create(
    info: &ResourceInfo,
    namespace: Option<&str>,
    obj: &mut Value,
) -> ApiResult<()> {
    let m = meta_mut(obj);
    let has_name = m
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name
        && let Some(g) = m
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
    {
        let base: String = g.chars().take(58).collect();
        m.insert("name".into(), json!(format!("{base}{}", random_suffix())));
    }
    if info.namespaced {
        let ns = namespace.unwrap_or("default");
        match m.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                m.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        m.remove("namespace");
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now_rfc3339()));
    if tracks_generation(info) {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        m.remove(f);
    }
    Ok(())
}

/// Copies the fields clients cannot change from `old` into `new` (name, namespace, uid,
/// creationTimestamp, deletion fields, generation).
pub fn preserve_system_fields(old: &Value, new: &mut Value) {
    let old_m = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let m = meta_mut(new);
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
    ] {
        match old_m.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("selfLink");
}

/// Everything but metadata and status: what bumps `generation` when it changes.
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.as_object().cloned().unwrap_or_default();
    o.remove("metadata");
    o.remove("status");
    o.remove("apiVersion");
    o.remove("kind");
    Value::Object(o)
}

/// Kinds whose kube registry does not maintain `metadata.generation`: they
/// have none. (Seen by the differential suite for ConfigMaps, Secrets,
/// Namespaces, Services, Roles, RoleBindings and ResourceQuotas; from
/// kube's registry strategies for the others.) Every other kind, custom
/// resources included, starts at 1.
const WITHOUT_GENERATION: &[(&str, &str)] = &[
    ("", "configmaps"),
    ("", "secrets"),
    ("", "namespaces"),
    ("", "services"),
    ("", "serviceaccounts"),
    ("", "endpoints"),
    ("", "events"),
    ("", "limitranges"),
    ("", "resourcequotas"),
    ("", "podtemplates"),
    ("", "nodes"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("events.k8s.io", "events"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("coordination.k8s.io", "leases"),
];

/// Whether objects of `info`'s kind have a `metadata.generation`.
pub fn tracks_generation(info: &ResourceInfo) -> bool {
    !WITHOUT_GENERATION.contains(&(info.group.as_str(), info.plural.as_str()))
}

/// Bumps `metadata.generation` when anything outside metadata/status changed
/// (objects without one keep none).
pub fn bump_generation(old: &Value, new: &mut Value) {
    let Some(old_gen) = old.pointer("/metadata/generation").and_then(Value::as_i64) else {
        meta_mut(new).remove("generation");
        return;
    };
    let changed = spec_part(old) != spec_part(new);
    meta_mut(new).insert(
        "generation".into(),
        json!(if changed { old_gen + 1 } else { old_gen }),
    );
}

/// The object without resourceVersion and managedFields, for no-op detection.
pub fn comparable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    o
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}
