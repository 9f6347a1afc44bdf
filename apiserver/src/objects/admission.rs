//! Per-kind admission of a request body: apiVersion/kind checks, typed decoding of
//! built-ins, CRD schema pruning/defaulting/validation, `fieldValidation` handling.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceInfo;

/// `?fieldValidation=`: what to do with unknown or duplicate fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop silently.
    Ignore,
    /// Drop and return a warning header (kube's default).
    Warn,
    /// Reject with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query value (absent → Warn).
    pub fn parse(v: Option<&str>) -> ApiResult<Self> {
        match v {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// Checks `apiVersion`/`kind` of a body against the resource (filling them in when absent).
pub fn check_type_meta(info: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    let want_av = info.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(want_av.clone()));
        }
        Some(av) if av != want_av => {
            // kube accepts any served version of the same group and converts.
            let (g, _) = crate::registry::split_api_version(av);
            if g != info.group || info.crd.is_none() {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want_av})"
                )));
            }
            map.insert("apiVersion".into(), Value::String(want_av.clone()));
        }
        Some(_) => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(info.kind.clone()));
        }
        Some(k) if k != info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )));
        }
        Some(_) => {}
    }
    Ok(())
}

/// Paths (dotted) of fields present in `orig` but not in `kept`.
fn dropped_fields(orig: &Value, kept: &Value, prefix: &str, out: &mut Vec<String>) {
    match (orig, kept) {
        (Value::Object(o), Value::Object(k)) => {
            for (key, v) in o {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                match k.get(key) {
                    None if !v.is_null() => out.push(path),
                    Some(kv) => dropped_fields(v, kv, &path, out),
                    None => {}
                }
            }
        }
        (Value::Array(o), Value::Array(k)) => {
            for (i, (ov, kv)) in o.iter().zip(k).enumerate() {
                dropped_fields(ov, kv, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The maps and lists of `ObjectMeta` that Go leaves out when empty (`omitempty`):
/// kube never stores `labels: {}` or `finalizers: []`. (`managedFields: []` is
/// left: it asks the field manager to reset them.)
const OMIT_EMPTY_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

fn drop_empty_collections(meta: &mut Value) {
    if let Some(m) = meta.as_object_mut() {
        m.retain(|k, v| {
            !(OMIT_EMPTY_METADATA.contains(&k.as_str())
                && match v {
                    Value::Object(o) => o.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                })
        });
    }
}

/// Decode failures as kube reports them.
fn decode_error(info: &ResourceInfo, detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"{v}\" cannot be handled as a {kind}: {detail}",
        kind = info.kind,
        v = info.version
    ))
}

/// Normalizes and validates a body for storage ([`normalize`] then
/// [`validate_schema`]). Returns warnings (unknown fields under Warn).
pub fn admit(
    info: &ResourceInfo,
    obj: &mut Value,
    mode: FieldValidation,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let warnings = normalize(info, obj, mode)?;
    validate_schema(info, obj, old)?;
    Ok(warnings)
}

/// Decodes a body as kube does before admission: built-ins round-trip through their
/// k8s-openapi type (dropping unknown fields, rejecting wrong types) and get their
/// defaults; custom resources are pruned and defaulted against the CRD's structural
/// schema. Returns warnings (unknown fields under Warn). Also run again on the object
/// a mutating webhook patched.
pub fn normalize(
    info: &ResourceInfo,
    obj: &mut Value,
    mode: FieldValidation,
) -> ApiResult<Vec<String>> {
    let mut unknown = vec![];
    // metadata through the typed ObjectMeta.
    if let Some(meta) = obj.get("metadata") {
        let typed: ObjectMeta = serde_json::from_value(meta.clone())
            .map_err(|e| decode_error(info, &format!("metadata: {e}")))?;
        let mut kept = serde_json::to_value(typed).expect("ObjectMeta serializes");
        dropped_fields(meta, &kept, "metadata", &mut unknown);
        drop_empty_collections(&mut kept);
        obj["metadata"] = kept;
    }
    if let Some(rt) = info.roundtrip {
        let kept = rt(obj).map_err(|e| decode_error(info, &e))?;
        dropped_fields(obj, &kept, "", &mut unknown);
        *obj = kept;
        crate::objects::defaults::apply(info, obj);
    } else if let Some(schema) = info.crd.as_ref().and_then(|c| c.schema.as_ref()) {
        let meta = obj.get("metadata").cloned();
        let pruned = schema.prune(obj);
        unknown.extend(
            pruned
                .into_iter()
                .map(|p| p.trim_start_matches('.').to_string()),
        );
        if let Some(m) = meta {
            obj["metadata"] = m;
        }
        if mode == FieldValidation::Strict && !unknown.is_empty() {
            return Err(strict_error(info, &unknown));
        }
        schema.default(obj);
    }
    match mode {
        FieldValidation::Strict if !unknown.is_empty() => Err(strict_error(info, &unknown)),
        FieldValidation::Warn => Ok(unknown
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect()),
        _ => Ok(vec![]),
    }
}

/// Validates a custom resource against its CRD's schema (ratcheting against `old` on
/// updates); 422 with causes. Built-ins are validated per kind elsewhere.
pub fn validate_schema(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
    let Some(schema) = info.crd.as_ref().and_then(|c| c.schema.as_ref()) else {
        return Ok(());
    };
    let errs = match old {
        Some(o) => schema.validate_update(obj, o),
        None => schema.validate(obj),
    };
    if errs.is_empty() {
        return Ok(());
    }
    let name = crate::objects::meta::meta_str(obj, "name")
        .unwrap_or("")
        .to_string();
    let causes = errs
        .iter()
        .map(|e| Cause::new(e.reason(), e.body(), e.field.clone()))
        .collect();
    Err(ApiError::invalid(&info.group, &info.kind, &name, causes))
}

/// A new object as a create of it admits it, away from any server: decoded
/// and defaulted ([`normalize`]: a custom resource pruned and defaulted
/// against its CRD's schema), placed in `default` when it is namespaced
/// and names no namespace (kubectl's namespace), then validated (the CRD's
/// OpenAPI v3 schema and CEL `x-kubernetes-validations`, name and labels).
/// Nothing a server adds (uid, timestamps, managedFields) and no webhook.
/// Returns the warnings (unknown fields dropped).
pub fn admit_detached(info: &ResourceInfo, obj: &mut Value) -> ApiResult<Vec<String>> {
    check_type_meta(info, obj)?;
    let warnings = normalize(info, obj, FieldValidation::Warn)?;
    if info.namespaced {
        let meta = crate::objects::meta::meta_mut(obj);
        if meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            meta.insert("namespace".into(), Value::String("default".into()));
        }
    }
    validate_schema(info, obj, None)?;
    crate::objects::meta::validate_name_and_labels(info, obj)?;
    Ok(warnings)
}

fn strict_error(info: &ResourceInfo, unknown: &[String]) -> ApiError {
    let list: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    decode_error(info, &format!("strict decoding error: {}", list.join(", ")))
}
