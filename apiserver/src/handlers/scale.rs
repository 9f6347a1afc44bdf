//! The `scale` subresource: autoscaling/v1 Scale views of `.spec.replicas`-like paths.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{Value, json};

use crate::app::{App, present};
use crate::http::body;
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::{fieldmanager, meta};
use crate::registry::{ResourceInfo, ScalePaths};
use crate::status::{ApiError, ApiResult, Cause};
use crate::storage::Write;

fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, p| format!("{acc}/{p}"))
}

fn scale_of(info: &ResourceInfo, paths: &ScalePaths, obj: &Value) -> Value {
    let m = &obj["metadata"];
    let mut status = json!({ "replicas": obj.pointer(&pointer(&paths.status_replicas)).and_then(Value::as_i64).unwrap_or(0) });
    if let Some(sel) = &paths.label_selector {
        if let Some(s) = obj.pointer(&pointer(sel)).and_then(Value::as_str) {
            status["selector"] = json!(s);
        }
    } else if let Some(ml) = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
    {
        let s: Vec<String> = ml
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        status["selector"] = json!(s.join(","));
    }
    let _ = info;
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": { "replicas": obj.pointer(&pointer(&paths.spec_replicas)).and_then(Value::as_i64).unwrap_or(0) },
        "status": status,
    })
}

/// GET .../scale
pub async fn get(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let info = &r.info;
    let paths = info.scale.as_ref().expect("router checked scale");
    let obj = app
        .store
        .get(&r.key())
        .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, r.name()))?;
    Ok(json_response(
        200,
        &scale_of(info, paths, &present(info, &obj)),
        &[],
    ))
}

/// PUT or PATCH .../scale: sets the desired replicas.
pub async fn write(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let info = r.info.clone();
    let paths = info.scale.clone().expect("router checked scale");
    let key = r.key();
    let name = r.name().to_string();
    let ct = r.content_type();
    let body_bytes = r.body.clone();
    let is_patch = r.verb == crate::http::request::Verb::Patch;
    let manager = r.field_manager();
    let dry = r.dry_run();
    let i2 = info.clone();
    let (out, events) = app
        .commit(move |view| {
            let old = view
                .get(&key)
                .map(|o| (**o).clone())
                .ok_or_else(|| ApiError::not_found(&i2.group, &i2.plural, &name))?;
            let current = scale_of(&i2, &paths, &present(&i2, &old));
            let scale = if is_patch {
                let mut doc = current.clone();
                match ct.as_str() {
                    "application/json-patch+json" => {
                        let p: json_patch::Patch = serde_json::from_slice(&body_bytes)
                            .map_err(|e| ApiError::bad_request(e.to_string()))?;
                        json_patch::patch(&mut doc, &p)
                            .map_err(|e| ApiError::bad_request(e.to_string()))?;
                    }
                    "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                        json_patch::merge(&mut doc, &body::json(&body_bytes)?)
                    }
                    other => {
                        return Err(ApiError::UnsupportedMediaType(format!(
                            "unsupported patch type for scale: {other}"
                        )));
                    }
                }
                doc
            } else {
                body::object(&ct, &body_bytes)?
            };
            if let Some(rv) = meta::meta_str(&scale, "resourceVersion").filter(|rv| !rv.is_empty())
                && Some(rv) != meta::meta_str(&old, "resourceVersion")
            {
                return Err(ApiError::stale(&i2.group, &i2.plural, &name));
            }
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    &name,
                    vec![Cause::new(
                        "FieldValueInvalid",
                        format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                        "spec.replicas",
                    )],
                ));
            }
            let mut new = old.clone();
            let ptr = pointer(&paths.spec_replicas);
            set_at(&mut new, &ptr, json!(replicas));
            if new == old {
                return Ok((old, vec![]));
            }
            meta::bump_generation(&old, &mut new);
            fieldmanager::record_update(&i2, Some(&old), &mut new, &manager, Some("scale"))?;
            let writes = if dry {
                vec![]
            } else {
                vec![Write::Put(key.clone(), new.clone())]
            };
            Ok((new, writes))
        })
        .await?;
    let stored = events.first().map(|e| (*e.object).clone()).unwrap_or(out);
    let paths = info.scale.as_ref().expect("router checked scale");
    Ok(json_response(
        200,
        &scale_of(&info, paths, &present(&info, &stored)),
        &[],
    ))
}

fn set_at(obj: &mut Value, ptr: &str, value: Value) {
    let mut cur = obj;
    let parts: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let m = cur.as_object_mut().expect("object");
        if i == parts.len() - 1 {
            m.insert(p.to_string(), value);
            return;
        }
        cur = m.entry(p.to_string()).or_insert_with(|| json!({}));
    }
}
